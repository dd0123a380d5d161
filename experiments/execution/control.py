"""What an owner does to a run: start it, and the recorded amendments — pause, resume, re-issue unknown slots, change concurrency (App. B.2)."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from experiments.execution.policy import RunError
from experiments.execution.sealing import seal_mismatches
from experiments.models import Amendment, Run, Slot


def run_start(*, run: Run) -> None:
    """Start a new run of a sealed protocol whose seal still matches (read fresh, under lock)."""
    with transaction.atomic():
        current = Run.objects.select_for_update(of=("self",)).select_related("protocol").get(pk=run.pk)
        if not current.protocol.is_sealed():
            raise RunError("the protocol is not sealed; seal it before running")
        if current.status != Run.Status.CREATED:
            raise RunError(f"the run is {current.status}; only a new run can start")
        problems = seal_mismatches(current.protocol)
        if problems:
            raise RunError("the seal no longer matches: " + "; ".join(problems))
        current.status = Run.Status.RUNNING
        current.started_at = timezone.now()
        current.save(update_fields=["status", "started_at"])
    run.status, run.started_at = current.status, current.started_at


def run_pause(*, run: Run, user, reason: str) -> Amendment:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status != Run.Status.RUNNING:
            raise RunError(f"the run is {run.status}, not running")
        run.status = Run.Status.PAUSED
        run.status_reason = f"Paused by {_who(user)}: {reason}"
        run.save(update_fields=["status", "status_reason"])
        return Amendment.objects.create(run=run, kind=Amendment.Kind.PAUSE, reason=reason, created_by=user)


def run_resume(*, run: Run, user, reason: str) -> Amendment:
    """Close the circuit and continue; each held slot may send one more identical request."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in (Run.Status.PAUSED, Run.Status.STOPPED):
            raise RunError(f"the run is {run.status}; only a paused or stopped run resumes")
        held = list(Slot.objects.filter(run=run, status=Slot.Status.HELD).values_list("key", flat=True))
        amendment = Amendment.objects.create(
            run=run, kind=Amendment.Kind.RESUME, reason=reason, created_by=user,
            payload={"held_slots_released": held, "was": run.status, "circuit_was_open": run.circuit_open},
        )
        _release(run, Slot.objects.filter(run=run, status=Slot.Status.HELD), amendment)
        # Pending slots handed out before the pause may have been dropped as no-ops.
        Slot.objects.filter(run=run, status=Slot.Status.PENDING).update(dispatched_at=None)
        run.status = Run.Status.RUNNING
        run.circuit_open = False
        run.status_reason = f"Resumed by {_who(user)}: {reason}"
        run.save(update_fields=["status", "circuit_open", "status_reason"])
        return amendment


def run_reissue_unknown(*, run: Run, user, reason: str) -> Amendment:
    """Allow exactly one more identical request for each slot now counted unknown."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        unknown = Slot.objects.filter(run=run, status=Slot.Status.UNKNOWN, phase=run.phase)
        keys = list(unknown.values_list("key", flat=True))
        if not keys:
            raise RunError("no unknown slots in the current phase")
        if run.status == Run.Status.FINISHED:
            raise RunError("the run is finished")
        amendment = Amendment.objects.create(run=run, kind=Amendment.Kind.REISSUE_UNKNOWN, reason=reason,
                                             created_by=user, payload={"slots": keys})
        _release(run, unknown, amendment)
        return amendment


def _release(run: Run, slots, amendment: Amendment) -> None:
    for slot in slots:
        slot.amended_attempts += 1
        slot.status = Slot.Status.PENDING
        slot.status_note = f"released by amendment {amendment.pk}"
        slot.dispatched_at = None
        slot.save(update_fields=["amended_attempts", "status", "status_note", "dispatched_at", "updated_at"])


def _who(user) -> str:
    return str(user) if user is not None else "a shell command"


def run_set_concurrency(*, run: Run, user, provider: str, cap: int, reason: str) -> Amendment:
    if cap < 1:
        raise RunError("the in-flight cap must be at least 1")
    providers = {run.protocol.generator.get("provider"), run.protocol.judge.get("provider")}
    if provider not in providers:
        raise RunError(f"the protocol uses {', '.join(sorted(p for p in providers if p))}, not {provider!r}")
    if run.status == Run.Status.FINISHED:
        raise RunError("the run is finished")
    return Amendment.objects.create(run=run, kind=Amendment.Kind.CONCURRENCY, reason=reason, created_by=user,
                                    payload={"concurrency": {provider: cap}})
