"""Import and page speed of the foundation.

Imports the 250 bundled Anthropic Interviewer transcripts into a fresh database and
times the session page (median of repeated requests) with its query count.

    .venv/bin/python benchmarks/foundation.py            # a fresh database on the embedded server
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python benchmarks/foundation.py
      (an empty PostgreSQL database: createdb -h 127.0.0.1 -U postgres bench)
"""
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if not os.environ.get("DATABASE_URL"):
    from ownwords_site import embedded
    os.environ["DATABASE_URL"] = embedded.fresh_postgres_url(ROOT / "var", "bench_foundation")
os.environ.setdefault("SECRET_KEY", "benchmark-only")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from experiments.core.interviews.readers import read_interview_path
from experiments.models import Membership, Role, Session, Turn  # noqa: E402
from experiments.data.sessions import project_get_or_create, sessions_import
from experiments.core.tasks import TaskRule

SAMPLE = ROOT / "experiments" / "sample_data" / "anthropic-interviewer"


def main():
    print(f"database: PostgreSQL {connection.pg_version} {connection.settings_dict['NAME']}")
    call_command("migrate", verbosity=0)
    project = project_get_or_create(slug="bench")
    started = time.perf_counter()
    for name in ("creatives_transcripts.csv", "scientists_transcripts.csv"):
        parsed = read_interview_path(SAMPLE / name)
        sessions_import(project=project, parsed=parsed, source_format="anthropic-csv", source_file=name,
                        task_rule=TaskRule(8, 3, 5))
    elapsed = time.perf_counter() - started
    print(f"import of {Session.objects.count()} interviews, {Turn.objects.count()} turns "
          f"(parse + store + derive tasks): {elapsed:.2f} s")

    user = get_user_model().objects.create_user("bench", password="x" * 12)
    Membership.objects.create(project=project, user=user, role=Role.ANALYST)
    client = Client()
    client.force_login(user)
    # the longest interview, so the figure is a worst case for the sample
    longest = max(Session.objects.all(), key=lambda s: s.turns.count())
    url = f"/p/bench/sessions/{longest.external_id}/"
    client.get(url)  # warm up templates
    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - t0)
        assert response.status_code == 200
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    print(f"session page ({longest.turns.count()} turns): median {statistics.median(times) * 1000:.1f} ms, "
          f"p90 {sorted(times)[int(0.9 * len(times))] * 1000:.1f} ms over {len(times)} requests, "
          f"{len(queries)} queries")
    t0 = time.perf_counter()
    client.get("/p/bench/")
    print(f"project page (250 sessions listed): {(time.perf_counter() - t0) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
