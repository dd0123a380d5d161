"""The planner's statistics of the tables a phase's planning fills, gathered when missing or outgrown.

PostgreSQL chooses each statement's indexes from its tables' statistics, which autovacuum gathers
some time after a table changes, and never where it is turned off (this machine's server). A
table planned into in bulk has none at first: every estimate is then one row, the indexes of a
statement tie, and the engine's receipts took ones that walk a whole run for each answer (a
generation receipt's candidate lookup read 120-140 buffers instead of 64 in the engine benchmark,
growing with the run: tests/test_receipt_lookups.py). Prepared statements keep the plan they were
first given until the statistics change.
"""
from __future__ import annotations

from django.db import connection

from experiments.models import Prediction, Slot

PLANNED_TABLES = (Slot._meta.db_table, Prediction._meta.db_table)
# Gathered again once a table outgrew what its statistics describe by half (autovacuum's own
# rule is a tenth of its rows, checked each minute): a phase planned in parts, each as large as
# all before it, gathers them a few times, each a sample of at most 30,000 rows.
GROWTH = 1.5


def refresh_planned_statistics() -> list[str]:
    """ANALYZE the planned tables that were never analyzed or grew by half since; their names."""
    with connection.cursor() as cursor:
        # Index: none; one catalog row per table.
        cursor.execute("SELECT relname FROM pg_class WHERE oid = ANY(CAST(%s AS regclass[])) AND "
                       "(reltuples < 0 OR pg_relation_size(oid) > (relpages * %s + 16) * "
                       "current_setting('block_size')::bigint)", [list(PLANNED_TABLES), GROWTH])
        outgrown = sorted(name for (name,) in cursor.fetchall())
        for name in outgrown:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(name)}")
    return outgrown
