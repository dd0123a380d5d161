from django.core.management.base import BaseCommand, CommandError

from experiments import engine
from experiments.access import OWNERS, member_with_role
from experiments.models import Run


class Command(BaseCommand):
    help = "Pause a running run (an amendment with a reason): nothing more is sent until it is resumed."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reason", required=True, help="recorded with the amendment")
        parser.add_argument("--user", help="recorded as who paused it (an owner of the project)")

    def handle(self, run_id, reason, user, **options):
        run = Run.objects.select_related("protocol__project").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run with id {run_id}")
        if not reason.strip():
            raise CommandError("give a reason: amendments are recorded with it")
        project = run.protocol.project
        owner = member_with_role(project, user, roles=OWNERS) if user else None
        if user and owner is None:
            raise CommandError(f"{user!r} is not an owner of project '{project.slug}'")
        try:
            amendment = engine.run_pause(run=run, user=owner, reason=reason.strip())
        except engine.RunError as exc:
            raise CommandError(f"run {run_id} not paused: {exc}") from None
        return f"run {run_id} paused (amendment {amendment.pk}); resume it with: manage.py run_resume {run_id} --reason …"
