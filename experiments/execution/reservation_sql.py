"""The SQL of a first attempt's reservation (`reservation`): claim the slot and insert its call in one statement."""
from __future__ import annotations

import contextlib
from datetime import timedelta

from django.db import IntegrityError, connection, transaction

from experiments.execution.hot_sql import hot_cursor
from experiments.models import ModelCall, Run, Slot

# The run's row is locked FOR SHARE in the same statement that claims the slot: a transaction
# holding the row FOR UPDATE (the quota answer's recording, a pause, the driver) makes this
# statement wait for its commit, and PostgreSQL then re-checks the run's conditions against
# the row as committed (READ COMMITTED's re-check of locked rows), so an opened circuit is seen.
# Index: the slot and the run by their primary keys; the unique model_call_attempt_once
# (slot, attempt) refuses a second first attempt (an IntegrityError: no reservation).
_FIRST_CTES = """
sending AS (
    SELECT r.id FROM {run} r JOIN {slot} s ON s.run_id = r.id
    WHERE s.id = %s AND r.status = %s AND NOT r.circuit_open AND r.phase = s.phase
    FOR SHARE OF r
), claimed AS (
    UPDATE {slot} SET status = %s, retry_at = NULL, updated_at = %s
    WHERE id = %s AND status = %s AND amended_attempts = 0 AND run_id IN (SELECT id FROM sending)
    RETURNING id, run_id, phase
), reserved AS (
    INSERT INTO {call} (slot_id, run_id, phase, attempt, basis, justification, worker, reserved_at, lease_until,
                        outcome, response_id, model_version, finish_reason, error, raw_body)
    SELECT id, run_id, phase, 1, %s, '', %s, %s, %s, '', '', '', '', '', '' FROM claimed
    RETURNING id
)"""


def first_ctes(slot_id: int, worker: str, lease_s: float, now) -> tuple[str, list]:
    """The CTEs sending, claimed and reserved (the new call's id) of a first attempt, and their parameters."""
    sql = _FIRST_CTES.format(slot=Slot._meta.db_table, run=Run._meta.db_table, call=ModelCall._meta.db_table)
    return sql, [slot_id, Run.Status.RUNNING, Slot.Status.IN_FLIGHT, now, slot_id, Slot.Status.PENDING,
                 ModelCall.Basis.FIRST, worker[:200], now, now + timedelta(seconds=lease_s)]


def claim_first(slot_id: int, worker: str, lease_s: float, now) -> int | None:
    """The new call's id, or None when the slot may not be claimed (or its first attempt exists)."""
    # One statement, one round trip and one commit while the in-flight place is held.
    ctes, params = first_ctes(slot_id, worker, lease_s, now)
    sql = "WITH " + ctes + "\nSELECT id FROM reserved"
    # In autocommit the statement commits by itself; inside a caller's transaction a
    # savepoint keeps a failed insert from breaking it.
    block = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with block, hot_cursor() as cursor:
            cursor.execute(sql, params, prepare=True)
            row = cursor.fetchone()
    except IntegrityError:
        return None
    return row[0] if row else None
