"""Planning of the App. F development attempts (`core.workflows`): their first call with the base
calls, their second in the decisions phase.

- notes, then an answer: the notes call is a generation slot of its own kind (`NotesKey`), shared
  by identical notes messages of a task and never judged; in the decisions phase its reply, capped
  at 120 words, goes into the answering call (`DecisionKey`). No reply: the answer is recorded
  missing, never redrawn.
- pruning: the base call is the memory one-shot's (one slot, one grade when both are in the
  protocol), kept as the condition's draft ``b0``; the decisions phase sends one pruning call over
  it. A draft that did not land blocks the call: the final is missing.

Every call is a slot like the others: reserved, journaled and resumed by the engine.
"""
from __future__ import annotations

from experiments.core.canonical import sha256_text
from experiments.core.conditions import FINAL, NOTES, PRUNE
from experiments.core.slot_keys import DecisionKey, NotesKey
from experiments.core.workflows import assemble_notes_answer, assemble_notes_request, assemble_prune, cap_notes
from experiments.models import ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase

DECIDING_WORKFLOWS = (NOTES, PRUNE)
USABLE_DRAFT = (Prediction.Status.OK, Prediction.Status.EMPTY)


def _slot(run: Run, phase: str, key: str, assembled, task) -> Slot:
    return Slot(run=run, phase=phase, key=key, role=Slot.Role.GENERATOR, task_id=task.pk,
                system=assembled.system, user=assembled.user,
                request_sha256=sha256_text(assembled.system + "\x00" + assembled.user),
                prompt_refs=[[ref.name, ref.sha256] for ref in assembled.prompt_refs])


def notes_slot_key(task, assembled) -> str:
    return str(NotesKey(task_id=task.pk, messages_sha=sha256_text(assembled.system + "\x00" + assembled.user)[:32]))


def notes_slot(run: Run, task, condition, task_input, memory: str | None) -> Slot:
    """The generation slot of a notes condition's first call."""
    assembled = assemble_notes_request(condition, task_input, memory=memory)
    return _slot(run, Phase.GENERATION, notes_slot_key(task, assembled), assembled, task)


def notes_replies(run: Run) -> dict[str, str]:
    """The text of every notes call that completed: slot key → the reply as received."""
    return dict(ModelCall.objects.filter(slot__run=run, slot__phase=Phase.GENERATION,
                                         slot__key__startswith=NotesKey.prefix(),
                                         slot__status=Slot.Status.OK, outcome=ModelCall.Outcome.OK)
                .values_list("slot__key", "text"))


def decision(run: Run, task, condition, task_input, memory: str | None, *, drafts: dict,
             replies: dict[str, str]) -> tuple[Slot | None, Prediction | None]:
    """The second call of a notes or pruning condition on one task and its final prediction;
    (None, None) when generation planning recorded the condition missing (no memory)."""
    if condition.needs_memory and memory is None:
        return None, None
    if condition.workflow == NOTES:
        reply = replies.get(notes_slot_key(task, assemble_notes_request(condition, task_input, memory=memory)))
        if reply is None:
            return None, Prediction(run=run, task=task, condition=condition.key, label=FINAL,
                                    status=Prediction.Status.MISSING)
        assembled = assemble_notes_answer(condition, task_input, notes=cap_notes(reply).text, memory=memory)
    else:
        draft = drafts.get((task.pk, condition.key, "b0"))
        if draft is None or draft.status not in USABLE_DRAFT:
            return None, Prediction(run=run, task=task, condition=condition.key, label=FINAL,
                                    status=Prediction.Status.MISSING)
        assembled = assemble_prune(condition, task_input, memory=memory, draft=draft.text or "")
    slot = _slot(run, Phase.DECISIONS, str(DecisionKey(task_id=task.pk, condition=condition.key)), assembled, task)
    return slot, Prediction(run=run, task=task, condition=condition.key, label=FINAL, slot=slot,
                            evidence=assembled.evidence, evidence_chars=assembled.evidence_chars,
                            budget=assembled.budget)
