"""What the run commands share: the run, a reason, and who acts — someone who may spend on it."""
from django.core.management.base import CommandError

from experiments.access import spender
from experiments.models import Protocol, Run


def run_and_owner(run_id: int, reason: str, user: str | None):
    """(run, user or None) for an amendment from the shell; CommandError otherwise.

    `user`, when given, must be allowed to spend on the run's protocol (`access.may_spend`:
    owners, and analysts for free protocols or when the project delegates it). Without it the
    shell's operator acts, recorded as "shell".
    """
    run = Run.objects.select_related("protocol__project").filter(pk=run_id).first()
    if run is None:
        raise CommandError(f"no run with id {run_id}")
    if not reason.strip():
        raise CommandError("give a reason: amendments are recorded with it")
    return run, acting_spender(run.protocol, user)


def acting_spender(protocol: Protocol, user: str | None):
    """The user called `user` if they may spend on `protocol`; None without `user`; CommandError otherwise."""
    if not user:
        return None
    member, refusal = spender(protocol, user)
    if member is None:
        raise CommandError(refusal)
    return member
