from django.core.management.base import BaseCommand

from experiments.execution import control, driver
from experiments.management.owner_action import amend_and_continue, inline_ending, run_and_owner


class Command(BaseCommand):
    help = (
        "Continue a run paused at a phase boundary with the slots that wait for a decision missing, as the paper "
        "keeps unknown reserved attempts (an amendment with a reason); the next phase starts."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reason", required=True, help="recorded with the amendment")
        parser.add_argument("--inline", action="store_true", help="continue the run here, without the queue")
        parser.add_argument("--user", help="recorded as who decided (an owner, or an analyst who may spend on it)")

    def handle(self, run_id, reason, inline, user, **options):
        run, owner = run_and_owner(run_id, reason, user)
        amendment = amend_and_continue(
            run, inline=inline, refused=f"run {run_id} not continued",
            amend=lambda: control.run_accept_missing(run=run, user=owner, reason=reason.strip()))
        missing = len(amendment.payload["slots"])
        if not inline:
            return f"run {run_id} continues through the queue with {missing} slots missing (amendment {amendment.pk})"
        run = driver.run_inline(run.pk)
        ending = inline_ending(run)
        return f"run {run_id} continued with {missing} slots missing (amendment {amendment.pk}) and is {ending}"
