"""Results epochs (0008-0011): the engine's writes of runs that no campaign reads fire no counter work
beyond one index probe (an answer's prediction, a grade) or nothing at all (a reservation).

0008's statement triggers on predictions and grades, and 0009's on inserted and deleted calls,
captured every statement's rows in transition tables and ran a plpgsql function over them, only to
find, for nearly every statement the engine makes, that no campaign reads the run: an answer's
receipt paid for that twice (its prediction's UPDATE, a judge's grade upsert firing both the
INSERT's and the UPDATE's trigger and the UPDATE of the predictions it scores), a reservation once
(about 0.4 ms of PostgreSQL's CPU per call together, measured by benchmarks/engine_statements.py).
Now:

* a row trigger BEFORE each prediction or grade written (inserted, updated, deleted) looks the
  row's run (before and after) up among the campaigns' runs (index: ratingcampaign(run_id)) and,
  only when some campaign reads it, notes those campaigns in a transaction-local setting;
* a call's insert or delete notes its run only when the row is a judge's answer or a stand-in's
  (0009's rows: judging, and ok or with a model version), a WHEN that a reservation never meets:
  no function is called for it;
* one statement trigger AFTER each statement of these tables moves the noted campaigns' counters
  (and those of the finished pairwise-judge runs noted, as 0009 did, under their FOR SHARE), once
  per statement, in campaign order, and clears the note. Its WHEN reads the setting: while nothing
  is noted the function is not even called.

The rows are noted BEFORE they are written because a statement trigger's WHEN is evaluated when the
statement's rows are done, before any AFTER row trigger has run. A note whose row is then not
written (a conflict, a row deleted meanwhile) moves a counter that need not move: the numbers are
computed again, never served stale. The note is transaction-local (set_config(…, true)), so an
aborted statement or savepoint leaves none behind.

What moves which counter is unchanged: any write of a prediction or grade of a campaign's run (in
the writer's snapshot), and a judge's settled call of a finished pairwise-judge run over it.
"""
import importlib

from django.db import migrations

EARLIER = importlib.import_module("annotations.migrations.0008_results_epochs")
JUDGE_CALLS = importlib.import_module("annotations.migrations.0009_results_epochs_judge_calls")

# Transaction-local settings holding what a statement's rows noted, comma-separated ids.
CAMPAIGNS = "ownwords.results_campaigns"
JUDGE_RUNS = "ownwords.results_judge_runs"
CALL_ROWS = {"INSERT": JUDGE_CALLS.CALL_ROWS.replace("phase", "NEW.phase").replace("outcome", "NEW.outcome")
             .replace("model_version", "NEW.model_version"),
             "DELETE": JUDGE_CALLS.CALL_ROWS.replace("phase", "OLD.phase").replace("outcome", "OLD.outcome")
             .replace("model_version", "OLD.model_version")}
NOTED = f"(current_setting('{CAMPAIGNS}', true) <> '' OR current_setting('{JUDGE_RUNS}', true) <> '')"

FORWARD = [
    # Adds ids to a note (kept distinct, so a statement over many rows keeps it short).
    f"""CREATE FUNCTION annotations_results_note(setting text, ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    noted bigint[] := string_to_array(NULLIF(current_setting(setting, true), ''), ',')::bigint[];
BEGIN
    ids := ARRAY(SELECT i FROM unnest(ids) i WHERE i IS NOT NULL);
    IF cardinality(ids) > 0 AND NOT (ids <@ COALESCE(noted, '{{}}')) THEN
        PERFORM set_config(setting, array_to_string(ARRAY(SELECT DISTINCT i FROM unnest(COALESCE(noted, '{{}}') || ids) i
                                                          ORDER BY i), ','), true);
    END IF;
END
$$""",
    # A prediction's or grade's row: the campaigns over its run (before and after), if any.
    # Index: ratingcampaign(run_id). OLD is NULL on an insert, NEW on a delete.
    f"""CREATE FUNCTION annotations_results_note_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    campaigns bigint[];
BEGIN
    campaigns := ARRAY(SELECT id FROM annotations_ratingcampaign WHERE run_id IN (NEW.run_id, OLD.run_id));
    IF cardinality(campaigns) > 0 THEN
        PERFORM annotations_results_note('{CAMPAIGNS}', campaigns);
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$""",
    # A judge's call inserted or deleted (the trigger's WHEN chose it): its run.
    f"""CREATE FUNCTION annotations_results_note_judge_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM annotations_results_note('{JUDGE_RUNS}', ARRAY[OLD.run_id]);
        RETURN OLD;
    END IF;
    PERFORM annotations_results_note('{JUDGE_RUNS}', ARRAY[NEW.run_id]);
    RETURN NEW;
END
$$""",
    # The statement's notes: their counters moved at once (annotations_results_move: in campaign order).
    f"""CREATE FUNCTION annotations_results_move_noted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    campaigns bigint[] := string_to_array(NULLIF(current_setting('{CAMPAIGNS}', true), ''), ',')::bigint[];
    runs bigint[] := string_to_array(NULLIF(current_setting('{JUDGE_RUNS}', true), ''), ',')::bigint[];
BEGIN
    PERFORM set_config('{CAMPAIGNS}', '', true), set_config('{JUDGE_RUNS}', '', true);
    IF runs IS NOT NULL THEN
        campaigns := COALESCE(campaigns, '{{}}') || annotations_results_campaigns_of_judges(runs);
    END IF;
    IF campaigns IS NOT NULL THEN
        PERFORM annotations_results_move(campaigns);
    END IF;
    RETURN NULL;
END
$$""",
    *(f"DROP TRIGGER results_moved_runs_{op} ON {table}"
      for table in ("experiments_prediction", "experiments_grade") for op in ("insert", "update", "delete")),
    *(f"DROP TRIGGER results_moved_calls_{op} ON experiments_modelcall" for op in ("insert", "delete")),
    *(f"CREATE TRIGGER results_note_run BEFORE INSERT OR UPDATE OR DELETE ON {table} FOR EACH ROW "
      "EXECUTE FUNCTION annotations_results_note_run()" for table in ("experiments_prediction", "experiments_grade")),
    *(f"CREATE TRIGGER results_note_judge_run_{op.lower()} BEFORE {op} ON experiments_modelcall FOR EACH ROW "
      f"WHEN ({CALL_ROWS[op]}) EXECUTE FUNCTION annotations_results_note_judge_run()" for op in ("INSERT", "DELETE")),
    *(f"CREATE TRIGGER results_move_noted AFTER {events} ON {table} FOR EACH STATEMENT WHEN {NOTED} "
      "EXECUTE FUNCTION annotations_results_move_noted()"
      for table, events in (("experiments_prediction", "INSERT OR UPDATE OR DELETE"),
                            ("experiments_grade", "INSERT OR UPDATE OR DELETE"),
                            ("experiments_modelcall", "INSERT OR DELETE"))),
]

BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS results_move_noted ON {table}"
      for table in ("experiments_prediction", "experiments_grade", "experiments_modelcall")),
    *(f"DROP TRIGGER IF EXISTS results_note_run ON {table}" for table in ("experiments_prediction", "experiments_grade")),
    *(f"DROP TRIGGER IF EXISTS results_note_judge_run_{op} ON experiments_modelcall" for op in ("insert", "delete")),
    # as 0008 and 0009 made them
    *(s for s in EARLIER.FORWARD
      if any(s.startswith(f"CREATE TRIGGER results_moved_runs_{op} ") and f" ON {table} " in s
             for table in ("experiments_prediction", "experiments_grade") for op in ("insert", "update", "delete"))),
    *(s for s in JUDGE_CALLS.FORWARD if s.startswith("CREATE TRIGGER results_moved_calls_")),
    "DROP FUNCTION IF EXISTS annotations_results_move_noted()",
    "DROP FUNCTION IF EXISTS annotations_results_note_judge_run()",
    "DROP FUNCTION IF EXISTS annotations_results_note_run()",
    "DROP FUNCTION IF EXISTS annotations_results_note(text, bigint[])",
]


class Migration(migrations.Migration):

    dependencies = [("annotations", "0011_results_ratings_without_lock")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
