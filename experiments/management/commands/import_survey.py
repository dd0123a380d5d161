"""import_survey: Twin-2K-500 wave_split files (parquet, a folder of chunks, JSON, JSONL) into a
project as one survey study, whole or not at all, with its seeded development and reported samples.

The files are read, validated and prepared in `--workers` processes (default: the setting
OWNWORDS_SURVEY_IMPORT_WORKERS, 2) while this process writes, in the one transaction."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from experiments.core.interviews.records import printable, unstorable_text_problem
from experiments.core.survey.prepare import PreparedStream
from experiments.core.survey.records import SurveyImportError
from experiments.core.survey.scores import SURVEY_SEED
from experiments.data.members import MembershipError, project_for_command
from experiments.data.surveys import survey_import, survey_import_workers


class Command(BaseCommand):
    help = "Import Twin-2K-500 wave_split respondents (parquet, folder of chunks, .json, .jsonl) as a survey study."

    def add_arguments(self, parser):
        parser.add_argument("paths", type=Path, nargs="+")
        parser.add_argument("--project", required=True, help="project slug (created if missing)")
        parser.add_argument("--owner", help="username of the owner of a project this creates (audited)")
        parser.add_argument("--name", help="the study's name (default: the first file's stem)")
        parser.add_argument("--seed", type=int, default=SURVEY_SEED, help="seed of the samples' order")
        parser.add_argument("--synthetic", action="store_true", help="label the respondents as synthetic everywhere")
        parser.add_argument("--workers", type=int, default=None,
                            help="processes reading the files (0 or 1: this one; default OWNWORDS_SURVEY_IMPORT_WORKERS)")

    def handle(self, paths, project, owner, name, seed, synthetic, workers, **options):
        if problem := unstorable_text_problem(project):
            raise CommandError(f"--project {printable(project)!r} {problem}")
        name = name or paths[0].stem
        workers = survey_import_workers() if workers is None else workers
        try:
            with transaction.atomic():  # a project made for the files goes if they are refused
                target, note = project_for_command(slug=project, owner=owner)
                result = survey_import(project=target, name=name,
                                       respondents=PreparedStream(paths, workers), sources=[p.name for p in paths],
                                       synthetic=synthetic, seed=seed)
        except SurveyImportError as exc:
            raise CommandError(str(exc)) from None
        except MembershipError as exc:
            raise CommandError(f"nothing imported: {exc}") from None
        lines = [f"{printable(name)}: {result.imported} respondent(s) imported"
                 + (" (SYNTHETIC)" if synthetic else "")
                 + f", {result.excluded_respondents} excluded by the leak check"]
        lines += [f"  excluded: {sentence}" for sentence in result.excluded]
        lines += [f"  sample {c.name!r}: {c.requested_size} respondent(s), seed {c.seed}" for c in result.samples]
        return "\n".join(lines + ([note] if note else []))
