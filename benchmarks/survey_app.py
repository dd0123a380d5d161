"""Speed of storing a survey study in the app (issue 16) on SYNTHETIC Twin-2K-500-shaped data.

    DATABASE_URL=postgres://.../bench_survey .venv/bin/python benchmarks/survey_app.py --data DIR [--workers 2]

DIR holds `wave_split/chunks/*.parquet` as `benchmarks/survey.py` generates them (var/bench/twin2k-full).
Prints, in wall and CPU seconds of this process (the workers' CPU is not in it): the import as
`import_survey` does it, `survey_data.survey_import` of a `prepare.PreparedStream` (reading,
validation, leak check and targets in --workers processes while this process writes; respondents,
items, exclusions and the two seeded samples in one transaction), target <= 30 s wall; then
rebuilding every stored respondent for a run (`respondent_record`). With --workers 0 the old
sequence instead: the whole list read in this process, then stored. The database is created if
missing, migrated, and the study is dropped after.
"""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
os.environ.setdefault("DEBUG", "1")

from urllib.parse import urlsplit  # noqa: E402


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database the URL names, if missing (as benchmarks/engine.py does)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        return
    import psycopg
    name = parts.path.lstrip("/")
    with psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username or "postgres",
                         password=parts.password, dbname="postgres", autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            admin.execute(f'CREATE DATABASE "{name}"')


ensure_database(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from experiments.core.survey.prepare import PreparedStream  # noqa: E402
from experiments.core.survey.reader import read_survey_path  # noqa: E402
from experiments.models import Project, SurveyRespondent  # noqa: E402
from experiments.survey_data import respondent_record, survey_import  # noqa: E402
from survey import Timer  # noqa: E402 - benchmarks/survey.py, beside this script


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=ROOT / "var" / "bench" / "twin2k-full")
    parser.add_argument("--respondents", type=int, default=0, help="with --workers 0: import only the first N")
    parser.add_argument("--workers", type=int, default=2, help="processes preparing respondents (0: the old sequence)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    chunks = args.data / "wave_split" / "chunks"
    project, _ = Project.objects.get_or_create(slug="bench-survey", defaults={"name": "bench"})
    project.survey_studies.all().delete()
    project.cohorts.filter(task_set__isnull=True).delete()
    try:
        if args.workers:
            with Timer() as store:
                stream = PreparedStream([chunks], args.workers)
                result = survey_import(project=project, name="bench", respondents=stream, sources=["chunks"],
                                       synthetic=True)
            print(f"read, validate and store ({args.workers} workers; {result.imported} stored, "
                  f"{result.excluded_respondents} excluded): {store}")
        else:
            with Timer() as read:
                respondents = read_survey_path(chunks)
            if args.respondents:
                respondents = respondents[:args.respondents]
            print(f"read and validate {len(respondents)} respondents: {read}")
            with Timer() as store:
                result = survey_import(project=project, name="bench", respondents=respondents,
                                       sources=["chunks"], synthetic=True)
            print(f"survey_import ({result.imported} stored, {result.excluded_respondents} excluded): {store}")
        with Timer() as rebuild:
            for row in SurveyRespondent.objects.filter(study=result.study).iterator(chunk_size=100):
                respondent_record(row)
        print(f"rebuild every stored respondent: {rebuild}")
    finally:
        project.cohorts.filter(task_set__isnull=True).delete()
        project.survey_studies.all().delete()


if __name__ == "__main__":
    main()
