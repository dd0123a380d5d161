"""The numeric package of a run (`exports.scores_package_rows`) one page at a time, for the JSON API.

`scores_package_rows` builds every row of a run (a paper-size run: seconds; a million rows: a
minute), which a client paging through the package would pay on every page. `scores_package_page`
gives rows [start, stop) of the same list — the same labels, numbers and order (task-major, the
protocol's conditions within a task) — reading every task's ids (for the labels, which number
people and studies over the whole cohort) but the grades and answers of the page's tasks only.
Its grade rule is `grades.final_grades`'s, restricted to those tasks; tests/test_api.py checks the
pages against the whole list.
"""
from __future__ import annotations

from experiments.analysis.exports import HEADER, cluster_labels, sequential_labels
from experiments.core.conditions import FINAL
from experiments.models import CohortTask, Grade, Prediction, Run


def scores_package_size(run: Run) -> int:
    """How many rows `scores_package_rows(run)` has: one per cohort task and condition."""
    return CohortTask.objects.filter(cohort_id=run.protocol.cohort_id).count() * len(run.protocol.conditions)


def scores_package_page(run: Run, start: int, stop: int) -> tuple[list[str], list[dict]]:
    """(HEADER, rows start..stop-1 of `scores_package_rows(run)`), with the same values."""
    conditions = list(run.protocol.conditions)
    if not conditions or stop <= start:
        return HEADER, []
    entries = list(CohortTask.objects.filter(cohort_id=run.protocol.cohort_id).order_by("position").values_list(
        "task_id", "task__session_id", "task__session__person_id", "task__session__study_id", "task__position"))
    person = cluster_labels(e[2] for e in entries)
    session = sequential_labels(e[1] for e in entries)
    study = cluster_labels(e[3] for e in entries)
    n = len(conditions)
    first, last = start // n, min(len(entries), -(-stop // n))
    page_tasks = entries[first:last]
    ids = [e[0] for e in page_tasks]
    table = _final_grades_of(run, ids)
    predictions = {
        (p["task_id"], p["condition"]): p
        for p in Prediction.objects.filter(run=run, label=FINAL, task_id__in=ids).values(
            "task_id", "condition", "status", "text", "evidence_chars", "budget")
    }
    rows = []
    for offset, (task_id, session_id, person_id, study_id, position) in enumerate(page_tasks):
        for condition in conditions:
            prediction = predictions.get((task_id, condition), {})
            text = prediction.get("text")
            grade = table.get(condition, {}).get(task_id)
            rows.append({
                "task": first + offset + 1,
                "person": person[person_id],
                "session": session[session_id],
                "study": study[study_id],
                "target": position + 1,
                "condition": condition,
                "status": prediction.get("status", "missing"),
                "grade": "" if grade is None else grade,
                "score": "" if grade is None else round(grade / 3, 6),
                "answer_words": "" if text is None else len(text.split()),
                "answer_chars": "" if text is None else len(text),
                "evidence_chars": prediction.get("evidence_chars", ""),
                "budget": prediction.get("budget") if prediction.get("budget") is not None else "",
            })
    skip = start - first * n
    return HEADER, rows[skip:skip + (stop - start)]


def _final_grades_of(run: Run, task_ids: list[int]) -> dict[str, dict[int, int | None]]:
    """`grades.final_grades(run)` for these tasks only (the same rule)."""
    grades = {
        (task_id, sha): score
        for task_id, sha, score in Grade.objects.filter(run=run, task_id__in=task_ids).values_list(
            "task_id", "answer_sha256", "score")
    }
    table: dict[str, dict[int, int | None]] = {key: {} for key in run.protocol.conditions}
    for condition, task_id, status, sha in Prediction.objects.filter(run=run, label=FINAL, task_id__in=task_ids) \
            .values_list("condition", "task_id", "status", "answer_sha256"):
        if status == Prediction.Status.INVALID_SELECTION:
            score = 0
        elif status in (Prediction.Status.OK, Prediction.Status.EMPTY):
            score = grades.get((task_id, sha))
        else:
            score = None
        table.setdefault(condition, {})[task_id] = score
    return table
