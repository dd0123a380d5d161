"""The statements that lock and rewrite `TaskGrades` rows (`analysis.task_grade_store` builds their
pieces: the grades string and the tasks' filter, SQL over a final prediction `p`).
"""
from __future__ import annotations

from django.db import connection

from experiments.core.conditions import FINAL
from experiments.models import CohortTask, Prediction, TaskGrades

_TG, _P, _CT = TaskGrades._meta.db_table, Prediction._meta.db_table, CohortTask._meta.db_table
# a task's cohort position, for the row (`task` is SQL for its id); index: the unique (cohort, task)
# constraint (cohort_task_once)
POSITION = "(SELECT position FROM " + _CT + " WHERE cohort_id = %s AND task_id = {task})"


def lock_task_row(run_id: int, cohort_id: int, task_id: int, blank: str) -> None:
    """Lock one task's row, a new row `blank` for a task without one: an upsert that writes nothing new."""
    # Index: the unique (run, task) constraint (task_grades_once), the ON CONFLICT target.
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {_TG} AS tg (run_id, task_id, position, grades) "
                       f"VALUES (%s, %s, {POSITION.format(task='%s')}, %s) "
                       "ON CONFLICT (run_id, task_id) DO UPDATE SET grades = tg.grades",
                       [run_id, task_id, cohort_id, task_id, blank])


def lock_filtered_task_rows(run_id: int, cohort_id: int, blank: str, where: str, params: list) -> None:
    """Lock the rows of the run's tasks with a final prediction matching `where`, in task order."""
    # Index: prediction_final (run, label, condition) for the tasks; task_grades_once for the upsert.
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {_TG} AS tg (run_id, task_id, position, grades) "
                       f"SELECT %s, t.task_id, {POSITION.format(task='t.task_id')}, %s "
                       f"FROM (SELECT DISTINCT p.task_id FROM {_P} p WHERE p.run_id = %s AND p.label = '{FINAL}'"
                       f"{where}) t ORDER BY t.task_id "
                       "ON CONFLICT (run_id, task_id) DO UPDATE SET grades = tg.grades",
                       [run_id, cohort_id, blank, run_id, *params])


def write_task_rows(run_id: int, cohort_id: int, row: str, row_params: list, where: str, params: list) -> None:
    """Rewrite the rows of the run's tasks with a final prediction matching `where`: `row` (SQL over
    the task's final predictions `p`, grouped by task) is the grades string."""
    # Index: prediction_final (run, label, condition) for the predictions; task_grades_once for the upsert.
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {_TG} (run_id, task_id, position, grades) "
                       f"SELECT %s, p.task_id, {POSITION.format(task='p.task_id')}, {row} FROM {_P} p "
                       f"WHERE p.run_id = %s AND p.label = '{FINAL}'{where} GROUP BY p.task_id "
                       "ON CONFLICT (run_id, task_id) DO UPDATE SET position = excluded.position, "
                       "grades = excluded.grades",
                       [run_id, cohort_id, *row_params, run_id, *params])
