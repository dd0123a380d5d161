"""derive_tasks: derive prediction tasks under a rule for every session of a project."""
from django.core.management.base import BaseCommand, CommandError

from experiments.core.interviews.records import printable, unstorable_text_problem
from experiments.models import Project
from experiments.data.sessions import tasks_derive
from experiments.core.tasks import PAPER_RULE, TaskRule


class Command(BaseCommand):
    help = "Derive prediction tasks (paper App. G) for every session of a project."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True)
        parser.add_argument("--min-pairs", type=int, default=PAPER_RULE.min_pairs)
        parser.add_argument("--min-targets", type=int, default=PAPER_RULE.min_targets)
        parser.add_argument("--max-targets", type=int, default=PAPER_RULE.max_targets)

    def handle(self, project, min_pairs, min_targets, max_targets, **options):
        # Command-line text can hold what no database stores (a NUL from call_command, a
        # surrogate-escaped byte from argv): say so instead of failing in the lookup.
        if problem := unstorable_text_problem(project):
            raise CommandError(f"--project {printable(project)!r} {problem}")
        try:
            project_obj = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"no project '{project}'") from None
        try:
            rule = TaskRule(min_pairs, min_targets, max_targets)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        new_tasks = tasks_derive(project=project_obj, rule=rule)
        task_set = project_obj.current_task_set()
        total = task_set.tasks.count()
        sessions = task_set.tasks.values("session").distinct().count()
        return f"{new_tasks} new tasks; the set ({task_set.rule_label()}) has {total} tasks from {sessions} sessions"
