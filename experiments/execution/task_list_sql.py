"""The SQL of the task lists' epoch (migration 0029): a seal check reads a cohort's task list hash
as last computed when nothing it reads has changed since (`kind_table.cohort_task_list_sha256_checked`).

Every statement that changes a cohort entry, task, session, person, study or turn moves the epoch
on (a statement trigger, in the writer's transaction: a reader sees the new epoch exactly when it
sees the change). A hash is stored with the epoch read before it was computed: a change committed
while it was computed moves the epoch past it, so the next check computes it again."""
from __future__ import annotations

from django.db import connection


def task_list_epoch(cohort_id: int) -> tuple[int, int | None, str | None]:
    """(the epoch now, the epoch the cohort's stored hash was computed at, that hash): one row."""
    # Index: both tables' primary keys (one row each).
    with connection.cursor() as cursor:
        cursor.execute("SELECT e.epoch, c.epoch, c.sha256 FROM experiments_task_list_epoch e "
                       "LEFT JOIN experiments_task_list_check c ON c.cohort_id = %s WHERE e.id = 1", [cohort_id])
        return cursor.fetchone()


def task_list_store(cohort_id: int, epoch: int, sha256: str) -> None:
    """The cohort's hash as computed from what the database held at `epoch` (a later one is kept)."""
    # Index: the check table's primary key.
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO experiments_task_list_check (cohort_id, epoch, sha256) VALUES (%s, %s, %s) "
                       "ON CONFLICT (cohort_id) DO UPDATE SET epoch = EXCLUDED.epoch, sha256 = EXCLUDED.sha256 "
                       "WHERE experiments_task_list_check.epoch <= EXCLUDED.epoch", [cohort_id, epoch, sha256])
