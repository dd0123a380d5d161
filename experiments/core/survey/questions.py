"""Blocks and questions of one JSON column, validated per question type (FORMAT.md §3, §7). No Django.

`parse_blocks` walks a decoded column (a list of blocks) and returns `records.Block`s, reporting
each problem through a callback with the column, block and question it concerns. Only the
fields of FORMAT.md §3.3 are read; unknown keys are ignored. What differs between the persona and
the two wave-4 columns (`wave4=True`):

- wave-4 questions must all be answered, matrix answer lists must be as long as their rows and
  slider value lists as long as their statements, and a QuestionID may occur only once;
- in the persona an unanswered question, a matrix answer list shorter than its rows (the missing
  rows cannot be told apart, so they stay unanswered) and repeated QuestionIDs are normal.

Text entries, numeric ones included, are kept as written: they are not targets, and a stray
"1,000" should not stop an import. Slider values must be numbers.
"""
from __future__ import annotations

import math
from typing import Callable

from experiments.core.survey.records import (
    MULTI_SELECTORS, QUESTION_TYPES, SINGLE_SELECTORS, Block, Question,
)

Report = Callable[[str, str], None]  # (where, message)

TEXT_SELECTORS_FORM = "FORM"
NUMERIC_CONTENT = "ValidNumber"


class _Bad(Exception):
    """One problem with one question; the walk goes on with the next question."""


def parse_blocks(value: list | None, column: str, report: Report, *, wave4: bool) -> tuple[Block, ...]:
    """The blocks of a decoded column; problems go to `report(where, message)`."""
    if value is None:
        return ()
    blocks = []
    seen_qids: dict[str, str] = {}
    if not value:
        report(column, "holds no block")
    for b, raw in enumerate(value):
        where_block = f"{column} block {b + 1}"
        if not isinstance(raw, dict):
            report(where_block, "a block must be a JSON object")
            continue
        element = raw.get("ElementType", "Block")
        if element != "Block":
            report(where_block, f"ElementType {element!r} is not supported (only 'Block')")
            continue
        name, questions = raw.get("BlockName"), raw.get("Questions")
        if not isinstance(name, str):
            report(where_block, "BlockName is missing or not a string")
            continue
        where_block += f" {name.strip()!r}"
        if not isinstance(questions, list):
            report(where_block, "Questions is missing or not a list")
            continue
        parsed = []
        for q, question in enumerate(questions):
            qid = question.get("QuestionID") if isinstance(question, dict) else None
            where = f"{where_block} question {q + 1}" + (f" {qid}" if isinstance(qid, str) else "")
            try:
                item = _question(question, b, name.strip(), q, wave4)
            except _Bad as bad:
                report(where, str(bad))
                continue
            if wave4:
                if item.qid in seen_qids:
                    report(where, f"QuestionID {item.qid} occurs twice in this column "
                                  f"(first at {seen_qids[item.qid]})")
                    continue
                seen_qids[item.qid] = where
            parsed.append(item)
        blocks.append(Block(b, name.strip(), name, tuple(parsed)))
    return tuple(blocks)


def _str(question: dict, key: str) -> str:
    value = question.get(key)
    if not isinstance(value, str):
        raise _Bad(f"{key} is missing or not a string")
    return value


# Question texts, options and rows recur in every respondent of a release: one shared copy of each
# keeps an import of 2,058 personas in memory once rather than 2,058 times. Equal values are
# interchangeable, so a dictionary shared by concurrent imports is harmless; it is emptied when big
# and after each import.
_SHARED: dict = {}
_SHARED_MAX = 500_000


def forget_shared() -> None:
    """Drop the shared copies (after an import: its respondents keep the ones they use)."""
    _SHARED.clear()


def shared(value):
    """One copy of an equal str or tuple of str for every respondent."""
    if len(_SHARED) > _SHARED_MAX:
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


def _str_list(container: dict, key: str, *, allow_numbers: bool = False) -> tuple[str, ...]:
    value = container.get(key)
    if not isinstance(value, list) or not value:
        raise _Bad(f"{key} is missing or not a non-empty list")
    if set(map(type, value)) == {str}:  # the usual case, checked in C
        return shared(tuple(value))
    out = []
    for i, item in enumerate(value):
        if allow_numbers and isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            raise _Bad(f"{key}[{i + 1}] is not a string")
        out.append(item)
    return shared(tuple(out))


def _position(value, k: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"{what} must be an integer position, got {value!r:.40}")
    if not 1 <= value <= k:
        raise _Bad(f"{what} {value} is outside the {k} options")
    return value


def _check_text(text, options: tuple[str, ...], position: int, what: str) -> None:
    if text != options[position - 1]:
        raise _Bad(f"{what} {text!r:.60} is not option {position} ({options[position - 1]!r:.60})")


def _question(raw, block_index: int, block: str, index: int, wave4: bool) -> Question:
    if not isinstance(raw, dict):
        raise _Bad("a question must be a JSON object")
    qid = _str(raw, "QuestionID")
    if not qid or not qid.strip():
        raise _Bad("QuestionID is empty")
    text = shared(_str(raw, "QuestionText"))
    qtype = _str(raw, "QuestionType")
    if qtype not in QUESTION_TYPES:
        raise _Bad(f"unknown QuestionType {qtype!r:.40} (known: {', '.join(QUESTION_TYPES)})")
    settings = raw.get("Settings", {})
    if not isinstance(settings, dict):
        raise _Bad("Settings is not an object")
    selector = settings.get("Selector", "")
    if not isinstance(selector, str):
        raise _Bad("Settings.Selector is not a string")
    base = (block_index, block, index, qid, qtype, selector, text)  # Question's first fields
    if qtype == "DB":
        return Question(*base)
    answers = raw.get("Answers")
    if answers is None:
        answers = {}
    if not isinstance(answers, dict):
        raise _Bad("Answers is not an object")
    if wave4 and not answers:
        raise _Bad("a wave-4 question has no answer")
    if qtype == "MC":
        return _mc(base, raw, answers, selector)
    if qtype == "Matrix":
        return _matrix(base, raw, answers, wave4)
    if qtype == "Slider":
        return _slider(base, raw, answers, wave4)
    return _text_entry(base, raw, answers, settings, selector)


def _mc(base: tuple, raw: dict, answers: dict, selector: str) -> Question:
    options = _str_list(raw, "Options")
    if selector not in SINGLE_SELECTORS + MULTI_SELECTORS:
        raise _Bad(f"unknown MC Selector {selector!r:.40} (known: {', '.join(SINGLE_SELECTORS + MULTI_SELECTORS)})")
    if not answers:
        return Question(*base, options=options)
    chosen, texts = answers.get("SelectedByPosition"), answers.get("SelectedText")
    if selector in SINGLE_SELECTORS:
        position = _position(chosen, len(options), "SelectedByPosition")
        _check_text(texts, options, position, "SelectedText")
        return Question(*base, options=options, positions=(position,))
    if not isinstance(chosen, list) or not isinstance(texts, list) or len(chosen) != len(texts):
        raise _Bad("a multiple-answer question needs SelectedByPosition and SelectedText as lists of equal length")
    positions = tuple(_position(p, len(options), "SelectedByPosition") for p in chosen)
    for position, text in zip(positions, texts):
        _check_text(text, options, position, "SelectedText")
    return Question(*base, options=options, positions=positions)


def _row_ids(raw: dict, key: str, rows: tuple[str, ...]) -> tuple[str, ...]:
    if raw.get(key) is None:
        return tuple(str(i) for i in range(1, len(rows) + 1))
    ids = _str_list(raw, key, allow_numbers=True)
    if len(ids) != len(rows) or len(set(ids)) != len(ids):
        raise _Bad(f"{key} must give one distinct id per row ({len(rows)})")
    return ids


def _matrix(base: tuple, raw: dict, answers: dict, wave4: bool) -> Question:
    rows, columns = _str_list(raw, "Rows"), _str_list(raw, "Columns")
    row_ids = _row_ids(raw, "RowsID", rows)
    shape = dict(options=columns, rows=rows, row_ids=row_ids)
    if not answers:
        return Question(*base, **shape)
    chosen, texts = answers.get("SelectedByPosition"), answers.get("SelectedText")
    if not isinstance(chosen, list) or not isinstance(texts, list) or len(chosen) != len(texts):
        raise _Bad("a matrix needs SelectedByPosition and SelectedText as lists of equal length")
    if len(chosen) > len(rows) or (wave4 and len(chosen) != len(rows)):
        raise _Bad(f"{len(chosen)} answers for {len(rows)} rows"
                   + (" (a wave-4 matrix answers every row)" if wave4 else ""))
    k = len(columns)
    if (set(map(type, chosen)) <= {int} and all(1 <= p <= k for p in chosen)
            and texts == [columns[p - 1] for p in chosen]):  # the usual case, in one pass
        return Question(*base, **shape, positions=tuple(chosen))
    for r, (position, text) in enumerate(zip(chosen, texts)):  # find and name the bad row
        what = f"row {r + 1} ({row_ids[r]})"
        _check_text(text, columns, _position(position, k, f"{what} SelectedByPosition"), f"{what} SelectedText")
    raise AssertionError("unreachable: some row failed the fast check")


def _number_text(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Bad(f"{value!r:.40} is not a number")
    text = str(value)
    try:
        number = float(text)
    except ValueError:
        raise _Bad(f"{text!r:.40} is not a number") from None
    if not math.isfinite(number):
        raise _Bad(f"{text!r:.40} is not a finite number")
    return text


def _slider(base: tuple, raw: dict, answers: dict, wave4: bool) -> Question:
    statements = _str_list(raw, "Statements")
    statement_ids = _row_ids(raw, "StatementsID", statements)
    bounds = raw.get("Range")
    if not isinstance(bounds, dict) or "Min" not in bounds or "Max" not in bounds:
        raise _Bad("a slider needs Range with Min and Max")
    slider_range = (_number_text(bounds["Min"]), _number_text(bounds["Max"]))
    shape = dict(rows=statements, row_ids=statement_ids, slider_range=slider_range)
    if not answers:
        return Question(*base, **shape)
    values = answers.get("Values")
    if not isinstance(values, list):
        raise _Bad("a slider needs Answers.Values as a list")
    if len(values) > len(statements) or (wave4 and len(values) != len(statements)):
        raise _Bad(f"{len(values)} values for {len(statements)} statements")
    return Question(*base, **shape, values=tuple(_number_text(v) for v in values))


def _text_entry(base: tuple, raw: dict, answers: dict, settings: dict, selector: str) -> Question:
    numeric = settings.get("ContentType") == NUMERIC_CONTENT
    text = answers.get("Text")
    if selector == TEXT_SELECTORS_FORM:
        rows = _str_list(raw, "Rows")
        if not answers:
            return Question(*base, rows=rows, row_ids=tuple(rows))
        if not isinstance(text, list):
            raise _Bad("a form needs Answers.Text as a list of one-key objects")
        filled = []
        for i, box in enumerate(text):
            if not isinstance(box, dict) or len(box) != 1:
                raise _Bad(f"Answers.Text[{i + 1}] must be an object with one key")
            (label, value), = box.items()
            if label not in rows or not isinstance(value, str):
                raise _Bad(f"Answers.Text[{i + 1}] names no row of the form or holds no text")
            filled.append((label, value))
        return Question(*base, rows=rows, row_ids=tuple(rows), form_answers=tuple(filled))
    if not answers:
        return Question(*base, numeric=numeric)
    if not isinstance(text, str):
        raise _Bad("a text entry needs Answers.Text as a string")
    return Question(*base, numeric=numeric, text_answer=text)
