"""The receipt of an attempt as one statement (the journal's path of nearly every answer).

Receipt, slot and the slot's result in one statement, its own transaction; and, when a slot
thread of the same process waits for the in-flight place this answer frees, that thread's first
attempt reserved in the same statement (`reservation.NextReservation`): one commit, so one WAL
flush, for both. Durability is unchanged: the receipt is durable no later than the reservation,
which is durable before its thread sends; the thread is woken only after the commit.
"""
from __future__ import annotations

import logging

from django.db import DatabaseError, connection

from experiments.execution.hot_sql import numbered, raw_hot_cursor
from experiments.execution.reservation import NextReservation, first_reservation_ctes
from experiments.models import ModelCall, Slot

logger = logging.getLogger(__name__)

_RECORD_SQL = """
WITH attempt AS (
    UPDATE {call} SET {receipt}
    WHERE id = %s AND outcome = ''
    RETURNING slot_id
), moved AS (
    UPDATE {slot} SET status = %s, status_note = %s, retry_at = %s, updated_at = %s
    WHERE id = %s AND status = %s AND EXISTS (SELECT 1 FROM attempt)
    RETURNING id
){result}
SELECT (SELECT count(*) FROM attempt), (SELECT count(*) FROM moved), {next_call}
"""
_RECEIPT_FIELDS = ("finished_at", "outcome", "http_status", "response_id", "model_version", "finish_reason", "text",
                   "input_tokens", "output_tokens", "reasoning_tokens", "total_tokens", "elapsed_s", "error",
                   "raw_body")


def record_receipt(call_id, receipt: dict, slot_id, status, note, retry_at, now, result=None,
                   next_ticket: NextReservation | None = None) -> bool:
    """The attempt's receipt, if the attempt is still open, and the slot's new state, if it is
    still in flight: True when both happened (one statement). `result`: statements (sql, params)
    storing the slot's result, run in the same statement only if the slot moved (their SQL may
    read the `moved` CTE); the i-th is the CTE `result{i}`, which a later one may read so that it
    runs after it (PostgreSQL runs unread CTEs in no promised order). `next_ticket`: a waiting thread's first
    attempt, reserved in the same statement (one commit, one WAL flush, for both: the receipt
    is durable no later than the reservation, and the reservation before its thread sends);
    should that part fail, the receipt is stored alone and the ticket's thread reserves itself."""
    ctes, extra = ("", [])
    if next_ticket is not None and not connection.in_atomic_block:
        ctes, extra = first_reservation_ctes(next_ticket, now)
    sql = _RECORD_SQL.format(call=ModelCall._meta.db_table, slot=Slot._meta.db_table,
                             receipt=", ".join(f"{name} = %s" for name in _RECEIPT_FIELDS),
                             result="".join(f", result{i} AS ({sql})" for i, (sql, _) in enumerate(result or ()))
                             + (", " + ctes if ctes else ""),
                             next_call="(SELECT id FROM reserved)" if ctes else "NULL")
    params = [receipt[name] for name in _RECEIPT_FIELDS]
    params += [call_id, status, note, retry_at, now, slot_id, Slot.Status.IN_FLIGHT]
    params += [value for _, values in (result or ()) for value in values] + extra
    try:
        with raw_hot_cursor() as cursor:  # its conversion kept, whatever its number of parameters
            cursor.execute(numbered(sql), params, prepare=True)
            recorded, moved, next_call = cursor.fetchone()
    except DatabaseError:
        if not ctes:
            raise
        logger.exception("a receipt with another slot's reservation failed; storing the receipt alone")
        return record_receipt(call_id, receipt, slot_id, status, note, retry_at, now, result=result)
    if ctes:
        next_ticket.call_id = next_call
    return bool(recorded and moved)
