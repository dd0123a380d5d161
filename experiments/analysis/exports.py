"""The numeric package of a run (paper, "Ethical considerations"): task-level scores with
remapped person and session labels, conditions, word and character counts — no text."""
from __future__ import annotations

from experiments.analysis.grades import final_grades
from experiments.models import Prediction, Run
from experiments.core.conditions import FINAL
from experiments.data import cohort_tasks

HEADER = ["task", "person", "session", "study", "target", "condition", "status", "grade", "score",
          "answer_words", "answer_chars", "evidence_chars", "budget"]


def sequential_labels(keys) -> dict:
    """Opaque labels → 1, 2, 3 … in order of first appearance (order-preserving)."""
    labels: dict = {}
    for key in keys:
        labels.setdefault(key, len(labels) + 1)
    return labels


def scores_package_rows(run: Run) -> tuple[list[str], list[dict]]:
    tasks = cohort_tasks(run.protocol.cohort)
    person = sequential_labels(t.session.person_id for t in tasks)
    session = sequential_labels(t.session_id for t in tasks)
    study = sequential_labels(t.session.study_id for t in tasks)
    task_number = {t.pk: i + 1 for i, t in enumerate(tasks)}
    table = final_grades(run)
    predictions = {
        (p["task_id"], p["condition"]): p
        for p in Prediction.objects.filter(run=run, label=FINAL).values(
            "task_id", "condition", "status", "text", "evidence_chars", "budget")
    }
    rows = []
    for task in tasks:
        for condition in run.protocol.conditions:
            prediction = predictions.get((task.pk, condition), {})
            text = prediction.get("text")
            grade = table.get(condition, {}).get(task.pk)
            rows.append({
                "task": task_number[task.pk],
                "person": person[task.session.person_id],
                "session": session[task.session_id],
                "study": study[task.session.study_id],
                "target": task.position + 1,
                "condition": condition,
                "status": prediction.get("status", "missing"),
                "grade": "" if grade is None else grade,
                "score": "" if grade is None else round(grade / 3, 6),
                "answer_words": "" if text is None else len(text.split()),
                "answer_chars": "" if text is None else len(text),
                "evidence_chars": prediction.get("evidence_chars", ""),
                "budget": prediction.get("budget") if prediction.get("budget") is not None else "",
            })
    return HEADER, rows
