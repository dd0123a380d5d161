"""What the run commands share: the run, a reason, who acts (someone who may spend on it), the
queue check before anything changes, and how they report a run driven inline or a re-issue's cost."""
from django.core.management.base import CommandError
from django.db import transaction

from experiments.access import spender
from experiments.execution import jobs, policy, progress
from experiments.execution.jobs import WORKER_COMMAND
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


def require_queue(nothing: str) -> None:
    """CommandError unless the queue answers; `nothing` says what was left undone ("changed", …)."""
    if not progress.queue_reachable():
        raise CommandError("no queue is reachable (the Redis server of REDIS_URL did not answer), so nothing "
                           f"{nothing}. Start Redis and a worker ({WORKER_COMMAND}), or use --inline.")


def amend_and_continue(run: Run, *, inline: bool, refused: str, amend):
    """The amendment `amend()` makes, recorded in one transaction with the run's continuation
    through the queue (enqueued when it commits; nothing when `inline`); CommandError
    "`refused`: why" when the amendment is refused, and nothing changed."""
    if not inline:
        require_queue("changed")
    try:
        with transaction.atomic():
            amendment = amend()
            if not inline:
                jobs.run_enqueue(run.pk)
    except policy.RunError as exc:
        raise CommandError(f"{refused}: {exc}") from None
    return amendment


def inline_ending(run: Run) -> str:
    """How a run driven inline ended: its status, and the reason when it did not finish."""
    ending = run.get_status_display().lower()
    if run.status_reason and run.status != Run.Status.FINISHED:
        ending += f": {run.status_reason}"
    return ending


def tokens_text(estimate: dict) -> str:
    """The tokens of a re-issue estimate's last attempts, or "not known" when none reported usage."""
    if not estimate["tokens_known_for"]:
        return "not known"
    return (f"input {estimate['input_tokens']}, output {estimate['output_tokens']} "
            f"({estimate['tokens_known_for']} reported usage)")
