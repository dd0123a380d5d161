"""Results epochs (0012): predictions inserted or deleted (in bulk) are looked up once per statement
again, and the notes are written without queries.

Predictions are inserted in bulk (planning: one per slot, a million for a large run) and deleted
with their run; 0012's row trigger looked each row's run up among the campaigns' runs, one probe per
row, where 0008's statement trigger looked the statement's runs up once over its transition table:
those two statements get 0008's trigger back. The engine only updates predictions (an answer's
receipt), row by row, noted as 0012 does.

0012's note went through a plpgsql function of array subqueries and PERFORMs, each a query of its
own inside the trigger, for every row of a campaign's run (a statement rewriting 20,000 of them
ran 40,000 such queries); the notes here are plain expressions (a string search in the setting),
and a row runs one query, its look-up among the campaigns' runs.

Tried and not kept: 0009's row triggers on a judging slot's and call's updates (every judging
receipt of every run calls 0009's look-up twice) turned into notes moved by the statement's
trigger. A receipt's one statement updates the call, the slot, the grade and the predictions, and
each of those statements' triggers found the note set when its WHEN was evaluated (the notes are
cleared only when the first of them runs, at the statement's end): four calls of the moving
function instead of two look-ups, more CPU per judging call than before
(benchmarks/engine_statements.py).
"""
import importlib

from django.db import migrations

NOTES = importlib.import_module("annotations.migrations.0012_results_epochs_row_filters")
EPOCHS = importlib.import_module("annotations.migrations.0008_results_epochs")


def _note(setting: str, value: str, indent: int = 8) -> str:
    """plpgsql adding the id `value` to a note unless it is there: simple expressions only (each
    PERFORM or subquery would be a query of its own, for every row of a campaign's run)."""
    lines = [f"noted := COALESCE(current_setting('{setting}', true), '');",
             f"IF {value} IS NOT NULL AND strpos(',' || noted || ',', ',' || {value} || ',') = 0 THEN",
             f"    noted := set_config('{setting}', CASE WHEN noted = '' THEN {value}::text "
             f"ELSE noted || ',' || {value} END, true);",
             "END IF;"]
    return "".join("\n" + " " * indent + line for line in lines)


# 0012's: the campaigns over a prediction's or grade's run (the one query), noted without another.
NOTE_RUN = f"""CREATE OR REPLACE FUNCTION annotations_results_note_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    campaign bigint;
    noted text;
BEGIN
    FOR campaign IN SELECT id FROM annotations_ratingcampaign WHERE run_id IN (NEW.run_id, OLD.run_id) LOOP{_note(NOTES.CAMPAIGNS, 'campaign')}
    END LOOP;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$"""

# 0012's: the notes read and cleared by assignment (no PERFORM).
MOVE_NOTED = f"""CREATE OR REPLACE FUNCTION annotations_results_move_noted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    campaigns bigint[] := string_to_array(NULLIF(current_setting('{NOTES.CAMPAIGNS}', true), ''), ',')::bigint[];
    runs bigint[] := string_to_array(NULLIF(current_setting('{NOTES.JUDGE_RUNS}', true), ''), ',')::bigint[];
    cleared text;
BEGIN
    cleared := set_config('{NOTES.CAMPAIGNS}', '', true);
    cleared := set_config('{NOTES.JUDGE_RUNS}', '', true);
    IF runs IS NOT NULL THEN
        campaigns := COALESCE(campaigns, '{{}}') || annotations_results_campaigns_of_judges(runs);
    END IF;
    IF campaigns IS NOT NULL THEN
        PERFORM annotations_results_move(campaigns);
    END IF;
    RETURN NULL;
END
$$"""

# 0008's statement triggers on inserted and deleted predictions.
PREDICTIONS_IN_BULK = [s for s in EPOCHS.FORWARD
                       if s.startswith(("CREATE TRIGGER results_moved_runs_insert ", "CREATE TRIGGER results_moved_runs_delete "))
                       and " ON experiments_prediction " in s]
assert len(PREDICTIONS_IN_BULK) == 2

FORWARD = [
    NOTE_RUN,
    MOVE_NOTED,
    "DROP TRIGGER results_note_run ON experiments_prediction",
    "DROP TRIGGER results_move_noted ON experiments_prediction",
    ("CREATE TRIGGER results_note_run BEFORE UPDATE ON experiments_prediction FOR EACH ROW "
     "EXECUTE FUNCTION annotations_results_note_run()"),
    (f"CREATE TRIGGER results_move_noted AFTER UPDATE ON experiments_prediction FOR EACH STATEMENT WHEN {NOTES.NOTED} "
     "EXECUTE FUNCTION annotations_results_move_noted()"),
    *PREDICTIONS_IN_BULK,
]

BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS results_moved_runs_{op} ON experiments_prediction" for op in ("insert", "delete")),
    "DROP TRIGGER IF EXISTS results_note_run ON experiments_prediction",
    "DROP TRIGGER IF EXISTS results_move_noted ON experiments_prediction",
    # as 0012 made them
    *(s for s in NOTES.FORWARD if s.startswith(("CREATE TRIGGER results_note_run ", "CREATE TRIGGER results_move_noted "))
      and " ON experiments_prediction " in s),
    *(s.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION") for s in NOTES.FORWARD
      if s.startswith(tuple(f"CREATE FUNCTION annotations_results_{name}()" for name in ("note_run", "move_noted")))),
]


class Migration(migrations.Migration):

    dependencies = [("annotations", "0012_results_epochs_row_filters")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
