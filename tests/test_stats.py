"""Tests of experiments.core.stats: the paper's paired statistics.

Expected values are computed by hand in the comments, or by an independent
implementation (the slow loop, scipy, scikit-learn), never by the code under
test.
"""

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score

from experiments.core import stats

REPO = Path(__file__).resolve().parent.parent


def small_sample(seed=0, people=7, tasks=23):
    """Uneven people (1..6 tasks each) with raw integer differences −3..3."""
    rng = np.random.default_rng(seed)
    person = rng.integers(0, people, size=tasks)
    diff = rng.integers(0, 4, size=tasks) - rng.integers(0, 4, size=tasks)
    return person, diff.astype(float)


# --- bootstrap against the slow loop ----------------------------------------

def test_bootstrap_equals_loop_on_integer_differences():
    person, diff = small_sample()
    # 5,000 draws in blocks of 700: the last block is partial (100 draws).
    kw = dict(seed=11, draws=5_000, block=700, keep_replicates=True)
    fast = stats.paired_bootstrap(person, diff, **kw)
    slow = stats.paired_bootstrap_loop(person, diff, **kw)
    # Integer-valued sums are exact in any order, so every replicate is equal.
    np.testing.assert_array_equal(fast.replicates, slow.replicates)
    assert fast.estimate == slow.estimate == diff.mean()
    assert fast.lo == pytest.approx(slow.lo, abs=1e-12)
    assert fast.hi == pytest.approx(slow.hi, abs=1e-12)
    assert (fast.n_tasks, fast.n_people) == (slow.n_tasks, slow.n_people) == (23, len(set(person)))


def test_bootstrap_equals_loop_on_normalized_strings_and_person_weighting():
    person, diff = small_sample(seed=3)
    labels = np.array([f"p{p:02d}" for p in person])      # string labels, np.unique order
    for weighting in ("task", "person"):
        kw = dict(seed=5, draws=3_000, block=1_000, weighting=weighting, keep_replicates=True)
        fast = stats.paired_bootstrap(labels, diff / 3, **kw)
        slow = stats.paired_bootstrap_loop(labels, diff / 3, **kw)
        # Same people resampled; only the summation order differs (≤ a few ulps).
        np.testing.assert_allclose(fast.replicates, slow.replicates, rtol=0, atol=1e-15)
        assert fast.lo == pytest.approx(slow.lo, abs=1e-12)
        assert fast.hi == pytest.approx(slow.hi, abs=1e-12)
        assert fast.estimate == pytest.approx(slow.estimate, abs=1e-15)


def test_another_seed_gives_another_interval():
    person, diff = small_sample()
    a = stats.paired_bootstrap(person, diff, seed=1, draws=4_000)
    b = stats.paired_bootstrap(person, diff, seed=2, draws=4_000)
    loop_b = stats.paired_bootstrap_loop(person, diff, seed=2, draws=4_000)
    assert a.estimate == b.estimate                # the estimate does not depend on the seed
    assert (a.lo, a.hi) != (b.lo, b.hi)
    assert (b.lo, b.hi) == pytest.approx((loop_b.lo, loop_b.hi), abs=1e-12)


def test_fresh_stream_per_contrast():
    # B.3: contrasts with the same participant set consume the same stream.
    # Doubling every difference doubles every replicate exactly (powers of two
    # are exact), so the interval doubles exactly only if the draws are reused.
    person, diff = small_sample()
    one = stats.paired_bootstrap(person, diff / 3, seed=20260918, draws=2_000)
    two = stats.paired_bootstrap(person, 2 * diff / 3, seed=20260918, draws=2_000)
    assert (two.lo, two.hi) == (2 * one.lo, 2 * one.hi)


def test_estimate_person_weighted_and_degenerate_interval():
    person = ["a", "a", "b", "c", "c", "c"]
    diff = np.array([1, 0, -1, 1, 1, 1]) / 3
    # Task-weighted: (1 + 0 − 1 + 1 + 1 + 1)/3 / 6 = 1/6.
    r = stats.paired_bootstrap(person, diff, seed=1, draws=1_000)
    assert r.estimate == pytest.approx(1 / 6)
    assert (r.n_tasks, r.n_people, r.seed, r.draws) == (6, 3, 1, 1_000)
    assert r.tails == (0.025, 0.975)
    # Person-weighted: a = 1/6, b = −1/3, c = 1/3 → (1/6 − 1/3 + 1/3)/3 = 1/18.
    assert stats.person_weighted(person, diff) == pytest.approx(1 / 18)
    pw = stats.paired_bootstrap(person, diff, seed=1, draws=1_000, weighting="person")
    assert pw.estimate == pytest.approx(1 / 18)
    # Every replicate is a weighted mean of the person ratios 1/6, −1/3, 1/3.
    assert -1 / 3 <= r.lo <= r.estimate <= r.hi <= 1 / 3
    # One person: every resample is that person, so lo = hi = estimate.
    one = stats.paired_bootstrap(["x"] * 3, [0.5, 0.0, 0.25], seed=7, draws=500)
    assert one.lo == one.hi == pytest.approx(0.25)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError):
        stats.paired_bootstrap([1, 2], [0.1, np.nan], seed=1)    # a missing grade slipped in
    with pytest.raises(ValueError):
        stats.paired_bootstrap([1, 2, 3], [0.1, 0.2], seed=1)
    with pytest.raises(ValueError):
        stats.paired_bootstrap([1, 2], [0.1, 0.2], seed=1, tails=(0.9, 0.1))


def test_family_tails_and_family_interval():
    assert stats.family_tails(8) == (0.003125, 0.996875)       # 0.05 / 16
    assert stats.family_tails(1) == (0.025, 0.975)
    person, diff = small_sample()
    point = stats.paired_bootstrap(person, diff, seed=9, draws=4_000)
    family = stats.paired_bootstrap(person, diff, seed=9, draws=4_000,
                                    tails=stats.family_tails(8))
    # Same replicates, tails further out: the family interval contains the pointwise one.
    assert family.tails == (0.003125, 0.996875)
    assert family.lo <= point.lo and point.hi <= family.hi
    assert (family.lo, family.hi) != (point.lo, point.hi)


def test_study_level_resampling():
    # Two studies; each study's tasks travel together.
    study = ["s1"] * 4 + ["s2"] * 2
    diff = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]       # study means 0 and 1
    r = stats.study_bootstrap(study, diff, seed=3, draws=2_000)
    assert r.n_people == 2                      # clusters = studies
    assert r.estimate == pytest.approx(2 / 6)
    # A replicate draws {s1,s1}, {s1,s2} or {s2,s2}: 0, 2/6 or 1.
    # With 2,000 draws both extremes occur (each has probability 1/4).
    assert (r.lo, r.hi) == (0.0, 1.0)
    person_level = stats.paired_bootstrap(range(6), diff, seed=3, draws=2_000)
    assert person_level.n_people == 6 and (person_level.lo, person_level.hi) != (0.0, 1.0)


# --- ordinal scale (I.1) -----------------------------------------------------

A = [3, 2, 0, 1]
B = [1, 2, 1, 0]


def test_threshold_decomposition_by_hand():
    td = stats.threshold_decomposition(A, B)
    # ≥1: a 3/4, b 3/4 → 0;  ≥2: a 2/4, b 1/4 → 1/4;  ≥3: a 1/4, b 0 → 1/4.
    assert td.delta == pytest.approx((0.0, 0.25, 0.25))
    # a − b = [2, 0, −1, 1], mean 1/2 raw, 1/6 normalized = (0 + 1/4 + 1/4)/3.
    assert td.difference == pytest.approx(1 / 6)
    assert td.n_tasks == 4
    np.testing.assert_array_equal(td.per_task[2], [1, 0, 0, 0])   # ≥3: a scores 3 only on task 1


def test_threshold_decomposition_of_an_interaction():
    C, D = [2, 2, 2, 2], [0, 3, 1, 2]
    gamma = stats.threshold_decomposition(A, B, C, D, coefficients=(1, -1, -1, 1))
    first = stats.threshold_decomposition(A, B)
    second = stats.threshold_decomposition(C, D)
    assert gamma.delta == pytest.approx(tuple(x - y for x, y in zip(first.delta, second.delta)))
    # c − d = [2, −1, 1, 0], mean 1/2 raw → γ = (1/2 − 1/2)/3 = 0.
    assert gamma.difference == pytest.approx(0.0)


@pytest.mark.parametrize("corrupt", [4, 2.5, -1, np.nan])
def test_threshold_identity_raises_on_corrupt_grades(corrupt):
    # 4 → thresholds give 3; 2.5 → 2; −1 → 0; NaN → never ≥ k: the identity breaks.
    with pytest.raises(ValueError, match="identity"):
        stats.threshold_decomposition([3, corrupt, 0, 1], B)


def test_transition_table_and_win_tie_loss():
    table = stats.transition_table(A, B)
    expected = np.zeros((4, 4), dtype=int)
    for a, b in [(3, 1), (2, 2), (0, 1), (1, 0)]:     # rows: grade under A, cols: under B
        expected[a, b] += 1
    np.testing.assert_array_equal(table, expected)
    # a − b = [2, 0, −1, 1]: A higher on 2 tasks, tied on 1, lower on 1.
    assert stats.win_tie_loss(np.subtract(A, B) / 3) == (2, 1, 1)
    # 1/3 − 1 + 2/3 is −1.1e-16 in floating point, not 0.0; it is a tie.
    assert stats.win_tie_loss([1 / 3 - 1 + 2 / 3]) == (0, 1, 0)
    with pytest.raises(ValueError):
        stats.transition_table([0, 4], [1, 1])


# --- missing-score bounds (B.3) ----------------------------------------------

def test_missing_bounds_by_hand():
    nan = np.nan
    grades = [[3, 1],        # observed: 3 − 1 = 2
              [nan, 2],      # a free (c = +1: 0..3), −2      → −2..+1
              [0, nan]]      # 0, b free (c = −1: −3..0)      → −3..0
    b = stats.missing_bounds((1, -1), grades)
    # Sums −3 and +3 over 3 planned tasks, divided by 3 × 3.
    assert (b.lo, b.hi) == pytest.approx((-1 / 3, 1 / 3))
    assert (b.n_tasks, b.n_missing) == (3, 2)
    # None is missing too; with nothing missing the bounds collapse to the estimate.
    full = stats.missing_bounds((1, -1), [[3, 1], [2, 2]])
    assert full.lo == full.hi == pytest.approx((2 + 0) / (3 * 2))
    # Mean over two budgets of A minus B, written ±1 with averaging factor 2:
    # task 1: (3 − 1) + (2 − 0) = 4;  task 2: (1 − None) + (0 − 0) → 1 − [0, 3] = −2..1.
    avg = stats.missing_bounds((1, -1, 1, -1), [[3, 1, 2, 0], [1, None, 0, 0]], divisor=2)
    assert (avg.lo, avg.hi) == pytest.approx(((4 - 2) / 12, (4 + 1) / 12))


def test_missing_bounds_ignore_zero_coefficients_and_reject_bad_grades():
    b = stats.missing_bounds((1, 0, -1), [[2, np.nan, 1]])
    assert (b.lo, b.hi, b.n_missing) == pytest.approx((1 / 3, 1 / 3, 0))
    with pytest.raises(ValueError):
        stats.missing_bounds((1, -1), [[5, 1]])


# --- sign test, kappa --------------------------------------------------------

def test_sign_test_paper_numbers_against_scipy():
    # B.3: fusion below the one-shot for 85 people, above for 44, 59 equal.
    signs = [-1] * 85 + [1] * 44 + [0] * 59
    person, diff = [], []
    for i, s in enumerate(signs):            # five tasks each; the sum has sign s
        person += [i] * 5
        # 1/3 + 1/3 − 1 + 1/3 sums to −5.6e-17 in floating point: a zero, not a sign.
        diff += [s / 3, 1 / 3, 1 / 3, -1.0, 1 / 3]
    result = stats.sign_test(person, diff)
    assert result[:3] == (85, 44, 59)
    assert result.p_value == pytest.approx(binomtest(44, 129).pvalue, rel=1e-12)
    assert round(result.p_value, 4) == 0.0004


def test_sign_test_small_by_hand():
    # Five people all positive: p = 2 · (1/2)^5 = 0.0625; a person at zero is dropped.
    r = stats.sign_test([1, 2, 3, 4, 5, 6, 6], [1, 1, 1, 1, 1, 1, -1])
    assert r == (0, 5, 1, 0.0625)
    # Balanced 2 vs 2: 2 · P(X ≤ 2 | n = 4) = 2 · 11/16 > 1 → capped at 1.
    assert stats.sign_test([1, 2, 3, 4], [1, 1, -1, -1]).p_value == 1.0


def test_quadratic_kappa():
    assert stats.quadratic_kappa([0, 1, 2, 3], [0, 1, 2, 3]) == pytest.approx(1.0)
    # Observed table = chance table (each of the four corner cells 1) → κ = 0.
    assert stats.quadratic_kappa([0, 0, 3, 3], [0, 3, 0, 3]) == pytest.approx(0.0)
    rng = np.random.default_rng(4)
    a = rng.integers(0, 4, 300)
    b = np.clip(a + rng.integers(-1, 2, 300), 0, 3)
    expected = cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3])
    assert stats.quadratic_kappa(a, b) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError):
        stats.quadratic_kappa([0, 4], [0, 1])


# --- paired sets (B.3) -------------------------------------------------------

def test_paired_set_reports_lost_tasks():
    a = {"t1": 3, "t2": 2, "t3": None, "t4": 1}
    b = {"t1": 1, "t2": np.nan, "t3": 0, "t4": 1, "t5": 2}     # t5 never planned under a
    ps = stats.paired_set(a, b, person=lambda key: key[:2])
    assert ps.keys == ("t1", "t4")
    assert (ps.planned, ps.lost, ps.missing) == (5, 3, (2, 1))
    np.testing.assert_allclose(ps.diff(), [(3 - 1) / 3, 0.0])
    assert list(ps.person) == ["t1", "t4"]


def test_contrast_whose_paired_set_shrinks_by_a_missing_grade():
    # Three people, two tasks each; condition C misses one grade (person q).
    keys = [("p", 1), ("p", 2), ("q", 1), ("q", 2), ("r", 1), ("r", 2)]
    a = dict(zip(keys, [3, 2, 2, 1, 0, 3]))
    b = dict(zip(keys, [2, 2, 1, 1, 0, 1]))
    c = dict(zip(keys, [1, 2, None, 1, 0, 1]))
    owner = lambda key: key[0]
    ab, ac = stats.paired_set(a, b, person=owner), stats.paired_set(a, c, person=owner)
    assert (ab.n_tasks, ab.lost) == (6, 0)
    assert (ac.n_tasks, ac.lost) == (5, 1)
    r_ab = stats.paired_bootstrap(ab.person, ab.diff(), seed=1, draws=1_000)
    r_ac = stats.paired_bootstrap(ac.person, ac.diff(), seed=1, draws=1_000)
    # a − b = [1, 0, 1, 0, 0, 2] → 4/6 raw → 2/9;  a − c without (q, 1): [2, 0, 0, 0, 2] → 4/5 raw → 4/15.
    assert r_ab.estimate == pytest.approx(2 / 9)
    assert r_ac.estimate == pytest.approx(4 / 15)
    assert (r_ac.n_tasks, r_ac.n_people) == (5, 3)


def test_interaction_uses_the_four_cell_common_set():
    a = {1: 3, 2: 2, 3: 1}
    b = {1: 1, 2: 2, 3: 1}
    c = {1: 2, 2: 0, 3: 3}
    d = {1: 2, 2: 1, 3: None}                 # task 3 drops out of all four cells
    ps, gamma = stats.interaction(a, b, c, d)
    assert ps.keys == (1, 2) and ps.lost == 1
    # (3 − 1) − (2 − 2) = 2;  (2 − 2) − (0 − 1) = 1; normalized: 2/3, 1/3.
    np.testing.assert_allclose(gamma, [2 / 3, 1 / 3])


def test_candidate_mean_as_comparator():
    b0 = {1: 3, 2: 1, 3: 2}
    b1 = {1: 0, 2: 1, 3: None}
    b2 = {1: 0, 2: 2, 3: 2}
    mean = stats.candidate_mean(b0, b1, b2)
    assert mean == {1: 1.0, 2: 4 / 3, 3: None}          # pool 3 is incomplete
    fusion = {1: 2, 2: 2, 3: 3}
    ps = stats.paired_set(fusion, mean)
    # (2 − 1)/3 and (2 − 4/3)/3.
    np.testing.assert_allclose(ps.diff(), [1 / 3, 2 / 9])


# --- grouping (G.1) ------------------------------------------------------------

def test_budget_share_groups():
    g = stats.BUDGET_SHARE_GROUPS
    assert stats.budget_share_group(50, 400) == g[0]       # 1/8
    assert stats.budget_share_group(100, 400) == g[1]      # exactly a quarter
    assert stats.budget_share_group(200, 400) == g[2]      # exactly a half
    assert stats.budget_share_group(399, 400) == g[2]      # nearly all
    assert stats.budget_share_group(400, 400) == g[3]
    assert stats.budget_share_group(900, 400) == g[3]      # budget holds the whole source


def test_group_by_averages_a_tasks_rows_within_a_group():
    # Task t1 has two budgets in the same group (mean of 1/3 and 0 = 1/6).
    values = ["low", "low", "low", "high"]
    person = ["p", "p", "q", "q"]
    task = ["t1", "t1", "t2", "t2"]
    diff = [1 / 3, 0.0, -1 / 3, 2 / 3]
    out = stats.group_by(values, person, diff, task=task, seed=4, draws=500,
                         order=["high", "absent", "low"])
    assert list(out) == ["high", "low"]
    # low: t1 → 1/6, t2 → −1/3 → mean −1/12 over 2 tasks; high: t2 → 2/3.
    assert (out["low"].estimate, out["low"].n_tasks) == (pytest.approx(-1 / 12), 2)
    assert out["high"].estimate == pytest.approx(2 / 3)
    # Without task labels every row is its own task.
    assert stats.group_by(values, person, diff, seed=4, draws=500)["low"].n_tasks == 3
