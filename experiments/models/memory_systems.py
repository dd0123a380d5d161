"""What a memory system left per session of a run (paper App. H): Mem0's memories and how its add went."""
from django.db import models

from experiments.models.data import Session
from experiments.models.runs import Run, Slot


class Mem0Extraction(models.Model):
    """One session's Mem0 `add` in a run: the memories it stored, in extraction order, or why none.

    Written when base generation is planned, from the journaled extraction call (`slot`); an
    unparseable reply leaves no memories without an error in Mem0, so it is counted here and shown."""

    class Outcome(models.TextChoices):
        MEMORIES = "memories", "Memories stored"
        NONE_EXTRACTED = "none-extracted", "The reply held no memories"
        UNPARSEABLE = "unparseable", "Unparseable reply (no memories)"
        REFUSED = "refused", "Request differs from the journaled one (not answered)"
        FAILED = "failed", "Mem0 raised on the reply"
        NO_ANSWER = "no-answer", "The extraction call has no usable answer"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="mem0_extractions")
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="+")
    slot = models.ForeignKey(Slot, null=True, on_delete=models.PROTECT, related_name="+")
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    memories = models.JSONField(default=list, help_text="the memory texts Mem0 stored, in extraction order")
    note = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "session"], name="mem0_extraction_once_per_run"),
        ]
