"""The survey conditions and the App. E "Twin-2K-500 answering" messages. No Django.

System prompt: `prompts/survey_answer_system.txt` (verbatim). User prompt: one file per evidence
layout, `prompts/survey_answer_<layout>_user.txt`; each starts with [INFORMATION ABOUT THIS
RESPONDENT] and [SCREENER Q&A], then (after a blank line) the condition's evidence blocks, then
[SURVEY QUESTIONS] with the numbered items and their options, then the verbatim [RESPONSE FORMAT]
line. The memory is the concrete-memory prompt unchanged (`memory_concrete_system`,
`memory_concrete_user`) applied to the whole persona.

Conditions (App. H): screener only; memory; OwnWords at B = |memory|; memory + OwnWords;
the whole persona (OwnWords∞); memory + whole persona (the second sample). OwnWords's budget B is
the length of the respondent's memory in characters (`ownwords.survey_ownwords(respondent, len(memory))`).

Without a screener (Table 21's earlier runs, a protocol-level option): the same conditions, each with
its `NO_SCREENER_USER_PROMPTS` file, which leaves out the [SCREENER Q&A] block (the screener-only
condition then shows no information at all); `assemble_survey_no_screener` builds those messages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from experiments.core.prompts import PromptRef, render_prompt
from experiments.core.survey.targets import TargetItem

SCREENER_ONLY = "survey:screener"
MEMORY = "survey:memory"
OWNWORDS = "survey:ownwords(B=|memory|)"
MEMORY_PLUS_OWNWORDS = "survey:memory+ownwords"
WHOLE_PERSONA = "survey:whole-persona"
MEMORY_PLUS_WHOLE_PERSONA = "survey:memory+whole-persona"

SYSTEM_PROMPT = "survey_answer_system"


@dataclass(frozen=True)
class SurveyCondition:
    key: str
    label: str
    user_prompt: str  # prompt file name
    needs_memory: bool  # one further call writes the memory first
    evidence: tuple[str, ...]  # the evidence fields the user prompt takes, besides screener/questions/n


def _conditions(*conditions: SurveyCondition) -> dict[str, SurveyCondition]:
    return {condition.key: condition for condition in conditions}


SURVEY_CONDITIONS: dict[str, SurveyCondition] = _conditions(  # the paper's order (App. H)
    SurveyCondition(SCREENER_ONLY, "screener only", "survey_answer_screener_user", False, ()),
    SurveyCondition(MEMORY, "written memory", "survey_answer_memory_user", True, ("memory",)),
    SurveyCondition(OWNWORDS, "OwnWords (B = |memory|)", "survey_answer_ownwords_user", True, ("excerpts",)),
    SurveyCondition(MEMORY_PLUS_OWNWORDS, "memory + OwnWords", "survey_answer_memory_ownwords_user", True,
                    ("memory", "excerpts")),
    SurveyCondition(WHOLE_PERSONA, "whole persona (OwnWords\u221e)", "survey_answer_persona_user", False,
                    ("persona",)),
    SurveyCondition(MEMORY_PLUS_WHOLE_PERSONA, "memory + whole persona", "survey_answer_memory_persona_user",
                    True, ("memory", "persona")),
)
# The user prompt of each condition in a run that shows no condition the screener (Table 21). Kept
# apart from SurveyCondition, whose fields a seal hashes as they are.
NO_SCREENER_USER_PROMPTS: dict[str, str] = {
    SCREENER_ONLY: "survey_answer_questions_only_user",
    MEMORY: "survey_answer_memory_no_screener_user",
    OWNWORDS: "survey_answer_ownwords_no_screener_user",
    MEMORY_PLUS_OWNWORDS: "survey_answer_memory_ownwords_no_screener_user",
    WHOLE_PERSONA: "survey_answer_persona_no_screener_user",
    MEMORY_PLUS_WHOLE_PERSONA: "survey_answer_memory_persona_no_screener_user",
}
NO_SCREENER = "no screener"
NO_SCREENER_LABELS: dict[str, str] = {SCREENER_ONLY: "questions only (no screener)"}


def condition_label(key: str, *, screener: bool = True) -> str:
    """The condition's label; in a run without the screener, marked "(no screener)"."""
    condition = get_survey_condition(key)
    if screener:
        return condition.label
    return NO_SCREENER_LABELS.get(key, f"{condition.label} ({NO_SCREENER})")


def user_prompt_name(key: str, *, screener: bool = True) -> str:
    """The user prompt file of a condition, with or without the screener."""
    return get_survey_condition(key).user_prompt if screener else NO_SCREENER_USER_PROMPTS[key]


MEMORY_WORDS = 100  # the concrete memory's requested length, as in the interviews (conditions.DEFAULT_MEMORY_WORDS)


@dataclass(frozen=True)
class SurveyMessages:
    """The exact messages of one call and the prompts that made them."""

    system: str
    user: str
    prompts: tuple[PromptRef, ...]
    n_items: int  # items asked (0 for the memory call)


def get_survey_condition(key: str) -> SurveyCondition:
    try:
        return SURVEY_CONDITIONS[key]
    except KeyError:
        raise ValueError(f"unknown survey condition {key!r}; known: {', '.join(SURVEY_CONDITIONS)}") from None


def questions_block(items: Sequence[TargetItem]) -> str:
    """The numbered items with their options, as shown under [SURVEY QUESTIONS]: per item its number
    and question, a matrix row's text on a "Statement:" line, and its options as "k = text",
    items separated by blank lines. Numbers must run 1..n in order (they are the answer's keys)."""
    parts = []
    for expected, item in enumerate(items, 1):
        if item.number != expected:
            raise ValueError(f"items must be numbered 1..n in order; item {expected} is numbered {item.number}")
        lines = [f"{item.number}. {item.question}"]
        if item.row:
            lines.append(f"   Statement: {item.row}")
        lines.append("   Options: " + "; ".join(f"{k} = {option}" for k, option in enumerate(item.options, 1)))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def assemble_survey(condition_key: str, items: Sequence[TargetItem], *, screener: str,
                    memory: str | None = None, excerpts: str | None = None,
                    persona: str | None = None) -> SurveyMessages:
    """The system and user message of one answer call; fails if the condition's evidence is missing
    or evidence it does not use is given."""
    condition = get_survey_condition(condition_key)
    if not items:
        raise ValueError("a survey answer call needs at least one item")
    if not screener:
        raise ValueError("every survey condition shows the screener; it is empty")
    given = {"memory": memory, "excerpts": excerpts, "persona": persona}
    missing = [name for name in condition.evidence if given[name] is None]
    unused = [name for name, value in given.items() if value is not None and name not in condition.evidence]
    if missing or unused:
        raise ValueError(f"{condition.key} takes {list(condition.evidence) or 'no evidence'}: "
                         f"missing {missing}, not used {unused}")
    fields = {name: given[name] for name in condition.evidence}
    system, system_ref = render_prompt(SYSTEM_PROMPT)
    user, user_ref = render_prompt(condition.user_prompt, screener=screener, questions=questions_block(items),
                                   n=str(len(items)), **fields)
    return SurveyMessages(system, user, (system_ref, user_ref), len(items))


def assemble_survey_no_screener(condition_key: str, items: Sequence[TargetItem], *, memory: str | None = None,
                                excerpts: str | None = None, persona: str | None = None) -> SurveyMessages:
    """`assemble_survey` for a run that shows no condition the screener (Table 21): the condition's
    `NO_SCREENER_USER_PROMPTS` file, the same evidence rules, no screener field."""
    condition = get_survey_condition(condition_key)
    if not items:
        raise ValueError("a survey answer call needs at least one item")
    fields = _evidence_fields(condition, memory=memory, excerpts=excerpts, persona=persona)
    system, system_ref = render_prompt(SYSTEM_PROMPT)
    user, user_ref = render_prompt(NO_SCREENER_USER_PROMPTS[condition.key], questions=questions_block(items),
                                   n=str(len(items)), **fields)
    return SurveyMessages(system, user, (system_ref, user_ref), len(items))


def _evidence_fields(condition: SurveyCondition, **given: str | None) -> dict[str, str]:
    missing = [name for name in condition.evidence if given[name] is None]
    unused = [name for name, value in given.items() if value is not None and name not in condition.evidence]
    if missing or unused:
        raise ValueError(f"{condition.key} takes {list(condition.evidence) or 'no evidence'}: "
                         f"missing {missing}, not used {unused}")
    return {name: given[name] for name in condition.evidence}


def assemble_survey_memory(persona: str, *, words: int = MEMORY_WORDS) -> SurveyMessages:
    """The memory call: the concrete-memory prompt unchanged, with the whole persona as the record."""
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"words must be a positive integer, got {words!r}")
    if not persona:
        raise ValueError("the memory is written from the whole persona; it is empty")
    system, system_ref = render_prompt("memory_concrete_system")
    user, user_ref = render_prompt("memory_concrete_user", record=persona, words=str(words))
    return SurveyMessages(system, user, (system_ref, user_ref), 0)
