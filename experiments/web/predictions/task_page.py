"""What the task page shows: one card per condition and slot, and the transcript with
each condition's evidence marked, read in a constant number of queries whatever the number of
conditions (predictions with their grades, memories, model calls, turns: one query each)."""
from __future__ import annotations

from django.db.models import OuterRef, Q, Subquery

from experiments.core.conditions import (
    ANSWER_PARAPHRASE, FINAL, FUSION, LENGTH, LENGTH_WORDS, MEM0, MEMGPT_STYLE, NOTES, PARAPHRASE, PRUNE, SELECTION,
    TAGS, get_condition,
)
from experiments.core.evidence import TurnText
from experiments.core.slot_keys import ArchiveKey, NotesKey, ParaphraseKey, TagsKey
from experiments.models import Grade, Mem0Extraction, Memory, ModelCall, Prediction, Run, Turn
from experiments.web.predictions.transcript import mark_evidence, record_sentences

GRADE_FIELDS = ("score", "status", "rationale", "parse_error", "slot_id")
# The title of a first call that writes no answer, by evidence (MemGPT-style) or workflow.
FIRST_CALL_TITLES = {
    MEMGPT_STYLE: "archive queries (the MemGPT-style query call)",
    NOTES: "notes (the first call; cut at 120 words before the answering call)",
    TAGS: "tag choice (the session's call, from the cohort's 40 most frequent labels)",
    PARAPHRASE: ("paraphrase (the first call: the verbatim evidence it was given, in its message, and its rewording; "
                 "cut at the same character budget before the answering call)"),
}
# The card name of a final answer made by a second call.
FINAL_NAMES = {FUSION: FUSION, SELECTION: SELECTION, NOTES: "answer from the notes", PRUNE: "pruned draft",
               TAGS: "answer from the tags", PARAPHRASE: "answer from the paraphrase",
               ANSWER_PARAPHRASE: "the draft in other words", LENGTH: f"the draft at about {LENGTH_WORDS} words"}


def _with_grades(run: Run, task) -> list[Prediction]:
    """The task's predictions, each with its judge grade's fields as `grade_<field>`."""
    grade = Grade.objects.filter(run=run, task=task, answer_sha256=OuterRef("answer_sha256"))
    return list(
        Prediction.objects.filter(run=run, task=task).select_related("slot")
        .annotate(**{f"grade_{name}": Subquery(grade.values(name)[:1]) for name in GRADE_FIELDS})
    )


def _score(prediction: Prediction) -> int | None:
    if prediction.status == Prediction.Status.INVALID_SELECTION:
        return 0
    if prediction.status in (Prediction.Status.OK, Prediction.Status.EMPTY):
        return prediction.grade_score
    return None


def task_cards(run: Run, task) -> dict:
    """Cards by condition, the memories, identical answers, the sources of evidence."""
    predictions = _with_grades(run, task)
    memories = list(Memory.objects.filter(run=run, session_id=task.session_id).select_related("slot"))
    # Mem0's memories of the session (what its search ranked for the evidence), only if it ran.
    mem0 = (Mem0Extraction.objects.filter(run=run, session_id=task.session_id).first()
            if any(get_condition(key).evidence == MEM0 for key in run.protocol.conditions) else None)
    slot_ids = ({p.slot_id for p in predictions} | {p.grade_slot_id for p in predictions}
                | {m.slot_id for m in memories} | {mem0.slot_id if mem0 else None}) - {None}
    calls: dict[int, list[ModelCall]] = {}
    judge_slots = {}
    for call in ModelCall.objects.filter(slot_id__in=slot_ids).select_related("slot").order_by("slot_id", "attempt"):
        calls.setdefault(call.slot_id, []).append(call)
        judge_slots[call.slot_id] = call.slot
    same_text: dict[str, list[str]] = {}
    for p in predictions:
        if p.answer_sha256:
            same_text.setdefault(p.answer_sha256, []).append(f"{p.condition} · {_slot_name(p)}")
    by_condition: dict[str, list[Prediction]] = {}
    for p in predictions:
        by_condition.setdefault(p.condition, []).append(p)
    first_calls = _first_calls(run, task) if any(
        get_condition(key).evidence == MEMGPT_STYLE or get_condition(key).workflow in FIRST_CALL_TITLES
        for key in run.protocol.conditions) else []  # no query when no condition has such a call
    columns = []
    for key in run.protocol.conditions:
        condition = get_condition(key)
        rows = sorted(by_condition.get(key, []), key=lambda p: (p.label == FINAL, p.label))
        final = next((p for p in rows if p.label == FINAL), None)
        cards = [_card(p, condition, final, calls, judge_slots, same_text) for p in rows]
        memory = next((m for m in memories if condition.needs_memory and m.kind == condition.memory_kind
                       and m.words == condition.memory_words), None)
        columns.append({"condition": key, "workflow": condition.workflow, "cards": cards, "memory": memory,
                        "memory_calls": calls.get(memory.slot_id, []) if memory else [],
                        "archive_calls": [c for c in first_calls if [r[0] for r in c.slot.prompt_refs]
                                          == list(condition.auxiliary_prompts)],
                        "first_call_title": FIRST_CALL_TITLES.get(
                            MEMGPT_STYLE if condition.evidence == MEMGPT_STYLE else condition.workflow, ""),
                        "mem0": mem0 if condition.evidence == MEM0 else None,
                        "mem0_calls": calls.get(mem0.slot_id, []) if mem0 and condition.evidence == MEM0 else [],
                        "final_score": _score(final) if final else None})
    return {"columns": columns, "identical": sum(1 for names in same_text.values() if len(names) > 1)}


def _first_calls(run: Run, task) -> list[ModelCall]:
    """The task's calls that write no answer, with their replies as received: the MemGPT-style archive
    queries (App. H), the notes (App. F), the session's tag choice (App. K) and the paraphrases; one query."""
    keys = (Q(slot__key__startswith=ArchiveKey.prefix(task.pk)) | Q(slot__key__startswith=NotesKey.prefix(task.pk))
            | Q(slot__key__startswith=TagsKey.prefix(task.session_id))
            | Q(slot__key__startswith=ParaphraseKey.prefix(task.pk)))
    return list(ModelCall.objects.filter(keys, slot__run=run).select_related("slot").order_by("slot_id", "attempt"))


def _slot_name(p: Prediction) -> str:
    if p.label != FINAL:
        return p.label
    condition = get_condition(p.condition)
    if condition.length_from is not None:  # the target is the other condition's median, stated in the request
        return f"the draft at the median length of {condition.length_from}"
    return FINAL_NAMES.get(condition.workflow, "answer")


def _card(p: Prediction, condition, final, calls, judge_slots, same_text) -> dict:
    text = p.text or ""
    chosen = final is not None and p.label != FINAL and final.chosen_label == p.label
    copied = (condition.workflow == FUSION and final is not None and p.label != FINAL
              and p.answer_sha256 and p.answer_sha256 == final.answer_sha256)
    me = f"{p.condition} · {_slot_name(p)}"
    return {
        "prediction": p, "name": _slot_name(p), "score": _score(p), "is_final": p.label == FINAL,
        "chosen": chosen, "copied": bool(copied),
        "words": len(text.split()), "chars": len(text),
        "identical": [name for name in same_text.get(p.answer_sha256, []) if name != me] if p.answer_sha256 else [],
        "calls": calls.get(p.slot_id, []), "judge_calls": calls.get(p.grade_slot_id, []),
        "judge_slot": judge_slots.get(p.grade_slot_id),
    }


def transcript(task, columns: list[dict]) -> dict:
    """The session's turns up to the task's question, the participant's sentences marked with
    the evidence sources that kept them (one source per distinct evidence text)."""
    turns = list(Turn.objects.filter(session_id=task.session_id).order_by("index").values_list(
        "index", "speaker", "text"))
    sentences = record_sentences([TurnText(i, s, t) for i, s, t in turns], task.record_cut)
    sources: dict[str, list[str]] = {}
    for column in columns:
        for card in column["cards"]:
            p = card["prediction"]
            if p.evidence and p.label in (FINAL, "b0"):
                sources.setdefault(p.evidence, []).append(column["condition"])
                break
    texts = list(sources)
    counts = mark_evidence(sentences, texts)
    options = [{"index": i, "conditions": sources[text], "sentences": n}
               for i, (text, n) in enumerate(zip(texts, counts)) if n]
    rows = [{"index": i, "speaker": s, "text": t, "sentences": sentences.get(i),
             "is_question": i == task.cut, "in_record": i < task.record_cut}
            for i, s, t in turns if i <= task.cut]
    return {"turns": rows, "sources": options, "total_turns": len(turns)}
