"""The SQL of a first attempt's reservation (`reservation`): claim the slot and insert its call in one statement."""
from __future__ import annotations

import contextlib
import functools
from datetime import timedelta

from django.db import IntegrityError, connection, transaction

from experiments.execution.hot_sql import hot_cursor
from experiments.models import ModelCall, Protocol, Run, Slot

# The run's row is locked FOR SHARE in the same statement that claims the slot: a transaction
# holding the row FOR UPDATE (the quota answer's recording, a pause, the driver) makes this
# statement wait for its commit, and PostgreSQL then re-checks the run's conditions against
# the row as committed (READ COMMITTED's re-check of locked rows), so an opened circuit is seen.
# Index: the slot and the run by their primary keys; the unique model_call_attempt_once
# (slot, attempt) refuses a second first attempt (an IntegrityError: no reservation). The `named_*`
# parts, empty but in `claim_named_first`, check what a slot's job said of it and return its row.
_FIRST_CTES = """
sending AS (
    SELECT r.id FROM {run} r JOIN {slot} s ON s.run_id = r.id{named_join}
    WHERE s.id = %s AND r.status = %s AND NOT r.circuit_open AND r.phase = s.phase{named_where}
    FOR SHARE OF r
), claimed AS (
    UPDATE {slot} SET status = %s, retry_at = NULL, updated_at = %s
    WHERE id = %s AND status = %s AND amended_attempts = 0 AND run_id IN (SELECT id FROM sending){named_claim}
    RETURNING id, run_id, phase{named_returning}
), reserved AS (
    INSERT INTO {call} (slot_id, run_id, phase, attempt, basis, justification, worker, reserved_at, lease_until,
                        outcome, response_id, model_version, finish_reason, error, raw_body)
    SELECT id, run_id, phase, 1, %s, '', %s, %s, %s, '', '', '', '', '', '' FROM claimed
    RETURNING id
)"""


# The slot's own columns that the journal reads to send and record it (`slot_reads.slot_for_execution`).
NAMED_SLOT_COLUMNS = ("phase", "key", "system", "user", "task_id")


@functools.cache
def _first_ctes_sql(*, named: bool) -> str:
    """`_FIRST_CTES` for these tables, once per process: it is on the path of every request."""
    parts = dict(named_join="", named_where="", named_claim="", named_returning="")
    if named:
        parts = dict(named_join=f" JOIN {Protocol._meta.db_table} p ON p.id = r.protocol_id",
                     named_where=" AND r.id = %s AND s.role = %s AND p.id = %s AND p.sealed_at = %s",
                     named_claim=" AND retry_at IS NULL",
                     named_returning="".join(f', "{name}"' for name in NAMED_SLOT_COLUMNS[1:]))
    return _FIRST_CTES.format(slot=Slot._meta.db_table, run=Run._meta.db_table, call=ModelCall._meta.db_table,
                              **parts)


def first_ctes(slot_id: int, worker: str, lease_s: float, now) -> tuple[str, list]:
    """The CTEs sending, claimed and reserved (the new call's id) of a first attempt, and their parameters."""
    return _first_ctes_sql(named=False), [slot_id, Run.Status.RUNNING, Slot.Status.IN_FLIGHT, now, slot_id,
                                          Slot.Status.PENDING, ModelCall.Basis.FIRST, worker[:200], now,
                                          now + timedelta(seconds=lease_s)]


def claim_first(slot_id: int, worker: str, lease_s: float, now) -> int | None:
    """The new call's id, or None when the slot may not be claimed (or its first attempt exists)."""
    # One statement, one round trip and one commit while the in-flight place is held.
    ctes, params = first_ctes(slot_id, worker, lease_s, now)
    row = _claim("WITH " + ctes + "\nSELECT id FROM reserved", params)
    return row[0] if row else None


@functools.cache
def _named_first_sql() -> str:
    return ("WITH " + _first_ctes_sql(named=True) + "\nSELECT r.id, "
            + ", ".join(f'c."{name}"' for name in NAMED_SLOT_COLUMNS) + " FROM reserved r CROSS JOIN claimed c")


def claim_named_first(slot_id: int, run_id: int, role: str, protocol_id: int, sealed_at, worker: str,
                      lease_s: float, now) -> tuple | None:
    """`claim_first` of a slot whose job named its run and role (`jobs.slot_job_id`), for a worker
    holding that run's sealed protocol (`protocol_id`, sealed at `sealed_at`), with the slot's row
    read in the same statement: (the new call's id, *NAMED_SLOT_COLUMNS), or None when nothing was
    claimed. It claims only a slot of that run and role, under that protocol as sealed then, never a
    slot whose recovery is due (`retry_at`: its worker died in the cooldown): anything else is
    read and handled as before (`journal.slot_execute`)."""
    return _claim(_named_first_sql(), [
        slot_id, Run.Status.RUNNING, run_id, role, protocol_id, sealed_at, Slot.Status.IN_FLIGHT, now, slot_id,
        Slot.Status.PENDING, ModelCall.Basis.FIRST, worker[:200], now, now + timedelta(seconds=lease_s)])


def _claim(sql: str, params: list) -> tuple | None:
    # In autocommit the statement commits by itself; inside a caller's transaction a
    # savepoint keeps a failed insert from breaking it.
    block = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with block, hot_cursor() as cursor:
            cursor.execute(sql, params, prepare=True)
            return cursor.fetchone()
    except IntegrityError:
        return None
