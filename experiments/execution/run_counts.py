"""A run's slots per phase and status, and its calls per phase, for the run page.

They come from `RunTally`, which triggers keep in the transactions that change slots and calls
(see `experiments.models.tally`): one statement folds the deltas appended since the last look
into the run's folded rows and, from the same snapshot, sums folded rows and deltas. Its cost
follows the changes since the last look, not the size of the run. `counted` counts the rows
instead: it is the definition, and the tests hold the tallies to it.
"""
from __future__ import annotations

from django.db.models import Count, Q, Sum

from experiments.execution.run_counts_sql import fold_and_read
from experiments.models import ModelCall, Slot

TOKEN_FIELDS = ("input_tokens", "output_tokens", "reasoning_tokens")
_CALL_FIELDS = ("attempts", "recoveries", "unreported")
_KNOWN = {"input_tokens": "input_known", "output_tokens": "output_known", "reasoning_tokens": "reasoning_known"}
_SUMMED = ("slots", *_CALL_FIELDS, *(f for field in TOKEN_FIELDS for f in (field, _KNOWN[field])))


def run_counts(run) -> tuple[dict[str, dict[str, int]], dict[str, dict]]:
    """(phase → slot status → number of slots, phase → the calls' counters and token sums).

    A phase's calls: `attempts`, `recoveries` (basis recovery), `unreported` (finished without
    usage) and each token count's sum over the calls that reported it, None when none did.
    """
    rows = fold_and_read(run.pk, _SUMMED)
    counts: dict[str, dict[str, int]] = {}
    calls: dict[str, dict] = {}
    for phase, status, *sums in rows:
        values = dict(zip(_SUMMED, (int(v) for v in sums)))
        if status:  # a slot status
            if values["slots"]:
                counts.setdefault(phase, {})[status] = values["slots"]
        elif values["attempts"]:
            calls[phase] = {**{f: values[f] for f in _CALL_FIELDS},
                            **{f: values[f] if values[_KNOWN[f]] else None for f in TOKEN_FIELDS}}
    return counts, calls


def reserved_attempts(run) -> dict[str, int]:
    """Phase → attempts reserved (ModelCall rows), as `run_counts` has them."""
    return {phase: calls["attempts"] for phase, calls in run_counts(run)[1].items()}


def counted(run) -> tuple[dict[str, dict[str, int]], dict[str, dict]]:
    """`run_counts` by counting the rows: one aggregate over the slots, one over the calls."""
    counts: dict[str, dict[str, int]] = {}
    # COUNT(*), not COUNT(id): the (run, phase, status) index alone answers it (an index-only scan).
    for phase, status, n in (Slot.objects.filter(run=run).values_list("phase", "status")
                             .annotate(n=Count("*")).order_by()):
        counts.setdefault(phase, {})[status] = n
    calls = {
        row.pop("phase"): row
        for row in ModelCall.objects.filter(run=run).values("phase").annotate(
            attempts=Count("*"),
            recoveries=Count("basis", filter=Q(basis=ModelCall.Basis.RECOVERY)),
            unreported=Count("finished_at", filter=Q(total_tokens=None)),
            **{field: Sum(field) for field in TOKEN_FIELDS},
        ).order_by()
    }
    return counts, calls
