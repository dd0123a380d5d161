"""The paper's fixed inputs as files: a fixed task list and a person-exclusion list. Pure Python.

The paper runs on inputs fixed before any call: the benchmark's task list (which targets of
which sessions), and a list of people left out of every later cohort (those used in development;
§8 "excluding 156 people a later audit found in exploratory files"). Both are read strictly,
the whole file or nothing, every problem named with its line.

Fixed task list: UTF-8 CSV with the header ``session_id,question_turn``; one target per row,
``question_turn`` the turn index (0-based, as stored) of the target's question, whose reply is
the next turn. Rows are kept in file order, which becomes the cohort's order.

Person-exclusion list: UTF-8 text, one person id (as imported, e.g. ``p-17``) per line; blank
lines and lines starting with ``#`` are ignored; surrounding spaces are not part of an id.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from experiments.core.interviews.records import printable, unstorable_text_problem

TASK_LIST_HEADER = ("session_id", "question_turn")
MAX_ID_CHARS = 200
MAX_ROWS = 1_000_000


class FixedInputError(ValueError):
    """A fixed-input file that cannot be used; the message names every problem found."""


@dataclass(frozen=True)
class FixedTarget:
    session_id: str
    question_turn: int
    line: int  # for messages


def _text(data: bytes | str, label: str) -> str:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FixedInputError(f"{label}: not UTF-8 (byte {exc.start})") from None
    if problem := unstorable_text_problem(data):
        raise FixedInputError(f"{label}: the file {problem}")
    return data


def parse_task_list(data: bytes | str, label: str = "task list") -> list[FixedTarget]:
    """The rows of a fixed task list, or FixedInputError listing every bad row."""
    text = _text(data, label)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    problems: list[str] = []
    try:
        header = next(reader, None)
        if header is None or tuple(cell.strip() for cell in header) != TASK_LIST_HEADER:
            raise FixedInputError(f"{label}: the first line must be the header {','.join(TASK_LIST_HEADER)}")
        targets: list[FixedTarget] = []
        seen: dict[tuple[str, int], int] = {}
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(targets) >= MAX_ROWS:
                raise FixedInputError(f"{label}: more than {MAX_ROWS:,} rows")
            if len(row) != 2:
                problems.append(f"line {line}: expected 2 fields (session_id,question_turn), got {len(row)}")
                continue
            session_id, turn = row[0].strip(), row[1].strip()
            if not session_id or len(session_id) > MAX_ID_CHARS:
                problems.append(f"line {line}: session_id must be 1 to {MAX_ID_CHARS} characters")
                continue
            if not turn.isascii() or not turn.isdigit():
                problems.append(f"line {line}: question_turn must be a whole number ≥ 0, not {printable(turn)[:40]!r}")
                continue
            key = (session_id, int(turn))
            if key in seen:
                problems.append(f"line {line}: the same target as line {seen[key]}")
                continue
            seen[key] = line
            targets.append(FixedTarget(session_id, int(turn), line))
    except csv.Error as exc:
        raise FixedInputError(f"{label}: malformed CSV at line {reader.line_num}: {exc}") from None
    if problems:
        raise FixedInputError(f"{label}:\n" + "\n".join(problems[:50])
                              + (f"\n… and {len(problems) - 50} more" if len(problems) > 50 else ""))
    if not targets:
        raise FixedInputError(f"{label}: no targets")
    return targets


def parse_person_list(data: bytes | str, label: str = "exclusion list") -> list[str]:
    """The person ids of an exclusion list, in file order without repeats."""
    text = _text(data, label)
    people: dict[str, None] = {}
    problems = []
    for line_number, raw in enumerate(text.splitlines(), start=1):
        person = raw.strip()
        if not person or person.startswith("#"):
            continue
        if len(person) > MAX_ID_CHARS:
            problems.append(f"line {line_number}: a person id is at most {MAX_ID_CHARS} characters")
            continue
        people.setdefault(person, None)
    if problems:
        raise FixedInputError(f"{label}:\n" + "\n".join(problems[:50]))
    return list(people)
