"""What the analysis starts from: each condition's grade per task (paper App. B.3). `dashboard` computes the statistics from it."""
from __future__ import annotations

from django.db.models import CharField, Case, OuterRef, PositiveSmallIntegerField, Q, Subquery, Value, When
from django.db.models.functions import Coalesce

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


def store_scores(run_id: int, *, task_id: int | None = None, answer_sha256: str | None = None,
                 status: str | None = None) -> int:
    """Write `Prediction.score` (the rule of `final_grades`, for every label) and `copied_label`
    for a run's predictions, or those of one task, of one answer text in it, or of one status;
    one UPDATE.
    Called wherever an answer or a grade is written (planning, re-grade copies); returns the
    number of rows written."""
    predictions = Prediction.objects.filter(run_id=run_id)
    if task_id is not None:
        predictions = predictions.filter(task_id=task_id)
    if answer_sha256 is not None:
        predictions = predictions.filter(answer_sha256=answer_sha256)
    if status is not None:
        predictions = predictions.filter(status=status)
    grade = Grade.objects.filter(run_id=OuterRef("run_id"), task_id=OuterRef("task_id"),
                                 answer_sha256=OuterRef("answer_sha256")).values("score")[:1]
    candidate = (Prediction.objects.filter(run_id=OuterRef("run_id"), task_id=OuterRef("task_id"),
                                           condition=OuterRef("condition"), answer_sha256=OuterRef("answer_sha256"))
                 .exclude(label=FINAL).order_by("label").values("label")[:1])
    return predictions.update(
        score=Case(
            When(status=Prediction.Status.INVALID_SELECTION, then=Value(0)),
            When(status__in=(Prediction.Status.OK, Prediction.Status.EMPTY), then=Subquery(grade)),
            default=None, output_field=PositiveSmallIntegerField()),
        copied_label=Case(
            When(Q(label=FINAL) & ~Q(answer_sha256=""), then=Coalesce(Subquery(candidate), Value(""))),
            default=Value(""), output_field=CharField()))
