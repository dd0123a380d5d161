"""The SQL of planning (`planning`): a phase's new slots and predictions, each in one INSERT, and the run's
row taken FOR KEY SHARE."""
from __future__ import annotations

from django.db import connection

from experiments.execution.hot_sql import hot_cursor
from experiments.models import Prediction, Run, Slot

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


# A planned prediction's columns besides the row's own (run, task, condition, label, status, slot,
# evidence, its characters and budget) are the model's defaults: no text, no answer, no score.
# In the rows' order (the ids of a part follow its tasks, as the ORM's bulk insert made them);
# ON CONFLICT DO NOTHING, as bulk_create(ignore_conflicts=True): a prediction planned already
# (an earlier part, a concurrent planner) is left alone.
_INSERT_PREDICTIONS_SQL = """
INSERT INTO {prediction} (run_id, task_id, condition, label, status, slot_id, evidence, evidence_chars, budget,
                          text, answer_sha256, chosen_label, copied_label)
SELECT %s, (x->>0)::bigint, x->>1, x->>2, x->>3, (x->>4)::bigint, x->>5, (x->>6)::integer, (x->>7)::integer,
       NULL, '', '', ''
FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS rows (x, n)
ORDER BY n
ON CONFLICT DO NOTHING
"""


def insert_prediction_json(params: list) -> None:
    """New predictions, their rows one JSON document (`planning.insert_prediction_rows`); `params`:
    run id, the rows' JSON."""
    sql = _INSERT_PREDICTIONS_SQL.format(prediction=Prediction._meta.db_table)
    with hot_cursor() as cursor:
        cursor.execute(sql, params)


def share_the_run_row(run_id: int) -> None:
    """Take the run's row FOR KEY SHARE (`planning._share_the_run` says why)."""
    # Index: the run's primary key.
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {Run._meta.db_table} WHERE id = %s FOR KEY SHARE", [run_id])
