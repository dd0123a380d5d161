"""The SQL of handing a phase's slots out (`hand_out`): one conditional UPDATE … RETURNING."""
from __future__ import annotations

from datetime import datetime

from django.db import connection

from experiments.models import Slot


def mark_handed_out(run_id: int, phase: str, now: datetime, redispatch_before: datetime | None,
                    limit: int | None) -> tuple[int, ...]:
    """Mark the phase's pending slots not handed out yet (with `redispatch_before`: those handed out
    no later than it) handed out `now`, the first `limit` of them by id (None: all); their ids, sorted.

    The outer conditions are the inner ones again: a row another hand-out changed meanwhile is
    checked as that one left it, so each slot goes to one hand-out only."""
    # Index: slot_to_hand_out (run, phase, id) WHERE status = 'pending' AND dispatched_at IS NULL
    # reads a window of fresh slots in id order at its own cost; a redispatch reads slot_handed_out
    # (run, phase) WHERE status IN ('pending', 'in_flight') AND dispatched_at IS NOT NULL, which its
    # conditions imply.
    due, params = "dispatched_at IS NULL", []
    if redispatch_before is not None:
        due, params = "dispatched_at <= %s", [redispatch_before]
    where = f"run_id = %s AND phase = %s AND status = %s AND {due}"
    where_params = [run_id, phase, Slot.Status.PENDING, *params]
    table = Slot._meta.db_table
    if limit is None:
        sql, sql_params = f"UPDATE {table} SET dispatched_at = %s WHERE {where} RETURNING id", [now, *where_params]
    else:
        # The window is every slot due up to the limit-th one's id: one bound, computed once, that
        # the outer scan takes as an index condition. Written `id IN (SELECT … LIMIT)`, PostgreSQL
        # joined each due slot of the phase to the subquery run again (a nested loop semi join):
        # 77 ms of every 320-slot refill in the engine benchmark, and 58.8 s (now 0.2 s) for a
        # window of 4,096 among 64,000 slots due on tables without statistics.
        sql = (f"UPDATE {table} SET dispatched_at = %s WHERE {where} AND id <= "
               f"(SELECT max(id) FROM (SELECT id FROM {table} WHERE {where} ORDER BY id LIMIT %s) window_ids) "
               "RETURNING id")
        sql_params = [now, *where_params, *where_params, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, sql_params)
        return tuple(sorted(row[0] for row in cursor.fetchall()))
