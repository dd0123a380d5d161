"""Parsing a survey answer: item numbers to option numbers, problems recorded per item. No Django.

The model is asked for one JSON object mapping each item number (as a string) to the number of the
chosen option. A response is read strictly and never repaired or redrawn:
- the whole response, or one fenced block (```json ... ```), must be one JSON object; otherwise
  every item is recorded as missing with the response's problem (`ParsedSurvey.error`);
- a value must be a JSON integer (not a string, float, boolean or null) between 1 and the item's
  number of options; otherwise the item is recorded with its problem and no option;
- a key given twice makes that item "duplicate-key" (neither value is guessed);
- items not in the object are "missing"; keys that are not item numbers are kept as `extra`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MISSING = "missing"
DUPLICATE = "duplicate-key"
NOT_INTEGER = "not-an-integer"
OUT_OF_RANGE = "out-of-range"


@dataclass(frozen=True)
class ItemAnswer:
    number: int
    option: int | None  # the chosen 1-based option, None when unusable
    problem: str | None = None  # MISSING, DUPLICATE, NOT_INTEGER, OUT_OF_RANGE
    raw: str = ""  # the value as the model wrote it (JSON), for the explorer


@dataclass(frozen=True)
class ParsedSurvey:
    items: tuple[ItemAnswer, ...]  # one per item, numbers 1..n
    extra: tuple[str, ...]  # keys that name no item, as written
    error: str | None = None  # the whole response's problem: "empty", "malformed-json", "not-an-object"

    @property
    def answered(self) -> int:
        return sum(item.option is not None for item in self.items)


def parse_survey_answer(text: str, option_counts: Sequence[int]) -> ParsedSurvey:
    """Parse one response for items 1..len(option_counts), item i having option_counts[i-1] options."""
    raise NotImplementedError
