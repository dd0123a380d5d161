"""RunTally (0016): a call's receipt appends one delta row of differences instead of the pair of rows
-1 (the call as it was) and +1 (as it is), and a reserved call its +1 from a row trigger instead of a
statement trigger over the statement's transition table.

Each engine call wrote 7 delta rows (the slot's two status changes two each, the call's insert one,
its receipt two), each a heap tuple and two index entries. A receipt changes the call's counted
columns (finished_at, the token counts) but never its run or phase, so its -1 and +1 fall on the
same run, phase and status (calls count under status ""): their difference, one row, sums to the
same totals; `attempts` is 0 in it (the call was counted at its insert). An update that moves a call
to another run or phase still appends the pair. The slot's status changes keep their two rows (the
statuses differ, and a row has one status).

A reservation inserts one call per statement; 0016's statement trigger captured it in a transition
table and grouped it, where a row trigger inserts its delta directly. A statement inserting many
calls now appends one delta per call instead of one per run and phase: the sums are the same, and
`run_counts` folds them at the next look. The slots' insert trigger stays per statement (planning
inserts a phase's slots in bulk).

The fold is unchanged: every delta row is still a signed contribution to its run, phase and status.
"""
import importlib

from django.db import migrations

TALLY = importlib.import_module("experiments.migrations.0016_model_call_run_phase")
COLUMNS = TALLY.TALLY_COLUMNS

# A call's counted quantities but `attempts`, of the row {p} ("NEW." or "OLD."), one SQL term each.
CALL_QUANTITIES = ["({p}basis = 'recovery')::int", "({p}finished_at IS NOT NULL AND {p}total_tokens IS NULL)::int",
                   "COALESCE({p}input_tokens, 0)", "({p}input_tokens IS NOT NULL)::int",
                   "COALESCE({p}output_tokens, 0)", "({p}output_tokens IS NOT NULL)::int",
                   "COALESCE({p}reasoning_tokens, 0)", "({p}reasoning_tokens IS NOT NULL)::int"]
DIFFERENCES = ", ".join(f"{term.format(p='NEW.')} - {term.format(p='OLD.')}" for term in CALL_QUANTITIES)
PAIR = (f"VALUES ({TALLY.ROW['experiments_modelcall'].format(p='OLD.', s=-1)}), "
        f"({TALLY.ROW['experiments_modelcall'].format(p='NEW.', s=1)})")

CALL_UPDATE = f"""
CREATE OR REPLACE FUNCTION experiments_modelcall_tally_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.run_id = NEW.run_id AND OLD.phase = NEW.phase THEN
        -- a receipt: the call's -1 and +1 as one row of differences (no attempt added or removed)
        INSERT INTO experiments_runtally ({COLUMNS}) VALUES (NEW.run_id, NEW.phase, '', false, 0, 0, {DIFFERENCES});
    ELSE
        INSERT INTO experiments_runtally ({COLUMNS}) {PAIR};
    END IF;
    RETURN NULL;
END $$"""

CALL_INSERT_ROW = f"""
CREATE FUNCTION experiments_modelcall_tally_insert_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO experiments_runtally ({COLUMNS}) VALUES ({TALLY.ROW['experiments_modelcall'].format(p='NEW.', s=1)});
    RETURN NULL;
END $$"""

FORWARD = [
    CALL_UPDATE,
    CALL_INSERT_ROW,
    "DROP TRIGGER experiments_modelcall_tally_insert ON experiments_modelcall",
    ("CREATE TRIGGER experiments_modelcall_tally_insert_row AFTER INSERT ON experiments_modelcall "
     "FOR EACH ROW EXECUTE FUNCTION experiments_modelcall_tally_insert_row()"),
]

BACKWARD = [
    "DROP TRIGGER IF EXISTS experiments_modelcall_tally_insert_row ON experiments_modelcall",
    "DROP FUNCTION IF EXISTS experiments_modelcall_tally_insert_row()",
    # 0016's, as it made them
    ("CREATE TRIGGER experiments_modelcall_tally_insert AFTER INSERT ON experiments_modelcall "
     "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION experiments_modelcall_tally_insert()"),
    TALLY._function("experiments_modelcall_tally_update",
                    f"VALUES ({TALLY.ROW['experiments_modelcall'].format(p='OLD.', s=-1)}), "
                    f"({TALLY.ROW['experiments_modelcall'].format(p='NEW.', s=1)})")
    .replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"),
]


class Migration(migrations.Migration):

    dependencies = [("experiments", "0034_drop_fk_indexes_led_by_composites")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
