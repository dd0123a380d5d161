"""The condition registry (docs/design.md §4): evidence construction x answering workflow x prompts,
as named, frozen, parameterised specs. Pure Python, no Django.

A condition says *what* the answering call sees and *how many* calls answer; `assembly`
turns it and a task into the exact messages. Keys read like the paper's names, e.g.
`memory(concrete,100w)+one-shot`, `ownwords(B=|memory|)`, `recency(B=|memory(concrete,50w)|)`.
`B=|memory|` means the budget is the character length of the session's concrete 100-word
memory (§8: B := |m|); other memories are spelled out, fixed budgets are numbers.

Each spec has a canonical JSON form (`canonical_json`) and its sha256 (`spec_sha256`) for
protocol seals; prompt files are sealed separately by their own hashes (`prompts`).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from typing import Literal, Union

from experiments.core.canonical import canonical_json
from experiments.core.wrong_person import WRONG_PERSON_SEED

# Evidence constructions (what the model sees about the person, besides screener and question).
MEMORY = "memory"
OWNWORDS = "ownwords"
RECENCY = "recency"
QUESTION_FREE = "question-free"
WHOLE_RECORD = "whole-record"
CURRENT_DIALOGUE = "current-dialogue"
MEMORY_PLUS_OWNWORDS = "memory+ownwords"
MEMORY_PLUS_WHOLE_RECORD = "memory+whole-record"
NO_EVIDENCE = "none"  # screener-only and question-only
MEM0 = "mem0"
MEMGPT_STYLE = "memgpt-style"
MEMORY_UNDER_RAW_HEADER, QUESTION_FREE_UNDER_MEMORY_HEADER = "memory@raw-header", "question-free@memory-header"  # Table 15
DENSE, WRONG_PERSON = "dense", "wrong-person"  # beyond the paper: a dense ranker; App. K: another person's memory

# Answering workflows (§6, App. B.2).
ONE_SHOT = "one-shot"
FUSION = "fusion"
SELECTION = "selection"
NOTES, PRUNE, TAGS, NOTES_WORDS = "notes", "prune", "tags", 120  # App. F / E.12: notes; pruning. App. K: tags
NOTES_PROMPTS = {WHOLE_RECORD: ("notes_system", "notes_record_user"), MEMORY: ("notes_system", "notes_memory_user")}
PRUNE_PROMPTS, TAGS_PROMPTS = ("prune_system", "prune_layout"), ("tags_choice_system", "tags_choice_user")
PARAPHRASE, PARAPHRASE_PROMPTS = "paraphrase", ("paraphrase_system", "paraphrase_evidence_user")  # beyond the paper
# Beyond the paper: an answer rewritten after it is drafted — in other words (judge invariance), or to LENGTH_WORDS,
# or to the median length of another condition's answers (`<base>+length(median:<other>)`, `length_from`).
ANSWER_PARAPHRASE, LENGTH, LENGTH_WORDS = "answer-paraphrase", "length", 60
REWRITE_PROMPTS = {ANSWER_PARAPHRASE: ("rewrite_answer_system", "paraphrase_answer_user"),
                   LENGTH: ("rewrite_answer_system", "length_rewrite_user")}

CONCRETE = "concrete"
TRAIT = "trait"
MEMORY_KINDS, PROFILE, LABELS = (CONCRETE, TRAIT), "profile", "labels"  # App. K: the combined profile; tag labels
DEFAULT_MEMORY_WORDS = 100
SWEEP_MEMORY_WORDS = (50, 100, 200, 400)  # App. G.1
DECISION_CANDIDATES = 3
# The label of a condition's own answer; fusion and selection pools also keep candidates b0..b2.
FINAL = "final"

# Budget rule: "|memory|" (B = the memory's character count), a fixed number of characters,
# or None (no budget).
MEMORY_LENGTH = "|memory|"
Budget = Union[Literal["|memory|"], int, None]

GENERATION_SYSTEM = "generation_system"
MEMORY_PROMPTS = {
    CONCRETE: ("memory_concrete_system", "memory_concrete_user"),
    TRAIT: ("memory_trait_system", "memory_trait_user"),
    PROFILE: ("memory_profile_system", "memory_profile_user"),  # App. K: 28 imputed scale entries
    LABELS: ("memory_labels_system", "memory_labels_user"),  # App. K: the tag arm's free labels
}
DECISION_INSTRUCTIONS = {FUSION: "fusion_instruction", SELECTION: "selection_instruction"}
DECISION_LAYOUT = "decision_layout"
JUDGE_PROMPTS = ("judge_system", "judge_user")
MEMGPT_QUERY_PROMPTS = ("memgpt_query_system", "memgpt_query_user")


@dataclass(frozen=True)
class Condition:
    """One condition. `candidates` is the number of identical-prompt base calls (1 for a
    one-shot, 3 for fusion and selection, the first being the one-shot b0, App. B.2)."""

    key: str
    evidence: str
    workflow: str
    candidates: int
    budget: Budget
    memory_kind: str | None  # the memory shown, or the one whose length sets the budget
    memory_words: int | None
    with_screener: bool
    system_prompt: str
    user_prompt: str
    decision_instruction: str | None = None
    decision_layout: str | None = None
    auxiliary_prompts: tuple[str, ...] = ()  # further calls per answer, e.g. archive queries
    runnable: bool = True
    note: str = ""
    # A length control's target: the median length in words of this condition's final answers in the
    # run, computed when the rewrites are planned (`core.paraphrase.length_target`); None: LENGTH_WORDS.
    length_from: str | None = None

    @property
    def needs_memory(self) -> bool:
        return self.memory_kind is not None

    def prompt_names(self) -> tuple[str, ...]:
        """Every prompt file the condition depends on, in use order: the memory writer's (when
        a memory is shown or sets the budget), auxiliary calls', then the answering call's."""
        names = [
            *(MEMORY_PROMPTS[self.memory_kind] if self.needs_memory else ()),
            *self.auxiliary_prompts,
            self.system_prompt, self.user_prompt, self.decision_instruction, self.decision_layout,
        ]
        return tuple(dict.fromkeys(name for name in names if name is not None))

    def resolve_budget(self, memory: str | None) -> int | None:
        """The budget in characters for this session: |memory|, the fixed number, or None."""
        if self.budget == MEMORY_LENGTH:
            if memory is None:
                raise ValueError(f"{self.key}: the budget is |memory| but no memory was given")
            return len(memory)
        return self.budget

    def canonical_json(self) -> str:
        """The spec as JSON with sorted keys, compact separators and UTF-8 as is, so the same
        spec always gives the same bytes. `note` is left out: it describes, it does not act,
        and rewording it must not break a seal."""
        spec = asdict(self)
        del spec["note"]
        if spec["length_from"] is None:  # absent unless set: every other spec keeps its bytes and hash
            del spec["length_from"]
        return canonical_json(spec)

    def spec_sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()


def memory_key(kind: str, words: int) -> str:
    return f"memory({kind},{words}w)"


def _budget_key(budget: Budget, kind: str | None, words: int | None) -> str:
    if budget == MEMORY_LENGTH:
        if (kind, words) == (CONCRETE, DEFAULT_MEMORY_WORDS):
            return "B=|memory|"
        return f"B=|{memory_key(kind, words)}|"
    return f"B={budget}"


def _check_memory(kind: str, words: int) -> None:
    if kind not in MEMORY_PROMPTS:
        raise ValueError(f"memory kind must be one of {tuple(MEMORY_PROMPTS)}, got {kind!r}")
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"memory words must be a positive integer, got {words!r}")


def _check_budget(budget: Budget) -> None:
    if budget == MEMORY_LENGTH:
        return
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget must be {MEMORY_LENGTH!r} or a non-negative integer, got {budget!r}")


# --- Factories: one per family of conditions ------------------------------------------

def memory_condition(kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS, workflow: str = ONE_SHOT) -> Condition:
    """Answering from a written memory (§5-§7, E.6): one-shot, or fusion / selection over
    three identical-prompt candidates (E.8, E.9)."""
    _check_memory(kind, words)
    if workflow == ONE_SHOT:
        key, candidates = f"{memory_key(kind, words)}+one-shot", 1
    elif workflow in DECISION_INSTRUCTIONS:
        key, candidates = f"{memory_key(kind, words)}+{workflow}({DECISION_CANDIDATES})", DECISION_CANDIDATES
    else:
        raise ValueError(f"workflow must be one-shot, fusion or selection, got {workflow!r}")
    return Condition(
        key=key, evidence=MEMORY, workflow=workflow, candidates=candidates, budget=None,
        memory_kind=kind, memory_words=words, with_screener=True,
        system_prompt=GENERATION_SYSTEM, user_prompt="answer_memory_user",
        decision_instruction=DECISION_INSTRUCTIONS.get(workflow),
        decision_layout=DECISION_LAYOUT if workflow != ONE_SHOT else None,
    )


def _budgeted(evidence: str, budget: Budget, kind: str, words: int, note: str) -> Condition:
    _check_budget(budget)
    if budget == MEMORY_LENGTH:
        _check_memory(kind, words)
    else:
        kind = words = None  # a fixed budget needs no memory
    return Condition(
        key=f"{evidence}({_budget_key(budget, kind, words)})", evidence=evidence,
        workflow=ONE_SHOT, candidates=1, budget=budget, memory_kind=kind, memory_words=words,
        with_screener=True, system_prompt=GENERATION_SYSTEM, user_prompt="answer_raw_user",
        note=note,
    )


def ownwords_condition(budget: Budget = MEMORY_LENGTH, kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS) -> Condition:
    """OwnWords at budget B (§8, Algorithm 1), answered with the raw-evidence prompt (E.7)."""
    return _budgeted(OWNWORDS, budget, kind, words, "Algorithm 1: BM25 over the person's sentences, greedy fill to B")


def recency_condition(budget: Budget = MEMORY_LENGTH, kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS) -> Condition:
    """The most recent whole sentences that fit in B (App. G.1)."""
    return _budgeted(RECENCY, budget, kind, words, "most recent whole sentences that fit in B")


def question_free_condition(budget: Budget = MEMORY_LENGTH, kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS) -> Condition:
    """OwnWords with the record's 12 most frequent content words as the query (App. F)."""
    return _budgeted(QUESTION_FREE, budget, kind, words, "OwnWords with the source's 12 most frequent tokens as query")


def _unbudgeted(key: str, evidence: str, user_prompt: str, *, with_screener: bool = True, note: str = "") -> Condition:
    return Condition(
        key=key, evidence=evidence, workflow=ONE_SHOT, candidates=1, budget=None,
        memory_kind=None, memory_words=None, with_screener=with_screener,
        system_prompt=GENERATION_SYSTEM, user_prompt=user_prompt, note=note,
    )


def memory_plus_ownwords_condition(kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS) -> Condition:
    """The memory and OwnWords's excerpts at B = |memory| in one call (App. H)."""
    _check_memory(kind, words)
    suffix = "" if (kind, words) == (CONCRETE, DEFAULT_MEMORY_WORDS) else f"({kind},{words}w)"
    return Condition(
        key=f"memory+ownwords{suffix}", evidence=MEMORY_PLUS_OWNWORDS, workflow=ONE_SHOT,
        candidates=1, budget=MEMORY_LENGTH, memory_kind=kind, memory_words=words,
        with_screener=True, system_prompt=GENERATION_SYSTEM,
        user_prompt="answer_memory_excerpts_user",
        note="about twice the context of the memory alone",
    )


def memory_plus_whole_record_condition(kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS) -> Condition:
    """The memory and the whole record, no budget, in one call (App. H)."""
    _check_memory(kind, words)
    suffix = "" if (kind, words) == (CONCRETE, DEFAULT_MEMORY_WORDS) else f"({kind},{words}w)"
    return Condition(
        key=f"memory+whole-record{suffix}", evidence=MEMORY_PLUS_WHOLE_RECORD, workflow=ONE_SHOT,
        candidates=1, budget=None, memory_kind=kind, memory_words=words, with_screener=True,
        system_prompt=GENERATION_SYSTEM, user_prompt="answer_memory_record_user",
    )


MEM0_NOTE = (
    "Mem0 as deployed (mem0ai, App. H), fully local: the permitted record is added as the "
    "participant's message (one extraction call per session, to the generator, through the journal); "
    "Mem0's search ranks its memories against the question, semantic only (its BM25 and entity "
    "scoring need models it downloads at run time); the ranked memories fill B greedily; sessions "
    "whose extraction gave no memories are counted on the run page. Needs requirements-mem0.txt"
)


def mem0_condition() -> Condition:
    """Mem0 as deployed at B = |memory| (App. H), answered with the raw-evidence prompt (E.7);
    run by `experiments.memory_systems.mem0_store` and `experiments.execution.mem0_planning`."""
    return Condition(
        key=f"{MEM0}({_budget_key(MEMORY_LENGTH, CONCRETE, DEFAULT_MEMORY_WORDS)})",
        evidence=MEM0, workflow=ONE_SHOT, candidates=1, budget=MEMORY_LENGTH,
        memory_kind=CONCRETE, memory_words=DEFAULT_MEMORY_WORDS, with_screener=True,
        system_prompt=GENERATION_SYSTEM, user_prompt="answer_raw_user", note=MEM0_NOTE,
    )


def memgpt_style_condition(kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS) -> Condition:
    """MemGPT's core-plus-archival pattern as in App. H: the written memory is the core memory;
    one call per task writes up to three archive queries (E.12) from the screener, the memory
    and the question; joined, they are one BM25 query of OwnWords over the verbatim source at
    B = |memory|; one call answers over the core memory and the excerpts. The query call runs
    with the base calls, the answering call in the decisions phase (after the queries exist)."""
    _check_memory(kind, words)
    suffix = "" if (kind, words) == (CONCRETE, DEFAULT_MEMORY_WORDS) else f"({kind},{words}w)"
    return Condition(
        key=f"{MEMGPT_STYLE}({_budget_key(MEMORY_LENGTH, CONCRETE, DEFAULT_MEMORY_WORDS)}){suffix}",
        evidence=MEMGPT_STYLE, workflow=ONE_SHOT, candidates=1, budget=MEMORY_LENGTH,
        memory_kind=kind, memory_words=words, with_screener=True,
        system_prompt=GENERATION_SYSTEM, user_prompt="answer_memory_excerpts_user",
        auxiliary_prompts=MEMGPT_QUERY_PROMPTS,
        note="one more call per task writes the archive queries; about twice the context of the memory alone",
    )


def _memory_cell(key: str, evidence: str, budget: Budget, user_prompt: str, note: str) -> Condition:
    """One call on the concrete 100-word memory (shown, or setting B): Table 15's cross cells, App. K's control."""
    return Condition(key, evidence, ONE_SHOT, 1, budget, CONCRETE, DEFAULT_MEMORY_WORDS, True, GENERATION_SYSTEM,
                     user_prompt, note=note)


def dense_condition(budget: Budget = MEMORY_LENGTH, kind: str = CONCRETE, words: int = DEFAULT_MEMORY_WORDS) -> Condition:
    """Beyond the paper (its future work): OwnWords's path, sentences ranked by embedding cosine to the question."""
    return _budgeted(DENSE, budget, kind, words, "dense ranker (all-MiniLM-L6-v2 cosine); needs requirements-mem0.txt")


def _second_call(key: str, evidence: str, workflow: str, memory: tuple, user: str, first: tuple, note: str) -> Condition:
    """App. F's notes and pruning, App. K's tags: a call after one of their own (`core.workflows`, `core.tags`)."""
    return Condition(key, evidence, workflow, 1, None, *memory, True, GENERATION_SYSTEM, user, auxiliary_prompts=first,
                     note=note)


def paraphrased_condition(verbatim: Condition) -> Condition:
    """Beyond the paper (its closing call for a controlled paraphrase comparison): the verbatim
    condition's evidence rewritten by one call to keep its content in other words, within the same
    character budget (`core.paraphrase`), then answered with the verbatim condition's own prompt."""
    return replace(verbatim, key=f"{verbatim.key}+paraphrased", workflow=PARAPHRASE, auxiliary_prompts=PARAPHRASE_PROMPTS,
                   note="the evidence in other words (one call, cut at the budget), then the answer")


def rewritten_condition(base: Condition, workflow: str, length_from: Condition | None = None) -> Condition:
    """Beyond the paper: the base condition's one-shot answer as its draft b0 (the same call), then one call
    rewrites it — in other words, content kept (the same judge grades both: judge invariance), or to about
    LENGTH_WORDS words, or to the median length of `length_from`'s answers in the run (the contrast at equal
    length); the rewrite is the final answer (`core.paraphrase`)."""
    if workflow == ANSWER_PARAPHRASE:
        suffix = "answer-paraphrased"
    else:
        suffix = f"length(median:{length_from.key})" if length_from is not None else f"length({LENGTH_WORDS}w)"
    return replace(base, key=f"{base.key}+{suffix}", workflow=workflow, auxiliary_prompts=REWRITE_PROMPTS[workflow],
                   length_from=length_from.key if length_from is not None else None,
                   note="the base condition's answer as its draft, then one rewriting call")


def _rewrite_bases() -> tuple[Condition, ...]:
    """The rewrites' drafts, and the answers whose median a length target may be: base calls (generation
    phase), so they exist when the rewrites are planned (decisions phase)."""
    return memory_condition(), ownwords_condition(), _unbudgeted(WHOLE_RECORD, WHOLE_RECORD, "answer_raw_user")


def _budget_sweep(words: int) -> tuple[Condition, ...]:
    """App. G.1 at one memory length w: the memory, OwnWords and recency at B_w = |m_w|."""
    return (
        memory_condition(CONCRETE, words),
        ownwords_condition(MEMORY_LENGTH, CONCRETE, words),
        recency_condition(MEMORY_LENGTH, CONCRETE, words),
    )


def _registry() -> dict[str, Condition]:
    conditions = [
        *(memory_condition(kind, DEFAULT_MEMORY_WORDS, workflow)
          for kind in MEMORY_KINDS for workflow in (ONE_SHOT, FUSION, SELECTION)),
        ownwords_condition(),
        recency_condition(),
        question_free_condition(),
        _unbudgeted(WHOLE_RECORD, WHOLE_RECORD, "answer_raw_user",
                    note="the memories' verbatim source: OwnWords without a budget"),
        _unbudgeted(CURRENT_DIALOGUE, CURRENT_DIALOGUE, "answer_raw_user",
                    note="both speakers up to the question, last 16,000 characters"),
        memory_plus_ownwords_condition(),
        memory_plus_whole_record_condition(),
        _unbudgeted("screener-only", NO_EVIDENCE, "answer_screener_only_user"),
        _unbudgeted("question-only", NO_EVIDENCE, "answer_question_only_user", with_screener=False),
        mem0_condition(),
        memgpt_style_condition(),
        _second_call(f"{WHOLE_RECORD}+notes({NOTES_WORDS}w)", WHOLE_RECORD, NOTES, (None, None), "answer_notes_record_user",
                     NOTES_PROMPTS[WHOLE_RECORD], "App. F: notes (one call), then an answer"),
        _second_call(f"{memory_key(CONCRETE, 100)}+notes({NOTES_WORDS}w)", MEMORY, NOTES, (CONCRETE, 100),
                     "answer_notes_memory_user", NOTES_PROMPTS[MEMORY], "App. F: notes (one call), then an answer"),
        _second_call(f"{memory_key(CONCRETE, 100)}+pruned", MEMORY, PRUNE, (CONCRETE, 100), "answer_memory_user",
                     PRUNE_PROMPTS, "App. F: the one-shot draft b0, then one pruning call"),
        _second_call("tags(6-10,top-40)+one-shot", TAGS, TAGS, (LABELS, 30), "answer_memory_user", TAGS_PROMPTS,
                     "App. K: labels per session, then 6-10 tags chosen from the cohort's 40 most frequent"),
        memory_condition(PROFILE),
        _memory_cell("memory(concrete,100w)+raw-header", MEMORY_UNDER_RAW_HEADER, None, "answer_raw_user",
                     "Table 15: the memory under the raw-evidence header"),
        _memory_cell("question-free(B=|memory|)+memory-header", QUESTION_FREE_UNDER_MEMORY_HEADER, MEMORY_LENGTH,
                     "answer_memory_user", "Table 15: question-free excerpts under the memory header"),
        _memory_cell(f"memory(concrete,100w)+wrong-person(seed={WRONG_PERSON_SEED})", WRONG_PERSON, None,
                     "answer_memory_user", "App. K: another cohort member's memory (core.wrong_person)"),
        dense_condition(),
        *(paraphrased_condition(verbatim) for verbatim in (
            ownwords_condition(), recency_condition(),
            _unbudgeted(WHOLE_RECORD, WHOLE_RECORD, "answer_raw_user"))),
        *(rewritten_condition(base, workflow) for workflow in REWRITE_PROMPTS for base in _rewrite_bases()),
        *(rewritten_condition(base, LENGTH, other) for base in _rewrite_bases() for other in _rewrite_bases()),
        *(condition for words in SWEEP_MEMORY_WORDS if words != DEFAULT_MEMORY_WORDS
          for condition in _budget_sweep(words)),
    ]
    registry = {condition.key: condition for condition in conditions}
    assert len(registry) == len(conditions), "condition keys must be unique"
    return registry


CONDITIONS: dict[str, Condition] = _registry()


def get_condition(key: str) -> Condition:
    try:
        return CONDITIONS[key]
    except KeyError:
        raise KeyError(f"unknown condition {key!r}; known: {', '.join(CONDITIONS)}") from None


def prediction_labels(condition: Condition) -> list[str]:
    """The labels of the answers a condition produces per task: its final answer, or its pool's candidates."""
    if condition.workflow in (PRUNE, *REWRITE_PROMPTS):  # its draft; the edited answer is its final (decisions)
        return ["b0"]
    return [FINAL] if condition.candidates == 1 else [f"b{i}" for i in range(condition.candidates)]
