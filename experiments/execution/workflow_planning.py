"""Planning of the two-call designs — App. F's development attempts (`core.workflows`), App. K's
tags (`core.tags`) and the evidence-paraphrase control (`core.paraphrase`): their first call with
the base calls, their second in the decisions phase.

- notes, then an answer: the notes call is a generation slot of its own kind (`NotesKey`), shared
  by identical notes messages of a task and never judged; in the decisions phase its reply, capped
  at 120 words, goes into the answering call (`DecisionKey`). No reply: the answer is recorded
  missing, never redrawn.
- pruning: the base call is the memory one-shot's (one slot, one grade when both are in the
  protocol), kept as the condition's draft ``b0``; the decisions phase sends one pruning call over
  it. A draft that did not land blocks the call: the final is missing.
- tags: the labels are a memory kind (one call per session, memories phase); with the base calls,
  one call per session (`TagsKey`) chooses 6-10 tags from the cohort's 40 most frequent labels
  (the vocabulary, counted over the run's label memories); in the decisions phase each task's
  answer shows its session's tags as the memory. A choice that did not land, or names too few
  tags of the vocabulary, leaves the answer missing, never redrawn.
- answer rewrites (beyond the paper): as the pruning, the base condition's answer is the draft ``b0``
  (one shared call); one call rewrites it in other words or to a target length, the rewrite is graded.
  A target "the median of another condition's answers" (`Condition.length_from`) is computed once, when
  the decisions phase is planned, from that condition's final answers in the run (`length_targets`); it
  stands in every rewrite's journaled request, and a re-plan reads it back from there, never anew.
- paraphrase: like the notes, with its own slot kind (`ParaphraseKey`); the reply is cut at the
  verbatim evidence's budget (`core.paraphrase.fit_to_budget`) before the answering call.

Every call is a slot like the others: reserved, journaled and resumed by the engine.
"""
from __future__ import annotations

from experiments.analysis.journal_reads import recorded_length_target, settled_calls
from experiments.core.assembly import assemble
from experiments.core.canonical import sha256_text
from experiments.core.conditions import (
    ANSWER_PARAPHRASE, FINAL, LABELS, LENGTH, LENGTH_WORDS, NOTES, PARAPHRASE, PRUNE, TAGS, get_condition,
)
from experiments.core.paraphrase import (
    assemble_answer_paraphrase, assemble_length_rewrite, assemble_paraphrase_answer, assemble_paraphrase_request,
    fit_to_budget, length_target,
)
from experiments.core.slot_keys import DecisionKey, NotesKey, ParaphraseKey, TagsKey
from experiments.core.tags import assemble_tags_choice, parse_choice, parse_labels, tags_text, vocabulary
from experiments.core.workflows import assemble_notes_answer, assemble_notes_request, assemble_prune, cap_notes
from experiments.models import Memory, ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase

DECIDING_WORKFLOWS = (NOTES, PRUNE, TAGS, PARAPHRASE, ANSWER_PARAPHRASE, LENGTH)
FIRST_CALL_WORKFLOWS = (NOTES, PARAPHRASE)  # a first call of their own per task (`notes_slot`)
USABLE_DRAFT = (Prediction.Status.OK, Prediction.Status.EMPTY)


def _slot(run: Run, phase: str, key: str, assembled, task, *, session_id=None) -> Slot:
    return Slot(run=run, phase=phase, key=key, role=Slot.Role.GENERATOR,
                task_id=task.pk if task is not None else None, session_id=session_id,
                system=assembled.system, user=assembled.user,
                request_sha256=sha256_text(assembled.system + "\x00" + assembled.user),
                prompt_refs=[[ref.name, ref.sha256] for ref in assembled.prompt_refs])


def notes_slot_key(task, assembled) -> str:
    return str(NotesKey(task_id=task.pk, messages_sha=sha256_text(assembled.system + "\x00" + assembled.user)[:32]))


def paraphrase_slot_key(task, assembled) -> str:
    return str(ParaphraseKey(task_id=task.pk,
                             messages_sha=sha256_text(assembled.system + "\x00" + assembled.user)[:32]))


def notes_slot(run: Run, task, condition, task_input, memory: str | None) -> Slot:
    """The generation slot of a notes condition's first call, or of a paraphrase condition's
    (the evidence in other words, `core.paraphrase`)."""
    if condition.workflow == PARAPHRASE:
        assembled = assemble_paraphrase_request(condition, task_input, memory=memory)
        return _slot(run, Phase.GENERATION, paraphrase_slot_key(task, assembled), assembled, task)
    assembled = assemble_notes_request(condition, task_input, memory=memory)
    return _slot(run, Phase.GENERATION, notes_slot_key(task, assembled), assembled, task)


def notes_replies(run: Run) -> dict[str, str]:
    """The text of every notes or paraphrase call that completed: slot key → the reply as received."""
    return {**_first_call_replies(run, NotesKey.prefix()), **_first_call_replies(run, ParaphraseKey.prefix())}


def _first_call_replies(run: Run, prefix: str) -> dict[str, str]:
    """Slot key → the reply of the call that settled it (`journal_reads.settled_calls`: never a late receipt)."""
    return dict(settled_calls(ModelCall.objects.filter(slot__run=run, slot__phase=Phase.GENERATION,
                                                       slot__key__startswith=prefix)).values_list("slot__key", "text"))


def uses_tags(run: Run) -> bool:
    return any(get_condition(key).workflow == TAGS for key in run.protocol.conditions)


def tag_vocabulary(run: Run) -> list[str]:
    """The cohort's 40 most frequent labels: the run's label memories counted (`core.tags.vocabulary`)."""
    texts = Memory.objects.filter(run=run, kind=LABELS, text__isnull=False).order_by("session_id")
    return vocabulary(parse_labels(text) for text in texts.values_list("text", flat=True))


def tags_slot(run: Run, task, task_input, vocabulary_labels: list[str]) -> Slot:
    """The generation slot of a session's tag choice (one per session: its tasks share the key)."""
    assembled = assemble_tags_choice(task_input, vocabulary_labels)
    key = str(TagsKey(session_id=task.session_id,
                      messages_sha=sha256_text(assembled.system + "\x00" + assembled.user)[:32]))
    return _slot(run, Phase.GENERATION, key, assembled, None, session_id=task.session_id)


def tags_replies(run: Run) -> dict[str, str]:
    """The text of every tag choice that completed: slot key → the reply as received."""
    return _first_call_replies(run, TagsKey.prefix())


def length_targets(run: Run, conditions) -> dict[str, int]:
    """condition key → the target in words of each length control of `conditions` that takes another
    condition's median (`Condition.length_from`): the one recorded in its planned rewrites, else the
    median word count of that condition's final answers in the run (`core.paraphrase.length_target`:
    answers that did not land left out; an empty answer counts 0 words). When that condition has no
    answer at all there is no target: the control's rewrites are recorded missing (`decision`)."""
    targets = {}
    for condition in conditions:
        if condition.workflow != LENGTH or condition.length_from is None:
            continue
        recorded = recorded_length_target(run, condition.key)
        if recorded is not None:
            targets[condition.key] = recorded
            continue
        texts = Prediction.objects.filter(run=run, condition=condition.length_from, label=FINAL,
                                          status__in=USABLE_DRAFT).values_list("text", flat=True)
        texts = [text or "" for text in texts]
        if texts:
            targets[condition.key] = length_target(texts)
    return targets


def decision(run: Run, task, condition, task_input, memory: str | None, *, drafts: dict,
             replies: dict[str, str], vocabulary_labels: list[str] | None = None,
             targets: dict[str, int] | None = None) -> tuple[Slot | None, Prediction | None]:
    """The second call of a notes or pruning condition on one task and its final prediction;
    (None, None) when generation planning recorded the condition missing (no memory)."""
    if condition.needs_memory and memory is None:
        return None, None
    missing = Prediction(run=run, task=task, condition=condition.key, label=FINAL, status=Prediction.Status.MISSING)
    if condition.workflow == TAGS:
        reply = replies.get(tags_slot(run, task, task_input, vocabulary_labels).key)
        chosen = parse_choice(reply, vocabulary_labels) if reply is not None else None
        if chosen is None or not chosen.usable:
            return None, missing
        assembled = assemble(condition, task_input, memory=tags_text(chosen.tags))
    elif condition.workflow == NOTES:
        reply = replies.get(notes_slot_key(task, assemble_notes_request(condition, task_input, memory=memory)))
        if reply is None:
            return None, missing
        assembled = assemble_notes_answer(condition, task_input, notes=cap_notes(reply).text, memory=memory)
    elif condition.workflow == PARAPHRASE:  # the evidence in other words, cut at its budget (`core.paraphrase`)
        request = assemble_paraphrase_request(condition, task_input, memory=memory)
        reply = replies.get(paraphrase_slot_key(task, request))
        if reply is None:
            return None, missing
        assembled = assemble_paraphrase_answer(condition, task_input, memory=memory,
                                               paraphrase=fit_to_budget(reply, request.budget).text)
    else:
        draft = drafts.get((task.pk, condition.key, "b0"))
        if draft is None or draft.status not in USABLE_DRAFT:
            return None, missing
        if condition.workflow == ANSWER_PARAPHRASE:  # the draft in other words: the same judge grades both
            assembled = assemble_answer_paraphrase(task_input.question, draft.text or "")
        elif condition.workflow == LENGTH:  # the draft at about LENGTH_WORDS words, or the other condition's median
            words = (targets or {}).get(condition.key) if condition.length_from is not None else LENGTH_WORDS
            if words is None:  # the other condition gave no answer: no median to rewrite to
                return None, missing
            assembled = assemble_length_rewrite(task_input.question, draft.text or "", words)
        else:
            assembled = assemble_prune(condition, task_input, memory=memory, draft=draft.text or "")
    slot = _slot(run, Phase.DECISIONS, str(DecisionKey(task_id=task.pk, condition=condition.key)), assembled, task)
    return slot, Prediction(run=run, task=task, condition=condition.key, label=FINAL, slot=slot,
                            evidence=assembled.evidence, evidence_chars=assembled.evidence_chars,
                            budget=assembled.budget)
