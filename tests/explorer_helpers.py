"""Hand-made grades for the explorer and task page tests: every final answer of a finished run
rewritten to a known text and grade, and fusion and selection pools added by hand."""
from __future__ import annotations

from experiments.analysis.grades import store_scores
from experiments.core.conditions import FINAL
from experiments.core.canonical import sha256_text
from experiments.models import CohortTask, Grade, Prediction, Protocol
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY

FUSION = "memory(concrete,100w)+fusion(3)"
SELECTION = "memory(concrete,100w)+selection(3)"


def cohort_task_ids(run) -> list[int]:
    return list(CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")
                .values_list("task_id", flat=True))


def hand_scores(i: int) -> dict:
    """Task i (cohort order): memory i % 4, OwnWords 3 − i % 4, question-only 0 (missing at i = 5)."""
    return {MEMORY: i % 4, OWNWORDS: 3 - i % 4, QUESTION_ONLY: None if i == 5 else 0}


def set_answer(run, task_id, condition, label, text, score):
    """One answer with a known text and (when `score` is not None) a judge grade."""
    status = Prediction.Status.MISSING if text is None else Prediction.Status.OK
    sha = sha256_text(text) if text is not None else ""
    Prediction.objects.update_or_create(run=run, task_id=task_id, condition=condition, label=label,
                                        defaults={"status": status, "text": text, "answer_sha256": sha})
    if text is not None and score is not None:
        Grade.objects.update_or_create(run=run, task_id=task_id, answer_sha256=sha,
                                       defaults={"status": Grade.Status.OK, "score": score,
                                                 "rationale": f"hand grade {score}"})
    store_scores(run.pk, task_id=task_id)  # as the engine does after writing an answer or a grade


def grade_by_hand(run) -> list[int]:
    """Rewrite the run's final answers to hand_scores; returns the task ids in cohort order."""
    ids = cohort_task_ids(run)
    for i, task_id in enumerate(ids):
        for condition, score in hand_scores(i).items():
            text = None if score is None else f"{condition} answer for task {i}"
            set_answer(run, task_id, condition, FINAL, text, score)
    return ids


def add_pools(run, ids) -> None:
    """Fusion and selection conditions on the first two tasks: task 0's fusion copies b1 and its
    selection chose b2; task 1's fusion writes a new answer and its selection chose b0."""
    Protocol.objects.filter(pk=run.protocol_id).update(conditions=[*run.protocol.conditions, FUSION, SELECTION])
    run.protocol.refresh_from_db()
    for i, task_id in enumerate(ids[:2]):
        for condition in (FUSION, SELECTION):
            for b in range(3):
                set_answer(run, task_id, condition, f"b{b}", f"candidate b{b} of task {i}", b)
        set_answer(run, task_id, FUSION, FINAL, "candidate b1 of task 0" if i == 0 else "a fused answer", 1 if i == 0 else 2)
        chosen = "b2" if i == 0 else "b0"
        set_answer(run, task_id, SELECTION, FINAL, f"candidate {chosen} of task {i}", int(chosen[1]))
        Prediction.objects.filter(run=run, task_id=task_id, condition=SELECTION, label=FINAL).update(chosen_label=chosen)
