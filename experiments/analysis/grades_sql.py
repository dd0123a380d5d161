"""The SQL of `analysis.grades`: a run's grades of one label's answers, packed per condition."""
from __future__ import annotations

from django.db import connection

from experiments.models import CohortTask, Grade, Prediction


def packed_grade_rows(run_id: int, cohort_id: int, width: int, conditions, label: str) -> list[tuple[str, str]]:
    """(condition, packed): per condition one string of cells, each a task's cohort position
    zero-padded to `width` digits and a mark ('0'-'9' the grade, 'X' out of range, '-' missing)."""
    packed_position = f"lpad(CAST(ct.position AS text), {width}, '0')"
    grade = ("CASE WHEN p.status = %s THEN '0' "
             "WHEN p.status IN (%s, %s) AND g.score BETWEEN 0 AND 9 THEN CAST(g.score AS CHAR(1)) "
             "WHEN p.status IN (%s, %s) AND g.score IS NOT NULL THEN 'X' ELSE '-' END")
    S = Prediction.Status
    sql = (f"SELECT p.condition, string_agg({packed_position} || {grade}, '') "
           f"FROM {Prediction._meta.db_table} p "
           f"JOIN {CohortTask._meta.db_table} ct ON ct.task_id = p.task_id AND ct.cohort_id = %s "
           f"LEFT JOIN {Grade._meta.db_table} g "
           "ON g.run_id = p.run_id AND g.task_id = p.task_id AND g.answer_sha256 = p.answer_sha256 "
           "WHERE p.run_id = %s AND p.label = %s AND p.condition IN ({}) GROUP BY p.condition"
           ).format(", ".join(["%s"] * len(conditions)))
    params = [S.INVALID_SELECTION, S.OK, S.EMPTY, S.OK, S.EMPTY, cohort_id, run_id, label, *conditions]
    # Index: prediction_final (run, label, condition); each cohort task by the unique (cohort, task)
    # constraint (cohort_task_once); each grade by the unique (run, task, answer_sha256)
    # constraint (grade_once_per_answer).
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
