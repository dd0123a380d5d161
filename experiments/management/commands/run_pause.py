from django.core.management.base import BaseCommand, CommandError

from experiments.execution import control, policy
from experiments.management.owner_action import run_and_owner


class Command(BaseCommand):
    help = "Pause a running run (an amendment with a reason): nothing more is sent until it is resumed."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reason", required=True, help="recorded with the amendment")
        parser.add_argument("--user", help="recorded as who paused it (an owner, or an analyst who may spend on it)")

    def handle(self, run_id, reason, user, **options):
        run, owner = run_and_owner(run_id, reason, user)
        try:
            amendment = control.run_pause(run=run, user=owner, reason=reason.strip())
        except policy.RunError as exc:
            raise CommandError(f"run {run_id} not paused: {exc}") from None
        return f"run {run_id} paused (amendment {amendment.pk}); resume it with: manage.py run_resume {run_id} --reason …"
