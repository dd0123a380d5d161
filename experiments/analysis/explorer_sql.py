"""The explorer's and the project search's statements (`analysis.explorer`, `analysis.explorer_search`).

The explorer's statements take the filtered tasks' FROM … WHERE … (`text`, alias `ct`: the cohort's
tasks, or a run's `TaskGrades` rows) and each task's sort key (`key`) built by `analysis.explorer`,
with their parameters in the order they appear. Indexes they read: the cohort's tasks by the unique
(cohort, position) constraint (cohort_task_position_once); a condition's final predictions by
prediction_score (run, condition, label, score, task) and the explorer's other prediction indexes
(prediction_choice, prediction_unscored, prediction_unanswered); a run's `TaskGrades` by the unique
(run, task) constraint (task_grades_once).
"""
from __future__ import annotations

from django.db import connection

from experiments.models import CohortTask, Prediction, Project, Run, Session, Task, Turn

_CT, _P = CohortTask._meta.db_table, Prediction._meta.db_table
_TASK, _TURN, _SESSION, _RUN = Task._meta.db_table, Turn._meta.db_table, Session._meta.db_table, Run._meta.db_table
_MATCH = "to_tsvector('english'::regconfig, {column}) @@ plainto_tsquery('english'::regconfig, %s)"


def listed_page(key: str, text: str, facts_flag: str, params: list) -> list[tuple]:
    """(task id, position, total[, facts missing]) of a filtered list's page: read once into a CTE
    with each task's sort key, then counted and cut."""
    # Index: those of the filter (module docstring); the sort runs over the listed tasks only.
    with connection.cursor() as cursor:
        cursor.execute(f"WITH listed AS (SELECT ct.task_id AS task_id, ct.position AS position, "
                       f"{key} AS k {text}) "
                       f"SELECT task_id, position, (SELECT COUNT(*) FROM listed){facts_flag} FROM listed "
                       f"ORDER BY k LIMIT %s OFFSET %s", params)
        return cursor.fetchall()


def cohort_page(counted: str, facts_flag: str, text: str, order: str, params: list) -> list[tuple]:
    """(task id, position, total[, facts missing]) of the whole cohort's page, in `order`."""
    # Index: cohort_task_position_once (cohort, position): counted and read in its order.
    with connection.cursor() as cursor:
        # the subquery's own aliases shadow the outer ones: it is uncorrelated
        cursor.execute(f"SELECT ct.task_id, ct.position, (SELECT COUNT(*) {counted}){facts_flag} {text} "
                       f"ORDER BY {order} LIMIT %s OFFSET %s", params)
        return cursor.fetchall()


def listed_count(facts_flag: str, text: str, params: list) -> tuple:
    """(number of listed tasks[, facts missing])."""
    # Index: those of the filter (module docstring).
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*){facts_flag} {text}", params)
        return cursor.fetchone()


def neighbours_around(key: str, text: str, place: str, extra: str, params: list) -> tuple:
    """(previous, next, place, total, *extra) of one task in the list: one pass counts the tasks
    before it and finds the nearest key on either side."""
    # Index: those of the filter (module docstring); the neighbours' ids by
    # cohort_task_position_once (cohort, position).
    # each task's key computed once, in the subquery (PostgreSQL would otherwise inline it and
    # compute the key again in every comparison of the aggregate: several times slower)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH around AS (SELECT COUNT(*) AS total, SUM(CASE WHEN l.k < h.k THEN 1 ELSE 0 END) AS before, "
            f"MAX(CASE WHEN l.k < h.k THEN l.k END) AS previous, MIN(CASE WHEN l.k > h.k THEN l.k END) AS following "
            f"FROM (SELECT {key} AS k {text} OFFSET 0) l "
            f"CROSS JOIN (SELECT {key} AS k {text} AND ct.task_id = %s OFFSET 0) h) "
            f"SELECT (SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position = {place.format(k='previous')}), "
            f"(SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position = {place.format(k='following')}), "
            f"before + 1, total{extra} FROM around",
            params)
        return cursor.fetchone()


def neighbours_in_cohort(cohort: int, position: int) -> tuple:
    """(task before, task after, the cohort's size) around a cohort position."""
    # Index: cohort_task_position_once (cohort, position), three lookups.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position < %s ORDER BY position DESC LIMIT 1), "
            f"(SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position > %s ORDER BY position LIMIT 1), "
            f"(SELECT COUNT(*) FROM {_CT} WHERE cohort_id = %s)", [cohort, position, cohort, position, cohort])
        return cursor.fetchone()


def final_cell_rows(run_id: int, label: str, task_ids: list[int]) -> list[tuple]:
    """(task id, condition, status, chosen label, score) of the run's `label` answers of the tasks."""
    marks = ", ".join(["%s"] * len(task_ids))
    # Index: the unique (run, task, condition, label) constraint (prediction_once).
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT task_id, condition, status, chosen_label, score FROM {_P} "
            f"WHERE run_id = %s AND label = %s AND task_id IN ({marks})", [run_id, label, *task_ids])
        return cursor.fetchall()


def search_task_ids(project: Project, text: str, limit: int) -> list[int]:
    """Ids of `project`'s tasks whose question or reference answer matches, at most `limit` of each."""
    match = _MATCH.format(column="tu.text")
    turns = (f"SELECT tu.id FROM {_TURN} tu WHERE {match} AND tu.session_id IN "
             f"(SELECT id FROM {_SESSION} WHERE project_id = %s)")
    # Index: the GIN explorer_turn_text_fts (migration 0006, the same expression as _MATCH); the
    # session's project by its foreign key; the tasks by their question_turn and answer_turn
    # foreign keys' indexes.
    with connection.cursor() as cursor:
        cursor.execute(
            f"(SELECT t.id FROM {_TASK} t WHERE t.question_turn_id IN ({turns}) LIMIT %s) UNION "
            f"(SELECT t.id FROM {_TASK} t WHERE t.answer_turn_id IN ({turns}) LIMIT %s)",
            [text, project.pk, limit, text, project.pk, limit])
        return [row[0] for row in cursor.fetchall()]


def search_prediction_ids(project: Project, text: str, limit: int) -> list[int]:
    """Ids of at most `limit` predictions of `project`'s runs whose text matches."""
    # Index: the GIN explorer_prediction_text_fts (migration 0006, the same expression as _MATCH);
    # the project's protocols by their foreign key.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT p.id FROM {_P} p WHERE {_MATCH.format(column='p.text')} AND p.run_id IN "
            f"(SELECT r.id FROM {_RUN} r JOIN experiments_protocol pr ON pr.id = r.protocol_id "
            f"WHERE pr.project_id = %s) LIMIT %s", [text, project.pk, limit])
        return [row[0] for row in cursor.fetchall()]
