"""Parsing a survey answer: item numbers to option numbers, problems recorded per item. No Django.

The model is asked for one JSON object mapping each item number (as a string) to the number of the
chosen option. A response is read strictly and never repaired or redrawn:
- the whole response, or one fenced block (```json ... ```), must be one JSON object; otherwise
  every item is recorded as missing with the response's problem (`ParsedSurvey.error`);
- a value must be a JSON integer (not a string, float, boolean or null) between 1 and the item's
  number of options; otherwise the item is recorded with its problem and no option;
- a key given twice makes that item "duplicate-key" (neither value is guessed);
- items not in the object are "missing"; keys that are not item numbers ("01", " 3", "0", "85"
  of 84, "item 3") are kept as `extra`.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

MISSING = "missing"
DUPLICATE = "duplicate-key"
NOT_INTEGER = "not-an-integer"
OUT_OF_RANGE = "out-of-range"
RAW_MAX_CHARS = 200  # what is kept of a value or key as written, for the explorer

_FENCED = re.compile(r"```(?:json)?(.*)```", re.DOTALL | re.IGNORECASE)  # as parsers._FENCED
# An item key is the item's number as the prompt wrote it: digits without sign, spaces or zeros in front.
_ITEM_KEY = re.compile(r"[1-9][0-9]{0,5}")


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


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _pairs(pairs: list[tuple[str, object]]) -> list[tuple[str, object]]:
    # Keep every pair, duplicates included: a key given twice is the item's problem, not the
    # whole response's.
    return pairs


def _top_level_pairs(text: str) -> tuple[list[tuple[str, object]] | None, str | None]:
    stripped = text.strip()
    if not stripped:
        return None, "empty"
    fenced = _FENCED.fullmatch(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        value = json.loads(stripped, object_pairs_hook=_pairs, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None, "malformed-json"
    if not isinstance(value, list) or (value and not isinstance(value[0], tuple)) or stripped[:1] != "{":
        return None, "not-an-object"
    return value, None


def _raw(value: object) -> str:
    if type(value) is int:  # the usual case; json.dumps of an int is its decimal text
        return str(value)[:RAW_MAX_CHARS]
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        value = dict(value)  # a nested object, shown as written (duplicates collapsed)
    try:
        return json.dumps(value, ensure_ascii=False)[:RAW_MAX_CHARS]
    except (TypeError, ValueError):
        return repr(value)[:RAW_MAX_CHARS]


def parse_survey_answer(text: str, option_counts: Sequence[int]) -> ParsedSurvey:
    """Parse one response for items 1..len(option_counts), item i having option_counts[i-1] options."""
    if not isinstance(text, str):
        raise TypeError("the response must be text")
    n = len(option_counts)
    pairs, error = _top_level_pairs(text)
    if error is not None:
        return ParsedSurvey(tuple(ItemAnswer(i, None, MISSING) for i in range(1, n + 1)), (), error)
    values: dict[int, list[object]] = {}
    extra: list[str] = []
    for key, value in pairs:
        number = int(key) if key.isascii() and key.isdigit() and _ITEM_KEY.fullmatch(key) else 0
        if 1 <= number <= n:
            values.setdefault(number, []).append(value)
        else:
            extra.append(key[:RAW_MAX_CHARS])
    items = []
    for number in range(1, n + 1):
        given = values.get(number)
        if not given:
            items.append(ItemAnswer(number, None, MISSING))
            continue
        raw = _raw(given[-1]) if len(given) == 1 else " | ".join(_raw(v) for v in given)[:RAW_MAX_CHARS]
        if len(given) > 1:
            items.append(ItemAnswer(number, None, DUPLICATE, raw))
            continue
        value = given[0]
        if isinstance(value, bool) or not isinstance(value, int):
            items.append(ItemAnswer(number, None, NOT_INTEGER, raw))
        elif not 1 <= value <= option_counts[number - 1]:
            items.append(ItemAnswer(number, None, OUT_OF_RANGE, raw))
        else:
            items.append(ItemAnswer(number, value, None, raw))
    return ParsedSurvey(tuple(items), tuple(extra), None)
