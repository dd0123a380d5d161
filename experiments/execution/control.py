"""What an owner does to a run: start it, the recorded amendments — pause, resume, re-issue unknown slots, change
concurrency (App. B.2) — and, once it is finished, have its answers re-graded by another judge (App. H)."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from experiments.execution.policy import RunError
from experiments.execution.sealing import protocol_seal, seal_mismatches
from experiments.models import Amendment, Protocol, Run, Slot
from experiments.models.runs import Phase


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
        if current.protocol.is_regrade():
            current.phase = Phase.JUDGING  # a re-grade generates nothing: straight to its one phase
        current.save(update_fields=["status", "started_at", "phase"])
    run.status, run.started_at, run.phase = current.status, current.started_at, current.phase


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


def regrade_create(*, source: Run, user, judge: dict | None = None, cap: int | None = None,
                   name: str | None = None) -> Protocol:
    """A sealed re-grade-only protocol of the finished run `source` (App. H): the same cohort,
    conditions, contrasts and bootstrap, its answers judged by `judge` (None: the source's own
    judge, a retest), `cap` requests in flight to the judge's provider. RunError, and nothing
    created, when it cannot be sealed."""
    with transaction.atomic():
        source = Run.objects.select_for_update(of=("self",)).select_related("protocol__project").get(pk=source.pk)
        if source.status != Run.Status.FINISHED:
            raise RunError(f"run {source.pk} is {source.get_status_display().lower()}; "
                           "only a finished run can be re-graded")
        base = source.protocol
        judge = dict(base.judge) if judge is None else judge
        name = (name or "").strip() or _regrade_name(source, retest=judge == base.judge)
        if len(name) > Protocol._meta.get_field("name").max_length:
            raise RunError("the name is longer than 100 characters")
        if Protocol.objects.filter(project=base.project, name=name).exists():
            raise RunError(f"the project has a protocol named {name!r} already")
        concurrency = dict(base.concurrency)
        if cap is not None and isinstance(judge, dict):
            concurrency[str(judge.get("provider"))] = cap
        protocol = Protocol.objects.create(
            project=base.project, name=name, cohort=base.cohort, conditions=list(base.conditions),
            generator=base.generator, judge=judge, concurrency=concurrency, retry_policy=base.retry_policy,
            contrasts=base.contrasts, bootstrap=base.bootstrap, regrade_of=source, created_by=user,
        )
        # A refused seal raises inside this transaction: the protocol is not kept.
        return protocol_seal(protocol=protocol, user=user)


def _regrade_name(source: Run, *, retest: bool) -> str:
    """A free default name, e.g. "pilot · re-grade 2 of run 17"."""
    kind = "retest" if retest else "re-grade"
    taken = set(Protocol.objects.filter(project=source.protocol.project).values_list("name", flat=True))
    for number in range(1, len(taken) + 2):
        suffix = f" · {kind}{'' if number == 1 else f' {number}'} of run {source.pk}"
        name = source.protocol.name[:100 - len(suffix)] + suffix
        if name not in taken:
            return name
    raise AssertionError("unreachable: one of len(taken) + 1 names is free")
