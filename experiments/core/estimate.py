"""How many calls and tokens a protocol will ask for, before it is sealed. Pure Python, no Django.

Calls follow the phases exactly as planning makes them (paper App. B.2), counted per task of the
cohort:

- memories: one call per session and distinct memory (kind, length) a condition shows or
  takes its budget from, and one Mem0 extraction call per session when a condition is Mem0;
- base generation: one call per identical-prompt candidate; conditions whose messages are
  identical (a memory's one-shot, fusion and selection) share their calls, so a group of them
  costs its largest number of candidates (1 or 3);
- decisions: one call per task and fusion or selection condition, and the MemGPT-style answer
  (its base call writes the archive queries, App. H); one per task and App. F development
  attempt: the answer from the notes (its base call writes the notes, at most 120 words) or the
  pruning of the one-shot draft (its base call is the one-shot's, shared); App. K's tags: the labels
  are a memory (one call per session), the tag choice one call per session with the base calls
  (never judged), the answer one decision per task;
- judging: at most one call per distinct answer of a task: every base and fusion answer
  (selection copies a candidate, so it adds none). Identical answers share a grade, so this
  is an upper bound.

Tokens are an ESTIMATE: characters / CHARS_PER_TOKEN, with the characters of each call's
prompt files, the cohort's mean question, screener, record and dialogue lengths, memories of
CHARS_PER_WORD characters a word, budgets as resolved, and answers as long as the mean
reference answer. Output tokens are given as the ceiling (calls x the output-token cap), since
answers end when the model stops. Failed attempts and retries are not included.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from experiments.core import evidence as ev
from experiments.core.conditions import (
    CURRENT_DIALOGUE, DECISION_CANDIDATES, DECISION_INSTRUCTIONS, DECISION_LAYOUT, JUDGE_PROMPTS, MEM0,
    MEMGPT_QUERY_PROMPTS, MEMGPT_STYLE, MEMORY, MEMORY_LENGTH, MEMORY_PLUS_OWNWORDS, MEMORY_PLUS_WHOLE_RECORD,
    MEMORY_PROMPTS, NO_EVIDENCE, NOTES, NOTES_PROMPTS, NOTES_WORDS, OWNWORDS, PARAPHRASE, PARAPHRASE_PROMPTS, PRUNE,
    PRUNE_PROMPTS, REWRITE_PROMPTS, TAGS, TAGS_PROMPTS, QUESTION_FREE, RECENCY, SELECTION, WHOLE_RECORD, Condition,
)
from experiments.core.prompts import load_prompt

CHARS_PER_TOKEN = 4.0  # a common rule of thumb for English text with these tokenizers
CHARS_PER_WORD = 6.0  # an English word and its space, for a memory of w words

PHASES = ("memories", "generation", "decisions", "judging")
# Mem0's extraction messages around the record (mem0ai 2.2.1: its system prompt and the user
# prompt's headings, measured); the record appears in them once, as the participant's message.
MEM0_EXTRACTION_CHARS = 33_841
# App. K's tag vocabulary: 40 labels of about 15 characters and a line break each.
TAG_VOCABULARY_CHARS = 40 * 16


@dataclass(frozen=True)
class CohortShape:
    """What the estimate needs to know of a cohort: counts and mean lengths in characters."""

    sessions: int
    tasks: int
    record_chars: float = 0.0  # the permitted respondent record per session, before its 12,000 cap
    dialogue_chars: float = 0.0  # both speakers before a task's question, before the 16,000 cap
    question_chars: float = 0.0
    reference_chars: float = 0.0
    screener_chars: float = 0.0


@dataclass
class PhaseEstimate:
    phase: str
    calls: int = 0
    input_chars: float = 0.0
    output_cap_tokens: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def input_tokens(self) -> int:
        return round(self.input_chars / CHARS_PER_TOKEN)


@dataclass
class RunEstimate:
    phases: list[PhaseEstimate]

    @property
    def calls(self) -> int:
        return sum(p.calls for p in self.phases)

    @property
    def input_tokens(self) -> int:
        return sum(p.input_tokens for p in self.phases)

    @property
    def output_cap_tokens(self) -> int:
        return sum(p.output_cap_tokens for p in self.phases)


def _base_group(c: Condition) -> tuple:
    """Conditions with the same key here send byte-identical base messages (they differ only in workflow)."""
    return (c.evidence, c.budget, c.memory_kind, c.memory_words, c.with_screener, c.system_prompt, c.user_prompt,
            c.workflow == PARAPHRASE)  # a paraphrase condition's base call is its paraphrase call, not the verbatim's


def estimate_run(conditions: Iterable[Condition], shape: CohortShape, *, generator_cap: int, judge_cap: int,
                 prompt_text: Callable[[str], str] = load_prompt) -> RunEstimate:
    """Calls and tokens per phase for these conditions on a cohort of this shape (see the module's doc)."""
    conditions = list(conditions)
    length = {}

    def chars(name):
        if name not in length:
            length[name] = len(prompt_text(name))
        return length[name]

    record = min(shape.record_chars, ev.RECORD_CAP)
    screener = min(shape.screener_chars, ev.SCREENER_CAP)
    answer = shape.reference_chars
    memory = PhaseEstimate("memories")
    for kind, words in sorted({(c.memory_kind, c.memory_words) for c in conditions if c.needs_memory}):
        system, user = MEMORY_PROMPTS[kind]
        memory.calls += shape.sessions
        memory.input_chars += shape.sessions * (chars(system) + chars(user) + record)
        memory.output_cap_tokens += shape.sessions * generator_cap
    if any(c.evidence == MEM0 for c in conditions):
        memory.calls += shape.sessions
        memory.input_chars += shape.sessions * (MEM0_EXTRACTION_CHARS + record)
        memory.output_cap_tokens += shape.sessions * generator_cap
        memory.notes.append("includes one Mem0 extraction call per session (its prompt is about 34,000 characters)")

    generation = PhaseEstimate("generation")
    groups: dict[tuple, list[Condition]] = {}
    for c in conditions:
        groups.setdefault(_base_group(c), []).append(c)
    base_chars = {}
    unjudged = 0  # base calls that are not answers (the tag choices, per session)
    for members in groups.values():
        c = members[0]
        if c.workflow == TAGS:  # one choice per session: the record and the vocabulary in
            unjudged += shape.sessions
            generation.calls += shape.sessions
            generation.input_chars += shape.sessions * (sum(chars(name) for name in TAGS_PROMPTS) + record
                                                        + TAG_VOCABULARY_CHARS)
            generation.output_cap_tokens += shape.sessions * generator_cap
            continue
        candidates = max(m.candidates for m in members)
        per_call = (chars(c.system_prompt) + chars(c.user_prompt) + _evidence_chars(c, shape, record)
                    + shape.question_chars + (screener if c.with_screener else 0))
        if c.evidence == MEMGPT_STYLE:  # the base call is the archive-query call: screener, memory, question
            per_call = (sum(chars(name) for name in MEMGPT_QUERY_PROMPTS) + (c.memory_words or 0) * CHARS_PER_WORD
                        + shape.question_chars + screener)
        if c.workflow == NOTES:  # the base call is the notes call: the source and the question
            per_call = (sum(chars(name) for name in NOTES_PROMPTS[c.evidence]) + _evidence_chars(c, shape, record)
                        + shape.question_chars)
        if c.workflow == PARAPHRASE:  # the base call is the paraphrase call: the verbatim evidence alone
            per_call = sum(chars(name) for name in PARAPHRASE_PROMPTS) + _evidence_chars(c, shape, record)
        for m in members:
            base_chars[m.key] = per_call
        generation.calls += shape.tasks * candidates
        generation.input_chars += shape.tasks * candidates * per_call
        generation.output_cap_tokens += shape.tasks * candidates * generator_cap

    decisions = PhaseEstimate("decisions")
    judged_per_task = (generation.calls - unjudged) / shape.tasks if shape.tasks else 0
    for c in conditions:
        if c.evidence == MEMGPT_STYLE:
            decisions.calls += shape.tasks
            decisions.input_chars += shape.tasks * (chars(c.system_prompt) + chars(c.user_prompt)
                                                    + _evidence_chars(c, shape, record) + shape.question_chars
                                                    + screener)
            decisions.output_cap_tokens += shape.tasks * generator_cap
            continue  # judged once per task: generation.calls counted its (never judged) query call in its place
        if c.workflow == NOTES:
            decisions.calls += shape.tasks
            decisions.input_chars += shape.tasks * (chars(c.system_prompt) + chars(c.user_prompt)
                                                    + _evidence_chars(c, shape, record) + NOTES_WORDS * CHARS_PER_WORD
                                                    + shape.question_chars + screener)
            decisions.output_cap_tokens += shape.tasks * generator_cap
            continue  # judged once per task, in place of its (never judged) notes call
        if c.workflow == PARAPHRASE:  # the verbatim call's messages with the paraphrase (at most as long)
            decisions.calls += shape.tasks
            decisions.input_chars += shape.tasks * (chars(c.system_prompt) + chars(c.user_prompt)
                                                    + _evidence_chars(c, shape, record) + shape.question_chars + screener)
            decisions.output_cap_tokens += shape.tasks * generator_cap
            continue  # judged once per task, in place of its (never judged) paraphrase call
        if c.workflow == TAGS:  # the answer from the session's tags (about 10 labels), judged once per task
            decisions.calls += shape.tasks
            decisions.input_chars += shape.tasks * (chars(c.system_prompt) + chars(c.user_prompt) + TAG_VOCABULARY_CHARS / 4
                                                    + shape.question_chars + screener)
            decisions.output_cap_tokens += shape.tasks * generator_cap
            judged_per_task += 1
            continue
        if c.workflow in REWRITE_PROMPTS:  # the question, the base answer (its draft) and the rewriting task
            decisions.calls += shape.tasks
            decisions.input_chars += shape.tasks * (sum(chars(name) for name in REWRITE_PROMPTS[c.workflow])
                                                    + shape.question_chars + answer)
            decisions.output_cap_tokens += shape.tasks * generator_cap
            judged_per_task += 1
            continue
        if c.workflow == PRUNE:  # the one-shot's messages without E.5's system prompt, the draft, the task
            decisions.calls += shape.tasks
            decisions.input_chars += shape.tasks * (base_chars[c.key] - chars(c.system_prompt)
                                                    + sum(chars(name) for name in PRUNE_PROMPTS) + answer)
            decisions.output_cap_tokens += shape.tasks * generator_cap
            judged_per_task += 1
            continue
        if c.workflow not in DECISION_INSTRUCTIONS:
            continue
        decisions.calls += shape.tasks
        decisions.input_chars += shape.tasks * (base_chars[c.key] + chars(c.decision_instruction)
                                                + chars(DECISION_LAYOUT) + DECISION_CANDIDATES * answer)
        decisions.output_cap_tokens += shape.tasks * generator_cap
        if c.workflow != SELECTION:
            judged_per_task += 1

    judging = PhaseEstimate("judging")
    judging.calls = round(shape.tasks * judged_per_task)
    system, user = JUDGE_PROMPTS
    judging.input_chars = judging.calls * (chars(system) + chars(user) + shape.question_chars
                                           + shape.reference_chars + answer)
    judging.output_cap_tokens = judging.calls * judge_cap
    judging.notes.append("at most: identical answers of a task share one grade")
    return RunEstimate([memory, generation, decisions, judging])


def _evidence_chars(c: Condition, shape: CohortShape, record: float) -> float:
    memory = (c.memory_words or 0) * CHARS_PER_WORD
    budget = memory if c.budget == MEMORY_LENGTH else c.budget
    if c.evidence == MEMORY:
        return memory
    if c.evidence in (OWNWORDS, RECENCY, QUESTION_FREE):
        return min(budget, record)
    if c.evidence == WHOLE_RECORD:
        return record
    if c.evidence == CURRENT_DIALOGUE:
        return min(shape.dialogue_chars, ev.DIALOGUE_CAP)
    if c.evidence in (MEMORY_PLUS_OWNWORDS, MEMGPT_STYLE):
        return memory + min(memory, record)
    if c.evidence == MEMORY_PLUS_WHOLE_RECORD:
        return memory + record
    if c.evidence == NO_EVIDENCE:
        return 0.0
    return memory  # a condition not runnable yet: its budget is |memory|


def with_imported_memories(estimate: RunEstimate, imported: int) -> RunEstimate:
    """The estimate when `imported` of its memory calls are replaced by sealed memories of
    earlier runs (no call): the memories phase loses that many calls at its mean cost."""
    memory = next((p for p in estimate.phases if p.phase == "memories"), None)
    if memory is None or imported <= 0 or memory.calls == 0:
        return estimate
    imported = min(imported, memory.calls)
    kept = memory.calls - imported
    reduced = PhaseEstimate("memories", kept, memory.input_chars * kept / memory.calls,
                            memory.output_cap_tokens * kept // memory.calls,
                            [*memory.notes, f"{imported} imported from earlier runs: no call"])
    return RunEstimate([reduced if p is memory else p for p in estimate.phases])
