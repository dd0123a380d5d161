"""The selection and judge parsers (App. B.2, §3.2) and the candidates' display order."""
import hashlib
import json
from collections import Counter

import pytest

from experiments.core.parsers import (
    CANDIDATE_IDS, JudgeResult, Selection, candidate_display_order, parse_judge, parse_selection,
    selection_payload,
)

# --- Selection ------------------------------------------------------------------------------

@pytest.mark.parametrize("response, candidate_id", [
    ('{"candidate_id":"c1"}', "c1"),
    ('{"candidate_id": "c2"}', "c2"),
    ('  \n{"candidate_id":"c3"}\n ', "c3"),
    ('```json\n{"candidate_id":"c2"}\n```', "c2"),
    ('```JSON\n{"candidate_id":"c1"}\n```', "c1"),
    ('```\n{"candidate_id":"c3"}\n```', "c3"),
    ('```json {"candidate_id":"c1"} ```', "c1"),
    ('{"candidate_id":"c1","reason":"closest to the memory"}', "c1"),  # extra fields ignored
    ('{"confidence":0.9,"candidate_id":"c2","notes":{"a":[1,2,null]}}', "c2"),
])
def test_parse_selection_accepts(response, candidate_id):
    assert parse_selection(response) == Selection(candidate_id)
    assert parse_selection(response).usable


@pytest.mark.parametrize("response, error", [
    ("", "empty"),
    ("   \n\t", "empty"),
    ("c1", "malformed-json"),
    ('{"candidate_id":"c1"', "malformed-json"),
    ("{'candidate_id':'c1'}", "malformed-json"),
    ('{"candidate_id":"c1",}', "malformed-json"),
    ('I pick {"candidate_id":"c1"}', "malformed-json"),
    ('{"candidate_id":"c1"} {"candidate_id":"c2"}', "malformed-json"),
    ('```json\n{"candidate_id":"c1"}\n```\nBecause it matches.', "malformed-json"),
    ('```json\n{"candidate_id":"c1"}\n```\n```json\n{"candidate_id":"c2"}\n```', "malformed-json"),
    ("[" * 100_000 + "]" * 100_000, "malformed-json"),
    ('{"candidate_id":"c1","candidate_id":"c2"}', "duplicate-key"),
    ('{"candidate_id":"c1","candidate_id":"c1"}', "duplicate-key"),
    ('{"candidate_id":"c1","meta":{"a":1,"a":2}}', "duplicate-key"),
    ('{"candidate_id":"c1","confidence":NaN}', "non-finite-number"),
    ('{"candidate_id":"c1","confidence":Infinity}', "non-finite-number"),
    ('{"candidate_id":"c1","confidence":-Infinity}', "non-finite-number"),
    ('{"candidate_id":"c1","confidence":1e999}', "non-finite-number"),
    ('["c1"]', "not-an-object"),
    ('[{"candidate_id":"c1"}]', "not-an-object"),
    ('"c1"', "not-an-object"),
    ("null", "not-an-object"),
    ("1", "not-an-object"),
    ("{}", "missing-field"),
    ('{"id":"c1"}', "missing-field"),
    ('{"Candidate_id":"c1"}', "missing-field"),
    ('{"candidate_id":"c4"}', "unknown-id"),
    ('{"candidate_id":"c0"}', "unknown-id"),
    ('{"candidate_id":"C1"}', "unknown-id"),
    ('{"candidate_id":" c1"}', "unknown-id"),
    ('{"candidate_id":"b0"}', "unknown-id"),
    ('{"candidate_id":1}', "unknown-id"),
    ('{"candidate_id":null}', "unknown-id"),
    ('{"candidate_id":["c1"]}', "unknown-id"),
    ('{"candidate_id":true}', "unknown-id"),
])
def test_parse_selection_gives_no_usable_selection_for(response, error):
    selection = parse_selection(response)
    assert selection == Selection(None, error)
    assert not selection.usable


# --- Judge ----------------------------------------------------------------------------------

@pytest.mark.parametrize("response, score, rationale", [
    ('{"score": 0, "rationale": "Contradicts the stance."}', 0, "Contradicts the stance."),
    ('{"score": 1, "rationale": "Same direction."}', 1, "Same direction."),
    ('{"rationale": "Matches.", "score": 2}', 2, "Matches."),
    ('{"score":3,"rationale":"Exact."}', 3, "Exact."),
    ('```json\n{"score": 2, "rationale": "ok"}\n```', 2, "ok"),
    ('{"score": 2}', 2, None),  # the rationale is informative, not required
    ('{"score": 1, "rationale": 42}', 1, None),  # a rationale that is not text is dropped
    ('{"score": 3, "rationale": "x", "step2": ["match", "match"]}', 3, "x"),
    ('{"score": -0, "rationale": "r"}', 0, "r"),  # JSON -0 is the integer 0
])
def test_parse_judge_accepts(response, score, rationale):
    result = parse_judge(response)
    assert result == JudgeResult(score, rationale)
    assert result.normalized == score / 3


@pytest.mark.parametrize("response, error", [
    ("", "empty"),
    ("Score: 2", "malformed-json"),
    ('{"score": 2', "malformed-json"),
    ('{"score": 2} trailing words', "malformed-json"),
    ("{'score': 2}", "malformed-json"),
    ('Here is my grade: {"score": 2, "rationale": "x"}', "malformed-json"),
    ('{"score": 2, "score": 2}', "duplicate-key"),
    ('{"score": 1, "score": 3}', "duplicate-key"),
    ('{"score": NaN}', "non-finite-number"),
    ('{"score": Infinity}', "non-finite-number"),
    ('{"score": 2, "confidence": -Infinity}', "non-finite-number"),
    ('{"score": 2e999}', "non-finite-number"),
    ("[2]", "not-an-object"),
    ('"2"', "not-an-object"),
    ("2", "not-an-object"),
    ('{"rationale": "no score"}', "missing-field"),
    ('{"Score": 2}', "missing-field"),
    ('{"result": {"score": 2}}', "missing-field"),
    ('{"score": 2.5}', "wrong-type"),
    ('{"score": 3.0}', "wrong-type"),
    ('{"score": 1e0}', "wrong-type"),
    ('{"score": "2"}', "wrong-type"),
    ('{"score": true}', "wrong-type"),
    ('{"score": false}', "wrong-type"),
    ('{"score": null}', "wrong-type"),
    ('{"score": [2]}', "wrong-type"),
    ('{"score": -1}', "out-of-range"),
    ('{"score": 4}', "out-of-range"),
    ('{"score": 100000000000000000000000000000}', "out-of-range"),
])
def test_parse_judge_gives_a_missing_grade_for(response, error):
    result = parse_judge(response)
    assert result.score is None
    assert result.error == error
    assert result.normalized is None


def test_parse_judge_keeps_the_rationale_of_an_unusable_score():
    result = parse_judge('{"score": 2.5, "rationale": "between 2 and 3"}')
    assert result == JudgeResult(None, "between 2 and 3", "wrong-type")


# --- Display order and payload -----------------------------------------------------------------

POOL = [("b0", "one-shot answer"), ("b1", "second answer"), ("b2", "")]


def test_display_order_sorts_by_the_sha256_of_task_key_and_slot():
    key = "task 17|memory(concrete,100w)"
    expected = sorted(POOL, key=lambda c: hashlib.sha256(f"{key}\n{c[0]}".encode()).hexdigest())
    assert candidate_display_order(key, POOL) == expected


def test_display_order_is_deterministic_and_a_permutation():
    first = candidate_display_order("task 1", POOL)
    assert candidate_display_order("task 1", list(reversed(POOL))) == first
    assert sorted(first) == sorted(POOL)


def test_display_order_ignores_the_answers():
    changed = [(slot, answer.upper() + " more") for slot, answer in POOL]
    slots = [slot for slot, _ in candidate_display_order("task 9", POOL)]
    assert [slot for slot, _ in candidate_display_order("task 9", changed)] == slots


def test_display_order_varies_over_tasks_so_b0_is_not_always_first():
    positions = Counter(
        [slot for slot, _ in candidate_display_order(f"task {i}", POOL)].index("b0") for i in range(300)
    )
    assert set(positions) == {0, 1, 2}
    assert min(positions.values()) > 60  # about 100 each


def test_display_order_rejects_duplicate_slots():
    with pytest.raises(ValueError):
        candidate_display_order("t", [("b0", "x"), ("b0", "y"), ("b1", "z")])


def test_selection_payload_is_a_canonical_key_sorted_json_array():
    payload = selection_payload(['He said "yes" — naïvely', "", "line\nbreak {x}"])
    assert payload == (
        '[{"answer":"He said \\"yes\\" — naïvely","candidate_id":"c1"},'
        '{"answer":"","candidate_id":"c2"},'
        '{"answer":"line\\nbreak {x}","candidate_id":"c3"}]'
    )
    assert [item["candidate_id"] for item in json.loads(payload)] == list(CANDIDATE_IDS)


@pytest.mark.parametrize("answers", [[], ["a", "b"], ["a", "b", "c", "d"], ["a", None, "c"]])
def test_selection_payload_needs_three_text_answers(answers):
    with pytest.raises(ValueError):
        selection_payload(answers)


def test_a_selection_maps_back_to_its_slot_through_the_display_order():
    ordered = candidate_display_order("task 3|memory(trait,100w)", POOL)
    payload = json.loads(selection_payload([answer for _, answer in ordered]))
    chosen = parse_selection('{"candidate_id":"c2"}').candidate_id
    slot, answer = ordered[CANDIDATE_IDS.index(chosen)]
    assert payload[1] == {"answer": answer, "candidate_id": "c2"}
    assert dict(POOL)[slot] == answer
