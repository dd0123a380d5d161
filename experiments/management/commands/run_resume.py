from django.core.management.base import BaseCommand

from experiments.execution import control, driver
from experiments.management.owner_action import amend_and_continue, inline_ending, run_and_owner


class Command(BaseCommand):
    help = (
        "Resume a paused or stopped run (an amendment with a reason; it closes an open circuit and lets each "
        "held slot send --allowance identical requests, one by default as in the paper), then continue it "
        "through the queue or, with --inline, here."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reason", required=True, help="recorded with the amendment")
        parser.add_argument("--allowance", type=int, default=1,
                            help="identical requests each held slot may send (default 1, the paper's continuation)")
        parser.add_argument("--inline", action="store_true", help="drive the run here, without the queue")
        parser.add_argument("--user", help="recorded as who resumed it (an owner, or an analyst who may spend on it)")

    def handle(self, run_id, reason, inline, user, allowance=1, **options):
        run, owner = run_and_owner(run_id, reason, user)
        amendment = amend_and_continue(
            run, inline=inline, refused=f"run {run_id} not resumed",
            amend=lambda: control.run_resume(run=run, user=owner, reason=reason.strip(), allowance=allowance))
        released = len(amendment.payload.get("held_slots_released", []))
        if not inline:
            return (f"run {run_id} resumed through the queue (amendment {amendment.pk}, {released} held slots "
                    f"released, {allowance} identical request{'s' * (allowance != 1)} each)")
        run = driver.run_inline(run.pk)
        ending = inline_ending(run)
        return f"run {run_id} resumed inline (amendment {amendment.pk}, {released} held slots released) and is {ending}"
