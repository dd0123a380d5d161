"""The index model_call_finished (a call's finished_at alone) is dropped: no query reads it.

Every read of a call's finished_at also names the call's run (and phase), which lead
model_call_phase (run, phase, finished_at, ...): the run page's window and pace
(`progress`), the report audit's last receipt; or the call's primary key (`durable`'s check of a
receipt stored before a retry). The index was two more entries written on every call's path: at
the reservation's insert (a NULL) and at its receipt (never HOT: the receipt changes finished_at,
which model_call_phase keys). Dropped concurrently, as 0034 dropped the foreign keys' indexes, so
no writer waits for the drop.
"""
from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations

# For benchmarks/engine_statements.py, which alternates the index's presence (outside a transaction).
FORWARD = ['DROP INDEX CONCURRENTLY IF EXISTS "model_call_finished"']
BACKWARD = ['CREATE INDEX CONCURRENTLY IF NOT EXISTS "model_call_finished" ON "experiments_modelcall" ("finished_at")']


class Migration(migrations.Migration):

    atomic = False
    dependencies = [("experiments", "0035_tally_fewer_deltas")]

    operations = [RemoveIndexConcurrently(model_name="modelcall", name="model_call_finished")]
