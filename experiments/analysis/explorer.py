"""Finding tasks in a run: the explorer's filters, sort and pages in SQL.

A run's grade of a task under a condition is the condition's `final` prediction's stored
`score` (`analysis.grades.store_scores` keeps it equal to what `final_grades` computes). The
explorer builds one SQL statement over the cohort's tasks that joins, for every condition a
filter or the sort names, that prediction on the (run, condition, label, score, task) index —
or, once the run's final answers all exist and a filter reads grades, lists the run's
`TaskGrades` rows, which hold every condition's grade of a task in one row and its cohort
position (an a − b sort at a million predictions: one row per task instead of two index lookups,
and no join to the cohort) — and lets the database filter, count, sort and cut the page (a
count, then LIMIT/OFFSET over at most the cohort's tasks); nothing is scanned in Python. The SQL
is standard (JOIN, IN, window functions, NULLS LAST) but for one function name
(`grade_at`; indexes: migrations 0006, 0008, 0019).
A sort by person or study and the question-text filter read facts copied onto the cohort's tasks
(`experiments.data.cohort_facts`, migration 0017) instead of joining every task to its person, study or turn.
Filters other apps provide (the judge–human disagreement) come from `analysis.task_filters`.

`ExplorerQuery.from_params` (`explorer_query`) reads the URL's query string (see the `run_explorer` view for the
parameter names); `explorer_page` returns a page of rows, `explorer_neighbours` the previous
and next task of the same filtered, sorted list (the task page's j/k).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from experiments.analysis.explorer_query import ExplorerQuery
from experiments.analysis.explorer_sql import (
    cohort_page, final_cell_rows, listed_count, listed_page, neighbours_around, neighbours_in_cohort,
)
from experiments.analysis.task_grade_store import grade_at
from experiments.analysis.task_filters import TASK_FILTERS
from experiments.data.cohort_facts import cohort_facts_copy, cohort_facts_missing
from experiments.core.question_text import question_sentences
from experiments.core.conditions import FINAL, FUSION, SELECTION, get_condition
from experiments.models import CohortTask, Person, Prediction, Run, Session, Study, Task, TaskGrades
from experiments.models.runs import Phase

PAGE_SIZE = 50

_CT, _T, _S = CohortTask._meta.db_table, Task._meta.db_table, Session._meta.db_table
_P, _TG = Prediction._meta.db_table, TaskGrades._meta.db_table
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
    """The filtered tasks' FROM … WHERE …: the listed tasks `ct` (the cohort's tasks, or, when a
    filter reads grades, the run's TaskGrades rows, which carry a task id and cohort position too),
    joins that filter, joins only the sort reads, the conditions, each with its parameters in the
    order they appear."""
    where: list[tuple[str, list]]
    source: str = f"{_CT} ct"
    joins: list[tuple[str, list]] = field(default_factory=list)
    sort_joins: list[tuple[str, list]] = field(default_factory=list)

    def text(self, *, for_sort: bool) -> tuple[str, list]:
        joins = self.joins + (self.sort_joins if for_sort else [])
        sql = (f"FROM {self.source} " + " ".join(j for j, _ in joins)
               + " WHERE " + " AND ".join(w for w, _ in self.where))
        return sql, [v for _, ps in joins for v in ps] + [v for _, ps in self.where for v in ps]

    def is_whole_cohort(self) -> bool:
        """Every task of the cohort: no join, only the first condition (the cohort's)."""
        return not self.joins and len(self.where) == 1


def _statement(run: Run, query: ExplorerQuery) -> tuple[_Sql, dict[str, str]]:
    """The filtered tasks (see `_Sql`) and each scored condition's grade column.

    Once every final answer exists, a filter on grades reads the tasks' `TaskGrades` rows (one
    row per task, every condition's grade in it). Otherwise a condition's grade is its final
    prediction's stored `score`: a filter on it is a join on the (run, condition, label, score,
    task) index; a condition only sorted by is a LEFT JOIN that the count leaves out.
    """
    protocol = run.protocol
    sql = _Sql(where=[("ct.cohort_id = %s", [protocol.cohort_id])])
    filtered = [key for key, _ in query.grades] + [k for k, g in ((query.a, query.ga), (query.b, query.gb))
                                                   if k and (g is not None or (query.a and query.b))]
    score = {}
    scored = query.scored_conditions()
    if any(key in filtered for key in scored) and all_finals_exist(run):
        # A filter on grades reads every grade from the task's one TaskGrades row
        # (`analysis.task_grade_store`; a task without one has no grade, so the filter drops it): the
        # listed rows themselves, unless the query reads the cohort's copied facts. (A grade only
        # sorted by, every task listed, keeps the predictions' index: as fast, and no row needed.)
        if _reads_facts(query):
            sql.joins.append((f"JOIN {_TG} tg ON tg.run_id = %s AND tg.task_id = ct.task_id", [run.pk]))
            score = {key: grade_at(protocol.conditions.index(key), "tg") for key in scored}
        else:
            sql = _Sql(source=f"{_TG} ct", where=[("ct.run_id = %s", [run.pk])])
            score = {key: grade_at(protocol.conditions.index(key), "ct") for key in scored}
    for i, key in enumerate(scored if not score else ()):  # some final rows may not exist yet
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
    # the task and its session joined only when a filter reads them (a sort by person or study and
    # the question's text read the cohort task's copied facts: `experiments.data.cohort_facts`)
    if query.study or query.person:
        sql.joins += [(f"JOIN {_T} t ON t.id = ct.task_id", []), (f"JOIN {_S} s ON s.id = t.session_id", [])]
    if query.study:
        sql.where.append((f"s.study_id IN (SELECT id FROM {_STUDY} WHERE project_id = %s AND key = %s)",
                          [protocol.project_id, query.study]))
    if query.person:
        sql.where.append((f"s.person_id IN (SELECT id FROM {_PERSON} WHERE project_id = %s AND label = %s)",
                          [protocol.project_id, query.person]))
    if query.q:
        sql.where.append(("ct.question_lowercase LIKE %s ESCAPE '\\'", [_like(query.q)]))
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
    if query.answered:  # the answers the dashboard's answer lengths count (`dashboard._answer_lengths`)
        if all_finals_exist(run):  # answered: not among the few without a text (a partial index, 0020)
            sql.where.append((f"ct.task_id NOT IN (SELECT task_id FROM {_P} WHERE run_id = %s AND condition = %s "
                              f"AND label = '{FINAL}' AND text IS NULL)", [run.pk, query.answered]))
        else:
            sql.where.append((f"ct.task_id IN (SELECT task_id FROM {_P} WHERE run_id = %s AND condition = %s "
                              f"AND label = '{FINAL}' AND text IS NOT NULL)", [run.pk, query.answered]))
    for key in query.extra:
        ids = sorted(set(TASK_FILTERS[key].task_ids(run)))
        sql.where.append((f"ct.task_id IN ({', '.join(['%s'] * len(ids))})" if ids else "1 = 0", ids))
    return sql, score


# A sort as one integer per task: rank × 2³² + cohort position (positions are smaller), so ORDER
# BY, and the task page's previous/next, compare one number. A person's or study's rank counts
# down from _RANK_CEILING when descending, so that every key stays positive (key mod 2³² is the
# position) and below 2⁶².
_SPAN = 2 ** 32
_RANK_CEILING = 2 ** 30
_FACT_RANKS = {"person": "ct.person_rank", "study": "ct.study_rank"}


def _numeric_key(query: ExplorerQuery, score: dict[str, str]) -> str:
    """The sort as one ascending integer expression. A missing grade ranks last in either
    direction; ties keep cohort order; people and studies sort by label or key in code point
    order (their ranks, `experiments.data.cohort_facts`), ties in cohort order."""
    descending = query.sort.startswith("-")
    bare = query.sort.lstrip("-")
    if bare == "task":
        return "-ct.position" if descending else "ct.position"
    if bare in _FACT_RANKS:
        rank = f"{_RANK_CEILING} - {_FACT_RANKS[bare]}" if descending else _FACT_RANKS[bare]
    elif bare == "diff":  # a missing grade makes the difference NULL: rank 7
        a, b = score[query.a], score[query.b]
        # (each grade read once: a grade is an expression over the row's string, the cost of this scan)
        rank = f"COALESCE(3 - ({a} - {b}), 7)" if descending else f"COALESCE({a} - {b} + 3, 7)"
    elif bare.startswith("grade:"):
        grade = score[bare[6:]]
        rank = f"COALESCE(3 - {grade}, 4)" if descending else f"COALESCE({grade}, 4)"
    return f"({rank}) * {_SPAN} + ct.position"


def _order(query: ExplorerQuery, score: dict[str, str]) -> str:
    if query.sort.lstrip("-") == "task":  # the (cohort, position) index's order
        return f"ct.position {'DESC' if query.sort.startswith('-') else 'ASC'}"
    return _numeric_key(query, score)


def _reads_facts(query: ExplorerQuery) -> bool:
    """The query reads the facts copied onto the cohort's tasks (`experiments.data.cohort_facts`)."""
    return bool(query.q) or query.sort.lstrip("-") in _FACT_RANKS


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
    # A query that reads the cohort's copied facts also asks whether they are missing; if they are
    # (a cohort a script stored), they are copied and the page read again.
    facts_flag, facts_params = ((f", {cohort_facts_missing()}", [run.protocol.cohort_id]) if _reads_facts(query)
                                else ("", []))
    for _ in range(2):
        if not sql.is_whole_cohort():
            found = listed_page(_numeric_key(query, score), text, facts_flag, [*params, *facts_params, size, offset])
        else:
            counted, count_params = sql.text(for_sort=False)
            found = cohort_page(counted, facts_flag, text, _order(query, score),
                                [*count_params, *facts_params, *params, size, offset])
        if found:
            total, missing = found[0][2], bool(facts_flag and found[0][3])
        else:  # past the end, or nothing matches
            total, missing = _count(sql, facts_flag, facts_params)
        if not missing:
            break
        cohort_facts_copy(run.protocol.cohort_id)
    ids = [task_id for task_id, *_ in found]
    facts = task_facts(ids)
    cells = final_cells(run, ids)
    rows = [{**facts[task_id], "position": position + 1, "cells": cells.get(task_id, {})}
            for task_id, position, *_ in found]
    return ExplorerPage(rows=rows, total=total, number=query.page, size=size)


def _count(sql: _Sql, facts_flag: str, facts_params: list) -> tuple[int, bool]:
    """The filtered tasks' number, and whether the cohort's facts are missing (when asked)."""
    text, params = sql.text(for_sort=False)
    row = listed_count(facts_flag, text, [*facts_params, *params])
    return row[0], bool(facts_flag and row[1])


def explorer_neighbours(run: Run, query: ExplorerQuery, task_id: int, position: int | None = None) -> dict:
    """The previous and next task ids around `task_id` in the filtered, sorted list, its
    1-based place there and the list's length (place None: the task is not in the list).

    Unfiltered in cohort order (given the task's cohort `position`), the neighbours are read
    from the (cohort, position) index. Every other sort is one integer per task (`_numeric_key`):
    one pass counts the tasks before this one and finds the nearest key on either side, with
    no sort of the list; the task's own key is read by the same statement narrowed to it. One
    query (a second only to copy missing cohort facts, or past a missing `TaskGrades` row).
    """
    if position is not None and not query.is_filtered() and query.sort in ("task", "-task"):
        return _neighbours_in_cohort_order(run, position, descending=query.sort == "-task")
    cohort = run.protocol.cohort_id
    by_rows = not query.is_filtered() and query.sort.lstrip("-").startswith("grade:") and all_finals_exist(run)
    for _ in range(2):
        if by_rows:
            # sorted by a grade, every task listed: the run's TaskGrades rows alone (no join of the
            # cohort to the predictions: a third of the time), if there is one per cohort task
            sql = _Sql(source=f"{_TG} ct", where=[("ct.run_id = %s AND ct.position IS NOT NULL", [run.pk])])
            score = {key: grade_at(run.protocol.conditions.index(key), "ct") for key in query.scored_conditions()}
            extra, extra_params = f", (SELECT COUNT(*) FROM {_CT} WHERE cohort_id = %s)", [cohort]
        else:
            sql, score = _statement(run, query)
            extra, extra_params = (f", {cohort_facts_missing()}", [cohort]) if _reads_facts(query) else ("", [])
        row = _neighbours_row(query, sql, score, task_id, cohort, extra, extra_params)
        if by_rows and row[3] != row[4]:
            by_rows = False  # a cohort task without its row (or the task itself): read the predictions
        elif extra and not by_rows and row[4]:
            cohort_facts_copy(cohort)  # read before the cohort's facts were there: copy them, read again
        else:
            break
    if not row[3]:
        return {"previous": None, "next": None, "place": None, "total": None}
    return dict(zip(("previous", "next", "place", "total"), row[:4]))


def _neighbours_row(query: ExplorerQuery, sql: _Sql, score: dict[str, str], task_id: int, cohort: int,
                    extra: str, extra_params: list) -> tuple:
    """(previous, next, place, total, *extra): one row, total 0 when the task is not listed."""
    text, params = sql.text(for_sort=True)
    key = _numeric_key(query, score)
    # a key's position: key mod 2³² (or minus the key, for the descending cohort order)
    place = "-{k}" if query.sort == "-task" else f"{{k}} %% {_SPAN}"
    return neighbours_around(key, text, place, extra, [*params, *params, task_id, cohort, cohort, *extra_params])


def _neighbours_in_cohort_order(run: Run, position: int, *, descending: bool) -> dict:
    before, after, total = neighbours_in_cohort(run.protocol.cohort_id, position)
    if descending:
        return {"previous": after, "next": before, "place": total - position, "total": total}
    return {"previous": before, "next": after, "place": position + 1, "total": total}


def task_facts(task_ids: list[int]) -> dict[int, dict]:
    """Session, person, study and the question sentence for each task (one query)."""
    rows = (Task.objects.filter(pk__in=task_ids)
            .values("pk", "position", "session__external_id", "session__person__label", "session__study__key",
                    "question_turn__text"))
    return {r["pk"]: {"task_id": r["pk"], "target": r["position"] + 1, "session": r["session__external_id"],
                      "person": r["session__person__label"], "study": r["session__study__key"],
                      "question": question_sentences(r["question_turn__text"])} for r in rows}


def final_cells(run: Run, task_ids: list[int]) -> dict[int, dict[str, dict]]:
    """task → condition → the final answer's grade (0–3 or None), normalized grade, status and
    the selection's chosen candidate; one query."""
    if not task_ids:
        return {}
    found = final_cell_rows(run.pk, FINAL, task_ids)
    cells: dict[int, dict[str, dict]] = {}
    for task_id, condition, status, chosen, score in found:
        cells.setdefault(task_id, {})[condition] = {
            "score": score, "normalized": None if score is None else score / 3, "status": status, "chosen": chosen}
    return cells
