"""The SQL of the API's pages of a run's answers (`text.predictions`): one range of one index.

`WHERE run_id = %s AND id > %s ORDER BY id` lets PostgreSQL choose the primary key's scan from the
cursor, filtering on the run: cheap while the run's answers are most of the rows after the cursor,
seconds a page where another run's answers lie between (a run written after another: its first
page scanned all 1,428,600 answers of the first, 1.2-2.3 s, benchmarks/api_pages.py). The row
comparison below can only be a range of `prediction_run_page` (run_id, id), from (run, cursor) to the
run's end: 501 index entries a page wherever the cursor stands. (With `run_id = %s` beside it,
PostgreSQL starts that range at the run's first entry instead: a page at the millionth answer read
5,000 index pages, 70 ms.)"""
from __future__ import annotations

from django.db import connection

ANSWER_COLUMNS = ("id", "task_id", "condition", "label", "status", "text", "chosen_label", "copied_label",
                  "evidence_chars", "budget", "grade")


def run_answers_after(run_id: int, after: int, count: int) -> list[dict]:
    """The run's answers with an id above `after`, by id, at most `count`: dicts of ANSWER_COLUMNS
    (the grade is the stored `score`)."""
    # Index: prediction_run_page (run_id, id), the range from (run_id, after) to the run's last entry.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, task_id, condition, label, status, text, chosen_label, copied_label, evidence_chars, budget, "
            "score FROM experiments_prediction WHERE (run_id, id) > (%s, %s) AND run_id <= %s ORDER BY run_id, id "
            "LIMIT %s", [run_id, after, run_id, count])
        return [dict(zip(ANSWER_COLUMNS, row)) for row in cursor.fetchall()]
