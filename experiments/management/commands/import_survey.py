"""import_survey: Twin-2K-500 wave_split files (parquet, a folder of chunks, JSON, JSONL) into a
project as one survey study, whole or not at all, with its seeded development and reported samples."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from experiments.core.interviews.records import printable, unstorable_text_problem
from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.records import SurveyImportError
from experiments.core.survey.scores import SURVEY_SEED
from experiments.data import project_get_or_create
from experiments.survey_data import survey_import


class Command(BaseCommand):
    help = "Import Twin-2K-500 wave_split respondents (parquet, folder of chunks, .json, .jsonl) as a survey study."

    def add_arguments(self, parser):
        parser.add_argument("paths", type=Path, nargs="+")
        parser.add_argument("--project", required=True, help="project slug (created if missing)")
        parser.add_argument("--name", help="the study's name (default: the first file's stem)")
        parser.add_argument("--seed", type=int, default=SURVEY_SEED, help="seed of the samples' order")
        parser.add_argument("--synthetic", action="store_true", help="label the respondents as synthetic everywhere")

    def handle(self, paths, project, name, seed, synthetic, **options):
        if problem := unstorable_text_problem(project):
            raise CommandError(f"--project {printable(project)!r} {problem}")
        name = name or paths[0].stem
        respondents, problems = [], []
        for path in paths:
            try:
                respondents += read_survey_path(path)
            except SurveyImportError as exc:
                problems += exc.problems
        if problems:
            raise CommandError(str(SurveyImportError(problems)))
        pids = [r.pid for r in respondents]
        if len(set(pids)) != len(pids):
            repeated = sorted({pid for pid in pids if pids.count(pid) > 1})[:10]
            raise CommandError(f"nothing imported: respondent(s) {', '.join(repeated)} appear in more than one file")
        try:
            with transaction.atomic():  # a project made for the files goes if they are refused
                result = survey_import(project=project_get_or_create(slug=project), name=name,
                                       respondents=respondents, sources=[p.name for p in paths],
                                       synthetic=synthetic, seed=seed)
        except SurveyImportError as exc:
            raise CommandError(str(exc)) from None
        lines = [f"{printable(name)}: {result.imported} respondent(s) imported"
                 + (" (SYNTHETIC)" if synthetic else "")
                 + f", {result.excluded_respondents} excluded by the leak check"]
        lines += [f"  excluded: {sentence}" for sentence in result.excluded]
        lines += [f"  sample {c.name!r}: {c.requested_size} respondent(s), seed {c.seed}" for c in result.samples]
        return "\n".join(lines)
