"""Speed of storing a survey study in the app on SYNTHETIC Twin-2K-500-shaped data.

    DATABASE_URL=postgres://.../bench_survey .venv/bin/python benchmarks/survey_app.py --data DIR [--workers 2]

DIR holds `wave_split/chunks/*.parquet` as `benchmarks/survey.py` generates them (var/bench/twin2k-full).
Prints, in wall and CPU seconds of this process (the workers' CPU is not in it): the import as
`import_survey` does it, `survey_data.survey_import` of a `prepare.PreparedStream` (reading,
validation, leak check and targets in --workers processes while this process writes; respondents,
items, exclusions and the two seeded samples in one transaction), target <= 30 s wall; then
rebuilding every stored respondent for a run (`respondent_record`). With --workers 0 the old
sequence instead: the whole list read in this process, then stored. The database is created if
missing, migrated, and the study is dropped after.

--late-bad N instead imports a copy of the chunks whose respondent N gets a wave-4 answer outside
its options (var/bench/twin2k-late-N/, the other chunks linked): the import must fail naming that
respondent and question, after writing the batches before it, and leave nothing stored.
"""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
os.environ.setdefault("DEBUG", "1")

from page_setup import ensure_database  # noqa: E402

ensure_database(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from experiments.core.survey.prepare import PreparedStream  # noqa: E402
from experiments.core.survey.reader import read_survey_path  # noqa: E402
from experiments.models import Project, SurveyRespondent  # noqa: E402
from experiments.data.surveys import respondent_record, survey_import  # noqa: E402
from survey import Timer  # noqa: E402 - benchmarks/survey.py, beside this script


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=ROOT / "var" / "bench" / "twin2k-full")
    parser.add_argument("--respondents", type=int, default=0, help="with --workers 0: import only the first N")
    parser.add_argument("--workers", type=int, default=2, help="processes preparing respondents (0: the old sequence)")
    parser.add_argument("--late-bad", type=int, default=0, help="respondent N (1-based) made invalid: nothing stored")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    chunks = args.data / "wave_split" / "chunks"
    if args.late_bad:
        return late_bad(chunks, args.late_bad, args.workers)
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


def late_bad(chunks: Path, n: int, workers: int) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from experiments.core.survey.records import SurveyImportError
    from experiments.models import SurveyItem

    out = ROOT / "var" / "bench" / f"twin2k-late-{n}"
    out.mkdir(parents=True, exist_ok=True)
    before = 0
    for chunk in sorted(chunks.glob("*.parquet")):
        target = out / chunk.name
        target.unlink(missing_ok=True)
        rows = pq.ParquetFile(chunk).metadata.num_rows
        if not before < n <= before + rows:
            target.symlink_to(chunk.resolve())
        else:
            table = pq.read_table(chunk)
            records = table.to_pylist()
            row = records[n - before - 1]
            blocks = json.loads(row["wave4_Q_wave4_A"])
            question = next(q for b in blocks for q in b["Questions"]
                            if q.get("QuestionType") == "MC" and q.get("Answers"))
            question["Answers"]["SelectedByPosition"] = 99
            row["wave4_Q_wave4_A"] = json.dumps(blocks)
            pq.write_table(pa.Table.from_pylist(records, schema=table.schema), target)
            print(f"respondent {n} (pid {row['pid']}, {chunk.name} row {n - before}): {question['QuestionID']} "
                  "answered 99")
        before += rows
    project, _ = Project.objects.get_or_create(slug="bench-survey", defaults={"name": "bench"})
    counts = (SurveyRespondent.objects.count(), SurveyItem.objects.count())
    written = []
    with Timer() as failed:
        try:
            survey_import(project=project, name="late", respondents=PreparedStream([out], workers),
                          sources=[out.name], on_batch=written.append)
        except SurveyImportError as error:
            message = str(error)
        else:
            raise SystemExit("the import did not fail")
    assert (SurveyRespondent.objects.count(), SurveyItem.objects.count()) == counts, "something was stored"
    print(f"refused after {written[-1] if written else 0} respondents were written and rolled back: {failed}")
    print(message)


if __name__ == "__main__":
    main()
