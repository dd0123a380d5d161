"""The request journal's rules (paper App. B.2): reserve an attempt before sending, record its outcome, settle the slot, expire leases.

`slot_execute` makes the attempts of one slot:

- an attempt is reserved (a committed ModelCall row) before any byte is sent;
- only a transient outcome is retried, with the identical request, within the slot's and
  the phase's recovery allowances (`policy.decide_retry`);
- quota exhaustion opens the run's circuit and holds the slot; a non-transient error stops
  the run; both wait for an owner's amendment;
- the answer's receipt is made again after a transient database error until it is durable
  (`durable`), never dropped;
- the answer's receipt is committed before the in-flight place is given back: a Redis blip
  at that moment costs a logged, retried release, never the answer (an answer or an
  unusable response, which changes no one's right to send, may hand its place first to a
  thread of the same process waiting for one: in-process, nothing there can fail; that thread
  reserves its own attempt meanwhile, or, with settings.OWNWORDS_RESERVE_WITH_RECEIPT, has its
  first attempt reserved in the receipt's own statement, `receipt_sql`, and sends only after
  that commit);
- a reservation whose lease ran out without an outcome is *unknown* (`expire_leases`) and never
  re-sent automatically; a slot whose worker died while it waited for its recovery sent
  nothing unanswered, and goes back to pending with its recovery still due.

Reserving is `reservation.reserve` (the circuit is checked atomically with it).
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import timedelta

import httpx
from django.db import transaction
from django.utils import timezone

from experiments.core.llm import client as llm_client
from experiments.core.llm.wire import Outcome, OutcomeKind, build_request, first_call_failure_hint
from experiments.execution.durable import record_durably, retried
from experiments.execution.outcomes import apply_result, result_statements
from experiments.execution.endpoints import provider_excerpt
from experiments.execution.policy import (
    LEASE_GRACE_S, Decision, RetryPolicy, cached_cap, current_cap, decide_retry, limiter_name, role_config,
    run_retry_policy,
)
from experiments.execution.receipt_sql import record_receipt as _record_receipt
from experiments.execution.slot_reads import named_slot, prepare
from experiments.execution.reservation import (
    NextReservation, Reservation, next_reservation, phase_recoveries, reserve, reserve_named_first, settle,
)
from experiments.models import ModelCall, Run, Slot

logger = logging.getLogger(__name__)

# --- one slot --------------------------------------------------------------------------------

OPEN_STATUSES = (Slot.Status.PENDING, Slot.Status.IN_FLIGHT, Slot.Status.HELD)


def _record(call_id: int, outcome: Outcome, decision: Decision, slot: Slot | None = None,
            next_ticket: NextReservation | None = None) -> bool:
    """Store the attempt's receipt and what it means for the slot and the run.

    Returns False when the receipt came too late: the reservation's lease had run out and
    the slot is counted unknown. The receipt is kept, the slot stays as it is, nothing is
    retried. Statements are conditional updates in the order run (only for quota or a
    fatal error) → attempt → slot → results, the order run_drive uses. `next_ticket`: another
    slot's first attempt, reserved in the receipt's statement when that is one statement.
    """
    usage = outcome.usage
    kind = outcome.kind
    now = timezone.now()
    if slot is None:
        slot = Slot.objects.defer("system", "user").get(calls__pk=call_id)
    receipt = dict(
        finished_at=now, outcome=ModelCall.Outcome(kind.value), http_status=outcome.http_status,
        response_id=(outcome.response_id or "")[:200], model_version=(outcome.model_version or "")[:200],
        finish_reason=(outcome.finish_reason or "")[:64], text=outcome.text,
        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens, total_tokens=usage.total_tokens,
        elapsed_s=outcome.elapsed_s, error=outcome.error, raw_body=outcome.raw_body,
    )
    status, note, retry_at = Slot.Status.IN_FLIGHT, "", None
    if kind == OutcomeKind.OK:
        status = Slot.Status.OK
    elif kind == OutcomeKind.UNUSABLE:
        status, note = Slot.Status.UNUSABLE, provider_excerpt(outcome.error)
    elif kind == OutcomeKind.QUOTA:
        status, note = Slot.Status.HELD, f"quota exhausted: {provider_excerpt(outcome.error)}"
    elif kind == OutcomeKind.FATAL:
        status, note = Slot.Status.HELD, f"stopped: {provider_excerpt(outcome.error)}"
    elif not decision.retry:  # transient, and no recovery left
        status, note = Slot.Status.FAILED, decision.justification
    else:  # stays in flight until its recovery is reserved
        retry_at, note = now + timedelta(seconds=decision.wait_s), decision.justification
    settles = kind == OutcomeKind.OK or status in (Slot.Status.UNUSABLE, Slot.Status.FAILED)
    if settles:
        # Receipt, slot and result in one statement (its own transaction), when the phase's
        # result has its statements (`outcomes.result_statements`): the path of nearly every answer.
        result = result_statements(slot, outcome.text if kind == OutcomeKind.OK else None)
        if result is not None:
            if _record_receipt(call_id, receipt, slot.pk, status, note, retry_at, now, result=result,
                               next_ticket=next_ticket):
                slot.status, slot.status_note, slot.retry_at = status, note, retry_at
                return True
            return _late(call_id, receipt, slot, outcome)
    with transaction.atomic():
        run = None
        if kind in (OutcomeKind.QUOTA, OutcomeKind.FATAL):
            run = Run.objects.select_for_update(of=("self",)).get(pk=slot.run_id)
            # From this lock on no reservation is committed (`reservation.reserve` waits for it
            # and then sees the circuit open): the receipt's time is taken now, so every attempt
            # reserved before the circuit opened has an earlier reservation time.
            receipt["finished_at"] = timezone.now()
        on_time = _record_receipt(call_id, receipt, slot.pk, status, note, retry_at, now)
        if not on_time:
            return _late(call_id, receipt, slot, outcome)
        slot.status, slot.status_note, slot.retry_at = status, note, retry_at
        if kind == OutcomeKind.OK:
            apply_result(slot, outcome.text, usable=True)
        elif status in (Slot.Status.UNUSABLE, Slot.Status.FAILED):
            apply_result(slot, outcome.text, usable=False)
        elif kind == OutcomeKind.QUOTA:
            run.circuit_open = True
            run.status = Run.Status.PAUSED
            run.status_reason = (f"Quota exhausted (slot {slot.key}): {provider_excerpt(outcome.error)}. "
                                 "Nothing is sent until an owner resumes.")
            run.save(update_fields=["circuit_open", "status", "status_reason"])
        elif kind == OutcomeKind.FATAL:
            run.status = Run.Status.STOPPED
            run.status_reason = (f"Stopped by a non-transient error on slot {slot.key}: "
                                 f"{provider_excerpt(outcome.error)}{_first_call_hint(slot, outcome)}")
            run.save(update_fields=["status", "status_reason"])
        return True


def _first_call_hint(slot: Slot, outcome: Outcome) -> str:
    """The likely cause of a server error on the phase's first call (`wire.first_call_failure_hint`):
    no call of the phase was answered yet, so the server more likely refuses the settings."""
    if outcome.http_status != 500 or ModelCall.objects.filter(
            run_id=slot.run_id, phase=slot.phase, outcome=ModelCall.Outcome.OK).exists():
        return ""
    return " " + first_call_failure_hint(role_config(slot.run, slot.role), outcome.http_status)


def _late(call_id: int, receipt: dict, slot: Slot, outcome: Outcome) -> bool:
    """A receipt that came after its lease ran out: kept, saying so; the slot stays as it is."""
    current = Slot.objects.values_list("status", flat=True).get(pk=slot.pk)
    receipt["error"] = ("arrived after the reservation's lease ran out; the slot stays "
                        f"{current}" + (f"; {outcome.error}" if outcome.error else ""))
    ModelCall.objects.filter(pk=call_id).update(**receipt)
    return False


def in_this_thread(step, *args, **kwargs):
    """`slot_execute`'s default `db`: run the database step here."""
    return step(*args, **kwargs)


class _ReadTheSlot(Exception):
    """The slot its job named claimed nothing (`reservation.reserve_named_first`): nothing was
    reserved or sent, and its in-flight place was given back; it is read and handled as any other."""


def slot_execute(slot_id: int, *, limiter, client: httpx.Client, worker: str = "", sleep=time.sleep,
                 db=in_this_thread, run_id: int | None = None, role: str | None = None) -> Slot:
    """Make the attempts of one slot allowed by the journal's rules; returns the slot as read
    before its first attempt (its run id and phase tell the caller where to look next).

    Every database step goes through `db(step, *args)`: a multi-slot worker
    (`workers.MultiSlotWorker`) runs them on a connection lent for the step, while the slot's own
    thread waits for the limiter, the service and the cooldown. The order of the steps is the
    journal's, whichever thread runs them.

    `run_id` and `role`: what the slot's job says of it (`jobs.slot_job_id`). The slot is then read
    in the statement that reserves its first attempt, not in a round trip of its own before it
    (`slot_reads.named_slot`); when that claims nothing, it is read and handled as below.
    """
    named = named_slot(slot_id, run_id, role, db) if run_id is not None and role is not None else None
    if named is not None:
        try:
            return _attempts(*named, limiter=limiter, client=client, worker=worker, sleep=sleep, db=db, named=True)
        except _ReadTheSlot:
            pass
    slot, config = db(prepare, slot_id)
    if config is None:
        return slot
    return _attempts(slot, config, limiter=limiter, client=client, worker=worker, sleep=sleep, db=db, named=False)


def _attempts(slot: Slot, config, *, limiter, client: httpx.Client, worker: str, sleep, db, named: bool) -> Slot:
    """`slot_execute`'s attempts of a slot read (`slot_reads.prepare`), or `named` by its job (`named_slot`:
    its first reservation reads it, or raises _ReadTheSlot before anything is sent)."""
    slot_id, run = slot.pk, slot.run
    policy = run_retry_policy(run)
    if named and policy.has_http_ceilings:
        raise _ReadTheSlot  # its reservations are counted under the run's lock (`reservation.reserve`)
    prepared = None if named else build_request(config, slot.system, slot.user)
    lease_s = config.timeout_s + LEASE_GRACE_S
    name, cap = limiter_name(config), cached_cap(run.pk, config.provider)
    if cap is None:  # read again (every CAP_CACHE_S): a database step
        cap = db(current_cap, run, config.provider)
    basis, justification, after_call = ModelCall.Basis.FIRST, "", None
    if not named and slot.status == Slot.Status.PENDING and slot.retry_at is not None:
        # Back to pending after its worker died during the cooldown: the recovery is still due.
        sleep(max((slot.retry_at - timezone.now()).total_seconds(), 0.0))
        basis, justification = ModelCall.Basis.RECOVERY, slot.status_note
    while True:
        # The place is given back only after the outcome is committed (`release` never raises),
        # or handed to a waiting thread of this process once a usable answer is in (`_hand_on`),
        # whose first attempt may be reserved with that answer's receipt (`ticket`).
        ticket = None if named else next_reservation(slot_id, basis=basis, worker=worker, lease_s=lease_s,
                                                      policy=policy)
        place = limiter.acquire(name, cap, lease_s=lease_s, ticket=ticket)
        handing = None
        try:
            reservation = ticket.reservation() if ticket is not None else None
            if named:
                reservation = db(reserve_named_first, slot, worker=worker, lease_s=lease_s)
                if reservation is None:
                    raise _ReadTheSlot
                named = False
            elif reservation is None:
                reservation = db(reserve, slot_id, basis=basis, justification=justification, worker=worker,
                                 lease_s=lease_s, policy=policy, after_call=after_call)
            if reservation is None:
                return slot
            if prepared is None:
                prepared = _request_or_refusal(config, slot)
            outcome = (prepared if isinstance(prepared, Outcome)
                       else llm_client.send(config, prepared, client=client))
            if outcome.kind == OutcomeKind.OK and config.expected_model_version and (
                outcome.model_version != config.expected_model_version
            ):
                # An unexpected model version is recorded as it is, never a reason to redraw (B.2).
                outcome = _as_unusable(outcome, f"returned model {outcome.model_version!r}, expected "
                                                  f"{config.expected_model_version!r}")
            if outcome.kind in (OutcomeKind.OK, OutcomeKind.UNUSABLE):
                # Nothing is in flight any more and this answer changes no one's right to send
                # (a quota or fatal answer, or a retry, keeps its place until recorded): a thread
                # of this process waiting for a place takes it now, or with the receipt's commit.
                handing = _hand_on(limiter, place)
                place = None if handing is not None else place
            decision, recorded = db(_decide_and_record, policy, run, slot, reservation, outcome,
                                    handing.ticket if handing is not None else None)
        finally:
            if handing is not None:
                handing.complete()  # the waiting thread sends, or reserves itself (no ticket filled)
            if place is not None:
                limiter.release(place)
        if not recorded or not decision.retry:
            return slot
        sleep(decision.wait_s)
        basis, justification, after_call = ModelCall.Basis.RECOVERY, decision.justification, reservation.call_id


def _request_or_refusal(config, slot: Slot):
    """The slot's request, built once its reservation read the slot (`slot_reads.named_slot`); should it not
    build, a fatal outcome saying so, recorded for its reservation (nothing was sent) and stopping
    the run, rather than a reservation left to expire as if it might have been sent."""
    try:
        return build_request(config, slot.system, slot.user)
    except Exception as exc:  # noqa: BLE001 - said in the run's status; nothing was sent
        return Outcome(OutcomeKind.FATAL, error=f"the request could not be built ({exc!r}); nothing was sent")


def _hand_on(limiter, place):
    """Hand the place to a waiting thread of this process (`HandoverLimiter.hand_on`): never
    through Redis, so nothing can fail here before the receipt is stored."""
    hand_on = getattr(limiter, "hand_on", None)
    return hand_on(place) if place is not None and hand_on is not None else None


def _decide_and_record(policy: RetryPolicy, run: Run, slot: Slot, reservation: Reservation,
                       outcome: Outcome, next_ticket: NextReservation | None = None) -> tuple[Decision, bool]:
    """What the outcome means, and its receipt: both made again after a transient database error
    (a deadlock, a lost connection), so that an answer in hand is never dropped (`durable`)."""
    decision = retried(_decide, policy, run, slot, reservation, outcome,
                       what=f"the decision on attempt {reservation.call_id}")
    recorded = record_durably(lambda ticket: _record(reservation.call_id, outcome, decision, slot, ticket),
                              reservation.call_id, next_ticket)
    return decision, recorded


def _reserve(slot_id: int, *, basis: str, justification: str, worker: str, lease_s: float):
    """`reserve` with the retry settings of the slot's run (for callers that hold only the id)."""
    run = Run.objects.select_related("protocol").get(slots__pk=slot_id)
    return reserve(slot_id, basis=basis, justification=justification, worker=worker, lease_s=lease_s,
                   policy=run_retry_policy(run))


def _decide(policy: RetryPolicy, run: Run, slot: Slot, reservation: Reservation,
            outcome: Outcome) -> Decision:
    if outcome.kind == OutcomeKind.TRANSIENT and reservation.basis == ModelCall.Basis.AMENDMENT:
        # The owner's amendment allowed exactly one identical request (App. B.2's continuation).
        return Decision(retry=False, wait_s=0.0,
                        justification="no retry: the amendment allowed exactly one identical request")
    recoveries = reservation.recoveries + (reservation.basis == ModelCall.Basis.RECOVERY)
    allowance_left = 0
    if outcome.kind == OutcomeKind.TRANSIENT:
        allowance_left = policy.phase_allowance - phase_recoveries(run.pk, slot.phase)
    return decide_retry(policy, outcome, recoveries, allowance_left)


def phase_settled(slot_id: int) -> int | None:
    """The run's id when the slot's phase has no open slot left (time to drive), else None."""
    run_id, phase = Slot.objects.values_list("run_id", "phase").get(pk=slot_id)
    return None if phase_open(run_id, phase) else run_id


def phase_open(run_id: int, phase: str) -> bool:
    """Whether a slot of the phase is still pending, in flight or held."""
    return Slot.objects.filter(run_id=run_id, phase=phase, status__in=OPEN_STATUSES).exists()


def _as_unusable(outcome: Outcome, why: str) -> Outcome:
    return replace(outcome, kind=OutcomeKind.UNUSABLE, error=why)


def expire_leases(run: Run) -> None:
    """Reservations past their lease with no outcome: the worker died mid-request (B.2).

    The reservation is marked unknown (so a later attempt an owner allows is judged on its
    own lease) and its slot counts unknown: it is never re-sent automatically. A slot whose
    worker died while waiting to send a recovery has no request unanswered: it goes back to
    pending with its recovery still due (`retry_at` kept), to be handed out again, or, while the
    run may not send (paused, stopped, circuit open), is held for the owner's amendment as a
    live worker's reservation would hold it. The driver runs this whether or not the run may
    send: a dead worker's slots are settled after a stop too.
    """
    now = timezone.now()
    # Only the phase's slots in flight can have an open reservation that matters (earlier
    # phases are all terminal): the (run, phase, status) index keeps this cheap on big runs.
    in_flight = Slot.objects.filter(run=run, phase=run.phase, status=Slot.Status.IN_FLIGHT)
    expired = ModelCall.objects.filter(slot__in=in_flight, outcome=ModelCall.Outcome.IN_FLIGHT, lease_until__lt=now)
    # Locked, so an outcome being recorded right now either lands first (and the call is no
    # longer open when the lock is granted) or waits and finds the call marked unknown.
    calls = list(expired.select_for_update(of=("self",)).values_list("pk", "slot_id"))
    slot_ids = [slot_id for _, slot_id in calls]
    if calls:
        ModelCall.objects.filter(pk__in=[pk for pk, _ in calls]).update(
            outcome=ModelCall.Outcome.UNKNOWN,  # the lease ran out without an outcome (the slot is unknown)
            error="no outcome was recorded before the lease ran out: the worker stopped mid-request; "
                  "the request may or may not have reached the service",
        )
        for slot in Slot.objects.filter(pk__in=slot_ids, status=Slot.Status.IN_FLIGHT).select_related("run"):
            settle(slot, Slot.Status.UNKNOWN,
                   "reserved, no outcome recorded: the request may or may not have reached the service")
    stale = in_flight.filter(retry_at__isnull=False).exclude(calls__outcome=ModelCall.Outcome.IN_FLIGHT)
    for slot in stale.select_for_update(of=("self",)):
        lease_s = role_config(run, slot.role).timeout_s + LEASE_GRACE_S
        if slot.retry_at + timedelta(seconds=lease_s) < now:
            # Locked and re-checked in the update: a recovery reserved meanwhile keeps its slot.
            if run.may_send():
                change = dict(status=Slot.Status.PENDING, dispatched_at=None,
                              status_note=slot.status_note + " (its worker stopped during the cooldown; handed out again)")
            else:
                # What a live worker's `reserve` does with a recovery due while the run may not
                # send: held for the owner's amendment (the resume's allowance), never sent by itself.
                change = dict(status=Slot.Status.HELD, retry_at=None,
                              status_note=f"a recovery was due when the run was {run.status}"
                                          f"{' (circuit open)' if run.circuit_open else ''} and its worker had "
                                          "stopped during the cooldown; held for the owner's amendment")
            Slot.objects.filter(pk=slot.pk, status=Slot.Status.IN_FLIGHT, retry_at=slot.retry_at).update(
                updated_at=now, **change)
