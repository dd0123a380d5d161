"""Plain statements on the engine's hot paths, bound and prepared on the PostgreSQL server.

Django's psycopg cursor binds parameters on the client (it quotes every value into the SQL
text): cheap for a statement now and then, costly for the statements on the path of every
request and for the thousands of rows a phase's planning inserts between two phases.
"""
from __future__ import annotations

import contextlib
import re
import weakref
from functools import lru_cache

import psycopg
from django.conf import settings
from django.db import connection

# One cursor per database connection, kept: a new psycopg cursor copies the connection's
# adapters, a cost on every statement of every request.
_CURSORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_RAW_CURSORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Django turns prepared statements off on its connections (prepare_threshold None, for
# connection poolers), and psycopg then ignores `prepare=True`: each of these statements was
# parsed and planned anew at every request, half of the database's time per call. They are
# prepared unless settings.OWNWORDS_DB_PREPARE is off (e.g. behind a transaction-pooling pgbouncer
# older than 1.21); the ORM's own statements are never prepared (the threshold is out of reach).
_ONLY_WHEN_ASKED = 2**31 - 1


@contextlib.contextmanager
def hot_cursor():
    """A cursor for the statements on the path of every request. It binds
    parameters on the server and `execute(..., prepare=True)` keeps each statement's plan on the
    connection: parsing and planning these CTEs cost the server more than running them. Errors
    come out as Django's (IntegrityError, …), as from `connection.cursor()`."""
    connection.ensure_connection()
    raw = connection.connection
    cursor = _CURSORS.get(raw)
    if cursor is None or cursor.closed:
        if settings.OWNWORDS_DB_PREPARE and raw.prepare_threshold is None:
            raw.prepare_threshold = _ONLY_WHEN_ASKED
        cursor = _CURSORS[raw] = psycopg.Cursor(raw)
    with connection.wrap_database_errors:
        yield cursor


# psycopg keeps its conversion of a statement's `%s` placeholders to PostgreSQL's `$1`, `$2`, … only
# for statements of at most 50 parameters and 4,096 bytes (meant for the ORM's statements of
# varying shape); the receipt's statement has 49-63, so a judge's receipt, and any receipt that
# carries the next slot's reservation, split and converted its SQL again: profiled, a seventh of a
# busy worker's slot threads' GIL time. Its shapes are few (one per phase's
# result, with or without a reservation): `numbered` keeps their conversions, and `raw_hot_cursor`
# (psycopg's RawCursor: `$n` placeholders, sent as written) runs them.
_PERCENT = re.compile(r"%(.)?", re.DOTALL)


@lru_cache(maxsize=64)
def numbered(sql: str) -> str:
    """`sql` as psycopg sends it: each `%s` numbered `$1`, `$2`, … in order, each `%%` a `%`."""
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        if match.group(1) != "s":
            raise ValueError(f"only %s placeholders and %% are allowed here, not {match.group(0)!r}")
        count += 1
        return f"${count}"

    return _PERCENT.sub(replace, sql)


@contextlib.contextmanager
def raw_hot_cursor():
    """`hot_cursor`'s RawCursor: for statements written with `$n` placeholders (`numbered`)."""
    with hot_cursor():  # the connection, prepared as for hot_cursor, and Django's errors
        raw = connection.connection
        cursor = _RAW_CURSORS.get(raw)
        if cursor is None or cursor.closed:
            cursor = _RAW_CURSORS[raw] = psycopg.RawCursor(raw)
        yield cursor
