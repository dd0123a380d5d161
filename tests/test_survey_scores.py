"""Survey scores: exact-option accuracy and normalized deviation on a case computed by
hand, per-respondent means, paired whole-person intervals equal to the project's bootstrap, the human
test-retest row and prespecified criteria."""
import math
import random

import numpy as np
import pytest

from experiments.core.stats.paired import BootstrapResult, paired_bootstrap
from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.scores import (
    HUMAN_RETEST, SURVEY_SEED, Criterion, SurveyContrast, evaluate_criteria, human_retest_scores,
    paired_differences, respondent_means, score_items, summarize, survey_contrasts,
)
from experiments.core.survey.targets import TargetItem, target_items
from tests.survey_helpers import SAMPLE


def item(number, kind, k, truth, earlier=0):
    options = tuple(f"option {i}" for i in range(1, k + 1))
    return TargetItem(number, f"Q{number}", f"Q{number}", "", "block", "question", "", options, kind, truth, earlier)


ITEMS_A = [item(1, "ordinal", 5, 3, earlier=3), item(2, "two-option", 2, 1, earlier=2),
           item(3, "ordinal", 4, 2, earlier=4), item(4, "two-option", 2, 2, earlier=2)]
ITEMS_B = [item(1, "ordinal", 5, 3), item(2, "two-option", 2, 2)]


def hand_case():
    return (score_items("a", ITEMS_A, [5, 1, 1, None]) + score_items("b", ITEMS_B, [3, 1]))


def test_accuracy_and_normalized_deviation_by_hand():
    scores = hand_case()
    assert [(s.accuracy, s.deviation) for s in scores] == [
        (0.0, 2 / 4),  # ordinal, 5 options: |5 - 3| / (5 - 1)
        (1.0, None),  # two-option, right: no deviation
        (0.0, 1 / 3),  # ordinal, 4 options: |1 - 2| / (4 - 1)
        (None, None),  # no usable answer: no score, not a zero
        (1.0, 0.0),
        (0.0, None),
    ]


def test_per_respondent_means_and_the_condition_summary_by_hand():
    scores = hand_case()
    means = respondent_means(scores)
    assert means["a"] == pytest.approx((1 / 3, (1 / 2 + 1 / 3) / 2))
    assert means["b"] == (0.5, 0.0)
    summary = summarize("x", scores)
    assert (summary.n_people, summary.n_items, summary.n_unscored) == (2, 5, 1)
    assert summary.accuracy == pytest.approx((1 / 3 + 1 / 2) / 2)  # each respondent counts once
    assert summary.deviation == pytest.approx((5 / 12 + 0) / 2)
    assert summary.accuracy_items == pytest.approx(2 / 5)
    assert summary.deviation_items == pytest.approx((1 / 2 + 1 / 3 + 0) / 3)


def test_the_human_retest_row_scores_earlier_answers_against_wave4():
    scores = human_retest_scores("a", ITEMS_A)
    assert [(s.accuracy, s.deviation) for s in scores] == [(1.0, 0.0), (0.0, None), (0.0, 2 / 3), (1.0, None)]


def test_a_chosen_option_outside_the_item_is_an_error():
    with pytest.raises(ValueError, match="respondent a item 2 \\(Q2\\): option 3 is not one of 1..2"):
        score_items("a", ITEMS_A, [1, 3, 1, 1])
    with pytest.raises(ValueError, match="4 answers for 2 items"):
        score_items("b", ITEMS_B, [1, 1, 1, 1])


@pytest.fixture(scope="module")
def sample_scores():
    rng = random.Random(5)
    scores = {"good": [], "noisy": [], HUMAN_RETEST: []}
    for respondent in read_survey_path(SAMPLE):
        items = target_items(respondent)
        good = [i.wave4 if rng.random() < 0.7 else rng.randint(1, len(i.options)) for i in items]
        good[0] = None  # one omitted item, as in the paper's Table 22
        scores["good"] += score_items(respondent.pid, items, good)
        scores["noisy"] += score_items(respondent.pid, items, [rng.randint(1, len(i.options)) for i in items])
        scores[HUMAN_RETEST] += human_retest_scores(respondent.pid, items)
    return scores


def test_contrasts_are_the_projects_whole_person_bootstrap(sample_scores):
    contrasts = survey_contrasts(sample_scores, [("good", "noisy"), (HUMAN_RETEST, "good")], draws=4000)
    assert [(c.first, c.second, c.metric) for c in contrasts] == [
        ("good", "noisy", "accuracy"), ("good", "noisy", "deviation"),
        (HUMAN_RETEST, "good", "accuracy"), (HUMAN_RETEST, "good", "deviation")]
    for contrast in contrasts:
        people, diffs = paired_differences(sample_scores[contrast.first], sample_scores[contrast.second],
                                           contrast.metric)
        expected = paired_bootstrap(people.astype(str), diffs, seed=SURVEY_SEED, draws=4000)
        got = contrast.result
        assert (got.estimate, got.lo, got.hi, got.n_tasks, got.n_people) == (
            expected.estimate, expected.lo, expected.hi, expected.n_tasks, expected.n_people)
        assert got.n_people == 12
    # The omitted item leaves one pair fewer per respondent in contrasts with "good".
    total = sum(len(target_items(r)) for r in read_survey_path(SAMPLE))
    assert contrasts[0].result.n_tasks == total - 12
    ordinal = sum(i.ordinal for r in read_survey_path(SAMPLE) for i in target_items(r))
    assert contrasts[1].result.n_tasks == ordinal - 12  # item 1 is the ordinal QID287 row 1
    assert contrasts[0].result.lo > 0 and contrasts[1].result.hi < 0


def test_paired_differences_by_hand():
    first = hand_case()
    second = score_items("a", ITEMS_A, [3, 2, 2, 2]) + score_items("b", ITEMS_B, [1, 1])
    people, diffs = paired_differences(first, second, "deviation")
    assert people.tolist() == ["a", "a", "b"]
    assert diffs.tolist() == [2 / 4 - 0, 1 / 3 - 0, 0 - 2 / 4]
    people, diffs = paired_differences(first, second, "accuracy")
    assert diffs.tolist() == [-1.0, 1.0, -1.0, 1.0, 0.0]  # item 4 of "a" has no answer in first


def _contrast(metric, estimate, lo, hi):
    return SurveyContrast("ownwords", "memory", metric,
                          BootstrapResult(estimate, lo, hi, 100, 10, SURVEY_SEED, 1000, (0.025, 0.975)))


def test_prespecified_criteria_are_evaluated_by_code():
    contrasts = [_contrast("deviation", -0.0081, -0.0105, -0.0056), _contrast("accuracy", 0.0005, -0.0039, 0.0050)]
    results = evaluate_criteria([
        Criterion("ownwords", "memory", "deviation", "below-zero", label="primary"),
        Criterion("ownwords", "memory", "accuracy", "above-zero"),
        Criterion("ownwords", "memory", "accuracy", "lower-bound-above", threshold=-0.005),
    ], contrasts)
    assert [r.met for r in results] == [True, False, True]
    assert results[0].sentence == ("primary: ownwords minus memory, deviation -0.0081 [-0.0105, -0.0056]: "
                                   "met (interval below zero)")
    with pytest.raises(ValueError, match="no contrast memory minus ownwords"):
        evaluate_criteria([Criterion("memory", "ownwords", "deviation", "below-zero")], contrasts)
    with pytest.raises(ValueError, match="unknown rule"):
        evaluate_criteria([Criterion("ownwords", "memory", "deviation", "below")], contrasts)


def test_a_respondent_without_scored_items_has_nan_means():
    scores = score_items("c", ITEMS_B, [None, None])
    assert all(math.isnan(x) for x in respondent_means(scores)["c"])
    assert np.isnan(summarize("x", scores).accuracy)


def test_shared_draw_bootstraps_are_paired_bootstrap_to_the_last_bit():
    from experiments.core.survey.intervals import shared_draw_bootstraps
    rng = np.random.default_rng(3)
    people = np.repeat([f"p{i:03d}" for i in range(90)], 29)
    requests = []
    for k in (4, 5, 6, 9):
        diffs = (rng.integers(0, k, people.size) - rng.integers(0, k, people.size)) / k
        requests.append((people, diffs))
    keep = rng.random(people.size) > 0.1  # some pairs missing: other counts, same people
    requests.append((people[keep], requests[0][1][keep]))
    requests.append((people[:600], requests[1][1][:600]))  # other people: drawn on its own
    got = shared_draw_bootstraps(requests, seed=11, draws=4500, block=1000)
    for (cluster, diff), result in zip(requests, got):
        expected = paired_bootstrap(cluster, diff, seed=11, draws=4500, block=1000)
        assert result == expected
        assert (result.lo, result.hi) == (expected.lo, expected.hi)
    with pytest.raises(ValueError, match="finite"):
        shared_draw_bootstraps([(people[:2], [0.5, float("nan")])], seed=1)


def test_the_papers_reported_sample_criteria_are_deviation_intervals_below_zero_against_the_memory():
    from experiments.core.survey.prompt import MEMORY, MEMORY_PLUS_OWNWORDS, OWNWORDS
    from experiments.core.survey.scores import REPORTED_SAMPLE_CRITERIA
    assert [(c.first, c.second, c.metric, c.rule, c.label) for c in REPORTED_SAMPLE_CRITERIA] == [
        (OWNWORDS, MEMORY, "deviation", "below-zero", "primary"),
        (MEMORY_PLUS_OWNWORDS, MEMORY, "deviation", "below-zero", "secondary")]
    # The paper's figures: the primary met, the secondary not.
    contrasts = [SurveyContrast(OWNWORDS, MEMORY, "deviation",
                                BootstrapResult(-0.0081, -0.0105, -0.0056, 1, 1, SURVEY_SEED, 1, (0.025, 0.975))),
                 SurveyContrast(MEMORY_PLUS_OWNWORDS, MEMORY, "deviation",
                                BootstrapResult(-0.0016, -0.0039, 0.0007, 1, 1, SURVEY_SEED, 1, (0.025, 0.975)))]
    assert [r.met for r in evaluate_criteria(REPORTED_SAMPLE_CRITERIA, contrasts)] == [True, False]


def test_mean_intervals_are_the_projects_bootstrap_over_respondent_means(sample_scores):
    from experiments.core.survey.scores import mean_intervals
    intervals = mean_intervals(sample_scores, draws=3000)
    assert set(intervals) == {"good", "noisy", HUMAN_RETEST}
    for condition, scores in sample_scores.items():
        means = respondent_means(scores)
        summary = summarize(condition, scores)
        for position, metric in enumerate(("accuracy", "deviation")):
            people = np.array(list(means), dtype=str)
            values = np.array([means[pid][position] for pid in means])
            expected = paired_bootstrap(people, values, seed=SURVEY_SEED, draws=3000)
            got = intervals[condition][metric]
            assert (got.lo, got.hi, got.n_people) == (expected.lo, expected.hi, 12)
            assert got.estimate == pytest.approx(getattr(summary, metric))  # the mean the summary reports
            assert got.lo < got.estimate < got.hi
    # by hand: respondent a without a deviation has no entry for it; no respondent, no metric
    only = mean_intervals({"x": score_items("a", ITEMS_B[1:], [1])}, draws=50)
    assert set(only["x"]) == {"accuracy"} and only["x"]["accuracy"].lo == only["x"]["accuracy"].hi == 0.0
    assert mean_intervals({"y": score_items("a", ITEMS_B[1:], [None])}, draws=50) == {}
