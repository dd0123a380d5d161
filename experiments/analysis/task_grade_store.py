"""`TaskGrades` (a run's grades of a task, one character per condition): kept equal to
the final predictions' stored grades, and read in SQL by the explorer.

- `lock_task_rows` locks the rows of the tasks whose predictions are about to be written;
- `refresh_task_grades` rewrites the rows of a run's tasks from their final predictions' scores;
  `analysis.grades.store_scores` calls it in its transaction, after writing the scores.
- `task_grades_statement` does it for one task as one statement inside the journal's record
  statement (`execution.outcomes.result_statements`), whose snapshot does not show the scores
  written by the same statement: the characters of the conditions it writes come from what it
  writes, the others from the predictions as they were.
- `grade_at` is one condition's grade (0–9, NULL when missing) read from a row, for the explorer.

The engine grades the conditions of one task from several workers at once. A row computed from a
snapshot that lacks another worker's uncommitted grade, written after that worker's row, would
lose that grade; and two workers that lock a task's predictions in two orders deadlock.
So whoever writes a task's predictions takes the task's row first (`lock_task_rows`, an upsert
that writes nothing new; rows of many tasks in task order), before any prediction, and reads the
predictions in a later statement, which sees every grade committed by whoever held the lock
before it; the journal's statement runs its row's upsert before its other results, and it
changes in an existing row only the characters of the conditions it writes.
"""
from __future__ import annotations

from experiments.analysis.task_grade_store_sql import POSITION, lock_filtered_task_rows, lock_task_row, write_task_rows
from experiments.core.conditions import FINAL
from experiments.models import Prediction, TaskGrades

_TG, _P = TaskGrades._meta.db_table, Prediction._meta.db_table
MISSING = "-"


def _digit(score: str) -> str:
    return f"CASE WHEN {score} BETWEEN 0 AND 9 THEN CAST({score} AS CHAR(1)) END"


def _row(conditions, char: str, char_params: list) -> tuple[str, list]:
    """The grades string of one task's final predictions `p` (grouped by task): per condition the
    character `char` (SQL over p) of its final prediction, '-' without one or when it is NULL."""
    parts, params = [], []
    for key in conditions:
        parts.append(f"COALESCE(MAX(CASE WHEN p.condition = %s THEN {char} END), '{MISSING}')")
        params += [key, *char_params]
    return " || ".join(parts) or "''", params


def _tasks_filter(run_id: int, task_id: int | None, answer_sha256: str | None, status: str | None
                  ) -> tuple[str, list]:
    """SQL over a prediction `p` (and its parameters): its task is the one given, or one with a
    prediction of that answer text or status; no condition: every task of the run."""
    where, params = "", []
    if task_id is not None:
        where, params = " AND p.task_id = %s", [task_id]
    narrower = [(name, value) for name, value in (("answer_sha256", answer_sha256), ("status", status))
                if value is not None]
    if narrower:
        where += (f" AND p.task_id IN (SELECT task_id FROM {_P} WHERE run_id = %s"
                  + "".join(f" AND {name} = %s" for name, _ in narrower) + ")")
        params += [run_id, *(value for _, value in narrower)]
    return where, params


def lock_task_rows(run_id: int, cohort_id: int, conditions, *, task_id: int | None = None,
                   answer_sha256: str | None = None, status: str | None = None) -> None:
    """Lock the `TaskGrades` rows of the run's tasks whose predictions the caller is about to
    write (those of `refresh_task_grades`' arguments), a new row ('-' throughout) for a task
    without one, in task order: an upsert that writes nothing new.

    Whoever writes a task's predictions takes its row first (module: concurrent graders), so
    the receipts of one task queue at that row instead of locking its predictions in two
    orders (two decisions of one task deadlocked so in `store_scores`), and the
    predictions are read, after the lock, with every grade committed before it."""
    blank = MISSING * len(conditions)
    if task_id is not None and answer_sha256 is None and status is None:
        lock_task_row(run_id, cohort_id, task_id, blank)
        return
    where, params = _tasks_filter(run_id, task_id, answer_sha256, status)
    lock_filtered_task_rows(run_id, cohort_id, blank, where, params)


def refresh_task_grades(run_id: int, cohort_id: int, conditions, *, task_id: int | None = None,
                        answer_sha256: str | None = None, status: str | None = None, locked: bool = False) -> None:
    """Rewrite the `TaskGrades` of the run's tasks (those of `task_id`, or of the predictions with
    that answer text or status; every task without them) from their final predictions' scores.
    Their rows are locked first (`lock_task_rows`) unless the caller holds them (`locked`)."""
    if not locked:
        lock_task_rows(run_id, cohort_id, conditions, task_id=task_id, answer_sha256=answer_sha256, status=status)
    where, params = _tasks_filter(run_id, task_id, answer_sha256, status)
    row, row_params = _row(conditions, _digit("p.score"), [])
    write_task_rows(run_id, cohort_id, row, row_params, where, params)


def task_grades_statement(run_id: int, task_id: int, cohort_id: int, conditions, written: str, written_params: list,
                          char: str, char_params: list) -> tuple[str, list]:
    """The `TaskGrades` row of one task as one statement (sql, params) of the journal's record,
    run only when its `moved` CTE has a row; its upsert locks the row, so the journal runs it
    before its other results (`outcomes.result_statements`). `written` (SQL over a final
    prediction `p` as the statement's snapshot shows it) is true for the predictions whose score
    the same statement writes, `char` (SQL, NULL for missing) the score's character; an existing
    row changes only at those conditions (module: concurrent graders).

    Each condition of the protocol (an array, in its order) is joined to the task's final answer
    under it, and the characters aggregated in that order: one statement text per protocol size
    whatever its conditions, on the path of every answer."""
    each = (f"FROM unnest(CAST(%s AS text[])) WITH ORDINALITY AS k(condition, place) LEFT JOIN {_P} p "
            f"ON p.run_id = %s AND p.task_id = %s AND p.label = '{FINAL}' AND p.condition = k.condition")
    padded = f"tg.grades || '{MISSING * len(conditions)}'"  # a row shorter than the protocol
    sql = (f"INSERT INTO {_TG} AS tg (run_id, task_id, position, grades) "
           f"SELECT %s, %s, {POSITION.format(task='%s')}, string_agg(COALESCE(CASE WHEN {written} THEN {char} "
           f"ELSE {_digit('p.score')} END, '{MISSING}'), '' ORDER BY k.place) {each} "
           "WHERE EXISTS (SELECT 1 FROM moved) HAVING COUNT(p.id) > 0 "  # no final answer yet: no row
           "ON CONFLICT (run_id, task_id) DO UPDATE SET grades = (SELECT string_agg(CASE WHEN "
           f"{written} THEN COALESCE({char}, '{MISSING}') ELSE SUBSTR({padded}, CAST(k.place AS integer), 1) END, "
           f"'' ORDER BY k.place) {each}) RETURNING 1")  # read by the statements that must follow it
    keys = list(conditions)
    return sql, [run_id, task_id, cohort_id, task_id, *written_params, *char_params, keys, run_id, task_id,
                 *written_params, *char_params, keys, run_id, task_id]


def grade_at(index: int, alias: str = "tg") -> str:
    """SQL: the grade (an integer, NULL when missing) of the condition at `index` (0-based, the
    protocol's order) in the `TaskGrades` row `alias` (NULL too when the task has no row, or a
    row shorter than the protocol): the character's code minus '0''s, '-' and none made NULL."""
    return f"(NULLIF(NULLIF(ASCII(SUBSTR({alias}.grades, {index + 1}, 1)), {ord(MISSING)}), 0) - {ord('0')})"
