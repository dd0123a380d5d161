"""What each condition sees (the paper's Table 4, App. B.1) and how many calls it makes per answer
(Tables 1 and 16), derived from the condition registry. Pure Python, no Django.

Nothing here is typed per condition: each registered condition is read through a few rules.

- screener, question, reference answer: the fields of the condition's answering prompt
  (`prompts/*.txt`, `{screener}`, `{question}`; no answering prompt has a field for the reference);
- memory text, verbatim excerpts, whole record, current dialogue: the condition's evidence
  construction (`EVIDENCE_SEES`, one entry per evidence kind; a budgeted excerpt says its budget);
  an evidence kind without an entry is shown as "not classified", never guessed;
- earlier model output: the answering workflow (fusion and selection see their three candidates,
  a notes workflow its notes, a pruning workflow its own draft) and MemGPT-style's archive queries;
- another person's data: none for every classified evidence kind;
- calls per answer: the base calls (`candidates`), one decision call for fusion and selection, one
  call per auxiliary prompt pair (archive queries, notes, pruning), and "(+1)" when the condition
  needs one more call per session to write what it shows (the written memory, or Mem0's store).

Rows come in the paper's order first (the conditions of the ready-made protocols, template by
template, as `core.paper_protocols` lists them), then every other registered condition.
"""
from __future__ import annotations

from experiments.core import conditions as registry
from experiments.core.conditions import CONDITIONS, MEMORY_LENGTH, Condition
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.core.prompts import load_prompt, prompt_fields

YES, NO = "yes", "no"
NOT_CLASSIFIED = "not classified"

COLUMNS = ("Condition", "Screener", "Question", "Memory text", "Verbatim excerpts", "Whole record",
           "Current dialogue", "Earlier model output", "Another person's data", "Reference answer")

# What each evidence construction shows besides the screener and the question:
# memory (the written memory's text), store (Mem0's stored memories), excerpts (how they are
# ranked; the budget is the condition's), record (the whole permitted record), dialogue (the
# current dialogue), queries (model-written archive queries).
EVIDENCE_SEES: dict[str, dict] = {
    registry.MEMORY: {"memory": True},
    registry.OWNWORDS: {"excerpts": "BM25 on the question"},
    registry.RECENCY: {"excerpts": "most recent sentences"},
    registry.QUESTION_FREE: {"excerpts": "BM25 on the record's 12 most frequent words"},
    registry.WHOLE_RECORD: {"record": True},
    registry.CURRENT_DIALOGUE: {"dialogue": True},
    registry.MEMORY_PLUS_OWNWORDS: {"memory": True, "excerpts": "BM25 on the question"},
    registry.MEMORY_PLUS_WHOLE_RECORD: {"memory": True, "record": True},
    registry.NO_EVIDENCE: {},
    registry.MEM0: {"store": True},
    registry.MEMGPT_STYLE: {"memory": True, "excerpts": "BM25 on model-written archive queries", "queries": True},
    # Conditions of the factorial and of the dense ranker, by their evidence names.
    "dense": {"excerpts": "embedding cosine to the question"},
    "memory@raw-header": {"memory": True},
    "question-free@memory-header": {"excerpts": "BM25 on the record's 12 most frequent words"},
}

# The workflows whose answering call sees earlier model output of the same task.
WORKFLOW_OUTPUT = {registry.FUSION: "{n} candidate answers", registry.SELECTION: "{n} candidate answers",
                   "notes": "its question-specific notes", "prune": "its own one-shot draft",
                   "paraphrase": "its evidence rewritten in other words (instead of the verbatim text)",
                   "answer-paraphrase": "its own one-shot draft", "length": "its own one-shot draft"}
DECISION_WORKFLOWS = (registry.FUSION, registry.SELECTION)


def answering_fields(condition: Condition) -> set[str]:
    """The `{field}` names of the condition's answering prompt."""
    return prompt_fields(load_prompt(condition.user_prompt))


def budget_label(condition: Condition) -> str:
    """B for the concrete 100-word memory's length, |memory (kind, w words)| for another memory's,
    a number of characters for a fixed budget."""
    if condition.budget == MEMORY_LENGTH:
        if (condition.memory_kind, condition.memory_words) == (registry.CONCRETE, registry.DEFAULT_MEMORY_WORDS):
            return "B"
        return f"|{condition.memory_kind} memory, {condition.memory_words}w|"
    return f"{condition.budget} characters"


def memory_label(condition: Condition) -> str:
    return f"{condition.memory_kind} memory, {condition.memory_words}w"


def evidence_sees(condition: Condition) -> dict | None:
    """The EVIDENCE_SEES entry of the condition's evidence, or None when it is not classified."""
    return EVIDENCE_SEES.get(condition.evidence)


def writes_per_session(condition: Condition) -> bool:
    """Whether the condition needs one more call per session: to write the memory it shows, or
    Mem0's store. A memory that only sets the budget (OwnWords at B = |memory|) does not count."""
    sees = evidence_sees(condition) or {}
    return bool(sees.get("memory") or sees.get("store"))


def auxiliary_calls(condition: Condition) -> int:
    """One call per auxiliary prompt pair (a system prompt and its user prompt or layout)."""
    systems = sum(1 for name in condition.auxiliary_prompts if name.endswith("_system"))
    return systems or (len(condition.auxiliary_prompts) + 1) // 2


def calls_per_answer(condition: Condition) -> str:
    """Language-model calls per answer, as the paper prints them: "1", "2", "4 (+1)"."""
    calls = condition.candidates + (1 if condition.workflow in DECISION_WORKFLOWS else 0) + auxiliary_calls(condition)
    return f"{calls} (+1)" if writes_per_session(condition) else str(calls)


def sees_row(condition: Condition) -> tuple[str, ...]:
    """One row of Table 4 for the condition, in COLUMNS order."""
    fields = answering_fields(condition)
    sees = evidence_sees(condition)
    classified = sees is not None
    sees = sees or {}

    def known(value: str) -> str:
        return value if classified else NOT_CLASSIFIED

    if sees.get("memory"):
        memory = memory_label(condition)
    elif sees.get("store"):
        memory = f"Mem0's stored memories, ≤ {budget_label(condition)}"
    else:
        memory = known(NO)
    excerpts = f"≤ {budget_label(condition)}, {sees['excerpts']}" if sees.get("excerpts") else known(NO)
    record = "respondent only, to the earliest cut" if sees.get("record") else known(NO)
    dialogue = "both speakers, to the question" if sees.get("dialogue") else known(NO)
    output = WORKFLOW_OUTPUT.get(condition.workflow)
    if output is not None:
        earlier = output.format(n=condition.candidates)
    elif sees.get("queries"):
        earlier = "its archive queries"
    elif condition.workflow == registry.ONE_SHOT:
        earlier = known(NO)
    else:
        earlier = NOT_CLASSIFIED
    return (condition.key, YES if "screener" in fields else NO, YES if "question" in fields else NO, memory,
            excerpts, record, dialogue, earlier, known(NO),
            YES if fields & {"reference", "actual_answer", "reference_answer"} else NO)


def paper_order(keys=None) -> list[str]:
    """The condition keys (every registered one by default): the ready-made protocols' conditions
    first, template by template in their order, then the others in registry order."""
    chosen = list(CONDITIONS) if keys is None else [k for k in keys if k in CONDITIONS]
    seen = dict.fromkeys(key for template in PAPER_PROTOCOLS.values() for key in template.conditions
                         if key in chosen)
    return [*seen, *(key for key in chosen if key not in seen)]


def paper_conditions() -> set[str]:
    """The conditions of the paper's own ready-made protocols."""
    return {key for template in PAPER_PROTOCOLS.values() for key in template.conditions}


def information_rows(keys=None) -> list[tuple[str, ...]]:
    """Table 4's rows for the given condition keys (every registered condition by default)."""
    return [sees_row(CONDITIONS[key]) for key in paper_order(keys)]
