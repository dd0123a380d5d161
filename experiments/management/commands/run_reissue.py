from django.core.management.base import BaseCommand

from experiments.execution import control, driver
from experiments.management.owner_action import amend_and_continue, inline_ending, run_and_owner, tokens_text


class Command(BaseCommand):
    help = (
        "Re-issue, once each, the slots of the run's current phase that ended without an answer and wait for a "
        "decision (unknown, or failed after an amendment's allowance): a paid amendment, recorded with its cost. "
        "Without --yes it only prints what it would send."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reason", required=True, help="recorded with the amendment")
        parser.add_argument("--yes", action="store_true", help="send them (without it: only show the cost)")
        parser.add_argument("--inline", action="store_true", help="continue the run here, without the queue")
        parser.add_argument("--user", help="recorded as who decided (an owner, or an analyst who may spend on it)")

    def handle(self, run_id, reason, yes, inline, user, **options):
        run, owner = run_and_owner(run_id, reason, user)
        estimate = control.reissue_estimate(run)
        cost = f"{estimate['requests']} identical requests; tokens of their last attempts: {tokens_text(estimate)}"
        if not yes:
            keys = "\n".join(f"  {s['key']} ({s['status']})" for s in estimate["slots"])
            return f"run {run_id} would re-issue {cost}:\n{keys}\nrun again with --yes to send them"
        amendment = amend_and_continue(
            run, inline=inline, refused=f"run {run_id}: nothing re-issued",
            amend=lambda: control.run_reissue_unknown(run=run, user=owner, reason=reason.strip()))
        if not inline:
            return f"run {run_id}: re-issued {cost} (amendment {amendment.pk}) through the queue"
        run = driver.run_inline(run.pk)
        ending = inline_ending(run)
        return f"run {run_id}: re-issued {cost} (amendment {amendment.pk}) and is {ending}"
