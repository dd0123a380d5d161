"""A respondent's answers as text: one answer line per answered item. No Django.

An answer line is the (HTML-free, whitespace-collapsed) question text, then ": " and the chosen
answer's text; a matrix row's line puts the row's text after the question ("{question} {row}: ...");
a price-list row ("LEFT:RIGHT", columns "1" and "2") names the chosen side; a multi-answer MC
joins its answers with "; "; a form line names the box ("{question} {box}: ..."); a slider line
the statement. A question with an empty text (the depression inventory's groups, whose
instruction is a separate descriptive block) gives the answer alone. Descriptive blocks and
unanswered questions or rows give no line. These lines are what the screener shows and what
OwnWords ranks (App. H).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from experiments.core.survey.records import Block, Question

_TAG = re.compile(r"<[^>]*>")
PRICE_LIST_SELECTOR = "Bipolar"


@dataclass(frozen=True)
class AnswerLine:
    block_index: int
    question_index: int
    qid: str
    text: str


@lru_cache(maxsize=65_536)
def clean_text(text: str) -> str:
    """Text without HTML tags and &nbsp;, whitespace collapsed to single spaces (other entities
    are kept, as the dataset authors' renderer keeps them). Cached: texts recur in every persona."""
    if "<" in text:
        text = _TAG.sub(" ", text)
    return " ".join(text.replace("&nbsp;", " ").split())


def _line(question: Question, prefix: str, answer: str) -> AnswerLine:
    text = f"{prefix}: {answer}" if prefix else answer
    return AnswerLine(question.block_index, question.index, question.qid, text)


def question_lines(question: Question) -> list[AnswerLine]:
    """The answer lines of one question (none for DB or an unanswered question)."""
    stem = clean_text(question.text)
    qtype = question.qtype
    if qtype == "MC" and question.positions:
        answer = "; ".join(clean_text(question.options[p - 1]) for p in question.positions)
        return [_line(question, stem, answer)]
    if qtype == "Matrix":
        out = []
        for row, position in zip(question.rows, question.positions):
            row = clean_text(row)
            if question.selector == PRICE_LIST_SELECTOR and ":" in row and len(question.options) == 2:
                sides = row.split(":", 1)
                out.append(_line(question, f"{stem} {' or '.join(s.strip() for s in sides)}".strip(),
                                 sides[position - 1].strip()))
            else:
                out.append(_line(question, f"{stem} {row}".strip(), clean_text(question.options[position - 1])))
        return out
    if qtype == "Slider":
        return [_line(question, f"{stem} {clean_text(statement)}".strip(), value)
                for statement, value in zip(question.rows, question.values)]
    if qtype == "TE":
        if question.form_answers:
            return [_line(question, f"{stem} {clean_text(label)}".strip(), clean_text(value))
                    for label, value in question.form_answers if clean_text(value)]
        if question.text_answer is not None and clean_text(question.text_answer):
            return [_line(question, stem, clean_text(question.text_answer))]
    return []


def answer_lines(blocks: Sequence[Block], *, skip_blocks: Sequence[int] = ()) -> list[AnswerLine]:
    """Every answer line of the blocks, in file order; blocks whose index is in `skip_blocks` left out."""
    skip = set(skip_blocks)
    return [line for block in blocks if block.index not in skip
            for question in block.questions for line in question_lines(question)]
