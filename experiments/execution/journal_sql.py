"""The SQL of the journal's read of a slot (`slot_reads.slot_for_execution`), on the path of every request."""
from __future__ import annotations

from experiments.execution.hot_sql import hot_cursor
from experiments.models import Protocol, Run, Slot

# Index: the slot's, run's and protocol's primary keys (three single-row lookups).
_SLOT_SQL = """
SELECT s.run_id, s.phase, s.key, s.role, s.system, s.user, r.protocol_id, p.sealed_at,
       s.status, s.retry_at, s.status_note, s.task_id
FROM {slot} s JOIN {run} r ON r.id = s.run_id JOIN {protocol} p ON p.id = r.protocol_id
WHERE s.id = %s
"""


def slot_row(slot_id: int) -> tuple | None:
    """(run id, phase, key, role, system, user, protocol id, sealed at, status, retry at, status
    note, task id) of the slot, or None when there is no such slot."""
    sql = _SLOT_SQL.format(slot=Slot._meta.db_table, run=Run._meta.db_table, protocol=Protocol._meta.db_table)
    with hot_cursor() as cursor:
        cursor.execute(sql, [slot_id], prepare=True)
        return cursor.fetchone()
