"""Prediction pages (participant text: owners and analysts): a run's tasks, and one task's answers beside the real one."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from experiments.access import TEXT_READERS, run_for
from experiments.analysis.grades import final_grades

from experiments.core.conditions import FINAL, get_condition
from experiments.data import cohort_tasks
from experiments.execution.policy import offline_roles
from experiments.models import CohortTask, Grade, Memory, ModelCall, Prediction, Run

TASKS_PER_PAGE = 25


@login_required
def prediction_list(request, slug, pk):
    """Template experiments/predictions/prediction_list.html: the run's tasks with each condition's grade."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    protocol = run.protocol
    page = Paginator(cohort_tasks(protocol.cohort), TASKS_PER_PAGE).get_page(request.GET.get("page"))
    grades = final_grades(run)
    rows = [
        {"task": task, "number": page.start_index() + i,
         "grades": [grades.get(key, {}).get(task.pk) for key in protocol.conditions]}
        for i, task in enumerate(page)
    ]
    return render(request, "experiments/predictions/prediction_list.html", {
        "membership": membership, "project": membership.project, "run": run, "protocol": protocol,
        "page": page, "rows": rows, "offline": offline_roles(protocol),
    })


@login_required
def prediction_detail(request, slug, pk, task_pk):
    """Template experiments/predictions/prediction_detail.html: one task, every condition side by side."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    protocol = run.protocol
    entry = get_object_or_404(
        CohortTask.objects.select_related("task__session", "task__question_turn", "task__answer_turn"),
        cohort=protocol.cohort, task_id=task_pk,
    )
    return render(request, "experiments/predictions/prediction_detail.html", {
        "membership": membership, "project": membership.project, "run": run, "protocol": protocol,
        "task": entry.task, "position": entry.position + 1,
        "columns": _condition_columns(run, entry.task), "offline": offline_roles(protocol),
    })


def _condition_columns(run: Run, task) -> list[dict]:
    """Per condition: the final answer, its candidates, evidence, grade, and what made them."""
    predictions = list(Prediction.objects.filter(run=run, task=task).select_related("slot"))
    grades = {g.answer_sha256: g for g in Grade.objects.filter(run=run, task=task).select_related("slot")}
    slot_ids = {p.slot_id for p in predictions if p.slot_id} | {g.slot_id for g in grades.values() if g.slot_id}
    last_call = {}
    for call in ModelCall.objects.filter(slot_id__in=slot_ids).order_by("slot_id", "attempt"):
        last_call[call.slot_id] = call
    memories = {
        (m.kind, m.words): {"memory": m, "call": last_call.get(m.slot_id)}
        for m in _with_last_calls(Memory.objects.filter(run=run, session_id=task.session_id).select_related("slot"),
                                  last_call)
    }
    by_condition: dict[str, dict[str, Prediction]] = {}
    for prediction in predictions:
        by_condition.setdefault(prediction.condition, {})[prediction.label] = prediction

    def answer(prediction):
        if prediction is None:
            return None
        grade = grades.get(prediction.answer_sha256) if prediction.answer_sha256 else None
        return {
            "prediction": prediction,
            "call": last_call.get(prediction.slot_id),
            "grade": grade,
            "judge_call": last_call.get(grade.slot_id) if grade and grade.slot_id else None,
        }

    columns = []
    for key in run.protocol.conditions:
        labels = by_condition.get(key, {})
        condition = get_condition(key)
        columns.append({
            "condition": key,
            "memory": memories.get((condition.memory_kind, condition.memory_words)) if condition.needs_memory else None,
            "final": answer(labels.get(FINAL)),
            "candidates": [answer(labels[label]) for label in sorted(labels) if label != FINAL],
        })
    return columns


def _with_last_calls(memories, last_call: dict) -> list:
    """The memories, with the last attempt of each memory's slot added to `last_call`."""
    memories = list(memories)
    for call in ModelCall.objects.filter(slot_id__in=[m.slot_id for m in memories]).order_by("slot_id", "attempt"):
        last_call[call.slot_id] = call
    return memories
