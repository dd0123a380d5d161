"""Results epochs (0009): a judge's receipt, the engine's most frequent write, fires no counter work.

0009's row triggers on a judging slot's and call's updates called `annotations_results_row_moved`
(and, inside it, `annotations_results_campaigns_of_judges`, a query) twice for every judge answer
received, only to find, nearly always, that no campaign reads the run, and in any case that the run
has not finished: 0.15-0.3 ms of PostgreSQL's CPU per call of a run, up to a fifteenth of all the CPU
a call costs (benchmarks/engine-results.md, 7 Dec 2026).

A receipt is the update of a call still in flight (outcome '') and of its slot in flight. A run
whose slot or call is in flight has not finished and cannot finish before that update commits: the
drive moves a phase on only when none of its slots is open, in its own transaction, which does not
see the receipt's slot settled until the receipt commits, and a finished run reserves nothing
(`reservation_sql`: the run running, in the slot's phase) and takes no amendment (`control`). Its
finish, later, moves the counters itself (`results_run_moved`). What moves which counter is
therefore unchanged: the WHEN of each trigger leaves out an update of a row that was in flight.
"""
import importlib

from django.db import migrations

EARLIER = importlib.import_module("annotations.migrations.0008_results_epochs")
JUDGE_CALLS = importlib.import_module("annotations.migrations.0009_results_epochs_judge_calls")

SLOT_WHEN = f"OLD.status <> 'in_flight' AND {JUDGE_CALLS.SLOT_WHEN}"
CALL_WHEN = f"OLD.outcome <> '' AND {JUDGE_CALLS.CALL_WHEN}"


def _triggers(slot_when: str, call_when: str) -> list[str]:
    return [
        "DROP TRIGGER results_slot_moved ON experiments_slot",
        "DROP TRIGGER results_call_moved ON experiments_modelcall",
        (f"CREATE TRIGGER results_slot_moved AFTER UPDATE OF {EARLIER.SLOT} ON experiments_slot FOR EACH ROW "
         f"WHEN ({slot_when}) EXECUTE FUNCTION annotations_results_row_moved('judge')"),
        (f"CREATE TRIGGER results_call_moved AFTER UPDATE OF {EARLIER.CALL} ON experiments_modelcall "
         f"FOR EACH ROW WHEN ({call_when}) EXECUTE FUNCTION annotations_results_row_moved('judge')"),
    ]


class Migration(migrations.Migration):

    dependencies = [("annotations", "0013_results_epochs_bulk_predictions")]

    operations = [migrations.RunSQL(_triggers(SLOT_WHEN, CALL_WHEN),
                                    _triggers(JUDGE_CALLS.SLOT_WHEN, JUDGE_CALLS.CALL_WHEN))]
