"""Search within a project: task questions, reference answers and predictions.

Full-text search (`explorer_sql`): `to_tsvector('english', text) @@ plainto_tsquery(...)`, the
same expression as the GIN indexes of migration 0006, so a search reads the index rather than the
table (and needs no `django.contrib.postgres` app). Matches are capped (`LIMIT`), so a common word costs no more than
a rare one; the few rows found are then ordered for display.
"""
from __future__ import annotations

from experiments.analysis.explorer_sql import search_prediction_ids, search_task_ids
from experiments.models import Prediction, Project, Task

RESULTS = 50


def search_tasks(project: Project, text: str, *, limit: int = RESULTS) -> list[dict]:
    """Tasks of `project` whose question or reference answer matches, with what matched."""
    ids = search_task_ids(project, text, limit)
    rows = (Task.objects.filter(pk__in=ids).select_related("session", "question_turn", "answer_turn")
            .order_by("session__external_id", "position", "pk")[:limit])
    words = text.lower().split()
    return [{"task": task, "session": task.session.external_id, "question": task.question_turn.text,
             "reference": task.answer_turn.text,
             "in_question": _mentions(task.question_turn.text, words),
             "in_reference": _mentions(task.answer_turn.text, words)} for task in rows]


def search_predictions(project: Project, text: str, *, limit: int = RESULTS) -> list[dict]:
    """Predictions of `project`'s runs whose text matches (run, condition, label, task)."""
    ids = search_prediction_ids(project, text, limit)
    rows = (Prediction.objects.filter(pk__in=ids).select_related("task__session").order_by("-run_id", "task__session__external_id",
                                                            "task__position", "condition", "label")[:limit])
    return [{"prediction": p, "session": p.task.session.external_id, "target": p.task.position + 1}
            for p in rows]


def _mentions(text: str, words: list[str]) -> bool:
    lowered = text.lower()
    return all(word in lowered for word in words)
