"""The SQL that measures a run's final answers in the database, so no answer text travels: words
(as `len(text.split())` counts them), characters, and the evidence's characters.
"""
from __future__ import annotations

from django.db import connection

from experiments.models import Prediction

# Python's str.split() separators (str.isspace), as one regular-expression class for PostgreSQL.
PYTHON_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


def answer_length_counts(run_id: int, label: str) -> list[tuple[str, int, int, int]]:
    """(condition, words, characters, answers): one row per distinct (condition, words, characters)
    of the run's `label` answers with a text (the dashboard's answer lengths)."""
    # Index: prediction_final (run, label, condition).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT condition, regexp_count(text, %s), char_length(text), COUNT(*) "
            f"FROM {Prediction._meta.db_table} WHERE run_id = %s AND label = %s AND text IS NOT NULL "
            "GROUP BY 1, 2, 3", [f"[^{PYTHON_WHITESPACE}]+", run_id, label])
        return cursor.fetchall()


def answer_measure_rows(run_id: int, label: str, conditions) -> list[tuple[str, int, int, int]]:
    """(condition, task id, words, evidence characters) of the run's `label` answers with a text under
    `conditions` (the robustness tables' gaps)."""
    # Index: prediction_final (run, label, condition).
    # Words as `len(text.split())` counts them: runs of characters outside Python's whitespace.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT condition, task_id, regexp_count(text, %s), evidence_chars "
            f"FROM {Prediction._meta.db_table} WHERE run_id = %s AND label = %s AND text IS NOT NULL "
            f"AND condition IN ({', '.join(['%s'] * len(conditions))})",
            [f"[^{PYTHON_WHITESPACE}]+", run_id, label, *conditions])
        return cursor.fetchall()
