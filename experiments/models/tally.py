"""`RunTally`: the run page's counters, kept by the database itself (PostgreSQL triggers), at any size.

The run page counts a run's slots per phase and status and sums its calls per phase; at a million
slots, counting them on every 2 s poll costs seconds. Triggers on the slot and call tables
(migration 0016) append, in the transaction that changes the rows, *delta* rows: per statement
that inserts or deletes rows, one per run, phase and status; per update of a counted column (a
slot's status, a call's receipt), the row as it was (-1) and as it is (+1). Only inserts, so no
two writers ever wait for one counter row, and no engine statement had to change.
`execution.run_counts` folds a run's deltas into its *folded* rows (one per run, phase and status)
and reads the totals in one statement: the cost follows the changes since the last look, not the
size of the run. A delta and the row it came from commit together, so the sums equal a count of
the rows, exactly.

Call rows have status "" (they count per phase); a slot row counts `slots`, a call row the rest.
`run_id` has no constraint: a run's deletion removes its slots and calls, whose triggers add the
deltas that cancel its rows.
"""
from django.db import models

from experiments.models.runs import Phase, Run


class RunTally(models.Model):
    # db_index=False: run_tally_run (run, folded) leads with the run; one index entry less per delta (migration 0037).
    run = models.ForeignKey(Run, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+", db_index=False)
    phase = models.CharField(max_length=16, choices=Phase.choices)
    status = models.CharField(max_length=16, blank=True, help_text="a slot status; empty on a row of calls")
    folded = models.BooleanField(default=False, help_text="a run's total so far (one per run, phase and status)")
    slots = models.BigIntegerField(default=0)
    attempts = models.BigIntegerField(default=0)
    recoveries = models.BigIntegerField(default=0)
    unreported = models.BigIntegerField(default=0, help_text="finished calls that reported no usage")
    # a token count's sum over the calls that reported it, and how many did (none: unknown, not zero)
    input_tokens = models.BigIntegerField(default=0)
    input_known = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    output_known = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    reasoning_known = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "phase", "status"], condition=models.Q(folded=True),
                                    name="run_tally_folded_once"),
        ]
        indexes = [models.Index(fields=["run", "folded"], name="run_tally_run")]
