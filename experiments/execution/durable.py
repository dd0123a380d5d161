"""A paid answer is never dropped for a transient database error.

Between the service's answer and its receipt's commit (`journal._record`) the answer lives only
in the worker's memory. A deadlock, a serialization failure, a lock timeout or a lost connection
(Django's OperationalError and InterfaceError, from psycopg's) rolls the receipt back; the answer
is still here, so the receipt is made again, with growing pauses (50 ms doubling to 5 s), until it
is durable or the worker is killed. A killed worker's reservation then runs out its lease and
its slot becomes unknown, as for any worker that dies mid-request (`journal.expire_leases`).

The connection is closed before each retry: a lost one must be replaced (Django opens a new one
at the next statement), a rolled-back one starts clean. A commit whose acknowledgement was lost
may have stored the receipt: before recording again, the attempt is looked up, and a receipt
stored since the first try is this worker's own (only the receipt writes `finished_at`), as is a
first attempt of the waiting thread's slot (`NextReservation`) that this worker reserved with it.
"""
from __future__ import annotations

import logging
import threading
import time

from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from experiments.execution.reservation import NextReservation
from experiments.models import ModelCall

logger = logging.getLogger(__name__)

TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)
FIRST_PAUSE_S, LONGEST_PAUSE_S = 0.05, 5.0


class _Count:
    """Retries made by this process (the receipts benchmark reports them)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.value = 0

    def add(self) -> None:
        with self._lock:
            self.value += 1


RETRIES = _Count()


def _pauses():
    pause = FIRST_PAUSE_S
    while True:
        yield pause
        pause = min(pause * 2, LONGEST_PAUSE_S)


def _after_failure(what: str, exc: Exception) -> None:
    """Count and log a transient error, and let the connection go (reopened at the next use)."""
    if connection.in_atomic_block:
        raise exc  # inside a caller's transaction: only the caller can make it again
    RETRIES.add()
    logger.warning("%s met a transient database error (%s: %s); trying again", what, type(exc).__name__, exc)
    connection.close()


def retried(step, *args, sleep=time.sleep, what: str = "a database step", **kwargs):
    """`step(*args, **kwargs)`, made again after a transient database error until it succeeds.
    For reads (and writes that are idempotent): the step is simply run again."""
    pauses = _pauses()
    while True:
        try:
            return step(*args, **kwargs)
        except TRANSIENT_DB_ERRORS as exc:
            _after_failure(what, exc)
        sleep(next(pauses))


def record_durably(record, call_id: int, ticket: NextReservation | None = None, *, sleep=time.sleep) -> bool:
    """`record(ticket)`: the receipt of attempt `call_id` (True when it came on time), made
    again after each transient database error until it is durable. Retries go without the
    waiting thread's ticket, which then reserves its own attempt (unless the lost commit had
    reserved it: then the ticket is filled)."""
    first_try = timezone.now()
    pauses = _pauses()
    attempt_ticket = ticket
    while True:
        try:
            return record(attempt_ticket)
        except TRANSIENT_DB_ERRORS as exc:
            _after_failure(f"the receipt of attempt {call_id}", exc)
        attempt_ticket = None
        sleep(next(pauses))
        # Never record again without knowing whether the first commit landed (a second record
        # would take its own receipt for a late one): the look-up itself is retried until it answers.
        if retried(_stored_since, call_id, first_try, ticket, sleep=sleep, what=f"the look-up of attempt {call_id}"):
            logger.warning("the receipt of attempt %s had been committed before its error", call_id)
            return True


def _stored_since(call_id: int, first_try, ticket: NextReservation | None) -> bool:
    """Whether this worker's receipt of the attempt is stored (a commit whose answer was lost);
    if so, the ticket gets the reservation that may have been committed with it."""
    if not ModelCall.objects.filter(pk=call_id, finished_at__gte=first_try).exists():
        return False
    if ticket is not None and ticket.call_id is None:
        ticket.call_id = (ModelCall.objects.filter(
            slot_id=ticket.slot_id, basis=ModelCall.Basis.FIRST, outcome=ModelCall.Outcome.IN_FLIGHT, worker=ticket.worker[:200],
            reserved_at__gte=first_try).values_list("pk", flat=True).first())
    return True
