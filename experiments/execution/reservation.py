"""Reserving an attempt before it is sent (paper App. B.2): a committed ModelCall row, or nothing.

A reservation is made only while the run may send, and that is decided atomically with it:

- the circuit (`Run.circuit_open`, set when a quota answer is recorded) and the run's status
  are read under a lock on the run's row that conflicts with the lock the quota answer's
  recording holds, so a reservation either commits before the circuit opens or sees it open
  (without the lock, reservations were made 0–13 ms after a quota answer, from a snapshot taken
  before the circuit's commit);
- a recovery uses one of the phase's and the slot's allowances, counted under the run's lock;
- a protocol's HTTP ceilings (per phase, for the whole run) are counted under the run's lock
  too, and the run stops, saying which ceiling, when the next attempt would pass one.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from experiments.execution.outcomes import apply_result
from experiments.execution.policy import RetryPolicy, effective_http_ceilings
from experiments.execution.reservation_sql import NAMED_SLOT_COLUMNS, claim_first, claim_named_first, first_ctes
from experiments.execution.run_counts import reserved_attempts
from experiments.models import ModelCall, Run, Slot


@dataclass(frozen=True)
class Reservation:
    call_id: int
    basis: str
    recoveries: int  # recoveries of the slot before this attempt


def reserve(slot_id: int, *, basis: str, justification: str, worker: str, lease_s: float,
            policy: RetryPolicy, after_call: int | None = None) -> Reservation | None:
    """Commit the attempt row before anything is sent; None when the slot must not be sent.

    A first attempt of a run without HTTP ceilings claims its slot with one statement (the
    slot pending and never amended, the run sending and in the slot's phase) which takes a
    share lock on the run's row: many reservations proceed side by side, and none while the
    run's row is locked for an update (a quota answer being recorded, a pause, the driver).
    Everything else — recoveries, amended attempts, ceilings, refusals — locks the run's row
    and then the slot's (the order run_drive uses).

    A recovery comes either from the worker that recorded the transient outcome (`after_call`,
    its attempt: the slot is still in flight and has no later attempt) or, when that worker
    died during the cooldown, from whoever is handed the slot again (pending, its recovery
    due: `expire_leases`). Either way at most one worker can reserve it.
    """
    with_ceilings = policy.has_http_ceilings
    if basis == ModelCall.Basis.FIRST and not with_ceilings:
        reservation = _reserve_first(slot_id, worker=worker, lease_s=lease_s)
        if reservation is not None:
            return reservation
        if not Slot.objects.filter(pk=slot_id, status=Slot.Status.PENDING).exists():
            # In flight or settled elsewhere (its job handed out twice): nothing to send, and no
            # reason to take the run's lock, for which every other reservation would wait.
            return None
    with transaction.atomic():
        run_id = Slot.objects.values_list("run_id", flat=True).get(pk=slot_id)
        run = Run.objects.select_for_update(of=("self",)).select_related("protocol").get(pk=run_id)
        slot = Slot.objects.select_for_update().get(pk=slot_id)
        slot.run = run
        if run.phase != slot.phase:
            return None
        used = dict(ModelCall.objects.filter(slot=slot).values_list("basis").annotate(n=Count("pk")).order_by())
        if basis == ModelCall.Basis.RECOVERY:
            if after_call is None:  # handed out again after its worker died in the cooldown
                if slot.status != Slot.Status.PENDING or slot.retry_at is None:
                    return None
            elif slot.status != Slot.Status.IN_FLIGHT or slot.calls.filter(pk__gt=after_call).exists():
                return None  # counted failed or unknown meanwhile, or recovered elsewhere: nothing more is sent
            if not run.may_send():
                # The circuit opened (or the run stopped) during the cooldown: the recovery waits
                # for the owner, whose resume allows one more identical request (App. B.2).
                settle(slot, Slot.Status.HELD, f"a recovery was due when the run was {run.status}"
                                               f"{' (circuit open)' if run.circuit_open else ''}; "
                                               "held for the owner's amendment")
                return None
            if phase_recoveries(run.pk, slot.phase) >= policy.phase_allowance:
                settle(slot, Slot.Status.FAILED, "no retry: the phase's recovery allowance is used up")
                return None
        elif not run.may_send() or slot.status != Slot.Status.PENDING:
            return None  # paused, or terminal / in flight elsewhere / held: never re-sent here
        elif used:
            # A pending slot with earlier attempts was released by an amendment.
            if used.get(ModelCall.Basis.AMENDMENT, 0) >= slot.amended_attempts:
                return None
            basis = ModelCall.Basis.AMENDMENT
            justification = justification or "allowed by the owner's amendment"
        if with_ceilings and (reached := ceiling_reached(run, slot.phase, policy)):
            _stop(run, reached)
            if basis == ModelCall.Basis.RECOVERY:
                settle(slot, Slot.Status.HELD, f"a recovery was due when {reached}; held for the owner's amendment")
            return None
        now = timezone.now()
        try:
            with transaction.atomic():
                call = ModelCall.objects.create(
                    slot=slot, run=run, phase=slot.phase, attempt=sum(used.values()) + 1, basis=basis,
                    justification=justification,
                    worker=worker[:200], reserved_at=now, lease_until=now + timedelta(seconds=lease_s),
                )
        except IntegrityError:
            return None  # another worker reserved this attempt first
        slot.status, slot.retry_at = Slot.Status.IN_FLIGHT, None
        slot.save(update_fields=["status", "retry_at", "updated_at"])
        return Reservation(call.pk, basis, used.get(ModelCall.Basis.RECOVERY, 0))


def phase_recoveries(run_id: int, phase: str) -> int:
    """Recoveries reserved in the run's phase. Read from their partial index
    (`model_call_recoveries`): the cost follows the recoveries, at most the phase's allowance,
    not the run's size (a recovery counts them under the run's lock)."""
    return ModelCall.objects.filter(run_id=run_id, phase=phase, basis=ModelCall.Basis.RECOVERY).count()


def ceiling_reached(run: Run, phase: str, policy: RetryPolicy) -> str:
    """Which HTTP ceiling one more attempt would pass, in words; "" when none (App. B.2).
    The ceilings are the protocol's as the owner's amendments raised them. With a ceiling, every
    reservation asks this under the run's lock: the attempts come from the run's tally
    (`run_counts.reserved_attempts`), whose cost does not grow with the run."""
    phase_ceiling, run_ceiling = effective_http_ceilings(run, phase, policy)
    if phase_ceiling is None and run_ceiling is None:
        return ""
    attempts = reserved_attempts(run)
    if phase_ceiling is not None:
        reserved = attempts.get(phase, 0)
        if reserved >= phase_ceiling:
            return f"the {phase} phase's HTTP ceiling was reached ({reserved} of {phase_ceiling} attempts reserved)"
    if run_ceiling is not None:
        reserved = sum(attempts.values())
        if reserved >= run_ceiling:
            return f"the run's HTTP ceiling was reached ({reserved} of {run_ceiling} attempts reserved)"
    return ""


def _stop(run: Run, reached: str) -> None:
    run.status = Run.Status.STOPPED
    run.status_reason = (f"Stopped: {reached}. Nothing more is sent in this phase until an owner "
                         "amends the ceiling.")
    run.save(update_fields=["status", "status_reason"])


@dataclass
class NextReservation:
    """A first attempt a slot thread waiting for an in-flight place asks the thread that hands
    it the place to reserve in the same statement as its own receipt (`first_reservation_ctes`):
    one commit, so one WAL flush, instead of two on the path of every request. `call_id` is set
    once that statement committed with the reservation in it; None: reserve it yourself."""

    slot_id: int
    worker: str
    lease_s: float
    call_id: int | None = None

    def reservation(self) -> Reservation | None:
        return Reservation(self.call_id, ModelCall.Basis.FIRST, 0) if self.call_id is not None else None


def next_reservation(slot_id: int, *, basis: str, worker: str, lease_s: float,
                     policy: RetryPolicy) -> NextReservation | None:
    """A ticket for the attempt `reserve` would make with one statement (`_reserve_first`: a first
    attempt, no HTTP ceilings), for the thread that hands this one its place; else None (also when
    settings.OWNWORDS_RESERVE_WITH_RECEIPT is off, the default: the thread is handed its place at once
    and reserves its own attempt while the receipt is written)."""
    if (not settings.OWNWORDS_RESERVE_WITH_RECEIPT or basis != ModelCall.Basis.FIRST
            or policy.has_http_ceilings):
        return None
    return NextReservation(slot_id, worker, lease_s)


def first_reservation_ctes(ticket: NextReservation, now) -> tuple[str, list]:
    """`_reserve_first`'s statement as CTEs (sending, claimed, reserved: the new call's id) for
    another statement's WITH list, and their parameters. Durability is the reservation's own:
    the statement they join commits before the ticket's thread may send."""
    return first_ctes(ticket.slot_id, ticket.worker, ticket.lease_s, now)


def reserve_named_first(slot: Slot, *, worker: str, lease_s: float) -> Reservation | None:
    """`reserve`'s one-statement first attempt for a slot its job named (`jobs.slot_job_id`: the
    run and the role, under the run's protocol as the worker holds it, `slot.run.protocol`), the slot's
    row read in the same statement and set on `slot` (phase, key, prompts, task; now in flight).
    None when it claimed nothing: the slot must then be read and handled as any other."""
    protocol = slot.run.protocol
    row = claim_named_first(slot.pk, slot.run_id, slot.role, protocol.pk, protocol.sealed_at, worker, lease_s,
                            timezone.now())
    if row is None:
        return None
    call_id, *columns = row
    for name, value in zip(NAMED_SLOT_COLUMNS, columns):
        setattr(slot, name, value)
    slot.status, slot.retry_at = Slot.Status.IN_FLIGHT, None
    return Reservation(call_id, ModelCall.Basis.FIRST, 0)


def _reserve_first(slot_id: int, *, worker: str, lease_s: float):
    call_id = claim_first(slot_id, worker, lease_s, timezone.now())
    return Reservation(call_id, ModelCall.Basis.FIRST, 0) if call_id is not None else None


def settle(slot: Slot, status: str, note: str) -> None:
    """A slot ends (or is held) without a usable answer: its results are missing."""
    slot.status, slot.status_note, slot.retry_at = status, note, None
    slot.save(update_fields=["status", "status_note", "retry_at", "updated_at"])
    if status in Slot.TERMINAL:
        apply_result(slot, None, usable=False)
