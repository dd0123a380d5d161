"""draw_cohort: draw a frozen cohort from a project's current task set."""
from django.core.management.base import BaseCommand, CommandError

from experiments.core.interviews.records import printable, unstorable_text_problem
from experiments.models import Cohort, Project
from experiments.core.fixed_input_lists import FixedInputError
from experiments.data.sessions import CohortError, cohort_draw
from experiments.data.fixed_input_cohorts import cohort_draw_excluding


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None


class Command(BaseCommand):
    help = "Draw a frozen cohort from the project's current task set (paper App. G)."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--size", type=int, required=True, help="number of sessions")
        parser.add_argument("--seed", type=int, required=True)
        parser.add_argument("--exclude-cohort", action="append", default=[], help="leave out this cohort's people")
        parser.add_argument("--exclude-people", metavar="FILE",
                            help="a person-exclusion list: one person id per line (# comments), all their sessions left out")

    def handle(self, project, name, size, seed, exclude_cohort, exclude_people=None, **options):
        # Command-line text can hold what no database stores (a NUL from call_command, a
        # surrogate-escaped byte from argv): say so instead of failing in the lookup.
        for option, value in [("--project", project)] + [("--exclude-cohort", n) for n in exclude_cohort]:
            if problem := unstorable_text_problem(value):
                raise CommandError(f"{option} {printable(value)!r} {problem}")
        try:
            project_obj = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"no project '{project}'") from None
        excluded = list(Cohort.objects.filter(project=project_obj, name__in=exclude_cohort))
        unknown = set(exclude_cohort) - {c.name for c in excluded}
        if unknown:
            raise CommandError(f"no cohort named {', '.join(sorted(unknown))}")
        try:
            if exclude_people:
                cohort = cohort_draw_excluding(project=project_obj, name=name, size=size, seed=seed,
                                               exclusion_list=_read(exclude_people), label=exclude_people,
                                               exclude_cohorts=excluded)
            else:
                cohort = cohort_draw(
                    project=project_obj, name=name, size=size, seed=seed, exclude_cohorts=excluded
                )
        except (CohortError, FixedInputError) as exc:
            raise CommandError(str(exc)) from None
        return (
            f"cohort '{cohort.name}': {cohort.rule['drawn_sessions']} sessions, "
            f"{cohort.cohort_tasks.count()} tasks, sha256 {cohort.task_list_sha256}"
        )
