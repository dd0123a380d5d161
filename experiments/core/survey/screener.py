"""The survey screener: the persona's 14 demographic answer lines (App. H). No Django.

QID11-QID24 of the persona's `Demographics` block, in that order: region, sex, age, education,
race, citizenship, marital status, religion, religious attendance, party, income, ideology,
household size, employment. Each is one answer line (`lines.question_lines`: "{question}:
{answer}"), joined by line breaks; the prompt puts them under [SCREENER Q&A].
"""
from __future__ import annotations

from experiments.core.survey.lines import question_lines
from experiments.core.survey.records import Respondent

DEMOGRAPHICS_BLOCK = "Demographics"
SCREENER_QIDS = tuple(f"QID{n}" for n in range(11, 25))


class ScreenerError(ValueError):
    """A persona without one of the 14 screener answers (names the respondent and question)."""


def screener_block_index(respondent: Respondent) -> int:
    """The index of the persona's Demographics block (the first of that name)."""
    for block in respondent.persona:
        if block.name == DEMOGRAPHICS_BLOCK:
            return block.index
    raise ScreenerError(f"respondent {respondent.pid}: the persona has no {DEMOGRAPHICS_BLOCK!r} block")


def screener_lines(respondent: Respondent) -> list[str]:
    """The 14 answer lines, in SCREENER_QIDS order; ScreenerError if one is missing."""
    index = screener_block_index(respondent)
    block = respondent.persona[index]
    by_qid = {}
    for question in block.questions:
        by_qid.setdefault(question.qid, question)
    lines = []
    for qid in SCREENER_QIDS:
        question = by_qid.get(qid)
        found = question_lines(question) if question is not None and question.qtype == "MC" else []
        if len(found) != 1:
            raise ScreenerError(f"respondent {respondent.pid}: the {DEMOGRAPHICS_BLOCK!r} block has no "
                                f"single-choice answer to screener question {qid}")
        lines.append(found[0].text)
    return lines


def screener_text(respondent: Respondent) -> str:
    """The 14 lines joined by "\\n": what follows [SCREENER Q&A]."""
    return "\n".join(screener_lines(respondent))
