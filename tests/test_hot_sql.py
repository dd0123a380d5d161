"""The receipt's statement numbered once and kept (`hot_sql.numbered`) is what psycopg sends for it.

psycopg converts `%s` placeholders to `$n` itself, but keeps the conversion only for statements of
at most 4,096 bytes and 50 parameters; the receipt's statement (`receipt_sql`) has more, so it is
numbered by `numbered` (kept) and sent through a RawCursor. What reaches the server must be the
same, byte for byte: the statement's text, the dumped parameters, their types and formats.
"""
from datetime import UTC, datetime

import pytest
from psycopg._queries import (
    MAX_CACHED_STATEMENT_PARAMS,
    PostgresQuery,
    PostgresRawQuery,
)
from psycopg.adapt import Transformer

from experiments.execution.hot_sql import numbered
from experiments.execution.reservation_sql import first_ctes

COLUMNS = [f"c{i}" for i in range(MAX_CACHED_STATEMENT_PARAMS + 7)]
# More parameters than psycopg keeps, a `%%`, a `%s` inside a literal (psycopg numbers it too),
# and the first reservation's CTEs as the receipt carries them.
CTES, CTE_PARAMS = first_ctes(7, "host:1:slot_0", 32.0, datetime(2026, 12, 6, 13, tzinfo=UTC))
SQL = ("WITH " + CTES + ", moved AS (UPDATE t SET " + ", ".join(f"{name} = %s" for name in COLUMNS)
       + " WHERE note LIKE 'x%%' AND id = %s AND label <> '%s' RETURNING id) SELECT (SELECT id FROM reserved)")


def parameters(seed: int) -> list:
    kinds = [seed, f"text {seed}", None, 1.5 * seed, datetime(2026, 12, 6, seed % 24, tzinfo=UTC), b"\x00raw"]
    return (list(CTE_PARAMS) + [kinds[i % len(kinds)] for i in range(len(COLUMNS))] + [seed, "it's"])


def sent(query_class, sql, params):
    query = query_class(Transformer())
    query.convert(sql, params)
    return query.query, list(query.params), query.types, list(query.formats)


def test_the_numbered_statement_sends_what_psycopg_would_send():
    assert len(parameters(1)) > MAX_CACHED_STATEMENT_PARAMS
    for seed in (1, 2, 3):
        assert sent(PostgresRawQuery, numbered(SQL), parameters(seed)) == sent(PostgresQuery, SQL, parameters(seed))


def test_numbered_keeps_each_statement_once():
    numbered.cache_clear()
    for _ in range(3):
        numbered(SQL)
    assert numbered.cache_info().misses == 1 and numbered.cache_info().hits == 2


@pytest.mark.parametrize("sql", ["SELECT %(name)s", "SELECT 5 %", "SELECT %b"])
def test_anything_but_positional_placeholders_is_refused(sql):
    with pytest.raises(ValueError):
        numbered(sql)
