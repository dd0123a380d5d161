"""What the analysis and the planning read back from a run's journal, here so that both read it one way
(and the planning never imports a report item):

- `settled_calls`: of a slot's attempts, the one that settled it. A slot settles once, on the receipt
  of an attempt while the slot is in flight (`execution.journal`); a receipt that comes after its
  lease ran out (`journal._late`) is kept with its outcome — ok too — and settles nothing. Such a late
  attempt always comes before the one that settled the slot: a slot whose attempt's lease ran out is
  unknown and is sent again only when its owner allows it (a later attempt), and a settled slot gets
  no further attempt. So the settling call is the slot's last completed attempt.
- `recorded_length_target`: the target in words that a length control's planned rewrites state
  (`core.paraphrase.stated_length_target` on the journaled request).
"""
from __future__ import annotations

from django.db.models import QuerySet

from experiments.core.conditions import FINAL
from experiments.core.paraphrase import stated_length_target
from experiments.models import ModelCall, Prediction, Slot


def settled_calls(calls: QuerySet) -> QuerySet:
    """Of `calls` (ModelCall rows), the call that settled each slot with an answer: the slot is OK and
    the call is its last completed attempt — one call per slot, whatever late receipts the slot has."""
    return (calls.filter(outcome=ModelCall.Outcome.OK, slot__status=Slot.Status.OK)
            .order_by("slot_id", "-attempt").distinct("slot_id"))


def recorded_length_target(run, condition: str) -> int | None:
    """A length control's target in words as its planned rewrites state it (their journaled request), or None."""
    user = (Prediction.objects.filter(run=run, condition=condition, label=FINAL, slot__isnull=False)
            .order_by("pk").values_list("slot__user", flat=True).first())
    return stated_length_target(user)
