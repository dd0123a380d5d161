"""A respondent's answers as text: one answer line per answered item. No Django.

An answer line is the (HTML-free, whitespace-collapsed) question text, then ": " and the chosen
answer's text; a matrix row's line puts the row's text after the question ("{question} {row}: ...");
a price-list row ("LEFT:RIGHT") names the chosen side; a multi-answer MC joins its answers with
"; "; a form names the box ("{question} {box}: ..."); a question with an empty text (the
depression inventory's groups) gives the answer alone. Descriptive blocks and unanswered rows
give no line. These lines are what the screener shows and what OwnWords ranks (App. H).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from experiments.core.survey.records import Block, Question


@dataclass(frozen=True)
class AnswerLine:
    block_index: int
    question_index: int
    qid: str
    text: str


def clean_text(text: str) -> str:
    """QuestionText or option text without HTML tags and &nbsp;, whitespace collapsed."""
    raise NotImplementedError


def question_lines(question: Question, block_index: int = 0) -> list[AnswerLine]:
    """The answer lines of one question (none for DB or an unanswered question)."""
    raise NotImplementedError


def answer_lines(blocks: Sequence[Block], *, skip_blocks: Sequence[int] = ()) -> list[AnswerLine]:
    """Every answer line of the blocks, in file order; blocks whose index is in `skip_blocks` left out."""
    raise NotImplementedError
