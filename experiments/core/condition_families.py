"""The families a page lists conditions under (the protocol form, the contrast rows): each
condition of the registry (`core.conditions`) belongs to exactly one. Pure Python, no Django."""
from __future__ import annotations

from experiments.core.conditions import (
    CONDITIONS, CURRENT_DIALOGUE, DEFAULT_MEMORY_WORDS, DENSE, MEMORY, MEMORY_PLUS_OWNWORDS, MEMORY_PLUS_WHOLE_RECORD,
    MEMORY_UNDER_RAW_HEADER, NO_EVIDENCE, NOTES, OWNWORDS, PARAPHRASE, PRUNE, REWRITE_PROMPTS, QUESTION_FREE, QUESTION_FREE_UNDER_MEMORY_HEADER,
    RECENCY, TAGS, WHOLE_RECORD, WRONG_PERSON, Condition,
)

# (key, title, what the family's conditions share), in the order a page shows them.
FAMILIES = (
    ("memory", "A written memory", "one memory of the session, answered one-shot or by fusion / selection over "
     "three identical-prompt candidates (the one-shot is candidate b0)"),
    ("excerpts", "The person's own words at a budget", "sentences of the permitted record that fit in B characters"),
    ("record", "The record without a budget", "the whole permitted record, or the dialogue up to the question"),
    ("combined", "A memory together with the record", "the memory and excerpts or the whole record in one call"),
    ("factorial", "Evidence × header (App. F, Table 15)", "the memory text or question-free excerpts, each under "
     "the other's header, one call at the same per-task character budget"),
    ("development", "Added model stages (App. F; App. K's tags)", "notes; a pruned draft; tags from the cohort's labels"),
    ("controls", "Wording controls (beyond the paper)", "the excerpts or the record rewritten in other words at the "
     "same character budget, then answered with the verbatim condition's prompt; an answer rewritten in other words "
     "or to a fixed length, then graded"),
    ("baselines", "No personal evidence", "the screener and the question, or the question alone"),
    ("sweep", "Budget sweep at other memory lengths (App. G.1)", "memory, OwnWords and recency at B = |memory| "
     "for memories of 50, 200 and 400 words"),
    ("systems", "Memory systems (App. H)", "Mem0 and the MemGPT-style design, as deployed; one not runnable here says so"),
)


def condition_family(condition: Condition) -> str:
    """The FAMILIES key a condition is listed under."""
    if not condition.runnable:
        return "systems"
    if condition.workflow == PARAPHRASE or condition.workflow in REWRITE_PROMPTS:
        return "controls"
    if condition.workflow in (NOTES, PRUNE, TAGS):
        return "development"
    if condition.memory_words not in (None, DEFAULT_MEMORY_WORDS):
        return "sweep"
    return {
        MEMORY: "memory", WRONG_PERSON: "memory", OWNWORDS: "excerpts", RECENCY: "excerpts", QUESTION_FREE: "excerpts",
        WHOLE_RECORD: "record", CURRENT_DIALOGUE: "record", MEMORY_PLUS_OWNWORDS: "combined",
        MEMORY_PLUS_WHOLE_RECORD: "combined", NO_EVIDENCE: "baselines", DENSE: "excerpts",
        MEMORY_UNDER_RAW_HEADER: "factorial", QUESTION_FREE_UNDER_MEMORY_HEADER: "factorial",
    }.get(condition.evidence, "systems")


def conditions_by_family(keys=None) -> list[tuple[tuple[str, str, str], list[Condition]]]:
    """[(family, [conditions in registry order])] for the given keys (every condition by default),
    families in FAMILIES order, empty families left out."""
    chosen = [CONDITIONS[key] for key in CONDITIONS if keys is None or key in keys]
    grouped = [(family, [c for c in chosen if condition_family(c) == family[0]]) for family in FAMILIES]
    return [(family, members) for family, members in grouped if members]
