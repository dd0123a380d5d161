"""What an owner does to a run: start it, the recorded amendments — pause, resume with a continuation allowance,
re-issue or accept missing the slots that wait for a decision, change concurrency (App. B.2) — and, once it is
finished, have its answers re-graded by another judge (App. H)."""
from __future__ import annotations

from django.db import transaction
from django.db.models import Count, F, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from experiments.execution.endpoints import require_allowed_endpoint
from experiments.execution.kind_table import kind_rules
from experiments.execution.pairwise_judge import checked_pairs
from experiments.execution.policy import RunError, effective_http_ceilings, model_config, run_retry_policy
from experiments.execution.reservation import ceiling_reached
from experiments.execution.sealing import protocol_seal, seal_mismatches
from experiments.execution.journal import OPEN_STATUSES as OPEN_SLOT_STATUSES
from experiments.models import Amendment, ModelCall, Protocol, Run, Slot
from experiments.models.runs import PHASE_ORDER, Phase


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
        # The administrator may have withdrawn an endpoint since the seal: refuse before any request.
        rules = kind_rules(current.protocol)
        for role in rules.sending_roles:
            require_allowed_endpoint(model_config(getattr(current.protocol, role)))
        current.status = Run.Status.RUNNING
        current.started_at = timezone.now()
        current.phase = rules.first_phase  # a re-grade generates nothing: straight to its one phase
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


def run_resume(*, run: Run, user, reason: str, allowance: int = 1) -> Amendment:
    """Close the circuit and continue: the paper's continuation amendment (App. B.2).

    Each held slot gets a separately recorded allowance of `allowance` identical requests (the
    paper's one by default; the owner may allow more), recorded in the amendment's payload and
    granted exactly. A run paused at a phase boundary for slots that ended without an answer
    does not resume: the owner decides about them first (`run_accept_missing`, `run_reissue_unknown`).
    """
    if not isinstance(allowance, int) or allowance < 1 or allowance > MAX_ALLOWANCE:
        raise RunError(f"the allowance is a whole number of requests per held slot, 1 to {MAX_ALLOWANCE}")
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in (Run.Status.PAUSED, Run.Status.STOPPED):
            raise RunError(f"the run is {run.status}; only a paused or stopped run resumes")
        if not run.circuit_open and _at_decision(run):
            raise RunError(_DECISION_DUE.format(n=slots_awaiting_decision(run).count(), phase=_phase_name(run)))
        held_slots = Slot.objects.filter(run=run, status=Slot.Status.HELD).order_by("pk")
        held = list(held_slots.values_list("key", flat=True))
        amendment = Amendment.objects.create(
            run=run, kind=Amendment.Kind.RESUME, reason=reason, created_by=user,
            payload={"held_slots_released": held, "was": run.status, "circuit_was_open": run.circuit_open,
                     "allowance": allowance, "stopped_because": run.status_reason},
        )
        _release(run, held_slots, amendment, allowance)
        # Pending slots handed out before the pause may have been dropped as no-ops.
        Slot.objects.filter(run=run, status=Slot.Status.PENDING).update(dispatched_at=None)
        run.status = Run.Status.RUNNING
        run.circuit_open = False
        run.status_reason = f"Resumed by {_who(user)}: {reason}"
        run.save(update_fields=["status", "circuit_open", "status_reason"])
        return amendment


# The most identical requests one amendment may allow a slot (the paper's continuation allowed one).
MAX_ALLOWANCE = 10
_DECISION_DUE = ("{n} slots of {phase} ended without an answer and wait for your decision: continue with "
                 "them missing, or re-issue each once")


def slots_awaiting_decision(run: Run):
    """Slots of the run's current phase that ended without an answer in a way only the owner
    may settle (App. B.2): unknown (reserved, no outcome: the request may have reached the
    service), or failed after every identical request an amendment allowed."""
    amended = ModelCall.objects.filter(slot=OuterRef("pk"), basis=ModelCall.Basis.AMENDMENT)
    used = Subquery(amended.values("slot").annotate(n=Count("pk")).values("n")[:1])
    # The status filter first: the (run, phase, status) index keeps the page's 2 s poll cheap on big phases.
    return (Slot.objects.filter(run=run, phase=run.phase, status__in=(Slot.Status.UNKNOWN, Slot.Status.FAILED))
            .annotate(amended_used=Coalesce(used, 0))
            .filter(Q(status=Slot.Status.UNKNOWN)
                    | Q(status=Slot.Status.FAILED, amended_used__gt=0, amended_used__gte=F("amended_attempts"))))


def _at_decision(run: Run) -> bool:
    """The current phase has no open slot left and some slots wait for the owner's decision."""
    return (not Slot.objects.filter(run=run, phase=run.phase, status__in=OPEN_SLOT_STATUSES).exists()
            and slots_awaiting_decision(run).exists())


def decision_pause(run: Run) -> None:
    """The driver's pause at a phase boundary: nothing advances until the owner decides (run locked)."""
    n = slots_awaiting_decision(run).count()
    run.status = Run.Status.PAUSED
    run.status_reason = f"Paused at the end of {_phase_name(run)}: " + _DECISION_DUE.format(n=n, phase="the phase") + "."
    run.save(update_fields=["status", "status_reason"])


def reissue_estimate(run: Run) -> dict:
    """What re-issuing the slots awaiting a decision costs: one request each, and the tokens their
    latest attempts with reported usage consumed (unknown for the others: not zero, App. B.3)."""
    slots = list(slots_awaiting_decision(run).order_by("pk").values_list("pk", "key", "status"))
    usage = {}
    for slot_id, input_tokens, output_tokens in (
            ModelCall.objects.filter(slot_id__in=[pk for pk, _, _ in slots], total_tokens__isnull=False)
            .order_by("slot_id", "-attempt").values_list("slot_id", "input_tokens", "output_tokens")):
        usage.setdefault(slot_id, (input_tokens or 0, output_tokens or 0))  # the latest attempt first
    return {
        "phase": run.phase,
        "requests": len(slots),
        "slots": [{"key": key, "status": status} for _, key, status in slots],
        "input_tokens": sum(i for i, _ in usage.values()) if usage else None,
        "output_tokens": sum(o for _, o in usage.values()) if usage else None,
        "tokens_known_for": len(usage),
    }


def run_reissue_unknown(*, run: Run, user, reason: str) -> Amendment:
    """Allow exactly one more identical request for each slot of the current phase awaiting the
    owner's decision (unknown, or failed after an amendment's allowance); paid, so recorded with
    its estimated cost. A run paused for this decision continues."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status == Run.Status.FINISHED:
            raise RunError("the run is finished")
        waiting = slots_awaiting_decision(run)
        estimate = reissue_estimate(run)
        if not estimate["requests"]:
            raise RunError(f"no slot of {_phase_name(run)} waits for a decision (unknown slots of earlier phases "
                           "were settled when their phase ended)")
        at_decision = run.status == Run.Status.PAUSED and not run.circuit_open and _at_decision(run)
        amendment = Amendment.objects.create(
            run=run, kind=Amendment.Kind.REISSUE_UNKNOWN, reason=reason, created_by=user,
            payload={"slots": [s["key"] for s in estimate["slots"]], "phase": run.phase, "allowance": 1,
                     **{k: estimate[k] for k in ("requests", "input_tokens", "output_tokens", "tokens_known_for")}},
        )
        _release(run, Slot.objects.filter(pk__in=list(waiting.values_list("pk", flat=True))), amendment, 1)
        if at_decision:
            run.status = Run.Status.RUNNING
            run.status_reason = f"Re-issued {estimate['requests']} slots by {_who(user)}: {reason}"
            run.save(update_fields=["status", "status_reason"])
        return amendment


def run_accept_missing(*, run: Run, user, reason: str) -> Amendment:
    """Continue with the slots awaiting a decision missing, as the paper keeps unknown reserved
    attempts (App. B.2): recorded, then the phase ends and the run goes on to the next one."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in (Run.Status.PAUSED, Run.Status.RUNNING) or run.circuit_open:
            raise RunError(f"the run is {run.status}{' with its circuit open' if run.circuit_open else ''}; "
                           "resume it first")
        keys = list(slots_awaiting_decision(run).order_by("pk").values_list("key", "status"))
        if not keys:
            raise RunError(f"no slot of {_phase_name(run)} waits for a decision")
        if Slot.objects.filter(run=run, phase=run.phase, status__in=OPEN_SLOT_STATUSES).exists():
            raise RunError(f"{_phase_name(run)} still has slots pending, in flight or held; decide when it ends")
        amendment = Amendment.objects.create(
            run=run, kind=Amendment.Kind.ACCEPT_MISSING, reason=reason, created_by=user,
            payload={"phase": run.phase, "slots": [key for key, _ in keys],
                     "unknown": sum(status == Slot.Status.UNKNOWN for _, status in keys),
                     "failed": sum(status == Slot.Status.FAILED for _, status in keys),
                     "stopped_because": run.status_reason},
        )
        Slot.objects.filter(run=run, phase=run.phase, key__in=[key for key, _ in keys]).update(
            status_note=f"missing: the owner continued without it (amendment {amendment.pk})")
        # The phase is complete: every slot is terminal and the owner settled the rest.
        run.phase = PHASE_ORDER[PHASE_ORDER.index(run.phase) + 1]
        run.status = Run.Status.RUNNING
        run.status_reason = f"Continued by {_who(user)} with {len(keys)} slots missing: {reason}"
        run.save(update_fields=["phase", "status", "status_reason"])
        return amendment


def _release(run: Run, slots, amendment: Amendment, allowance: int) -> None:
    """Let each slot send exactly `allowance` more identical requests from now on."""
    used = dict(ModelCall.objects.filter(slot__in=slots, basis=ModelCall.Basis.AMENDMENT)
                .values_list("slot").annotate(n=Count("pk")).order_by())
    for slot in slots:
        slot.amended_attempts = used.get(slot.pk, 0) + allowance
        slot.status = Slot.Status.PENDING
        slot.status_note = f"released by amendment {amendment.pk}: {allowance} identical request{'s' if allowance > 1 else ''}"
        slot.dispatched_at = None
        slot.save(update_fields=["amended_attempts", "status", "status_note", "dispatched_at", "updated_at"])


def _phase_name(run: Run) -> str:
    return Phase(run.phase).label.lower()


def _who(user) -> str:
    return str(user) if user is not None else "a shell command"


def ceiling_state(run: Run) -> dict | None:
    """The run's HTTP ceilings for its current phase as they stand (the protocol's, raised by
    amendments), the attempts they count, and what one more request costs at this run's average
    usage; None when the protocol sets no ceiling that could apply."""
    phase_ceiling, run_ceiling = effective_http_ceilings(run, run.phase, run_retry_policy(run))
    if phase_ceiling is None and run_ceiling is None:
        return None
    calls = ModelCall.objects.filter(slot__run=run)
    usage = calls.filter(total_tokens__isnull=False).aggregate(
        n=Count("pk"), input=Sum("input_tokens"), output=Sum("output_tokens"))
    return {
        "phase": run.phase, "phase_ceiling": phase_ceiling, "run_ceiling": run_ceiling,
        "phase_used": calls.filter(slot__phase=run.phase).count() if phase_ceiling is not None else None,
        "run_used": calls.count() if run_ceiling is not None else None,
        "stopped_by_ceiling": run.status == Run.Status.STOPPED and CEILING_STOP in run.status_reason,
        # Per request, at this run's average so far (None: no attempt reported usage).
        "input_per_request": round(usage["input"] / usage["n"]) if usage["n"] else None,
        "output_per_request": round(usage["output"] / usage["n"]) if usage["n"] else None,
    }


# How `reservation._stop` says that a ceiling stopped the run.
CEILING_STOP = "HTTP ceiling was reached"


def run_raise_ceiling(*, run: Run, user, reason: str, phase_ceiling: int | None = None,
                      run_ceiling: int | None = None) -> Amendment:
    """Raise the current phase's and/or the run's HTTP ceiling (App. B.2's ceilings are protocol
    settings: a higher one is a recorded amendment, with the most it may cost). A run that a
    ceiling stopped resumes (the continuation amendment: each held slot one identical request)."""
    if phase_ceiling is None and run_ceiling is None:
        raise RunError("give a new ceiling for the phase, for the run, or both")
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("protocol").get(pk=run.pk)
        if run.status not in (Run.Status.PAUSED, Run.Status.STOPPED):
            raise RunError(f"the run is {run.status}; pause it before raising a ceiling")
        state = ceiling_state(run)
        payload = {"phase": run.phase, "stopped_because": run.status_reason}
        extra = 0
        for key, new, label in (("phase_http_ceiling", phase_ceiling, f"{_phase_name(run)} phase's"),
                                ("run_http_ceiling", run_ceiling, "run's")):
            if new is None:
                continue
            old = state[key.replace("_http", "")] if state else None
            if old is None:
                raise RunError(f"the protocol sets no {label} HTTP ceiling: there is nothing to raise")
            if not isinstance(new, int) or isinstance(new, bool) or new <= old:
                raise RunError(f"the {label} HTTP ceiling is {old}; a new one must be a larger whole number")
            payload[key] = {"from": old, "to": new}
            extra = max(extra, new - old)
        # The most the raise may cost: that many more requests, at the run's average usage so far.
        payload["extra_requests"] = extra
        for part in ("input", "output"):
            per = state[f"{part}_per_request"]  # state is set: a ceiling was found above
            payload[f"{part}_tokens_estimate"] = None if per is None else per * extra
        amendment = Amendment.objects.create(run=run, kind=Amendment.Kind.CEILING, reason=reason,
                                             created_by=user, payload=payload)
        if state["stopped_by_ceiling"] and not ceiling_reached(run, run.phase, run_retry_policy(run)):
            run_resume(run=run, user=user, reason=f"after raising the HTTP ceiling (amendment {amendment.pk}): {reason}")
        return amendment


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
                   name: str | None = None, pairs: list[list[str]] | None = None) -> Protocol:
    """A sealed re-grade-only protocol of the finished run `source` (App. H): the same cohort,
    conditions, contrasts and bootstrap, its answers judged by `judge` (None: the source's own
    judge, a retest), `cap` requests in flight to the judge's provider. With `pairs` ([X, Y] of
    its conditions) a pairwise judge instead (`execution.pairwise_judge`): the two answers of each
    pair compared, in both orders. RunError, and nothing created, when it cannot be sealed."""
    with transaction.atomic():
        source = Run.objects.select_for_update(of=("self",)).select_related("protocol__project").get(pk=source.pk)
        if source.status != Run.Status.FINISHED:
            raise RunError(f"run {source.pk} is {source.get_status_display().lower()}; "
                           "only a finished run can be re-graded")
        base = source.protocol
        if base.kind == Protocol.Kind.SURVEY:
            raise RunError(f"run {source.pk} is a survey run: its answers are scored against the recorded "
                           "options, not graded by a judge, so there is nothing to re-grade")
        judge = dict(base.judge) if judge is None else judge
        if pairs is not None:
            pairs = checked_pairs(source, pairs, judge)
        kind = "pairwise judge" if pairs else "retest" if judge == base.judge else "re-grade"
        name = (name or "").strip() or _regrade_name(source, kind=kind)
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
            kind=Protocol.Kind.PAIRWISE if pairs else Protocol.Kind.REGRADE, pairwise_pairs=pairs or [],
        )
        # A refused seal raises inside this transaction: the protocol is not kept.
        return protocol_seal(protocol=protocol, user=user)


def _regrade_name(source: Run, *, kind: str) -> str:
    """A free default name, e.g. "pilot · re-grade 2 of run 17" (kind: retest, re-grade, pairwise judge)."""
    taken = set(Protocol.objects.filter(project=source.protocol.project).values_list("name", flat=True))
    for number in range(1, len(taken) + 2):
        suffix = f" · {kind}{'' if number == 1 else f' {number}'} of run {source.pk}"
        name = source.protocol.name[:100 - len(suffix)] + suffix
        if name not in taken:
            return name
    raise AssertionError("unreachable: one of len(taken) + 1 names is free")
