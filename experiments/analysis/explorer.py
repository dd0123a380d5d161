"""Finding tasks in a run (issue 12): the explorer's filters, sort and pages as one SQL query.

A run's grade of a task under a condition is not stored in one place: it is the condition's
`final` prediction joined to the judge's grade of that answer text (an invalid selection is an
operational zero, as in `analysis.grades.final_grades`). The explorer therefore builds one SQL
statement over the cohort's tasks that joins, for every condition a filter or the sort names,
that prediction and its grade, and lets the database filter, sort, count and cut the page;
nothing is scanned in Python. The SQL is standard (LEFT JOIN, CASE, window functions, NULLS
LAST), so it runs on PostgreSQL and SQLite alike; migration 0006 adds the indexes it uses.

`ExplorerQuery.from_params` reads the URL's query string (see the `run_explorer` view for the
parameter names); `explorer_page` returns a page of rows, `explorer_neighbours` the previous
and next task of the same filtered, sorted list (the task page's j/k).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection

from experiments.core.conditions import FINAL, FUSION, SELECTION, get_condition
from experiments.models import (CohortTask, Grade, Person, Prediction, Run, Session, Study, Task,
                                Turn)

PAGE_SIZE = 50
GRADES = (0, 1, 2, 3)
SORT_FIELDS = ("task", "person", "study", "diff")  # plus "grade:<condition key>"
SCORED = (Prediction.Status.OK, Prediction.Status.EMPTY)

_CT, _T, _S = CohortTask._meta.db_table, Task._meta.db_table, Session._meta.db_table
_P, _G, _TURN = Prediction._meta.db_table, Grade._meta.db_table, Turn._meta.db_table
_PERSON, _STUDY = Person._meta.db_table, Study._meta.db_table


def _grade(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    if value not in {str(g) for g in GRADES}:
        raise ValueError(f"a grade is one of 0, 1, 2, 3, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class ExplorerQuery:
    """The explorer's filters and sort, as the URL carries them (every field optional)."""

    grades: tuple[tuple[str, int], ...] = ()  # (condition, grade) pairs: `condition` + `grade`
    a: str = ""
    ga: int | None = None
    b: str = ""
    gb: int | None = None
    study: str = ""
    person: str = ""
    q: str = ""
    missing: bool = False
    copied: bool = False
    chosen: str = ""
    sort: str = "task"
    page: int = 1
    errors: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_params(cls, params, conditions) -> ExplorerQuery:
        """Read a QueryDict; what cannot be used is dropped and explained in `errors`."""
        known, errors = set(conditions), []
        get, get_list = params.get, params.getlist

        def condition(key: str) -> str:
            if key and key not in known:
                errors.append(f"unknown condition {key!r}")
                return ""
            return key

        def grade(value) -> int | None:
            try:
                return _grade(value)
            except ValueError as error:
                errors.append(str(error))
                return None

        pairs = []
        for key, value in zip(get_list("condition"), get_list("grade")):
            key, value = condition(key), grade(value)
            if key and value is not None:
                pairs.append((key, value))
        sort = get("sort") or "task"
        bare = sort.lstrip("-")
        if not (bare in SORT_FIELDS or (bare.startswith("grade:") and bare[6:] in known)):
            errors.append(f"cannot sort by {sort!r}")
            sort = "task"
        try:
            page = max(1, int(get("page") or 1))
        except ValueError:
            page = 1
        a, b = condition(get("a") or ""), condition(get("b") or "")
        if sort.lstrip("-") == "diff" and not (a and b):
            errors.append("sorting by a − b needs two conditions a and b")
            sort = "task"
        return cls(
            grades=tuple(pairs), a=a, ga=grade(get("ga")) if a else None, b=b, gb=grade(get("gb")) if b else None,
            study=(get("study") or "").strip(), person=(get("person") or "").strip(), q=(get("q") or "").strip(),
            missing=get("missing") == "1", copied=get("copied") == "1", chosen=(get("chosen") or "").strip(),
            sort=sort, page=page, errors=tuple(errors),
        )

    def params(self) -> list[tuple[str, str]]:
        """The query string's pairs (without the page), in a stable order."""
        pairs: list[tuple[str, str]] = []
        for key, value in self.grades:
            pairs += [("condition", key), ("grade", str(value))]
        for name in ("a", "ga", "b", "gb", "study", "person", "q", "chosen"):
            value = getattr(self, name)
            if value is not None and value != "":
                pairs.append((name, str(value)))
        if self.missing:
            pairs.append(("missing", "1"))
        if self.copied:
            pairs.append(("copied", "1"))
        if self.sort != "task":
            pairs.append(("sort", self.sort))
        return pairs

    def is_filtered(self) -> bool:
        return any(name != "sort" for name, _ in self.params())

    def scored_conditions(self) -> list[str]:
        """The conditions whose grade the filters or the sort read, each once."""
        keys = [key for key, _ in self.grades] + [self.a, self.b]
        if self.sort.lstrip("-").startswith("grade:"):
            keys.append(self.sort.lstrip("-")[6:])
        return list(dict.fromkeys(k for k in keys if k))


def score_sql(p: str, g: str) -> str:
    """A final answer's grade: an invalid selection is 0, an answer its judge's grade, else none."""
    return (f"CASE WHEN {p}.status = 'invalid_selection' THEN 0 "
            f"WHEN {p}.status IN ('ok', 'empty') THEN {g}.score END")


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _statement(run: Run, query: ExplorerQuery) -> tuple[str, list, str]:
    """FROM … WHERE … of the filtered tasks, its parameters, and the ORDER BY clause."""
    protocol = run.protocol
    joins, where, params = [], ["ct.cohort_id = %s"], []
    alias = {}
    for i, key in enumerate(query.scored_conditions()):
        alias[key] = f"sc{i}"
        joins.append(
            f"LEFT JOIN {_P} p{i} ON p{i}.run_id = %s AND p{i}.task_id = ct.task_id AND p{i}.condition = %s "
            f"AND p{i}.label = '{FINAL}' "
            f"LEFT JOIN {_G} g{i} ON g{i}.run_id = %s AND g{i}.task_id = ct.task_id "
            f"AND g{i}.answer_sha256 = p{i}.answer_sha256")
        params += [run.pk, key, run.pk]
    params.append(protocol.cohort_id)
    score = {key: score_sql(f"p{a[2:]}", f"g{a[2:]}") for key, a in alias.items()}
    for key, value in query.grades:
        where.append(f"{score[key]} = %s")
        params.append(value)
    if query.a and query.b and query.ga is None and query.gb is None:
        where.append(f"{score[query.a]} <> {score[query.b]}")
    for key, value in ((query.a, query.ga), (query.b, query.gb)):
        if key and value is not None:
            where.append(f"{score[key]} = %s")
            params.append(value)
    if query.study:
        where.append(f"s.study_id IN (SELECT id FROM {_STUDY} WHERE project_id = %s AND key = %s)")
        params += [protocol.project_id, query.study]
    if query.person:
        where.append(f"s.person_id IN (SELECT id FROM {_PERSON} WHERE project_id = %s AND label = %s)")
        params += [protocol.project_id, query.person]
    if query.q:
        joins.append(f"JOIN {_TURN} qt ON qt.id = t.question_turn_id")
        where.append("LOWER(qt.text) LIKE %s ESCAPE '\\'")
        params.append(_like(query.q))
    if query.missing:
        # Fewer graded final answers than conditions: one is missing (or not yet made).
        where.append(
            f"(SELECT COUNT(*) FROM {_P} pm LEFT JOIN {_G} gm ON gm.run_id = pm.run_id AND gm.task_id = pm.task_id "
            f"AND gm.answer_sha256 = pm.answer_sha256 WHERE pm.run_id = %s AND pm.task_id = ct.task_id "
            f"AND pm.label = '{FINAL}' AND ({score_sql('pm', 'gm')}) IS NOT NULL) < %s")
        params += [run.pk, len(protocol.conditions)]
    if query.copied:
        fusion = [k for k in protocol.conditions if get_condition(k).workflow == FUSION] or [""]
        where.append(
            f"EXISTS (SELECT 1 FROM {_P} pf JOIN {_P} pc ON pc.run_id = pf.run_id AND pc.task_id = pf.task_id "
            f"AND pc.condition = pf.condition AND pc.label <> '{FINAL}' AND pc.answer_sha256 = pf.answer_sha256 "
            f"WHERE pf.run_id = %s AND pf.task_id = ct.task_id AND pf.label = '{FINAL}' AND pf.answer_sha256 <> '' "
            f"AND pf.condition IN ({', '.join(['%s'] * len(fusion))}))")
        params += [run.pk, *fusion]
    if query.chosen:
        selection = [k for k in protocol.conditions if get_condition(k).workflow == SELECTION] or [""]
        where.append(
            f"EXISTS (SELECT 1 FROM {_P} px WHERE px.run_id = %s AND px.task_id = ct.task_id "
            f"AND px.label = '{FINAL}' AND px.chosen_label = %s "
            f"AND px.condition IN ({', '.join(['%s'] * len(selection))}))")
        params += [run.pk, query.chosen, *selection]
    sql = (f"FROM {_CT} ct JOIN {_T} t ON t.id = ct.task_id JOIN {_S} s ON s.id = t.session_id "
           + " ".join(joins) + " WHERE " + " AND ".join(where))
    return sql, params, _order(query, score)


def _order(query: ExplorerQuery, score: dict[str, str]) -> str:
    descending = query.sort.startswith("-")
    bare = query.sort.lstrip("-")
    direction = "DESC" if descending else "ASC"
    if bare == "task":
        return f"ct.position {direction}"
    if bare == "person":
        return f"(SELECT label FROM {_PERSON} WHERE id = s.person_id) {direction}, ct.position"
    if bare == "study":
        return f"(SELECT key FROM {_STUDY} WHERE id = s.study_id) {direction}, ct.position"
    if bare == "diff":
        return f"({score[query.a]}) - ({score[query.b]}) {direction} NULLS LAST, ct.position"
    return f"{score[bare[6:]]} {direction} NULLS LAST, ct.position"


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

    Three queries: the page of task ids with the total (a window count), the tasks' facts,
    and the page's final answers with their grades.
    """
    sql, params, order = _statement(run, query)
    offset = (query.page - 1) * size
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT ct.task_id, ct.position, COUNT(*) OVER () {sql} ORDER BY {order} "
                       f"LIMIT %s OFFSET %s", [*params, size, offset])
        found = cursor.fetchall()
    total = found[0][2] if found else 0
    if not found and query.page > 1:
        total = explorer_count(run, query)
    ids = [task_id for task_id, _, _ in found]
    facts = task_facts(ids)
    cells = final_cells(run, ids)
    rows = [{**facts[task_id], "position": position + 1, "cells": cells.get(task_id, {})}
            for task_id, position, _ in found]
    return ExplorerPage(rows=rows, total=total, number=query.page, size=size)


def explorer_count(run: Run, query: ExplorerQuery) -> int:
    sql, params, _ = _statement(run, query)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) {sql}", params)
        return cursor.fetchone()[0]


def explorer_neighbours(run: Run, query: ExplorerQuery, task_id: int, position: int | None = None) -> dict:
    """The previous and next task ids around `task_id` in the filtered, sorted list, its
    1-based place there and the list's length (place None: the task is not in the list).

    Unfiltered in cohort order (given the task's cohort `position`), the neighbours are read
    from the (cohort, position) index; otherwise the list is numbered by a window function.
    """
    if position is not None and not query.is_filtered() and query.sort in ("task", "-task"):
        return _neighbours_in_cohort_order(run, position, descending=query.sort == "-task")
    sql, params, order = _statement(run, query)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT previous, following, place, total FROM (SELECT ct.task_id AS task_id, "
            f"LAG(ct.task_id) OVER w AS previous, LEAD(ct.task_id) OVER w AS following, "
            f"ROW_NUMBER() OVER w AS place, COUNT(*) OVER () AS total {sql} WINDOW w AS (ORDER BY {order})) "
            f"listed WHERE task_id = %s", [*params, task_id])
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
            f"SELECT p.task_id, p.condition, p.status, p.chosen_label, {score_sql('p', 'g')} FROM {_P} p "
            f"LEFT JOIN {_G} g ON g.run_id = p.run_id AND g.task_id = p.task_id AND g.answer_sha256 = p.answer_sha256 "
            f"WHERE p.run_id = %s AND p.label = %s AND p.task_id IN ({marks})", [run.pk, FINAL, *task_ids])
        found = cursor.fetchall()
    cells: dict[int, dict[str, dict]] = {}
    for task_id, condition, status, chosen, score in found:
        cells.setdefault(task_id, {})[condition] = {
            "score": score, "normalized": None if score is None else score / 3, "status": status, "chosen": chosen}
    return cells
