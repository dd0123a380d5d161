"""Results epochs (0008): a rating no longer moves its campaign's counter; the ratings are checked by a
digest read with the counters instead.

Each rating moved the campaign's one counter row, and that row's lock was held to the end of the
rater's transaction: raters of one campaign waited on each other again (a rater's open transaction
blocked every other rater of the campaign until it ended), which ratings had been built never to do.
The rater's path writes no other table the counter follows (an assignment's status and serving time
enter no number). So the ratings' triggers go, and `results_epoch_sql.results_state` reads, in the
same query as the counters, the count and an order-free sum of a 64-bit hash of every rating's
columns that enter the numbers: a read in the reader's snapshot, taken before the inputs like the
counters, that any rating added, changed or removed changes. It reads the campaign's ratings
(index human_grade_latest), a few milliseconds at 20,000, and waits on no writer.
"""
import importlib

from django.db import migrations

EPOCHS = importlib.import_module("annotations.migrations.0008_results_epochs")
PER_STATEMENT = importlib.import_module("annotations.migrations.0010_results_epochs_per_statement")
TABLE = "annotations_humangrade"
TRIGGERS = ("results_moved_campaigns_insert", "results_moved_campaigns_delete", "results_changed_rows_update")

FORWARD = [f"DROP TRIGGER IF EXISTS {name} ON {TABLE}" for name in TRIGGERS]

BACKWARD = [
    # as 0008 and 0010 made them
    *(s for s in EPOCHS.FORWARD
      if s.startswith(("CREATE TRIGGER results_moved_campaigns_insert ", "CREATE TRIGGER results_moved_campaigns_delete "))
      and f" ON {TABLE} " in s),
    *(s for s in PER_STATEMENT.FORWARD if s.startswith("CREATE TRIGGER results_changed_rows_update ") and f" ON {TABLE} " in s),
]


class Migration(migrations.Migration):

    dependencies = [("annotations", "0010_results_epochs_per_statement")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
