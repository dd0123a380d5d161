"""Results epochs: a campaign's stored numbers are checked against a counter, not the sha256 of their inputs.

Recomputing the inputs' sha256 on every view read every rating and digested every reply of the LLM
pairwise judge (hundreds of milliseconds at 20,000 preferences). `annotations_results_epoch` holds one
counter per campaign, moved by every statement that changes what a campaign's results read:

* the campaign's own rows: its ratings (HumanGrade), assignments (rater, item, showing, sides), items,
  raters and adjudications, and its settings that enter the numbers (run, kind, conditions, k, hidden
  repeats, pairs);
* its run's rows: the run's predictions and grades, the run's protocol (contrasts, bootstrap, cohort),
  and every pairwise-judge run over it (a pairwise protocol whose `regrade_of` is the campaign's run):
  the run's state, its protocol's pairs, its judging slots and its calls' replies.

The tasks, sessions and people the items belong to and the cohort's size move the project's "tasks"
epoch (0032's), which the check reads beside this one. Writes that enter no result (an item being
served, a note, a lease renewed, a call of a phase other than judging) are filtered by the triggers'
WHEN clauses and move nothing. A campaign's counter rows are taken in campaign order within a statement.

A change of a run's rows finds the campaigns over the run in the writer's snapshot: a campaign created
while such a change is in flight (a finished run's predictions or a finished judge run's replies being
rewritten at that very moment) is not moved by it. Nothing in the application rewrites those then.

`annotations_campaignresult.epochs` holds the counters (and the code's version of the numbers) the
stored numbers were computed at, read before their inputs; a TRUNCATE of a tracked table moves every
counter and marks every stored result as not current.
"""
from django.db import migrations, models

# Statement triggers (each statement's rows, one look-up per statement): function → tables.
STATEMENT = {
    # rows with a campaign_id: every write moves their campaigns
    "annotations_results_moved_campaigns": {"annotations_humangrade": "INSERT DELETE",
                                            "annotations_assignment": "INSERT DELETE",
                                            "annotations_ratingitem": "INSERT UPDATE DELETE",
                                            "annotations_campaignrater": "INSERT UPDATE DELETE"},
    "annotations_results_moved_items": {"annotations_adjudication": "INSERT UPDATE DELETE"},
    # rows with a run_id: the campaigns over the run, or over the run a pairwise-judge run judges
    "annotations_results_moved_runs": {"experiments_prediction": "INSERT UPDATE DELETE",
                                       "experiments_grade": "INSERT UPDATE DELETE",
                                       "experiments_slot": "INSERT DELETE",
                                       "experiments_modelcall": "INSERT DELETE"},
}
TRANSITIONS = {"INSERT": "NEW TABLE AS moved_rows", "DELETE": "OLD TABLE AS moved_rows",
               "UPDATE": "NEW TABLE AS moved_rows OLD TABLE AS moved_before"}


def _changed(columns: str) -> str:
    """A WHEN condition: any of these columns changed."""
    names = [c.strip() for c in columns.split(",")]
    return f"({', '.join('OLD.' + c for c in names)}) IS DISTINCT FROM ({', '.join('NEW.' + c for c in names)})"


# Row triggers on updates: only the columns that enter the numbers, only when they changed (the
# frequent writes of these tables, such as an item served or a call's lease, fire nothing).
HUMAN_GRADE = "campaign_id, assignment_id, grade, flagged, seconds_spent, preference, same_content"
ASSIGNMENT = "campaign_id, item_id, rater_id, showing, x_on_a"
CAMPAIGN = "run_id, project_id, kind, conditions, ratings_per_item, repeat_percent, pairs"
RUN = "protocol_id, status"
PROTOCOL = "cohort_id, contrasts, bootstrap, kind, regrade_of_id, pairwise_pairs"
SLOT = "run_id, phase, key, status"
CALL = "run_id, slot_id, phase, attempt, outcome, text, model_version"
ROW = [
    ("results_grade_moved", "UPDATE OF " + HUMAN_GRADE, "annotations_humangrade", _changed(HUMAN_GRADE),
     "campaign"),
    ("results_assignment_moved", "UPDATE OF " + ASSIGNMENT, "annotations_assignment", _changed(ASSIGNMENT),
     "campaign"),
    ("results_campaign_moved", "UPDATE OF " + CAMPAIGN, "annotations_ratingcampaign", _changed(CAMPAIGN), "id"),
    ("results_run_moved", "UPDATE OF " + RUN, "experiments_run", _changed(RUN), "run"),
    ("results_run_finished", "INSERT", "experiments_run", "NEW.status = 'finished'", "run"),
    ("results_run_gone", "DELETE", "experiments_run", "OLD.status = 'finished'", "run"),
    ("results_protocol_moved", "UPDATE OF " + PROTOCOL, "experiments_protocol", _changed(PROTOCOL), "protocol"),
    ("results_slot_moved", "UPDATE OF " + SLOT, "experiments_slot",
     f"(OLD.phase = 'judging' OR NEW.phase = 'judging') AND {_changed(SLOT)}", "run_id"),
    ("results_call_moved", "UPDATE OF " + CALL, "experiments_modelcall",
     f"(OLD.phase = 'judging' OR NEW.phase = 'judging') AND {_changed(CALL)}", "run_id"),
]
TRUNCATED = sorted({table for tables in STATEMENT.values() for table in tables}
                   | {table for _, _, table, _, _ in ROW})

FORWARD = [
    "CREATE TABLE annotations_results_epoch (campaign_id bigint PRIMARY KEY, epoch bigint NOT NULL)",
    """CREATE FUNCTION annotations_results_move(campaigns bigint[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO annotations_results_epoch (campaign_id, epoch)
        SELECT DISTINCT c, 1 FROM unnest(campaigns) c WHERE c IS NOT NULL ORDER BY c
    ON CONFLICT (campaign_id) DO UPDATE SET epoch = annotations_results_epoch.epoch + 1
$$""",
    # The campaigns over these runs, and over the run each pairwise-judge run among them judges.
    # Index: ratingcampaign(run_id), run and protocol primary keys.
    """CREATE FUNCTION annotations_results_campaigns_of_runs(runs bigint[]) RETURNS bigint[] LANGUAGE sql STABLE AS $$
    SELECT array_agg(id) FROM (
        SELECT c.id FROM annotations_ratingcampaign c WHERE c.run_id = ANY (runs)
        UNION
        SELECT c.id FROM experiments_run u
            JOIN experiments_protocol p ON p.id = u.protocol_id AND p.kind = 'pairwise'
            JOIN annotations_ratingcampaign c ON c.run_id = p.regrade_of_id
        WHERE u.id = ANY (runs)) found
$$""",
    """CREATE FUNCTION annotations_results_moved_campaigns() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        PERFORM annotations_results_move(ARRAY(SELECT campaign_id FROM moved_rows
                                               UNION SELECT campaign_id FROM moved_before));
    ELSE
        PERFORM annotations_results_move(ARRAY(SELECT DISTINCT campaign_id FROM moved_rows));
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE FUNCTION annotations_results_moved_items() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        PERFORM annotations_results_move(ARRAY(SELECT i.campaign_id FROM annotations_ratingitem i
            WHERE i.id IN (SELECT item_id FROM moved_rows UNION SELECT item_id FROM moved_before)));
    ELSE
        PERFORM annotations_results_move(ARRAY(SELECT i.campaign_id FROM annotations_ratingitem i
            WHERE i.id IN (SELECT item_id FROM moved_rows)));
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE FUNCTION annotations_results_moved_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    campaigns bigint[];
BEGIN
    IF TG_OP = 'UPDATE' THEN
        campaigns := annotations_results_campaigns_of_runs(ARRAY(SELECT run_id FROM moved_rows
                                                                  UNION SELECT run_id FROM moved_before));
    ELSE
        campaigns := annotations_results_campaigns_of_runs(ARRAY(SELECT DISTINCT run_id FROM moved_rows));
    END IF;
    IF campaigns IS NOT NULL THEN
        PERFORM annotations_results_move(campaigns);
    END IF;
    RETURN NULL;
END
$$""",
    # TG_ARGV[0]: what the row names: 'campaign' (its campaign_id), 'id' (the campaign itself), 'run'
    # (the run itself), 'run_id' (a slot's or call's run), 'protocol' (the protocol's runs, and the run
    # it judges).
    """CREATE FUNCTION annotations_results_row_moved() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    campaigns bigint[];
BEGIN
    IF TG_ARGV[0] = 'campaign' THEN
        campaigns := ARRAY[NEW.campaign_id, OLD.campaign_id];
    ELSIF TG_ARGV[0] = 'id' THEN
        campaigns := ARRAY[NEW.id];
    ELSIF TG_ARGV[0] = 'run' THEN
        IF TG_OP = 'INSERT' THEN
            campaigns := annotations_results_campaigns_of_runs(ARRAY[NEW.id]);
        ELSIF TG_OP = 'DELETE' THEN
            campaigns := annotations_results_campaigns_of_runs(ARRAY[OLD.id]);
        ELSE
            -- a run moved to another protocol: the campaigns over the runs its old protocol judged too
            campaigns := annotations_results_campaigns_of_runs(ARRAY[NEW.id])
                || ARRAY(SELECT c.id FROM experiments_protocol p
                         JOIN annotations_ratingcampaign c ON c.run_id = p.regrade_of_id
                         WHERE p.id = OLD.protocol_id AND p.kind = 'pairwise');
        END IF;
    ELSIF TG_ARGV[0] = 'run_id' THEN
        campaigns := annotations_results_campaigns_of_runs(ARRAY[NEW.run_id, OLD.run_id]);
    ELSIF TG_ARGV[0] = 'protocol' THEN
        campaigns := annotations_results_campaigns_of_runs(ARRAY(
                SELECT id FROM experiments_run WHERE protocol_id = NEW.id))
            || ARRAY(SELECT id FROM annotations_ratingcampaign
                     WHERE run_id IN (NEW.regrade_of_id, OLD.regrade_of_id));
    END IF;
    IF campaigns IS NOT NULL THEN
        PERFORM annotations_results_move(campaigns);
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE FUNCTION annotations_results_campaigns_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM annotations_results_epoch WHERE campaign_id IN (SELECT id FROM moved_rows);
    RETURN NULL;
END
$$""",
    """CREATE FUNCTION annotations_results_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE annotations_results_epoch SET epoch = epoch + 1;
    UPDATE annotations_campaignresult SET epochs = NULL;
    RETURN NULL;
END
$$""",
    *(f"CREATE TRIGGER {function.replace('annotations_', '')}_{op.lower()} AFTER {op} ON {table} "
      f"REFERENCING {TRANSITIONS[op]} FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
      for function, tables in STATEMENT.items() for table, ops in tables.items() for op in ops.split()),
    *(f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW WHEN ({when}) "
      f"EXECUTE FUNCTION annotations_results_row_moved('{what}')" for name, event, table, when, what in ROW),
    ("CREATE TRIGGER results_campaigns_gone AFTER DELETE ON annotations_ratingcampaign "
     "REFERENCING OLD TABLE AS moved_rows FOR EACH STATEMENT EXECUTE FUNCTION annotations_results_campaigns_gone()"),
    *(f"CREATE TRIGGER results_truncated AFTER TRUNCATE ON {table} "
      f"FOR EACH STATEMENT EXECUTE FUNCTION annotations_results_reset()"
      for table in [*TRUNCATED, "annotations_results_epoch"]),
]

BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS {function.replace('annotations_', '')}_{op.lower()} ON {table}"
      for function, tables in STATEMENT.items() for table, ops in tables.items() for op in ops.split()),
    *(f"DROP TRIGGER IF EXISTS {name} ON {table}" for name, _, table, _, _ in ROW),
    "DROP TRIGGER IF EXISTS results_campaigns_gone ON annotations_ratingcampaign",
    *(f"DROP TRIGGER IF EXISTS results_truncated ON {table}" for table in TRUNCATED),
    "DROP TABLE IF EXISTS annotations_results_epoch",
    *(f"DROP FUNCTION IF EXISTS {name}" for name in (
        "annotations_results_reset()", "annotations_results_campaigns_gone()", "annotations_results_row_moved()",
        "annotations_results_moved_runs()", "annotations_results_moved_items()",
        "annotations_results_moved_campaigns()", "annotations_results_campaigns_of_runs(bigint[])",
        "annotations_results_move(bigint[])")),
]


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0007_content_check"),
        ("experiments", "0032_project_epochs"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaignresult",
            name="epochs",
            field=models.JSONField(
                blank=True, null=True,
                help_text="the counters (and version) the numbers were computed at; null: compute again"),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
