"""The per-respondent leak check (App. H): violations reported and those respondents
excluded, never silently; fixtures from the generator's --leak option and hand-made leaks."""
import pytest

from experiments.core.survey.leaks import leak_violations, split_leaks
from experiments.core.survey.reader import parse_jsonl_text, read_survey_path
from tests.survey_helpers import SAMPLE, decoded, encoded, find_question, generate, jsonl, sample_rows


@pytest.fixture(scope="module")
def leak_fixture(tmp_path_factory):
    return read_survey_path(generate(tmp_path_factory.mktemp("leak"), "--n", "5", "--leak", "2"))


def test_the_bundled_sample_has_no_leak():
    clean, violations = split_leaks(read_survey_path(SAMPLE))
    assert violations == [] and len(clean) == 12


def test_planted_retest_blocks_are_found_and_their_respondents_excluded(leak_fixture):
    clean, violations = split_leaks(leak_fixture)
    assert [r.pid for r in clean] == ["900003", "900004", "900005"]
    assert {v.pid for v in violations} == {"900001", "900002"}
    for pid in ("900001", "900002"):
        kinds = {v.kind for v in violations if v.pid == pid}
        assert kinds == {"target-block", "target-question"}
    block_names = {b.name for b in leak_fixture[0].wave4}
    leaked = [v for v in violations if v.pid == "900001" and v.kind == "target-question"][0]
    assert str(leaked).startswith("respondent 900001: persona block 14 ")
    assert any(f"'{name}'" in str(leaked) for name in block_names)


def _one(change):
    row = decoded(sample_rows()[0])
    change(row)
    return parse_jsonl_text(jsonl([encoded(row)]), "x.jsonl")[0]


def test_a_persona_question_with_a_target_text_is_a_leak():
    def change(row):
        target = find_question(row["wave4_Q_wave4_A"], "QID291")
        find_question(row["wave1_3_persona_json"], "QID31")["QuestionText"] = target["QuestionText"]
    found = leak_violations(_one(change))
    assert [v.kind for v in found] == ["target-text"]
    assert "(QID31) has the text of target question QID291" in found[0].detail


def test_a_persona_text_quoting_a_target_question_with_its_answer_is_a_leak():
    def change(row):
        target = find_question(row["wave4_Q_wave1_3_A"], "QID291")
        answer = target["Answers"]["SelectedText"]
        row["wave1_3_persona_text"] += f"{target['QuestionText']}\nQuestion Type: Single Choice\nAnswer: {answer}\n\n"
    found = leak_violations(_one(change))
    assert [(v.kind, v.detail) for v in found] == [
        ("target-text", "the persona text quotes target question QID291 of block "
                        "'Non-experimental heuristics and biases'")]


def test_wave4_columns_that_differ_beyond_their_answers_are_reported():
    def change(row):
        question = find_question(row["wave4_Q_wave4_A"], "QID9_3")
        question["QuestionText"] = question["QuestionText"].replace("priced at: $", "priced at: $1")
    found = leak_violations(_one(change))
    assert [v.kind for v in found] == ["instrument-differs"]
    assert "question 4 QID9_3 differs between the two wave-4 columns in more than its answers" in found[0].detail


def test_answers_alone_may_differ_between_the_wave4_columns():
    respondent = read_survey_path(SAMPLE)[0]
    differing = [(a.positions, b.positions) for x, y in zip(respondent.earlier, respondent.wave4)
                 for a, b in zip(x.questions, y.questions) if a.positions != b.positions]
    assert differing and leak_violations(respondent) == []
