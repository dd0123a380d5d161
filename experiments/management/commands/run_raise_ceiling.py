from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from experiments.execution import control, driver, jobs, policy
from experiments.management.owner_action import inline_ending, require_queue, run_and_owner
from experiments.models import Run


class Command(BaseCommand):
    help = (
        "Raise a paused or stopped run's HTTP ceiling for its current phase and/or for the whole run (an "
        "amendment with a reason, recording the old and new ceilings and the most it may cost). A run that a "
        "ceiling stopped then resumes, through the queue or, with --inline, here."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--phase-ceiling", type=int, help="the current phase's new ceiling (HTTP attempts)")
        parser.add_argument("--run-ceiling", type=int, help="the whole run's new ceiling (HTTP attempts)")
        parser.add_argument("--reason", required=True, help="recorded with the amendment")
        parser.add_argument("--inline", action="store_true", help="drive a resumed run here, without the queue")
        parser.add_argument("--user", help="recorded as who raised it (an owner, or an analyst who may spend on it)")

    def handle(self, run_id, reason, inline, user, phase_ceiling=None, run_ceiling=None, **options):
        run, owner = run_and_owner(run_id, reason, user)
        if not inline:
            require_queue("changed")
        try:
            with transaction.atomic():
                amendment = control.run_raise_ceiling(run=run, user=owner, reason=reason.strip(),
                                                      phase_ceiling=phase_ceiling, run_ceiling=run_ceiling)
                resumed = Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
                if resumed and not inline:
                    jobs.run_enqueue(run.pk)
        except policy.RunError as exc:
            raise CommandError(f"run {run_id}: ceiling not raised: {exc}") from None
        said = f"ceiling raised (amendment {amendment.pk}, up to {amendment.payload['extra_requests']} more requests)"
        if not resumed:
            return f"run {run_id}: {said}; the run stays {Run.objects.get(pk=run.pk).status}"
        if not inline:
            return f"run {run_id}: {said}; resumed through the queue"
        return f"run {run_id}: {said}; resumed inline and is {inline_ending(driver.run_inline(run.pk))}"
