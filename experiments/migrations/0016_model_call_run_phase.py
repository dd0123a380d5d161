"""The run page at a million slots.

`ModelCall.run` and `ModelCall.phase`: each attempt carries its slot's run and phase, so the
calls of a phase in a recent window come from the (run, phase, finished_at) index instead of
joining every call of the run to its slot. The columns are added nullable, filled from the slots
in one statement, then made required. A slot's run and phase never change, so the copies never
go stale; `execution.reservation` writes them with every new attempt.

`RunTally` (see `experiments.models.tally`): statement triggers on the slot and call tables append
the changes of every statement, whoever makes it, and the tallies start from the rows as they are.
"""
from django.db import migrations, models
import django.db.models.deletion

# One join (a correlated subquery per row would probe the slots' index 2× per call).
BACKFILL = ("UPDATE experiments_modelcall c SET run_id = s.run_id, phase = s.phase "
            "FROM experiments_slot s WHERE s.id = c.slot_id")


def backfill(apps, schema_editor):
    schema_editor.execute(BACKFILL)


TALLY_COLUMNS = ("run_id, phase, status, folded, slots, attempts, recoveries, unreported, input_tokens, input_known, "
                 "output_tokens, output_known, reasoning_tokens, reasoning_known")
# A call's counted quantities, signed (+1 for a row as it is now, -1 as it was), of the columns
# prefixed by {p} ("" for a table's rows, "NEW." or "OLD." in a row trigger).
CALL_TERMS = ("{s}, {s} * ({p}basis = 'recovery')::int, {s} * ({p}finished_at IS NOT NULL AND {p}total_tokens IS NULL)::int, "
              "{s} * COALESCE({p}input_tokens, 0), {s} * ({p}input_tokens IS NOT NULL)::int, "
              "{s} * COALESCE({p}output_tokens, 0), {s} * ({p}output_tokens IS NOT NULL)::int, "
              "{s} * COALESCE({p}reasoning_tokens, 0), {s} * ({p}reasoning_tokens IS NOT NULL)::int")
CALL_SUMS = "SUM(a), SUM(r), SUM(u), SUM(i), SUM(ik), SUM(o), SUM(ok), SUM(g), SUM(gk)"
CALL_NAMES = "a, r, u, i, ik, o, ok, g, gk"
SLOT_TERMS = "{s}, 0, 0, 0, 0, 0, 0, 0, 0, 0"

# Inserted or deleted rows (planning stores a phase's slots in bulk): a statement trigger appends one
# delta row per run, phase (and status) of the statement's rows, +1 each inserted, -1 each deleted.
BULK = {
    "experiments_slot": ("SELECT run_id, phase, status, false, {sign} * COUNT(*), 0, 0, 0, 0, 0, 0, 0, 0, 0 "
                         "FROM {rows} GROUP BY run_id, phase, status"),
    "experiments_modelcall": (f"SELECT run_id, phase, '', false, 0, {CALL_SUMS} FROM (SELECT run_id, phase, "
                              f"{{terms}} FROM {{rows}}) changed (run_id, phase, {CALL_NAMES}) GROUP BY run_id, phase"),
}
# Updated rows (the engine moves one slot or one call at a time): a row trigger, only when a counted
# column changed (the WHEN is checked before any function is called: a slot's `dispatched_at` or a
# call's `raw_body` cost nothing), appends the row as it was (-1) and as it is (+1).
COUNTED = {"experiments_slot": ("run_id", "phase", "status"),
           "experiments_modelcall": ("run_id", "phase", "basis", "finished_at", "total_tokens", "input_tokens",
                                     "output_tokens", "reasoning_tokens")}
ROW = {"experiments_slot": ("{p}run_id, {p}phase, {p}status, false, " + SLOT_TERMS),
       "experiments_modelcall": ("{p}run_id, {p}phase, '', false, 0, " + CALL_TERMS)}


def _function(name: str, body: str) -> str:
    return f"""
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO experiments_runtally ({TALLY_COLUMNS}) {body};
    RETURN NULL;
END $$;"""


TRIGGERS = ""
for table, select in BULK.items():
    for event, sign, rows in (("insert", 1, "new_rows"), ("delete", -1, "old_rows")):
        body = select.format(sign=sign, rows=rows, terms=CALL_TERMS.format(s=sign, p=""))
        TRIGGERS += _function(f"{table}_tally_{event}", body) + f"""
CREATE TRIGGER {table}_tally_{event} AFTER {event.upper()} ON {table}
    REFERENCING {"NEW" if event == "insert" else "OLD"} TABLE AS {rows}
    FOR EACH STATEMENT EXECUTE FUNCTION {table}_tally_{event}();
"""
    columns = COUNTED[table]
    changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in columns)
    values = f"VALUES ({ROW[table].format(p='OLD.', s=-1)}), ({ROW[table].format(p='NEW.', s=1)})"
    TRIGGERS += _function(f"{table}_tally_update", values) + f"""
CREATE TRIGGER {table}_tally_update AFTER UPDATE OF {", ".join(columns)} ON {table}
    FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION {table}_tally_update();
"""

# The tallies of the rows already there, folded (in the migration's transaction, with the triggers).
START = f"""
INSERT INTO experiments_runtally ({TALLY_COLUMNS})
SELECT run_id, phase, status, true, COUNT(*), 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM experiments_slot GROUP BY run_id, phase, status;
INSERT INTO experiments_runtally ({TALLY_COLUMNS})
SELECT run_id, phase, '', true, 0, {CALL_SUMS} FROM (SELECT run_id, phase, {CALL_TERMS.format(s=1, p="")}
    FROM experiments_modelcall)
    calls ({"run_id, phase, " + CALL_NAMES}) GROUP BY run_id, phase;
"""

DROP = "".join(f"DROP TRIGGER IF EXISTS {table}_tally_{event} ON {table}; DROP FUNCTION IF EXISTS {table}_tally_{event}();"
               for table in BULK for event in ("insert", "update", "delete"))


def tally(apps, schema_editor):
    schema_editor.execute(START + TRIGGERS)


def untally(apps, schema_editor):
    schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("experiments", "0015_audit_member_changes"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelcall",
            name="run",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                    to="experiments.run"),
        ),
        migrations.AddField(
            model_name="modelcall",
            name="phase",
            field=models.CharField(choices=[("memories", "Memories"), ("generation", "Base generation"),
                                            ("decisions", "Decisions"), ("judging", "Judging"),
                                            ("analysis", "Analysis"), ("done", "Done")],
                                   max_length=16, null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="modelcall",
            name="run",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                    to="experiments.run"),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="phase",
            field=models.CharField(choices=[("memories", "Memories"), ("generation", "Base generation"),
                                            ("decisions", "Decisions"), ("judging", "Judging"),
                                            ("analysis", "Analysis"), ("done", "Done")],
                                   max_length=16),
        ),
        migrations.AddIndex(
            model_name="modelcall",
            index=models.Index(fields=["run", "phase", "finished_at", "slot", "reserved_at"], name="model_call_phase"),
        ),
        migrations.CreateModel(
            name="RunTally",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("phase", models.CharField(choices=[("memories", "Memories"), ("generation", "Base generation"),
                                                    ("decisions", "Decisions"), ("judging", "Judging"),
                                                    ("analysis", "Analysis"), ("done", "Done")], max_length=16)),
                ("status", models.CharField(blank=True, help_text="a slot status; empty on a row of calls",
                                            max_length=16)),
                ("folded", models.BooleanField(default=False,
                                               help_text="a run's total so far (one per run, phase and status)")),
                ("slots", models.BigIntegerField(default=0)),
                ("attempts", models.BigIntegerField(default=0)),
                ("recoveries", models.BigIntegerField(default=0)),
                ("unreported", models.BigIntegerField(default=0, help_text="finished calls that reported no usage")),
                ("input_tokens", models.BigIntegerField(default=0)),
                ("input_known", models.BigIntegerField(default=0)),
                ("output_tokens", models.BigIntegerField(default=0)),
                ("output_known", models.BigIntegerField(default=0)),
                ("reasoning_tokens", models.BigIntegerField(default=0)),
                ("reasoning_known", models.BigIntegerField(default=0)),
                ("run", models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING,
                                          related_name="+", to="experiments.run")),
            ],
            options={
                "indexes": [models.Index(fields=["run", "folded"], name="run_tally_run")],
                "constraints": [models.UniqueConstraint(condition=models.Q(("folded", True)),
                                                        fields=("run", "phase", "status"),
                                                        name="run_tally_folded_once")],
            },
        ),
        migrations.RunPython(tally, untally),
    ]
