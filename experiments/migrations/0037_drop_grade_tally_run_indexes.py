"""The run foreign keys' own single-column indexes grade(run) and runtally(run) are dropped: each
is the leading column of a composite index that serves the same look-ups, as 0034 found for the
slot, call and prediction tables.

- grade(run): the unique grade_once_per_answer (run, task, answer_sha256) serves every read of a
  run's grades (by run, or by run and task; the receipt's look-up of an answer's grade by all three)
  and the cascade of a run's deletion. The index was one more entry written at every judge answer
  (the receipt's grade upsert).
- runtally(run) (no constraint: `models.tally`): run_tally_run (run, folded) serves the run page's
  fold and read (`execution.run_counts_sql`), the only reader. The index was one more entry written
  at every delta row, about six per call (the reservation's and the receipt's slot and call deltas).

Only the indexes go, concurrently: the state's AlterField would drop and re-add grade's foreign key
constraint, which validates the whole table again under a lock."""
import django.db.models.deletion
from django.db import migrations, models

# (table, column, Django's name of the field's index: the same in every database)
_INDEXES = [
    ("experiments_grade", "run_id", "experiments_grade_run_id_ad147806"),
    ("experiments_runtally", "run_id", "experiments_runtally_run_id_1a0039fa"),
]
# For benchmarks/engine_statements.py, which alternates the indexes' presence (outside a transaction).
FORWARD = [f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"' for _, _, name in _INDEXES]
BACKWARD = [f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON "{table}" ("{column}")'
            for table, column, name in _INDEXES]


class Migration(migrations.Migration):

    atomic = False
    dependencies = [("experiments", "0036_drop_model_call_finished")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(forward, reverse_sql=backward)
                                 for forward, backward in zip(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AlterField(
                    model_name="grade", name="run",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="grades", to="experiments.run"),
                ),
                migrations.AlterField(
                    model_name="runtally", name="run",
                    field=models.ForeignKey(db_constraint=False, db_index=False,
                                            on_delete=django.db.models.deletion.DO_NOTHING,
                                            related_name="+", to="experiments.run"),
                ),
            ],
        ),
    ]
