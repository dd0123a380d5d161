"""The survey screener: the persona's 14 demographic answer lines (App. H). No Django.

QID11-QID24 of the persona's `Demographics` block, in that order: region, sex, age, education,
race, citizenship, marital status, religion, religious attendance, party, income, ideology,
household size, employment. Each is one answer line (`lines`), joined by line breaks; the
prompt puts them under [SCREENER Q&A].
"""
from __future__ import annotations

from experiments.core.survey.records import Respondent

DEMOGRAPHICS_BLOCK = "Demographics"
SCREENER_QIDS = tuple(f"QID{n}" for n in range(11, 25))


class ScreenerError(ValueError):
    """A persona without one of the 14 screener answers (names the respondent and question)."""


def screener_lines(respondent: Respondent) -> list[str]:
    """The 14 answer lines, in SCREENER_QIDS order; ScreenerError if one is missing."""
    raise NotImplementedError


def screener_text(respondent: Respondent) -> str:
    """The 14 lines joined by "\\n": what follows [SCREENER Q&A]."""
    raise NotImplementedError
