"""The foreign keys' own single-column indexes slot(run), modelcall(run), modelcall(slot) and
prediction(run) are dropped: each is the leading column of a composite index that serves the same
look-ups and the cascade of a run's deletion (slot_key_unique_in_run and slot_progress; model_call_phase;
model_call_attempt_once; prediction_once and the explorer's indexes), and each was one more index
entry written at every insert and (never HOT) update on a call's path.

Only the indexes go: the state's AlterField would drop and re-add each foreign key constraint,
which validates the whole table again under a lock; the index is dropped concurrently instead."""
import django.db.models.deletion
from django.db import migrations, models

# (table, column, Django's name of the field's index: the same in every database)
_INDEXES = [
    ("experiments_modelcall", "run_id", "experiments_modelcall_run_id_37f2dfda"),
    ("experiments_modelcall", "slot_id", "experiments_modelcall_slot_id_4c8ce570"),
    ("experiments_prediction", "run_id", "experiments_prediction_run_id_d199b228"),
    ("experiments_slot", "run_id", "experiments_slot_run_id_015376f0"),
]


class Migration(migrations.Migration):

    atomic = False
    dependencies = [("experiments", "0033_prediction_run_page")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for table, column, name in _INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="modelcall", name="run",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="+", to="experiments.run"),
                ),
                migrations.AlterField(
                    model_name="modelcall", name="slot",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="calls", to="experiments.slot"),
                ),
                migrations.AlterField(
                    model_name="prediction", name="run",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="predictions", to="experiments.run"),
                ),
                migrations.AlterField(
                    model_name="slot", name="run",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="slots", to="experiments.run"),
                ),
            ],
        ),
    ]
