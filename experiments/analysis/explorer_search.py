"""Search within a project: task questions, reference answers and predictions.

Full-text search: `to_tsvector('english', text) @@ plainto_tsquery(...)`, the same expression as
the GIN indexes of migration 0006, so a search reads the index rather than the table (and needs no
`django.contrib.postgres` app). Matches are capped (`LIMIT`), so a common word costs no more than
a rare one; the few rows found are then ordered for display.
"""
from __future__ import annotations

from django.db import connection

from experiments.models import Prediction, Project, Run, Session, Task, Turn

RESULTS = 50
_TASK, _TURN, _SESSION = Task._meta.db_table, Turn._meta.db_table, Session._meta.db_table
_P, _RUN = Prediction._meta.db_table, Run._meta.db_table
_MATCH = "to_tsvector('english'::regconfig, {column}) @@ plainto_tsquery('english'::regconfig, %s)"


def search_tasks(project: Project, text: str, *, limit: int = RESULTS) -> list[dict]:
    """Tasks of `project` whose question or reference answer matches, with what matched."""
    match = _MATCH.format(column="tu.text")
    turns = (f"SELECT tu.id FROM {_TURN} tu WHERE {match} AND tu.session_id IN "
             f"(SELECT id FROM {_SESSION} WHERE project_id = %s)")
    with connection.cursor() as cursor:
        cursor.execute(
            f"(SELECT t.id FROM {_TASK} t WHERE t.question_turn_id IN ({turns}) LIMIT %s) UNION "
            f"(SELECT t.id FROM {_TASK} t WHERE t.answer_turn_id IN ({turns}) LIMIT %s)",
            [text, project.pk, limit, text, project.pk, limit])
        ids = [row[0] for row in cursor.fetchall()]
    rows = (Task.objects.filter(pk__in=ids).select_related("session", "question_turn", "answer_turn")
            .order_by("session__external_id", "position", "pk")[:limit])
    words = text.lower().split()
    return [{"task": task, "session": task.session.external_id, "question": task.question_turn.text,
             "reference": task.answer_turn.text,
             "in_question": _mentions(task.question_turn.text, words),
             "in_reference": _mentions(task.answer_turn.text, words)} for task in rows]


def search_predictions(project: Project, text: str, *, limit: int = RESULTS) -> list[dict]:
    """Predictions of `project`'s runs whose text matches (run, condition, label, task)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT p.id FROM {_P} p WHERE {_MATCH.format(column='p.text')} AND p.run_id IN "
            f"(SELECT r.id FROM {_RUN} r JOIN experiments_protocol pr ON pr.id = r.protocol_id "
            f"WHERE pr.project_id = %s) LIMIT %s", [text, project.pk, limit])
        ids = [row[0] for row in cursor.fetchall()]
    rows = (Prediction.objects.filter(pk__in=ids).select_related("task__session").order_by("-run_id", "task__session__external_id",
                                                            "task__position", "condition", "label")[:limit])
    return [{"prediction": p, "session": p.task.session.external_id, "target": p.task.position + 1}
            for p in rows]


def _mentions(text: str, words: list[str]) -> bool:
    lowered = text.lower()
    return all(word in lowered for word in words)
