"""Speed and peak memory of a large JSONL import: 100,000 sessions.

Writes a deterministic JSONL file of SESSIONS sessions (a screener of two items and
PAIRS question/answer pairs each, every LONG_EVERY-th session twelve, enough for tasks
under the paper's rule), then imports it into a fresh database through the path the
`import_sessions` command and the background import job use (read, check, store, derive
tasks), and prints the wall time and the process's peak resident memory (ru_maxrss, so
Python and Django themselves are included). The file is written line by line and the
import runs in a child process of its own, so the figure is the import's alone.

    .venv/bin/python benchmarks/import.py            # a fresh database on the embedded server
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python benchmarks/import.py
      (an empty PostgreSQL database: createdb -h 127.0.0.1 -U postgres bench; its tables are emptied)
    SESSIONS=10000 ... for a quick look; PROFILE=1 prints a cProfile of the import
    (PROFILE_SORT=tottime to sort by own time, PROFILE_CALLERS=<function> for its callers).

The default shape: 100,000 sessions of one question/answer pair and a two-item screener,
every 50th of twelve pairs (PAIRS and LONG_EVERY change it): 40.7 MB, 244,000 turns,
10,000 tasks.

Targets: ≤ 20 s and ≤ 250 MB for 100,000 sessions.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = int(os.environ.get("SESSIONS", "100000"))
# Most sessions are short; every LONG_EVERY-th passes the paper's rule (12 pairs, 5 targets).
PAIRS_SHORT, PAIRS_LONG = int(os.environ.get("PAIRS", "1")), 12
LONG_EVERY = int(os.environ.get("LONG_EVERY", "50"))


def write_file(path: Path, sessions: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(sessions):
            pairs = PAIRS_LONG if i % LONG_EVERY == 0 else PAIRS_SHORT
            turns = []
            for j in range(pairs):
                turns.append({"speaker": "interviewer", "text": f"Could you tell me about part {j} of your work?"})
                turns.append({"speaker": "participant", "text": f"Person {i} says part {j} is mostly about care."})
            record = {"session_id": f"s-{i:06d}", "person_id": f"p-{i // 2:06d}", "study_id": f"study-{i % 7}",
                      "language": "en", "screener": [{"question": "Age?", "answer": str(20 + i % 60)},
                                                     {"question": "Job?", "answer": "composer"}],
                      "turns": turns}
            handle.write(json.dumps(record) + "\n")


def child(path: str) -> None:
    """Runs in its own process: migrate a fresh database, import the file, print the figures."""
    sys.path.insert(0, str(ROOT))
    if not os.environ.get("DATABASE_URL"):
        from ownwords_site import embedded
        os.environ["DATABASE_URL"] = embedded.fresh_postgres_url(ROOT / "var", "bench_import")
    os.environ.setdefault("SECRET_KEY", "benchmark-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
    import django
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from experiments.models import Project, Session, Task, Turn

    call_command("migrate", verbosity=0)
    assert not Project.objects.filter(slug="bench-import").exists(), "use an empty database"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    profiler = None
    if os.environ.get("PROFILE"):
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    call_command("import_sessions", path, "--project", "bench-import", stdout=open(os.devnull, "w"))
    elapsed = time.perf_counter() - started
    if profiler:
        profiler.disable()
        import pstats
        stats = pstats.Stats(profiler).sort_stats(os.environ.get("PROFILE_SORT", "cumulative"))
        stats.print_stats(30)
        if os.environ.get("PROFILE_CALLERS"):
            stats.print_callers(os.environ["PROFILE_CALLERS"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    project = Project.objects.get(slug="bench-import")
    print(f"database: PostgreSQL {connection.pg_version} {connection.settings_dict['NAME']}")
    print(f"imported {Session.objects.filter(project=project).count():,} sessions, "
          f"{Turn.objects.filter(session__project=project).count():,} turns, "
          f"{Task.objects.filter(session__project=project).count():,} tasks")
    print(f"import (read + check + store + derive tasks): {elapsed:.1f} s (target ≤ 20 s)")
    print(f"peak resident memory: {peak:.0f} MB (target ≤ 250 MB; {before:.0f} MB before the import)")


def main():
    if len(sys.argv) > 1:
        return child(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        write_file(path, SESSIONS)
        print(f"file: {SESSIONS:,} sessions, {path.stat().st_size / 1e6:.1f} MB")
        subprocess.run([sys.executable, __file__, str(path)], check=True)


if __name__ == "__main__":
    main()
