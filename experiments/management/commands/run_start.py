from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from experiments.execution import control, driver, jobs, policy
from experiments.management.owner_action import acting_spender, inline_ending, require_queue
from experiments.models import Protocol, Run


class Command(BaseCommand):
    help = (
        "Create a run of a sealed protocol and start it: through the queue (workers make the calls), "
        "or with --inline in this process, one request at a time. Prints the run id."
    )

    def add_arguments(self, parser):
        parser.add_argument("protocol_id", type=int)
        parser.add_argument("--inline", action="store_true", help="drive the run here, without the queue")
        parser.add_argument("--user", help="recorded as the run's creator (an owner, or an analyst who may spend on it)")

    def handle(self, protocol_id, inline, user, **options):
        protocol = Protocol.objects.select_related("project").filter(pk=protocol_id).first()
        if protocol is None:
            raise CommandError(f"no protocol with id {protocol_id}")
        creator = acting_spender(protocol, user)
        if not inline:
            require_queue("was started")
        try:
            with transaction.atomic():
                run = Run.objects.create(protocol=protocol, created_by=creator, inline=inline)
                control.run_start(run=run)
                if not inline:
                    jobs.run_enqueue(run.pk)  # enqueued when this transaction commits
        except policy.RunError as exc:
            raise CommandError(f"protocol {protocol.name!r}: the run did not start: {exc}") from None
        if not inline:
            return f"run {run.pk} of {protocol.name!r} started through the queue; follow it with: manage.py run_report {run.pk}"
        run = driver.run_inline(run.pk)
        ending = inline_ending(run)
        return f"run {run.pk} of {protocol.name!r} ran inline and is {ending}; see: manage.py run_report {run.pk}"
