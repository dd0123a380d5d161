"""import_task_list: a cohort of exactly the targets a fixed task list names (the paper's fixed inputs)."""
from django.core.management.base import BaseCommand, CommandError

from experiments.core.fixed_input_lists import FixedInputError
from experiments.core.interviews.records import printable, unstorable_text_problem
from experiments.data.sessions import CohortError
from experiments.data.fixed_input_cohorts import cohort_from_task_list
from experiments.models import Project


class Command(BaseCommand):
    help = ("Make a frozen cohort from a fixed task list instead of deriving tasks: a UTF-8 CSV with the header "
            "session_id,question_turn (the question's turn index; the next turn is the reference answer), "
            "rows in cohort order. All or nothing.")

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--project", required=True)
        parser.add_argument("--name", required=True, help="the cohort's name")

    def handle(self, path, project, name, **options):
        for option, value in (("--project", project), ("--name", name)):
            if problem := unstorable_text_problem(value):
                raise CommandError(f"{option} {printable(value)!r} {problem}")
        project_obj = Project.objects.filter(slug=project).first()
        if project_obj is None:
            raise CommandError(f"no project '{project}'")
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            cohort = cohort_from_task_list(project=project_obj, name=name, data=data, label=path)
        except (FixedInputError, CohortError) as exc:
            raise CommandError(str(exc)) from None
        return (f"cohort '{cohort.name}' from the fixed task list {path}: {cohort.rule['targets']} tasks, "
                f"{cohort.rule['drawn_sessions']} sessions, {cohort.rule['people']} people, "
                f"sha256 {cohort.task_list_sha256}")
