from django.core.management.base import BaseCommand, CommandError

from experiments.management.owner_action import acting_spender
from experiments.execution.policy import RunError
from experiments.models import Protocol
from experiments.execution.sealing import protocol_seal


class Command(BaseCommand):
    help = "Seal a protocol: store the sha256 of its prompt files, task list and settings, and the code version."

    def add_arguments(self, parser):
        parser.add_argument("protocol_id", type=int)
        parser.add_argument("--user", help="recorded as the sealer (an owner, or an analyst who may spend on it)")

    def handle(self, protocol_id, user, **options):
        protocol = Protocol.objects.select_related("project").filter(pk=protocol_id).first()
        if protocol is None:
            raise CommandError(f"no protocol with id {protocol_id}")
        sealer = acting_spender(protocol, user)
        try:
            protocol = protocol_seal(protocol=protocol, user=sealer)
        except RunError as exc:
            raise CommandError(f"protocol {protocol.name!r} not sealed: {exc}") from None
        seal = protocol.seal
        lines = [
            f"protocol {protocol.name!r} (id {protocol.pk}) sealed; start a run with: manage.py run_start {protocol.pk}",
            f"  task list  {seal['task_list_sha256']}",
            f"  settings   {seal['settings_sha256']}",
            f"  code       {seal['code_version']}",
            *(f"  prompt {name}  {digest}" for name, digest in seal["prompts"].items()),
        ]
        return "\n".join(lines)
