"""The SQL of a generation answer's predictions (`outcomes`): one plain UPDATE on the path of every answer."""
from __future__ import annotations

from django.db import connection

from experiments.models import Prediction


def set_slot_answer(slot_id: int, values: list) -> None:
    """Set (status, text, answer sha256) on every prediction the generation slot feeds."""
    # Index: the slot foreign key's own index (Django's default for a ForeignKey) finds the slot's
    # predictions: a few per slot, however large the run.
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Prediction._meta.db_table} SET status = %s, text = %s, answer_sha256 = %s "
                       "WHERE slot_id = %s", [*values, slot_id])
