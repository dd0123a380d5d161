"""Targets of the survey experiments: closed-form single-answer wave-4 items, matrices
expanded to one item per row, the screener lines, and the seeded respondent samples."""
from collections import Counter

import pytest

from experiments.core.cohorts import Candidate, draw_cohort
from experiments.core.survey.reader import parse_jsonl_text, read_survey_path
from experiments.core.survey.screener import ScreenerError, screener_lines, screener_text
from experiments.core.survey.targets import (
    ORDINAL, TWO_OPTION, respondent_samples, seeded_order, target_items,
)
from tests.survey_helpers import SAMPLE, decoded, encoded, find_question, jsonl, sample_rows


@pytest.fixture(scope="module")
def respondents():
    return read_survey_path(SAMPLE)


def test_80_or_84_items_per_respondent_and_108_distinct(respondents):
    distinct = {}
    for r in respondents:
        items = target_items(r)
        assert [i.number for i in items] == list(range(1, len(items) + 1))
        kinds = Counter(i.kind for i in items)
        assert (len(items), kinds[ORDINAL]) in ((80, 29), (84, 29))
        distinct.update({i.key: i.kind for i in items})
    assert len(distinct) == 108
    assert Counter(distinct.values()) == {ORDINAL: 43, TWO_OPTION: 65}


def test_sliders_numeric_entries_and_descriptions_are_not_targets(respondents):
    keys = {i.qid for r in respondents for i in target_items(r)}
    for qid in ("QID154", "QID156", "QID290", "QID164", "QID166", "QID168", "QID170", "QID181", "QID182", "QID8"):
        assert qid not in keys


def test_a_matrix_becomes_one_item_per_row(respondents):
    row = decoded(sample_rows()[0])
    matrix = find_question(row["wave4_Q_wave4_A"], "QID287")
    earlier = find_question(row["wave4_Q_wave1_3_A"], "QID287")
    items = [i for i in target_items(respondents[0]) if i.qid == "QID287"]
    assert [i.key for i in items] == [f"QID287_{rid}" for rid in ("1", "2", "3", "4", "5", "6", "7", "10", "11", "12")]
    assert [i.row for i in items] == matrix["Rows"]
    assert {i.question for i in items} == {matrix["QuestionText"]}
    assert all(i.options == tuple(matrix["Columns"]) and i.kind == ORDINAL for i in items)
    assert [i.wave4 for i in items] == matrix["Answers"]["SelectedByPosition"]
    assert [i.earlier for i in items] == earlier["Answers"]["SelectedByPosition"]
    # The matrix opens the instrument: its rows are items 1..10.
    assert [i.number for i in items] == list(range(1, 11))


def test_a_matrix_without_row_ids_numbers_its_rows(respondents):
    linda = [i for i in target_items(respondents[0]) if i.qid in ("QID159", "QID160")]
    assert [i.row_id for i in linda] == ["1", "2", "3"]
    assert linda[0].key.endswith("_1")


def test_the_screener_is_the_14_demographic_answer_lines(respondents):
    row = decoded(sample_rows()[0])
    lines = screener_lines(respondents[0])
    assert len(lines) == 14
    assert lines[0] == ("Which part of the United States do you live in now?: "
                        "Northeast (PA, NY, NJ, RI, CT, MA, VT, NH, ME)")
    assert lines[1] == "What sex were you assigned at birth?: Female"
    assert lines[13] == "What is your employment status at present?: Unemployed"
    for n, line in zip(range(11, 25), lines):
        question = find_question(row["wave1_3_persona_json"], f"QID{n}")
        assert line == f"{question['QuestionText']}: {question['Answers']['SelectedText']}"
    assert screener_text(respondents[0]) == "\n".join(lines)


def test_a_persona_missing_a_screener_answer_is_named():
    row = decoded(sample_rows()[2])
    demographics = row["wave1_3_persona_json"][0]["Questions"]
    demographics[:] = [q for q in demographics if q["QuestionID"] != "QID19"]
    respondent = parse_jsonl_text(jsonl([encoded(row)]), "x.jsonl")[0]
    with pytest.raises(ScreenerError, match="respondent 900003: .* screener question QID19"):
        screener_lines(respondent)


PIDS = [str(900001 + k) for k in range(700)]


def test_samples_are_consecutive_slices_of_one_seeded_order():
    development, reported = respondent_samples(PIDS, seed=7)
    assert (len(development), len(reported)) == (200, 400)
    assert not set(development) & set(reported)
    order = seeded_order(PIDS, seed=7)
    assert development + reported == order[:600]
    # A second sample continues the same order.
    assert respondent_samples(PIDS, seed=7, sizes=(200, 400, 100))[2] == order[600:700]


def test_the_order_is_a_cohort_draw_and_ignores_input_order():
    expected = [c.session_key for c in draw_cohort([Candidate(p, "twin2k", p) for p in PIDS], size=700, seed=7)]
    assert seeded_order(list(reversed(PIDS)), seed=7) == expected
    assert seeded_order(PIDS, seed=8) != expected
    assert sorted(expected) == sorted(PIDS)


def test_too_few_respondents_for_the_samples_is_an_error():
    with pytest.raises(ValueError, match="need 600, but only 12 are available"):
        respondent_samples(PIDS[:12], seed=1)
