"""The SQL of the run page's counts (`run_counts`): one statement that folds a run's tally deltas and reads its totals."""
from __future__ import annotations

from django.db import connection

from experiments.models import RunTally

# The deltas are moved into the folded rows (their sums added on conflict); the outer SELECT reads
# the snapshot taken before either change, in which folded rows and deltas together are the totals.
# Index: run_tally_run (run, folded) finds the run's deltas and rows; the partial unique
# run_tally_folded_once (run, phase, status) WHERE folded is the ON CONFLICT target.
_FOLD_AND_READ = """
WITH moved AS (
    DELETE FROM {tally} WHERE run_id = %s AND NOT folded
    RETURNING phase, status, {summed}
), folded AS (
    INSERT INTO {tally} (run_id, phase, status, folded, {summed})
    SELECT %s, phase, status, true, {sums} FROM moved GROUP BY phase, status
    ON CONFLICT (run_id, phase, status) WHERE folded DO UPDATE SET {added}
)
SELECT phase, status, {sums} FROM {tally} WHERE run_id = %s GROUP BY phase, status
"""


def fold_and_read(run_id: int, summed: tuple[str, ...]) -> list[tuple]:
    """(phase, status, *sums of `summed`) per phase and status of the run, its deltas folded first."""
    sql = _FOLD_AND_READ.format(
        tally=RunTally._meta.db_table, summed=", ".join(summed), sums=", ".join(f"SUM({f})" for f in summed),
        added=", ".join(f"{f} = {RunTally._meta.db_table}.{f} + EXCLUDED.{f}" for f in summed))
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, run_id, run_id])
        return cursor.fetchall()
