"""The SQL of the dashboard's cost per condition (`analysis.dashboard._cost`): one grouped statement."""
from __future__ import annotations

from django.db import connection

from experiments.models import ModelCall, Prediction

# The columns of a condition's row, in the order of the dashboard's per-phase rows (`_cost`'s aggregates).
COST_COLUMNS = ("attempts", "recoveries", "input_tokens", "output_tokens", "reasoning_tokens", "elapsed_s",
                "unreported")


def cost_per_condition(run_id: int) -> dict[str, dict]:
    """Per condition of the run's predictions: the calls of the slots its answers came from, each call
    counted once per condition however many of its answers share the slot (a shared generation counts
    for every condition it served), and those slots (`slots`). A condition whose answers have no slot
    is absent; a slot without calls counts with no attempt. Token and time sums are None without calls."""
    sql = (
        "SELECT used.condition, count(DISTINCT used.slot_id), count(c.id), "
        "count(c.id) FILTER (WHERE c.basis = %s), sum(c.input_tokens), sum(c.output_tokens), "
        "sum(c.reasoning_tokens), sum(c.elapsed_s), count(c.id) FILTER (WHERE c.total_tokens IS NULL) "
        f"FROM (SELECT DISTINCT condition, slot_id FROM {Prediction._meta.db_table} "
        "      WHERE run_id = %s AND slot_id IS NOT NULL) used "
        f"LEFT JOIN {ModelCall._meta.db_table} c ON c.slot_id = used.slot_id "
        "GROUP BY used.condition")
    # Index: the run's predictions by prediction_run_page (run, id); each slot's calls by the unique
    # (slot, attempt) constraint (model_call_attempt_once).
    with connection.cursor() as cursor:
        cursor.execute(sql, [ModelCall.Basis.RECOVERY, run_id])
        rows = cursor.fetchall()
    return {condition: {"slots": slots, **dict(zip(COST_COLUMNS, sums))} for condition, slots, *sums in rows}
