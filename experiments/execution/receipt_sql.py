"""The receipt of an attempt as one statement on PostgreSQL (the journal's path of nearly every answer).

Receipt, slot and the slot's result in one statement, its own transaction; and, when slot
threads of the same process wait for in-flight places, their first attempts reserved in the same
statement (`reservation.NextReservation`): that of the thread this answer's place goes to, when
it has none yet (it is woken only after the commit), and that of the next one in line, ahead of
its place. One commit, so one WAL flush, for all. Durability is unchanged: the receipt is
durable no later than the reservations, and each reservation before its thread sends.
"""
from __future__ import annotations

import logging

from django.db import DatabaseError, connection

from experiments.execution.reservation import NextReservation, first_reservation_ctes, hot_cursor
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
SELECT (SELECT count(*) FROM attempt), (SELECT count(*) FROM moved){next_calls}
"""
_RECEIPT_FIELDS = ("finished_at", "outcome", "http_status", "response_id", "model_version", "finish_reason", "text",
                   "input_tokens", "output_tokens", "reasoning_tokens", "total_tokens", "elapsed_s", "error",
                   "raw_body")


def record_receipt(call_id, receipt: dict, slot_id, status, note, retry_at, now, result=None,
                   next_tickets: list[tuple[NextReservation, bool]] = ()) -> bool:
    """The attempt's receipt, if the attempt is still open, and the slot's new state, if it is
    still in flight: True when both happened (one statement on PostgreSQL). `result`:
    statements (sql, params) storing the slot's result, run in the same statement only if the
    slot moved (their SQL may read the `moved` CTE). `next_tickets`: waiting threads' first
    attempts (ticket, reserved ahead of its place?), reserved in the same statement (one commit,
    one WAL flush, for all: the receipt is durable no later than the reservations, and each
    reservation before its thread sends); should that part fail, the receipt is stored alone
    and the tickets' threads reserve themselves."""
    if connection.vendor == "postgresql":
        ctes, extra = [], []
        for index, (ticket, ahead) in enumerate(next_tickets if not connection.in_atomic_block else ()):
            ticket.ahead = ahead
            sql, params = first_reservation_ctes(ticket, now, suffix=str(index))
            ctes.append(sql)
            extra += params
        sql = _RECORD_SQL.format(call=ModelCall._meta.db_table, slot=Slot._meta.db_table,
                                 receipt=", ".join(f"{name} = %s" for name in _RECEIPT_FIELDS),
                                 result="".join(f", result{i} AS ({sql})" for i, (sql, _) in enumerate(result or ()))
                                 + "".join(", " + cte for cte in ctes),
                                 next_calls="".join(f", (SELECT id FROM reserved{i})" for i in range(len(ctes))))
        params = [receipt[name] for name in _RECEIPT_FIELDS]
        params += [call_id, status, note, retry_at, now, slot_id, Slot.Status.IN_FLIGHT]
        params += [value for _, values in (result or ()) for value in values] + extra
        try:
            with hot_cursor() as cursor:
                cursor.execute(sql, params, prepare=True)
                recorded, moved, *next_calls = cursor.fetchone()
        except DatabaseError:
            if not ctes:
                raise
            logger.exception("a receipt with other slots' reservations failed; storing the receipt alone")
            return record_receipt(call_id, receipt, slot_id, status, note, retry_at, now, result=result)
        for (ticket, _), next_call in zip(next_tickets, next_calls):
            ticket.call_id = next_call
        return bool(recorded and moved)
    return bool(ModelCall.objects.filter(pk=call_id, outcome="").update(**receipt)
                and Slot.objects.filter(pk=slot_id, status=Slot.Status.IN_FLIGHT)
                .update(status=status, status_note=note, retry_at=retry_at, updated_at=now))
