"""The SQL of the seal check's epochs (migration 0032): a seal check reads a hash as last computed
while nothing it reads has changed since (`execution.seal_checks`).

Each project has two counters: "tasks" (moved by every statement changing a cohort entry, task,
session, person, study, turn, survey sample member or respondent of the project) and "memories"
(moved by a change of what the imported memories' digest reads beyond those). The statement
triggers move them in the writer's transaction: a reader sees the new epoch exactly when it sees
the change. A hash is stored with the epochs read before it was computed: a change committed
while it was computed moves an epoch past them, so the next check computes it again."""
from __future__ import annotations

from typing import NamedTuple

from django.db import connection


class Stored(NamedTuple):
    tasks_epoch: int  # the project's counters now (0 while nothing of the project ever moved them)
    memories_epoch: int
    stored: tuple[int, int, str, str] | None  # the stored check: its two epochs, inputs' hash and hash


def seal_check_read(project_id: int, what: str, subject_id: int) -> Stored:
    """The project's epochs now and the stored hash of (`what`, `subject_id`), if any: one query."""
    # Index: both tables' primary keys (one row each of the three).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(t.epoch, 0), COALESCE(m.epoch, 0), c.tasks_epoch, c.memories_epoch, c.inputs_sha256, "
            "c.sha256 FROM (SELECT %s::bigint AS project_id) p "
            "LEFT JOIN experiments_project_epoch t ON t.project_id = p.project_id AND t.what = 'tasks' "
            "LEFT JOIN experiments_project_epoch m ON m.project_id = p.project_id AND m.what = 'memories' "
            "LEFT JOIN experiments_seal_check c ON c.what = %s AND c.subject_id = %s",
            [project_id, what, subject_id])
        tasks, memories, *stored = cursor.fetchone()
    return Stored(tasks, memories, None if stored[-1] is None else tuple(stored))


def seal_check_store(what: str, subject_id: int, tasks_epoch: int, memories_epoch: int, inputs_sha256: str,
                     sha256: str) -> None:
    """The hash as computed from what the database held at these epochs (replacing the one stored)."""
    # Index: the check table's primary key. A racing check that stores older epochs only costs the
    # next check a computation: a stored hash is used only while both epochs equal the project's.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO experiments_seal_check (what, subject_id, tasks_epoch, memories_epoch, inputs_sha256, sha256) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (what, subject_id) DO UPDATE SET "
            "tasks_epoch = EXCLUDED.tasks_epoch, memories_epoch = EXCLUDED.memories_epoch, "
            "inputs_sha256 = EXCLUDED.inputs_sha256, sha256 = EXCLUDED.sha256",
            [what, subject_id, tasks_epoch, memories_epoch, inputs_sha256, sha256])


def task_list_epoch(project_id: int) -> int:
    """The project's "tasks" counter now."""
    return seal_check_read(project_id, "", 0).tasks_epoch
