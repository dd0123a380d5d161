"""The two-call development attempts of App. F (prompts: App. E.12): the messages of each call
and the 120-word cap of the notes. Pure Python, no Django.

- **notes, then an answer** (`…+notes(120w)`): the first call (`assemble_notes_request`) is given
  the source — the respondent-only record, as in App. F, or the written memory — and the question,
  and writes at most 120 words of notes; `cap_notes` keeps the first 120 words of its reply (and
  says whether it cut); the second call (`assemble_notes_answer`) answers from the source, the
  capped notes and the question, with the screener like every answering call;
- **pruning the one-shot draft** (`memory(…)+pruned`): the base call is the memory one-shot's own
  (byte-identical, so the two share one call and one grade); its answer b0 is the draft, and one
  call (`assemble_prune`) edits it: the memory answering prompt without its closing line, then the
  draft and the editing task (E.12).

The first call of each runs with the base calls (generation phase), the second in the decisions
phase once the first has landed (`execution.workflow_planning`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from experiments.core import evidence as ev
from experiments.core.assembly import Assembled, TaskInput, assemble
from experiments.core.conditions import (
    MEMORY, NOTES, NOTES_PROMPTS, NOTES_WORDS, PRUNE, PRUNE_PROMPTS, WHOLE_RECORD, Condition, get_condition,
)
from experiments.core.prompts import render_prompt

# The closing line the pruning call leaves out of the memory answering prompt (E.12: "the memory
# answering prompt without its closing line"), after the blank line that separates it.
CLOSING_LINE = "Answer as this participant would. Write ONLY their reply."
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class CappedNotes:
    """The notes as the answering call sees them; `words` counts the reply's words before the cap."""

    text: str
    words: int
    cut: bool


def cap_notes(reply: str, words: int = NOTES_WORDS) -> CappedNotes:
    """The reply up to the end of its `words`-th whitespace-separated word (App. F: at most 120
    words), its other characters unchanged; surrounding whitespace removed."""
    found = list(_WORD.finditer(reply))
    if len(found) <= words:
        return CappedNotes(reply.strip(), len(found), False)
    return CappedNotes(reply[:found[words - 1].end()].strip(), len(found), True)


def _condition(condition: Condition | str, workflow: str) -> Condition:
    if isinstance(condition, str):
        condition = get_condition(condition)
    if condition.workflow != workflow:
        raise ValueError(f"{condition.key} is not a {workflow} condition")
    return condition


def _source(condition: Condition, task: TaskInput, memory: str | None) -> tuple[str, str]:
    """(field name, text) of the notes' source: the memory, or the whole permitted record."""
    if condition.evidence == MEMORY:
        if memory is None:
            raise ValueError(f"{condition.key} needs the session's {condition.memory_kind} memory")
        return "memory", memory
    if condition.evidence == WHOLE_RECORD:
        return "evidence", ev.whole_record(task.turns, task.record_cut)
    raise ValueError(f"{condition.key}: notes from {condition.evidence!r} are not defined")


def assemble_notes_request(condition: Condition | str, task: TaskInput, *, memory: str | None = None) -> Assembled:
    """The notes call (E.12 "Evidence notes"): the source and the question in, at most 120 words
    of notes out. Its evidence is the source."""
    condition = _condition(condition, NOTES)
    name, source = _source(condition, task, memory)
    system_name, user_name = NOTES_PROMPTS[condition.evidence]
    system, system_ref = render_prompt(system_name)
    fields = {"record" if name == "evidence" else name: source, "question": task.question, "words": str(NOTES_WORDS)}
    user, user_ref = render_prompt(user_name, **fields)
    return Assembled(system, user, source, len(source), (system_ref, user_ref))


def assemble_notes_answer(condition: Condition | str, task: TaskInput, *, notes: str,
                          memory: str | None = None) -> Assembled:
    """The answering call: `assembly.assemble` with the (capped) notes — the screener, the source,
    the notes and the question; its evidence is the source and the notes, joined by one blank line."""
    return assemble(_condition(condition, NOTES), task, memory=memory, notes=notes)


def assemble_prune(condition: Condition | str, task: TaskInput, *, memory: str, draft: str) -> Assembled:
    """The pruning call (E.12 "Grounded pruning"): the memory answering prompt of the task without
    its closing line, the draft b0 and the editing task. Its evidence is the memory."""
    condition = _condition(condition, PRUNE)
    if memory is None:
        raise ValueError(f"{condition.key} needs the session's {condition.memory_kind} memory")
    answering, answering_ref = render_prompt(condition.user_prompt, screener=ev.screener_block(task.screener),
                                             memory=memory, question=task.question)
    base, closing = answering.rsplit("\n\n", 1)
    if closing != CLOSING_LINE:
        raise ValueError(f"{condition.user_prompt} does not end with its closing line")
    system_name, layout_name = PRUNE_PROMPTS
    system, system_ref = render_prompt(system_name)
    user, layout_ref = render_prompt(layout_name, base=base, draft=draft)
    return Assembled(system, user, memory, len(memory), (system_ref, answering_ref, layout_ref))


__all__ = ["CLOSING_LINE", "CappedNotes", "assemble_notes_answer", "assemble_notes_request", "assemble_prune",
           "cap_notes"]
