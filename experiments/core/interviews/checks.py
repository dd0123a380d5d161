"""The checks every interview reader shares (`readers`, `genagents`, `streams`): a collector of a
file's problems, the checks of a text, an id and an interview, and the strict JSON decoder.

Each check adds its complaints to the file's `Collector` instead of raising, so the user sees every
problem of a file in one go. Imports no Django.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from experiments.core.interviews.records import (
    ID_MAX_CHARS, MAX_REPORTED_PROBLEMS, PARTICIPANT, InterviewFileError, Problem, text_is_plain,
    unstorable_text_problem,
)


@dataclass
class Collector:
    """Gathers problems for one file so the user sees them all in one go."""

    file: str
    problems: list[Problem] = field(default_factory=list)

    def add(self, location: str, field_name: str, message: str) -> None:
        if len(self.problems) < MAX_REPORTED_PROBLEMS:
            self.problems.append(Problem(self.file, location, field_name, message))

    def raise_if_any(self) -> None:
        if self.problems:
            raise InterviewFileError(self.problems)


_ID_BREAKS = re.compile("[\r\n\t]")


def check_text(text: str, where: str, field_name: str, out: Collector, *, limit: int) -> None:
    if text_is_plain(text, limit):
        return
    problem = unstorable_text_problem(text)
    if problem:
        out.add(where, field_name, problem)
    if len(text) > limit:
        out.add(where, field_name, f"is {len(text):,} characters long; the limit is {limit:,}")


def check_id(value, where: str, field_name: str, out: Collector) -> None:
    if not isinstance(value, str):
        out.add(where, field_name, f"must be a string, got {type(value).__name__}")
    elif not value.strip():
        out.add(where, field_name, "must not be empty")
    elif value != value.strip() or _ID_BREAKS.search(value):
        out.add(where, field_name, "must not contain leading/trailing spaces or line breaks")
    else:
        check_text(value, where, field_name, out, limit=ID_MAX_CHARS)


def check_has_participant_speech(turns, where: str, out: Collector) -> None:
    if not turns:
        out.add(where, "turns", "the interview is empty (no turns)")
    elif not any(t.speaker == PARTICIPANT and t.text.strip() for t in turns):
        out.add(where, "turns", "the interview has no participant speech")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a valid JSON number")


def _no_duplicate_keys(pairs):
    record = dict(pairs)  # one C call; the loop below runs only for a file that has a duplicate
    if len(record) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key '{key}'")
            seen.add(key)
    return record


# One decoder for every line (json.loads would build one per call).
_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)


def load_json_strict(text: str):
    """json.loads that refuses NaN/Infinity and duplicate keys instead of guessing."""
    return _STRICT_DECODER.decode(text)
