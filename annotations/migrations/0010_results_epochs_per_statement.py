"""Results epochs (0008): an update of ratings or assignments moves each campaign's counter once per
statement, not once per row.

0008's row triggers on these two tables moved the counter for every changed row: one statement
changing 20,000 ratings of a campaign (a correction by hand, a reassignment) updated the same counter
row 20,000 times in one transaction, each update walking the versions the earlier ones left. A
statement trigger compares each row's columns that enter the numbers before and after (its transition
tables joined on the primary key) and moves the counters of the campaigns whose rows changed, once.
An update that changes none of them (an item served, a note) still moves nothing.
"""
import importlib

from django.db import migrations

EARLIER = importlib.import_module("annotations.migrations.0008_results_epochs")
TABLES = {"annotations_humangrade": EARLIER.HUMAN_GRADE, "annotations_assignment": EARLIER.ASSIGNMENT}
ROW_TRIGGERS = {"annotations_humangrade": "results_grade_moved", "annotations_assignment": "results_assignment_moved"}


def _changed_campaigns(columns: str) -> str:
    """The campaigns (before and after) of the rows whose `columns` changed; a row whose id changed
    counts as changed."""
    names = [c.strip() for c in columns.split(",")]
    before, after = (", ".join(f"{side}.{c}" for c in names) for side in ("o", "n"))
    return ("ARRAY(SELECT DISTINCT c FROM moved_rows n FULL JOIN moved_before o ON o.id = n.id, "
            "unnest(ARRAY[n.campaign_id, o.campaign_id]) c "
            f"WHERE n.id IS NULL OR o.id IS NULL OR ({before}) IS DISTINCT FROM ({after}))")


FORWARD = [
    f"""CREATE FUNCTION annotations_results_changed_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'annotations_humangrade' THEN
        PERFORM annotations_results_move({_changed_campaigns(TABLES['annotations_humangrade'])});
    ELSIF TG_TABLE_NAME = 'annotations_assignment' THEN
        PERFORM annotations_results_move({_changed_campaigns(TABLES['annotations_assignment'])});
    END IF;
    RETURN NULL;
END
$$""",
    *(f"DROP TRIGGER {trigger} ON {table}" for table, trigger in ROW_TRIGGERS.items()),
    *(f"CREATE TRIGGER results_changed_rows_update AFTER UPDATE ON {table} REFERENCING {EARLIER.TRANSITIONS['UPDATE']} "
      "FOR EACH STATEMENT EXECUTE FUNCTION annotations_results_changed_rows()" for table in TABLES),
]

BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS results_changed_rows_update ON {table}" for table in TABLES),
    # 0008's, as it made them
    *(s for s in EARLIER.FORWARD if s.startswith(tuple(f"CREATE TRIGGER {t} " for t in ROW_TRIGGERS.values()))),
    "DROP FUNCTION IF EXISTS annotations_results_changed_rows()",
]


class Migration(migrations.Migration):

    dependencies = [("annotations", "0009_results_epochs_judge_calls")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
