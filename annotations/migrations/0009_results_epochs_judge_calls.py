"""Results epochs (0008), narrowed where the engine writes most: a pairwise-judge run's slots and calls
move the campaigns' counters only once the run has finished, and only by what its verdicts read.

0008 moved the counter of every campaign over the judged run with each call of a pairwise-judge run
(its reservation, each failure, each receipt) and each prediction or grade of a pairwise-judge run:
while such a run was running, every view of the campaign's results read and hashed their inputs
again, and every call wrote the counter. A results page reads a judge run only once it has finished
(`annotations.pairwise.judge_run`), and of its calls only the settled replies (a completed call of a
completed judging slot) and whether any came from the offline stand-in. Now:

* a call moves the counters when it is or was a completed judging call, or its model version
  changed (the stand-in), and a slot when it is or was completed; either only when its run has
  finished. The run's row is taken FOR SHARE before its state is read, as 0032 does for memories:
  a finish not yet committed is waited for and then read (the counter moves), and one not yet made
  waits for the call's commit (the finish moves the counter after it, `results_run_moved`).
* a slot's insert or delete moves nothing (a slot has no completed call when it is written; its
  calls are deleted before it, and their delete moves the counter);
* predictions and grades move the counters of the campaigns over their own run only.
"""
import importlib

from django.db import migrations

EARLIER = importlib.import_module("annotations.migrations.0008_results_epochs")
_changed = EARLIER._changed

SLOT_WHEN = (f"(OLD.phase = 'judging' OR NEW.phase = 'judging') AND (OLD.status = 'ok' OR NEW.status = 'ok') "
             f"AND {_changed(EARLIER.SLOT)}")
CALL_WHEN = (f"(OLD.phase = 'judging' OR NEW.phase = 'judging') AND (((OLD.outcome = 'ok' OR NEW.outcome = 'ok') "
             f"AND {_changed(EARLIER.CALL)}) OR {_changed('model_version, run_id')})")
# Only the judge's calls count; a reservation (no outcome, no model yet) does not.
CALL_ROWS = "phase = 'judging' AND (outcome = 'ok' OR model_version <> '')"


def _row_function(judge_branch: str) -> str:
    """0008's row function with its 'run_id' branch (a slot's or call's run) as given."""
    body = next(s for s in EARLIER.FORWARD if s.startswith("CREATE FUNCTION annotations_results_row_moved()"))
    old = ("    ELSIF TG_ARGV[0] = 'run_id' THEN\n"
           "        campaigns := annotations_results_campaigns_of_runs(ARRAY[NEW.run_id, OLD.run_id]);\n")
    assert old in body
    return body.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION").replace(old, judge_branch)


def _earlier(prefix: str) -> str:
    return next(s for s in EARLIER.FORWARD if s.startswith(prefix))


FORWARD = [
    # Of these runs, the finished pairwise-judge runs over a campaign's run: those campaigns.
    """CREATE FUNCTION annotations_results_campaigns_of_judges(runs bigint[]) RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    campaigns bigint[];
BEGIN
    -- Index: run and protocol primary keys, ratingcampaign(run_id). Most calls stop here.
    IF NOT EXISTS (SELECT 1 FROM experiments_run u
                   JOIN experiments_protocol p ON p.id = u.protocol_id AND p.kind = 'pairwise'
                   JOIN annotations_ratingcampaign c ON c.run_id = p.regrade_of_id
                   WHERE u.id = ANY (runs)) THEN
        RETURN NULL;
    END IF;
    -- A later statement: it reads the state as committed after any wait here.
    PERFORM 1 FROM experiments_run WHERE id = ANY (runs) ORDER BY id FOR SHARE;
    SELECT array_agg(c.id) INTO campaigns FROM experiments_run u
        JOIN experiments_protocol p ON p.id = u.protocol_id AND p.kind = 'pairwise'
        JOIN annotations_ratingcampaign c ON c.run_id = p.regrade_of_id
        WHERE u.id = ANY (runs) AND u.status = 'finished';
    RETURN campaigns;
END
$$""",
    f"""CREATE FUNCTION annotations_results_moved_calls() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    runs bigint[];
BEGIN
    runs := ARRAY(SELECT DISTINCT run_id FROM moved_rows WHERE {CALL_ROWS});
    IF cardinality(runs) > 0 THEN
        PERFORM annotations_results_move(annotations_results_campaigns_of_judges(runs));
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE OR REPLACE FUNCTION annotations_results_moved_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        PERFORM annotations_results_move(ARRAY(SELECT c.id FROM annotations_ratingcampaign c WHERE c.run_id IN (
            SELECT run_id FROM moved_rows UNION SELECT run_id FROM moved_before)));
    ELSE
        PERFORM annotations_results_move(ARRAY(SELECT c.id FROM annotations_ratingcampaign c WHERE c.run_id IN (
            SELECT run_id FROM moved_rows)));
    END IF;
    RETURN NULL;
END
$$""",
    _row_function("    ELSIF TG_ARGV[0] = 'judge' THEN\n"
                  "        campaigns := annotations_results_campaigns_of_judges(ARRAY[NEW.run_id, OLD.run_id]);\n"),
    *(f"DROP TRIGGER results_moved_runs_{op} ON {table}"
      for table in ("experiments_slot", "experiments_modelcall") for op in ("insert", "delete")),
    "DROP TRIGGER results_slot_moved ON experiments_slot",
    "DROP TRIGGER results_call_moved ON experiments_modelcall",
    (f"CREATE TRIGGER results_slot_moved AFTER UPDATE OF {EARLIER.SLOT} ON experiments_slot FOR EACH ROW "
     f"WHEN ({SLOT_WHEN}) EXECUTE FUNCTION annotations_results_row_moved('judge')"),
    (f"CREATE TRIGGER results_call_moved AFTER UPDATE OF {EARLIER.CALL} ON experiments_modelcall "
     f"FOR EACH ROW WHEN ({CALL_WHEN}) EXECUTE FUNCTION annotations_results_row_moved('judge')"),
    *(f"CREATE TRIGGER results_moved_calls_{op.lower()} AFTER {op} ON experiments_modelcall "
      f"REFERENCING {EARLIER.TRANSITIONS[op]} FOR EACH STATEMENT EXECUTE FUNCTION annotations_results_moved_calls()"
      for op in ("INSERT", "DELETE")),
]

BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS results_moved_calls_{op} ON experiments_modelcall" for op in ("insert", "delete")),
    "DROP TRIGGER IF EXISTS results_slot_moved ON experiments_slot",
    "DROP TRIGGER IF EXISTS results_call_moved ON experiments_modelcall",
    # 0008's, as it made them
    _row_function("    ELSIF TG_ARGV[0] = 'run_id' THEN\n"
                  "        campaigns := annotations_results_campaigns_of_runs(ARRAY[NEW.run_id, OLD.run_id]);\n"),
    _earlier("CREATE FUNCTION annotations_results_moved_runs()").replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"),
    *(s for s in EARLIER.FORWARD if s.startswith(("CREATE TRIGGER results_slot_moved", "CREATE TRIGGER results_call_moved"))
      or any(s.startswith(f"CREATE TRIGGER results_moved_runs_{op} ") and f" ON {table} " in s
             for table in ("experiments_slot", "experiments_modelcall") for op in ("insert", "delete"))),
    "DROP FUNCTION IF EXISTS annotations_results_moved_calls()",
    "DROP FUNCTION IF EXISTS annotations_results_campaigns_of_judges(bigint[])",
]


class Migration(migrations.Migration):

    dependencies = [("annotations", "0008_results_epochs")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
