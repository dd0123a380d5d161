"""Finding tasks in a run (issue 12): the explorer's filters, sort and pages in SQL.

A run's grade of a task under a condition is the condition's `final` prediction's stored
`score` (`analysis.grades.store_scores` keeps it equal to what `final_grades` computes). The
explorer builds one SQL statement over the cohort's tasks that joins, for every condition a
filter or the sort names, that prediction on the (run, condition, label, score, task) index,
and lets the database filter, count, sort and cut the page (a count, then LIMIT/OFFSET over at
most the cohort's tasks); nothing is scanned in Python. The SQL is standard (JOIN, IN, window
functions, NULLS LAST), so it runs on PostgreSQL and SQLite alike (indexes: migrations 0006, 0008).
Filters other apps provide (the judge–human disagreement) come from `analysis.task_filters`.

`ExplorerQuery.from_params` (`explorer_query`) reads the URL's query string (see the `run_explorer` view for the
parameter names); `explorer_page` returns a page of rows, `explorer_neighbours` the previous
and next task of the same filtered, sorted list (the task page's j/k).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection

from experiments.analysis.explorer_query import ExplorerQuery
from experiments.analysis.task_filters import TASK_FILTERS
from experiments.core.conditions import FINAL, FUSION, SELECTION, get_condition
from experiments.models import CohortTask, Person, Prediction, Run, Session, Study, Task, Turn
from experiments.models.runs import Phase

PAGE_SIZE = 50

_CT, _T, _S = CohortTask._meta.db_table, Task._meta.db_table, Session._meta.db_table
_P, _TURN = Prediction._meta.db_table, Turn._meta.db_table
_PERSON, _STUDY = Person._meta.db_table, Study._meta.db_table


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def all_finals_exist(run: Run) -> bool:
    """Past the decisions every (task, condition) of the run has its final row (planning writes a
    blocked one as missing; a re-grade copies its source's), so a missing grade is a null score."""
    return run.planned_phase == Phase.JUDGING or run.phase in (Phase.ANALYSIS, Phase.DONE)


@dataclass
class _Sql:
    """The filtered tasks' FROM … WHERE …: joins that filter, joins only the sort reads, the
    conditions, each with its parameters in the order they appear."""
    joins: list[tuple[str, list]] = field(default_factory=list)
    sort_joins: list[tuple[str, list]] = field(default_factory=list)
    where: list[tuple[str, list]] = field(default_factory=list)

    def text(self, *, for_sort: bool) -> tuple[str, list]:
        joins = self.joins + (self.sort_joins if for_sort else [])
        sql = f"FROM {_CT} ct " + " ".join(j for j, _ in joins) + " WHERE " + " AND ".join(w for w, _ in self.where)
        return sql, [v for _, ps in joins for v in ps] + [v for _, ps in self.where for v in ps]


def _statement(run: Run, query: ExplorerQuery) -> tuple[_Sql, dict[str, str]]:
    """The filtered tasks (see `_Sql`) and each scored condition's grade column.

    A condition's grade is its final prediction's stored `score`: a filter on it is a join on the
    (run, condition, label, score, task) index; a condition only sorted by is a LEFT JOIN that
    the count leaves out.
    """
    protocol = run.protocol
    sql = _Sql(where=[("ct.cohort_id = %s", [protocol.cohort_id])])
    bare = query.sort.lstrip("-")
    filtered = [key for key, _ in query.grades] + [k for k, g in ((query.a, query.ga), (query.b, query.gb))
                                                   if k and (g is not None or (query.a and query.b))]
    score = {}
    for i, key in enumerate(query.scored_conditions()):
        score[key] = f"p{i}.score"
        join = (f"JOIN {_P} p{i} ON p{i}.run_id = %s AND p{i}.condition = %s AND p{i}.label = '{FINAL}' "
                f"AND p{i}.task_id = ct.task_id")
        if key in filtered:
            sql.joins.append((join, [run.pk, key]))
        else:
            sql.sort_joins.append(("LEFT " + join, [run.pk, key]))
    for key, value in query.grades:
        sql.where.append((f"{score[key]} = %s", [value]))
    if query.a and query.b and query.ga is None and query.gb is None:
        sql.where.append((f"{score[query.a]} <> {score[query.b]}", []))
    for key, value in ((query.a, query.ga), (query.b, query.gb)):
        if key and value is not None:
            sql.where.append((f"{score[key]} = %s", [value]))
    # the task and its session joined only when a filter or the sort reads them
    task_join, session_join = (f"JOIN {_T} t ON t.id = ct.task_id", []), (f"JOIN {_S} s ON s.id = t.session_id", [])
    if query.study or query.person or query.q:
        sql.joins.append(task_join)
    elif bare in ("person", "study"):
        sql.sort_joins.append(task_join)
    if query.study or query.person:
        sql.joins.append(session_join)
    elif bare in ("person", "study"):
        sql.sort_joins.append(session_join)
    if query.study:
        sql.where.append((f"s.study_id IN (SELECT id FROM {_STUDY} WHERE project_id = %s AND key = %s)",
                          [protocol.project_id, query.study]))
    if query.person:
        sql.where.append((f"s.person_id IN (SELECT id FROM {_PERSON} WHERE project_id = %s AND label = %s)",
                          [protocol.project_id, query.person]))
    if query.q:
        sql.joins.append((f"JOIN {_TURN} qt ON qt.id = t.question_turn_id", []))
        sql.where.append(("LOWER(qt.text) LIKE %s ESCAPE '\\'", [_like(query.q)]))
    if query.missing:
        if all_finals_exist(run):
            sql.where.append((f"ct.task_id IN (SELECT task_id FROM {_P} WHERE run_id = %s AND label = '{FINAL}' "
                              f"AND score IS NULL)", [run.pk]))
        else:  # some final rows may not exist yet: count the graded ones
            sql.where.append((f"(SELECT COUNT(*) FROM {_P} pm WHERE pm.run_id = %s AND pm.task_id = ct.task_id "
                              f"AND pm.label = '{FINAL}' AND pm.score IS NOT NULL) < %s",
                              [run.pk, len(protocol.conditions)]))
    if query.copied:
        fusion = [k for k in protocol.conditions if get_condition(k).workflow == FUSION] or [""]
        sql.where.append((
            f"ct.task_id IN (SELECT task_id FROM {_P} WHERE run_id = %s AND label = '{FINAL}' AND copied_label <> '' "
            f"AND condition IN ({', '.join(['%s'] * len(fusion))}))", [run.pk, *fusion]))
    if query.chosen:
        selection = [k for k in protocol.conditions if get_condition(k).workflow == SELECTION] or [""]
        sql.where.append((
            f"ct.task_id IN (SELECT task_id FROM {_P} WHERE run_id = %s AND label = '{FINAL}' AND chosen_label = %s "
            f"AND condition IN ({', '.join(['%s'] * len(selection))}))", [run.pk, query.chosen, *selection]))
    for key in query.extra:
        ids = sorted(set(TASK_FILTERS[key].task_ids(run)))
        sql.where.append((f"ct.task_id IN ({', '.join(['%s'] * len(ids))})" if ids else "1 = 0", ids))
    if bare == "person":
        sql.sort_joins.append((f"JOIN {_PERSON} pe ON pe.id = s.person_id", []))
    if bare == "study":
        sql.sort_joins.append((f"JOIN {_STUDY} st ON st.id = s.study_id", []))
    return sql, score


# A numeric sort as one integer per task: rank × 2³² + cohort position (positions are smaller),
# so ORDER BY, and the task page's previous/next, compare one number.
_SPAN = 2 ** 32


def _numeric_key(query: ExplorerQuery, score: dict[str, str]) -> str | None:
    """The sort as one ascending integer expression, or None for a sort by text (person, study).
    A missing grade ranks last in either direction; ties keep cohort order."""
    descending = query.sort.startswith("-")
    bare = query.sort.lstrip("-")
    if bare == "task":
        return "-ct.position" if descending else "ct.position"
    if bare == "diff":
        a, b = score[query.a], score[query.b]
        rank = (f"CASE WHEN {a} IS NULL OR {b} IS NULL THEN 7 ELSE "
                + (f"3 - ({a} - {b}) END" if descending else f"{a} - {b} + 3 END"))
    elif bare.startswith("grade:"):
        grade = score[bare[6:]]
        rank = f"CASE WHEN {grade} IS NULL THEN 4 ELSE " + (f"3 - {grade} END" if descending else f"{grade} END")
    else:
        return None
    return f"({rank}) * {_SPAN} + ct.position"


def _text_order(query: ExplorerQuery, column: str, position: str) -> str:
    """A sort by person or study: `column` in code point order (as SQLite and Python sort, and
    cheaper than a locale's collation), then cohort order."""
    collate = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
    return f"{column}{collate} {'DESC' if query.sort.startswith('-') else 'ASC'}, {position}"


_TEXT_KEYS = {"person": "pe.label", "study": "st.key"}


def _order(query: ExplorerQuery, score: dict[str, str]) -> str:
    bare = query.sort.lstrip("-")
    if bare == "task":  # the (cohort, position) index's order
        return f"ct.position {'DESC' if query.sort.startswith('-') else 'ASC'}"
    if bare in _TEXT_KEYS:
        return _text_order(query, _TEXT_KEYS[bare], "ct.position")
    return _numeric_key(query, score)


@dataclass
class ExplorerPage:
    rows: list[dict]
    total: int
    number: int
    size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    def has_next(self) -> bool:
        return self.number < self.pages

    def has_previous(self) -> bool:
        return self.number > 1


def explorer_page(run: Run, query: ExplorerQuery, *, size: int = PAGE_SIZE) -> ExplorerPage:
    """One page of the filtered, sorted tasks, each with every condition's final grade.

    Three queries: the page of task ids (LIMIT/OFFSET over at most the cohort's tasks) with the
    total, the tasks' facts, and the page's final answers (a page past the end counts again).
    The whole cohort is counted from the (cohort, position) index and its page read in that
    index's order. A filtered list must be read whole to be counted, so it is read once into a
    CTE (`listed`, used twice, so PostgreSQL computes it once) with each task's sort key, then
    counted and cut from there.
    """
    sql, score = _statement(run, query)
    text, params = sql.text(for_sort=True)
    offset = (query.page - 1) * size
    with connection.cursor() as cursor:
        if sql.joins or len(sql.where) > 1:
            key, order = _numeric_key(query, score), "k"
            if key is None:  # person or study
                key, order = _TEXT_KEYS[query.sort.lstrip("-")], _text_order(query, "k", "position")
            cursor.execute(f"WITH listed AS (SELECT ct.task_id AS task_id, ct.position AS position, {key} AS k {text}) "
                           f"SELECT task_id, position, (SELECT COUNT(*) FROM listed) FROM listed "
                           f"ORDER BY {order} LIMIT %s OFFSET %s", [*params, size, offset])
        else:
            counted, count_params = sql.text(for_sort=False)
            # the subquery's own aliases shadow the outer ones: it is uncorrelated
            cursor.execute(f"SELECT ct.task_id, ct.position, (SELECT COUNT(*) {counted}) {text} "
                           f"ORDER BY {_order(query, score)} LIMIT %s OFFSET %s",
                           [*count_params, *params, size, offset])
        found = cursor.fetchall()
    total = found[0][2] if found else _count(sql)
    ids = [task_id for task_id, _, _ in found]
    facts = task_facts(ids)
    cells = final_cells(run, ids)
    rows = [{**facts[task_id], "position": position + 1, "cells": cells.get(task_id, {})}
            for task_id, position, _ in found]
    return ExplorerPage(rows=rows, total=total, number=query.page, size=size)


def _count(sql: _Sql) -> int:
    text, params = sql.text(for_sort=False)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) {text}", params)
        return cursor.fetchone()[0]


def explorer_neighbours(run: Run, query: ExplorerQuery, task_id: int, position: int | None = None) -> dict:
    """The previous and next task ids around `task_id` in the filtered, sorted list, its
    1-based place there and the list's length (place None: the task is not in the list).

    Unfiltered in cohort order (given the task's cohort `position`), the neighbours are read
    from the (cohort, position) index. A numeric sort is one integer per task (`_numeric_key`):
    one pass counts the tasks before this one and finds the nearest key on either side, with
    no sort of the list. A sort by text numbers the list with a window function.
    """
    if position is not None and not query.is_filtered() and query.sort in ("task", "-task"):
        return _neighbours_in_cohort_order(run, position, descending=query.sort == "-task")
    sql, score = _statement(run, query)
    text, params = sql.text(for_sort=True)
    key = _numeric_key(query, score)
    with connection.cursor() as cursor:
        if key is None:
            cursor.execute(
                f"SELECT previous, following, place, total FROM (SELECT ct.task_id AS task_id, "
                f"LAG(ct.task_id) OVER w AS previous, LEAD(ct.task_id) OVER w AS following, "
                f"ROW_NUMBER() OVER w AS place, COUNT(*) OVER () AS total {text} "
                f"WINDOW w AS (ORDER BY {_order(query, score)})) listed WHERE task_id = %s", [*params, task_id])
            row = cursor.fetchone()
        else:
            # a key's position: key mod 2³² (or minus the key, for the descending cohort order)
            place = "-{k}" if query.sort == "-task" else f"{{k}} %% {_SPAN}"
            cursor.execute(
                f"WITH listed AS (SELECT ct.task_id AS task_id, {key} AS k {text}), "
                f"here AS (SELECT k FROM listed WHERE task_id = %s), "
                f"around AS (SELECT COUNT(*) AS total, SUM(CASE WHEN l.k < h.k THEN 1 ELSE 0 END) AS before, "
                f"MAX(CASE WHEN l.k < h.k THEN l.k END) AS previous, MIN(CASE WHEN l.k > h.k THEN l.k END) AS following "
                f"FROM listed l CROSS JOIN here h) "
                f"SELECT (SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position = {place.format(k='previous')}), "
                f"(SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position = {place.format(k='following')}), "
                f"before + 1, total FROM around WHERE total > 0",
                [*params, task_id, run.protocol.cohort_id, run.protocol.cohort_id])
            row = cursor.fetchone()
    if row is None:
        return {"previous": None, "next": None, "place": None, "total": None}
    return dict(zip(("previous", "next", "place", "total"), row))


def _neighbours_in_cohort_order(run: Run, position: int, *, descending: bool) -> dict:
    cohort = run.protocol.cohort_id
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position < %s ORDER BY position DESC LIMIT 1), "
            f"(SELECT task_id FROM {_CT} WHERE cohort_id = %s AND position > %s ORDER BY position LIMIT 1), "
            f"(SELECT COUNT(*) FROM {_CT} WHERE cohort_id = %s)", [cohort, position, cohort, position, cohort])
        before, after, total = cursor.fetchone()
    if descending:
        return {"previous": after, "next": before, "place": total - position, "total": total}
    return {"previous": before, "next": after, "place": position + 1, "total": total}


def task_facts(task_ids: list[int]) -> dict[int, dict]:
    """Session, person, study and the question's start for each task (one query)."""
    rows = (Task.objects.filter(pk__in=task_ids)
            .values("pk", "position", "session__external_id", "session__person__label", "session__study__key",
                    "question_turn__text"))
    return {r["pk"]: {"task_id": r["pk"], "target": r["position"] + 1, "session": r["session__external_id"],
                      "person": r["session__person__label"], "study": r["session__study__key"],
                      "question": r["question_turn__text"][:300]} for r in rows}


def final_cells(run: Run, task_ids: list[int]) -> dict[int, dict[str, dict]]:
    """task → condition → the final answer's grade (0–3 or None), normalized grade, status and
    the selection's chosen candidate; one query."""
    if not task_ids:
        return {}
    marks = ", ".join(["%s"] * len(task_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT task_id, condition, status, chosen_label, score FROM {_P} "
            f"WHERE run_id = %s AND label = %s AND task_id IN ({marks})", [run.pk, FINAL, *task_ids])
        found = cursor.fetchall()
    cells: dict[int, dict[str, dict]] = {}
    for task_id, condition, status, chosen, score in found:
        cells.setdefault(task_id, {})[condition] = {
            "score": score, "normalized": None if score is None else score / 3, "status": status, "chosen": chosen}
    return cells
