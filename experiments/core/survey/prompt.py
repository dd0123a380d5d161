"""The survey conditions and the App. E "Twin-2K-500 answering" messages. No Django.

System prompt: `prompts/survey_answer_system.txt` (verbatim). User prompt: one file per evidence
layout, `prompts/survey_answer_<layout>_user.txt`; each starts with [INFORMATION ABOUT THIS
RESPONDENT] and [SCREENER Q&A], then (after a blank line) the condition's evidence blocks, then
[SURVEY QUESTIONS] with the numbered items and their options, then the verbatim [RESPONSE FORMAT]
line. The memory is the concrete-memory prompt unchanged (`memory_concrete_system`,
`memory_concrete_user`) applied to the whole persona.

Conditions (App. H): screener only; memory; OwnWords at B = |memory|; memory + OwnWords;
the whole persona (OwnWords∞); memory + whole persona (the second sample).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from experiments.core.prompts import PromptRef
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


SURVEY_CONDITIONS: dict[str, SurveyCondition] = {}  # filled below, in the paper's order


@dataclass(frozen=True)
class SurveyMessages:
    """The exact messages of one answer call and the prompts that made them."""

    system: str
    user: str
    prompts: tuple[PromptRef, ...]
    n_items: int


def get_survey_condition(key: str) -> SurveyCondition:
    raise NotImplementedError


def questions_block(items: Sequence[TargetItem]) -> str:
    """The numbered items with their options, as shown under [SURVEY QUESTIONS]."""
    raise NotImplementedError


def assemble_survey(condition_key: str, items: Sequence[TargetItem], *, screener: str,
                    memory: str | None = None, excerpts: str | None = None,
                    persona: str | None = None) -> SurveyMessages:
    """The system and user message of one answer call; fails if the condition's evidence is missing
    or evidence it does not use is given."""
    raise NotImplementedError


def assemble_survey_memory(persona: str, *, words: int) -> SurveyMessages:
    """The memory call: the concrete-memory prompt unchanged, with the whole persona as the record."""
    raise NotImplementedError
