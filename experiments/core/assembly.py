"""Message assembly: a condition and a task in, the exact messages sent out. Pure Python, no Django.

`assemble` is the one place that decides what an answering call contains, so what a page
shows as "what the model saw" is by construction what was sent (docs/design.md §4, Prediction keeps
the exact evidence and messages). `assemble_memory_request` and `assemble_judge` do the same
for the memory writer (App. E.1-E.4) and the blind judge (App. E.10-E.11, §3.2).

Example (a notebook):

    from experiments.core.assembly import TaskInput, assemble
    from experiments.core.evidence import RankedMemories, TurnText
    task = TaskInput(question="How do you use AI when composing?", turns=turns, cut=14,
                     record_cut=10, screener=(("Occupation?", "Composer"),))
    sent = assemble("ownwords(B=|memory|)", task, memory=memory_text)
    sent.system, sent.user, sent.evidence, sent.evidence_chars, sent.prompt_refs
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from experiments.core import evidence as ev
from experiments.core.conditions import (
    CURRENT_DIALOGUE, DENSE, Condition, JUDGE_PROMPTS, MEM0, MEMGPT_QUERY_PROMPTS, MEMGPT_STYLE, MEMORY,
    MEMORY_PLUS_OWNWORDS, MEMORY_PLUS_WHOLE_RECORD, MEMORY_PROMPTS, MEMORY_UNDER_RAW_HEADER, NO_EVIDENCE, ONE_SHOT,
    OWNWORDS, QUESTION_FREE, QUESTION_FREE_UNDER_MEMORY_HEADER, RECENCY, WHOLE_RECORD, WRONG_PERSON, get_condition,
)
from experiments.core.dense import Embed, dense_excerpt
from experiments.core.conditions import NOTES, TAGS
from experiments.core.evidence import RankedMemories, TurnText
from experiments.core.parsers import selection_payload
from experiments.core.prompts import PromptRef, fill_prompt, loaded_prompt, render_prompt

# Blocks of a composite evidence are shown, and counted, joined by one blank line.
EVIDENCE_PART_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class TaskInput:
    """One prediction task as the builders need it (docs/design.md §4, Task).

    `turns` is the whole session; `cut` is the target question's turn index (the current
    dialogue sees the turns before it); `record_cut` is the session's earliest task cut,
    which bounds the permitted record for memories, OwnWords, recency and the whole record
    (§3.1, §8); `screener` holds (question, answer) pairs.
    """

    question: str
    turns: tuple[TurnText, ...]
    cut: int
    record_cut: int
    screener: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.record_cut > self.cut:
            raise ValueError(
                f"record_cut ({self.record_cut}) is the session's earliest cut and cannot be "
                f"after this task's cut ({self.cut})"
            )

    def record(self) -> str:
        """The permitted respondent-only record H (App. F)."""
        return ev.respondent_record(self.turns, self.record_cut)


@dataclass(frozen=True)
class Assembled:
    """The exact messages of one call, the personal evidence inside them, and the prompts.

    `evidence` is what the condition shows about the person besides the screener and the
    question (the memory, the excerpts, the record, the dialogue; "" for none) and
    `evidence_chars` its length in characters. `budget` is B in characters, if any.
    """

    system: str
    user: str
    evidence: str
    evidence_chars: int
    prompt_refs: tuple[PromptRef, ...]
    budget: int | None = None


def _evidence_fields(condition: Condition, task: TaskInput, memory: str | None, budget: int | None,
                     ranked: RankedMemories | None = None, archive_query: str | None = None,
                     embed: Embed | None = None) -> dict[str, str]:
    """The user prompt's evidence fields for the condition, in prompt order."""
    kind = condition.evidence
    if kind == MEMORY_UNDER_RAW_HEADER:  # Table 15's cross cells: the same text, the other header
        return {"evidence": memory}
    if kind == QUESTION_FREE_UNDER_MEMORY_HEADER:
        return {"memory": ev.question_free(task.record(), budget)}
    if kind == DENSE:
        if embed is None:
            raise ValueError(f"{condition.key} needs the sentence embedder (memory_systems.dense_embedder.embed)")
        return {"evidence": dense_excerpt(task.record(), task.question, budget, embed)}
    if kind == MEM0:
        if ranked is None:
            raise ValueError(f"{condition.key} needs Mem0's ranked memories of the session")
        return {"evidence": ev.ranked_memories_excerpt(ranked, budget)}
    if kind in (MEMORY, WRONG_PERSON):  # the wrong person's: planning passes another person's memory
        return {"memory": memory}
    if kind == TAGS:  # App. K: the chosen tags, shown as the memory
        return {"memory": memory}
    if kind == OWNWORDS:
        return {"evidence": ev.ownwords(task.record(), task.question, budget)}
    if kind == RECENCY:
        return {"evidence": ev.recency(task.record(), budget)}
    if kind == QUESTION_FREE:
        return {"evidence": ev.question_free(task.record(), budget)}
    if kind == WHOLE_RECORD:
        return {"evidence": ev.whole_record(task.turns, task.record_cut)}
    if kind == CURRENT_DIALOGUE:
        return {"evidence": ev.current_dialogue(task.turns, task.cut)}
    if kind == MEMORY_PLUS_OWNWORDS:
        return ev.memory_plus_ownwords(memory, task.record(), task.question)
    if kind == MEMORY_PLUS_WHOLE_RECORD:
        return ev.memory_plus_whole_record(memory, task.record())
    if kind == MEMGPT_STYLE:
        return ev.memgpt_style(memory, task.record(), archive_query)
    if kind == NO_EVIDENCE:
        return {}
    raise NotImplementedError(f"{condition.key}: no builder for evidence {kind!r}")


def assemble(
    condition: Condition | str,
    task: TaskInput,
    *,
    memory: str | None = None,
    candidates: Sequence[str] | None = None,
    ranked_memories: RankedMemories | None = None,
    archive_queries: Sequence[str] | None = None,
    notes: str | None = None,
    embed: Embed | None = None,
) -> Assembled:
    """The messages of one answering call of `condition` on `task`.

    `memory` is the session's written memory of the condition's kind and length (required
    when the condition shows a memory or its budget is |memory|; ignored otherwise).
    Without `candidates`, the base call (a one-shot, or each identical-prompt candidate of
    fusion and selection). With `candidates` — the three answers in display order, see
    `parsers.candidate_display_order` — the decision call: the base user prompt followed by
    [DECISION TASK], the instruction and [ANONYMOUS CANDIDATES] (App. E, after E.11).
    `ranked_memories`: Mem0's memories of the session ranked for this question (Mem0 only).
    A notes condition's answering call (App. F) needs the first call's `notes`, capped
    (`core.workflows.cap_notes`); they follow the source in its evidence.
    A MemGPT-style condition's answering call needs its parsed `archive_queries` (the query
    call itself is `assemble_archive_queries`). The dense retriever needs `embed`, the sentence
    embedder (`experiments.memory_systems.dense_embedder.embed`, or any stand-in).
    """
    if isinstance(condition, str):
        condition = get_condition(condition)
    if not condition.runnable:
        raise NotImplementedError(f"{condition.key} is not runnable yet: {condition.note}")
    if condition.needs_memory and memory is None:
        raise ValueError(f"{condition.key} needs the session's {condition.memory_kind} memory")
    if candidates is not None and condition.workflow == ONE_SHOT:
        raise ValueError(f"{condition.key} is a one-shot condition: it takes no candidates")

    archive_query = None
    if condition.evidence == MEMGPT_STYLE:
        if not archive_queries:
            raise ValueError(f"{condition.key} answers only with its archive queries")
        archive_query = " ".join(archive_queries)
    budget = condition.resolve_budget(memory)
    evidence_fields = _evidence_fields(condition, task, memory, budget, ranked_memories, archive_query, embed)
    if condition.workflow == NOTES:  # App. F: the source, then the first call's notes
        if notes is None:
            raise ValueError(f"{condition.key} answers only with its notes (core.workflows)")
        evidence_fields = dict(evidence_fields, notes=notes)
    fields = dict(evidence_fields, question=task.question)
    if condition.with_screener:
        fields["screener"] = ev.screener_block(task.screener)

    system, system_ref = render_prompt(condition.system_prompt)
    user, user_ref = render_prompt(condition.user_prompt, **fields)
    refs = [system_ref, user_ref]
    if candidates is not None:
        instruction, instruction_ref = render_prompt(condition.decision_instruction)
        user, layout_ref = render_prompt(
            condition.decision_layout,
            base=user, instruction=instruction, candidates=selection_payload(candidates),
        )
        refs += [instruction_ref, layout_ref]

    evidence = EVIDENCE_PART_SEPARATOR.join(evidence_fields.values())
    return Assembled(system, user, evidence, len(evidence), tuple(refs), budget)


def assemble_memory_request(kind: str, words: int, task: TaskInput) -> Assembled:
    """The call that writes a session's memory (App. E.1-E.4, §5): the permitted record H
    (up to the session's earliest cut, capped at 12,000 characters) and about `words` words."""
    if kind not in MEMORY_PROMPTS:
        raise ValueError(f"memory kind must be one of {tuple(MEMORY_PROMPTS)}, got {kind!r}")
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"words must be a positive integer, got {words!r}")
    system_name, user_name = MEMORY_PROMPTS[kind]
    record = task.record()
    system, system_ref = render_prompt(system_name)
    user, user_ref = render_prompt(user_name, record=record, words=str(words))
    return Assembled(system, user, record, len(record), (system_ref, user_ref))


def assemble_archive_queries(condition: Condition | str, task: TaskInput, *, memory: str) -> Assembled:
    """The MemGPT-style query call (E.12, App. H): the screener, the core memory and the question
    in, up to three archive queries (JSON) out. Its evidence is the core memory."""
    if isinstance(condition, str):
        condition = get_condition(condition)
    if condition.evidence != MEMGPT_STYLE:
        raise ValueError(f"{condition.key} writes no archive queries")
    if memory is None:
        raise ValueError(f"{condition.key} needs the session's {condition.memory_kind} memory")
    system_name, user_name = MEMGPT_QUERY_PROMPTS
    system, system_ref = render_prompt(system_name)
    user, user_ref = render_prompt(user_name, screener=ev.screener_block(task.screener), memory=memory,
                                   question=task.question)
    return Assembled(system, user, memory, len(memory), (system_ref, user_ref))


def assemble_judge(question: str, reference: str, prediction: str) -> Assembled:
    """The blind content judge's call (App. E.10-E.11): question, reference and prediction
    only — no condition, no memory, no evidence (§3.2)."""
    system_name, user_name = JUDGE_PROMPTS
    system, system_ref = render_prompt(system_name)
    user, user_ref = render_prompt(user_name, question=question, reference=reference, prediction=prediction)
    return Assembled(system, user, "", 0, (system_ref, user_ref))


def judge_assembler():
    """`assemble_judge` for many calls: both prompt files read and hashed once (each text and
    its reference from the same bytes, as in `render_prompt`), filled per call."""
    system_name, user_name = JUDGE_PROMPTS
    system, system_ref = render_prompt(system_name)
    user_template, user_ref = loaded_prompt(user_name)
    refs = (system_ref, user_ref)

    def assemble_one(question: str, reference: str, prediction: str) -> Assembled:
        user = fill_prompt(user_template, question=question, reference=reference, prediction=prediction)
        return Assembled(system, user, "", 0, refs)
    return assemble_one


# The LLM pairwise judge's prompts: question, actual answer, answers A and B.
PAIRWISE_JUDGE_PROMPTS = ("pairwise_judge_system", "pairwise_judge_user")


def pairwise_judge_assembler():
    """As `judge_assembler`, for the pairwise judge: each call shows two answers as A and B."""
    system_name, user_name = PAIRWISE_JUDGE_PROMPTS
    system, system_ref = render_prompt(system_name)
    user_template, user_ref = loaded_prompt(user_name)
    refs = (system_ref, user_ref)

    def assemble_one(question: str, reference: str, answer_a: str, answer_b: str) -> Assembled:
        user = fill_prompt(user_template, question=question, reference=reference, answer_a=answer_a,
                           answer_b=answer_b)
        return Assembled(system, user, "", 0, refs)
    return assemble_one


__all__ = ["Assembled", "TaskInput", "TurnText", "assemble", "assemble_archive_queries", "assemble_memory_request",
           "assemble_judge", "judge_assembler",
           "PAIRWISE_JUDGE_PROMPTS", "pairwise_judge_assembler"]
