"""The survey answer parser on hostile JSON: item numbers to option numbers; missing,
extra, out-of-range, non-integer and duplicate items recorded per item, never guessed."""
import pytest

from experiments.core.survey.answers import (
    DUPLICATE, MISSING, NOT_INTEGER, OUT_OF_RANGE, parse_survey_answer,
)

COUNTS = [5, 2, 2, 7]


def outcome(parsed):
    return [(item.number, item.option, item.problem) for item in parsed.items]


def test_a_clean_answer():
    parsed = parse_survey_answer('{"1": 5, "2": 1, "3": 2, "4": 7}', COUNTS)
    assert outcome(parsed) == [(1, 5, None), (2, 1, None), (3, 2, None), (4, 7, None)]
    assert parsed.error is None and parsed.extra == () and parsed.answered == 4


def test_a_fenced_answer_and_surrounding_whitespace():
    parsed = parse_survey_answer('\n```json\n{"1": 1, "2": 2, "3": 1, "4": 3}\n```\n', COUNTS)
    assert [item.option for item in parsed.items] == [1, 2, 1, 3]


@pytest.mark.parametrize("text, expected", [
    # Strings, floats, booleans, null, lists and objects are not integers.
    ('{"1": "3", "2": 1.0, "3": true, "4": null}',
     [(1, None, NOT_INTEGER), (2, None, NOT_INTEGER), (3, None, NOT_INTEGER), (4, None, NOT_INTEGER)]),
    ('{"1": [2], "2": {"a": 1}, "3": 1e999, "4": -0}',
     [(1, None, NOT_INTEGER), (2, None, NOT_INTEGER), (3, None, NOT_INTEGER), (4, None, OUT_OF_RANGE)]),
    # Out of range: 0, negative, past the item's options (items have 5, 2, 2 and 7 options).
    ('{"1": 6, "2": 0, "3": -1, "4": 99999999999999999999999}',
     [(1, None, OUT_OF_RANGE), (2, None, OUT_OF_RANGE), (3, None, OUT_OF_RANGE), (4, None, OUT_OF_RANGE)]),
    # A key given twice, even with the same value, is that item's problem; the rest stand.
    ('{"1": 2, "1": 2, "2": 1, "3": 1, "3": 2}',
     [(1, None, DUPLICATE), (2, 1, None), (3, None, DUPLICATE), (4, None, MISSING)]),
    # Missing items.
    ('{"2": 2}', [(1, None, MISSING), (2, 2, None), (3, None, MISSING), (4, None, MISSING)]),
])
def test_item_problems_are_recorded_per_item(text, expected):
    assert outcome(parse_survey_answer(text, COUNTS)) == expected


def test_keys_that_name_no_item_are_extra():
    parsed = parse_survey_answer('{"1": 1, "5": 1, "0": 1, "01": 2, " 2": 1, "item 3": 1, "-4": 1, "2": 2}',
                                 COUNTS)
    assert parsed.extra == ("5", "0", "01", " 2", "item 3", "-4")
    assert outcome(parsed) == [(1, 1, None), (2, 2, None), (3, None, MISSING), (4, None, MISSING)]


@pytest.mark.parametrize("text, error", [
    ("", "empty"),
    ("   \n", "empty"),
    ("Sure! Here are the answers: 1: 2", "malformed-json"),
    ('{"1": 2', "malformed-json"),
    ('{"1": NaN}', "malformed-json"),
    ('{"1": 2} {"2": 1}', "malformed-json"),
    ("[1, 2, 1, 3]", "not-an-object"),
    ('[{"1": 2}]', "not-an-object"),
    ('"{\\"1\\": 2}"', "not-an-object"),
    ("7", "not-an-object"),
    ("[" * 100000 + "]" * 100000, "malformed-json"),
])
def test_a_response_that_is_no_object_leaves_every_item_missing(text, error):
    parsed = parse_survey_answer(text, COUNTS)
    assert parsed.error == error
    assert outcome(parsed) == [(n, None, MISSING) for n in range(1, 5)]


def test_what_the_model_wrote_is_kept_for_the_explorer():
    parsed = parse_survey_answer('{"1": "three", "2": 1, "3": 1, "3": 2}', COUNTS)
    assert [item.raw for item in parsed.items] == ['"three"', "1", "1 | 2", ""]
    long = parse_survey_answer('{"1": "' + "x" * 1000 + '"}', COUNTS)
    assert len(long.items[0].raw) == 200
