"""What the analysis starts from: each condition's grade per task (paper App. B.3). `dashboard` computes the statistics from it."""
from __future__ import annotations

from experiments.models import Grade, Prediction, Run
from experiments.core.conditions import FINAL


def final_grades(run: Run) -> dict[str, dict[int, int | None]]:
    """condition → {task id → raw grade 0..3, or None when missing}.

    An invalid selection and an empty answer are operational zeros; a selection carries
    the grade of the answer it copied (same text, same grade within a task).
    """
    grades = {
        (task_id, sha): score
        for task_id, sha, score in Grade.objects.filter(run=run).values_list("task_id", "answer_sha256", "score")
    }
    table: dict[str, dict[int, int | None]] = {key: {} for key in run.protocol.conditions}
    for condition, task_id, status, sha in Prediction.objects.filter(run=run, label=FINAL).values_list(
        "condition", "task_id", "status", "answer_sha256"
    ):
        if status == Prediction.Status.INVALID_SELECTION:
            score = 0
        elif status in (Prediction.Status.OK, Prediction.Status.EMPTY):
            score = grades.get((task_id, sha))
        else:
            score = None
        table.setdefault(condition, {})[task_id] = score
    return table
