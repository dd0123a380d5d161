"""The SQL of planning (`planning`): a phase's new slots in one INSERT, and the run's row taken FOR KEY SHARE."""
from __future__ import annotations

from django.db import connection

from experiments.execution.hot_sql import hot_cursor
from experiments.models import Run, Slot

# Index: the unique slot_key_unique_in_run (run, key) is the ON CONFLICT target, so a key planned
# already (by an earlier part, or by a concurrent planner) is skipped in the index.
_INSERT_SLOTS_SQL = """
INSERT INTO {slot} (run_id, phase, role, key, task_id, session_id, system, "user", request_sha256, prompt_refs,
                    status, status_note, amended_attempts, updated_at)
SELECT %s, %s, %s, x->>0, (x->>1)::bigint, (x->>2)::bigint, x->>3, x->>4, x->>5, (x->6)::jsonb, %s, '', 0, %s
FROM jsonb_array_elements(%s::jsonb) AS x
ON CONFLICT (run_id, key) DO NOTHING
"""


def insert_slot_json(params: list) -> None:
    """New slots, their rows one JSON document (`planning.insert_slot_rows`); `params`: run id,
    phase, role, status, updated at, the rows' JSON."""
    sql = _INSERT_SLOTS_SQL.format(slot=Slot._meta.db_table)
    with hot_cursor() as cursor:
        cursor.execute(sql, params)


def share_the_run_row(run_id: int) -> None:
    """Take the run's row FOR KEY SHARE (`planning._share_the_run` says why)."""
    # Index: the run's primary key.
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {Run._meta.db_table} WHERE id = %s FOR KEY SHARE", [run_id])
