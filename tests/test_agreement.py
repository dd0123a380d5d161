"""Tests of experiments.core.stats.agreement_stats: graders' agreement and its whole-person intervals.

Expected values are computed by hand in the comments, or by an independent
implementation (scikit-learn's Cohen's κ, the `krippendorff` package, the
project's own paired_bootstrap for the random stream), never by the code under
test.  Pure: no database.
"""

import json
import math

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from experiments.core import stats

NAN = float("nan")


def reference_alpha(units):
    """The `krippendorff` package on a units × raters array (it wants raters × units)."""
    return krippendorff.alpha(reliability_data=np.asarray(units, dtype=float).T,
                              level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])


def rated_pairs(seed, n=300, people=40):
    """Two correlated raters (b mostly within a step of a) on n items of uneven people."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, size=n)
    b = np.clip(a + rng.choice([-2, -1, -1, 0, 0, 0, 0, 1, 1, 2], size=n), 0, 3)
    return a, b, rng.integers(0, people, size=n)


# --- by hand ----------------------------------------------------------------------------------------

# Two raters, six items; differences a − b = 0, −1, 0, 2, −1, 0.
A6 = [0, 1, 2, 3, 2, 1]
B6 = [0, 2, 2, 1, 3, 1]


def test_two_raters_by_hand():
    assert stats.confusion_matrix(A6, B6).tolist() == [
        [1, 0, 0, 0],   # (0,0)
        [0, 1, 1, 0],   # (1,1) (1,2)
        [0, 0, 1, 1],   # (2,2) (2,3)
        [0, 1, 0, 0],   # (3,1)
    ]
    # Exact: items 1, 3, 6 → 3/6.  Within one: all but (3,1) → 5/6.
    assert stats.exact_agreement(A6, B6) == pytest.approx(3 / 6)
    assert stats.within_one(A6, B6) == pytest.approx(5 / 6)
    # κ, w = (i − j)²/9.  Observed Σ w·O = (0+1+0+4+1+0)/9 = 6/9.
    # Marginals a = b = [1, 2, 2, 1], n = 6; Σ r_i c_j (i − j)² = 19 + 2·7 + 2·7 + 19 = 66,
    # so Σ w·E = 66/(9·6) = 66/54 and κ = 1 − (36/54)/(66/54) = 1 − 36/66 = 5/11.
    assert stats.quadratic_kappa(A6, B6) == pytest.approx(5 / 11, abs=1e-12)
    assert float(stats.kappa_from_tables(stats.confusion_matrix(A6, B6))) == pytest.approx(5 / 11, abs=1e-12)
    # α ordinal.  Coincidences o = T + Tᵀ, marginals n_v = [2, 4, 4, 2], n = 12.
    # δ²(c,k) = (Σ_{g=c..k} n_g − (n_c + n_k)/2)²:
    #   (0,1) (6−3)² = 9   (1,2) (8−4)² = 16   (2,3) (6−3)² = 9
    #   (0,2) (10−3)² = 49 (1,3) (10−3)² = 49  (0,3) (12−2)² = 100
    # Observed Σ o δ² = 2·[δ²(1,2) + δ²(1,3) + δ²(2,3)] = 2·(16 + 49 + 9) = 148.
    # Expected Σ n_c n_k δ² = 2·(2·4·9 + 2·4·49 + 2·2·100 + 4·4·16 + 4·2·49 + 4·2·9) = 2·1584 = 3168.
    # α = 1 − (n − 1)·148/3168 = 1 − 1628/3168 = 35/72.
    units = np.column_stack([A6, B6])
    assert stats.krippendorff_alpha_ordinal(units) == pytest.approx(35 / 72, abs=1e-12)
    assert reference_alpha(units) == pytest.approx(35 / 72, abs=1e-12)


# Three raters, one missing rating, and one unit rated once (not pairable).
UNITS3 = [[0, 0, 1],
          [2, 2, 2],
          [3, None, 2],
          [1, None, None]]


def test_three_raters_with_missing_by_hand():
    # Unit 1 (m = 3, counts 0:2, 1:1): (n nᵀ − diag n)/(m − 1) gives o00 += 2/2, o01 = o10 += 2/2.
    # Unit 2 (m = 3, counts 2:3): o22 += (9 − 3)/2 = 3.  Unit 3 (m = 2): o23 = o32 += 1.
    # Unit 4 has one rating and adds nothing.
    expected = [[1, 1, 0, 0],
                [1, 0, 0, 0],
                [0, 0, 3, 1],
                [0, 0, 1, 0]]
    np.testing.assert_allclose(stats.coincidence_matrix(UNITS3), expected)
    # n_v = [2, 1, 4, 1], n = 8 pairable values.  δ²:
    #   (0,1) (3 − 1.5)² = 2.25   (0,2) (7 − 3)² = 16    (0,3) (8 − 1.5)² = 42.25
    #   (1,2) (5 − 2.5)² = 6.25   (1,3) (6 − 1)² = 25    (2,3) (5 − 2.5)² = 6.25
    # Observed Σ o δ² = 2·2.25 + 2·6.25 = 17.
    # Expected Σ n_c n_k δ² = 2·(2·1·2.25 + 2·4·16 + 2·1·42.25 + 1·4·6.25 + 1·1·25 + 4·1·6.25)
    #                       = 2·(4.5 + 128 + 84.5 + 25 + 25 + 25) = 584.
    # α = 1 − 7·17/584 = 465/584.
    assert stats.krippendorff_alpha_ordinal(UNITS3) == pytest.approx(465 / 584, abs=1e-12)
    units = np.array(UNITS3, dtype=float)
    assert reference_alpha(units) == pytest.approx(465 / 584, abs=1e-12)
    # The unpairable unit changes nothing.
    assert stats.krippendorff_alpha_ordinal(units[:3]) == pytest.approx(465 / 584, abs=1e-12)


# --- against independent implementations -----------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_kappa_matches_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    # Seeds 0..3 use every grade; seeds 4..7 leave some grade out of one or both raters.
    grades_a = [0, 1, 2, 3] if seed < 4 else [[1, 2], [0, 3], [0, 1, 2], [2, 3]][seed - 4]
    grades_b = [0, 1, 2, 3] if seed < 4 else [[1, 2, 3], [0, 3], [1, 2], [0, 1]][seed - 4]
    a = rng.choice(grades_a, size=n)
    b = rng.choice(grades_b, size=n)
    a[:2], b[:2] = grades_a[:2], grades_b[:2]          # neither rater constant
    expected = cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3])
    assert stats.quadratic_kappa(a, b) == pytest.approx(expected, abs=1e-12)
    assert float(stats.kappa_from_tables(stats.confusion_matrix(a, b))) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_alpha_matches_krippendorff_package(seed):
    rng = np.random.default_rng(100 + seed)
    raters = 2 + seed % 4
    n = int(rng.integers(10, 120))
    grades = [0, 1, 2, 3] if seed % 2 == 0 else [0, 2, 3]       # odd seeds: grade 1 absent
    units = rng.choice(grades, size=(n, raters)).astype(float)
    units[rng.random(units.shape) < 0.3] = np.nan
    expected = reference_alpha(units)
    assert stats.krippendorff_alpha_ordinal(units) == pytest.approx(expected, abs=1e-12)
    assert float(stats.alpha_from_coincidences(stats.coincidence_matrix(units))) == pytest.approx(expected,
                                                                                                abs=1e-12)


def test_vectorized_from_tables_equals_scalar():
    rng = np.random.default_rng(7)
    pairs = [(rng.integers(0, 4, size=30), rng.integers(0, 4, size=30)) for _ in range(6)]
    tables = np.stack([stats.confusion_matrix(a, b) for a, b in pairs]).reshape(2, 3, 4, 4)
    kappas = stats.kappa_from_tables(tables)
    assert kappas.shape == (2, 3)
    np.testing.assert_allclose(kappas.ravel(), [stats.quadratic_kappa(a, b) for a, b in pairs], atol=1e-12)
    # A constant table in the stack gives NaN there and nothing else changes.
    with_constant = np.concatenate([tables.reshape(6, 4, 4), [[[0, 0, 0, 0], [0, 5, 0, 0],
                                                              [0, 0, 0, 0], [0, 0, 0, 0]]]])
    out = stats.kappa_from_tables(with_constant)
    assert math.isnan(out[-1]) and np.allclose(out[:-1], kappas.ravel())

    units = rng.integers(0, 4, size=(5, 40, 3)).astype(float)
    units[rng.random(units.shape) < 0.2] = np.nan
    coinc = stats.coincidence_matrix(units)
    assert coinc.shape == (5, 4, 4)
    np.testing.assert_allclose(coinc, [stats.coincidence_matrix(u) for u in units])
    np.testing.assert_allclose(stats.alpha_from_coincidences(coinc),
                               [stats.krippendorff_alpha_ordinal(u) for u in units], atol=1e-12)


# --- the bootstrap ----------------------------------------------------------------------------------

def test_bootstrap_is_reproducible_and_uses_the_paired_bootstrap_stream():
    a, b, persons = rated_pairs(1)
    kw = dict(draws=4_000, seed=5)
    first = stats.agreement_bootstrap(a, b, persons, **kw)
    assert first == stats.agreement_bootstrap(a, b, persons, **kw)
    assert first != stats.agreement_bootstrap(a, b, persons, draws=4_000, seed=6)
    assert (first.n_pairs, first.n_people, first.draws, first.seed) == (300, len(set(persons)), 4_000, 5)
    assert first.confusion == stats.confusion_matrix(a, b).tolist()
    # Exact and within-one are means of per-pair indicators: the project's one bootstrap
    # (same seed, same people) must give the very same interval.
    for interval, indicator in ((first.exact, a == b), (first.within_one, abs(a - b) <= 1)):
        ref = stats.paired_bootstrap(persons, indicator.astype(float), **kw)
        assert (interval.estimate, interval.lo, interval.hi) == (ref.estimate, ref.lo, ref.hi)
    # A reasonable case: every interval holds its estimate.
    for interval in (first.exact, first.within_one, first.kappa, first.alpha):
        assert interval.lo <= interval.estimate <= interval.hi
        assert interval.lo < interval.hi
    assert first.kappa.estimate == pytest.approx(stats.quadratic_kappa(a, b), abs=1e-12)
    assert first.alpha.estimate == pytest.approx(reference_alpha(np.column_stack([a, b])), abs=1e-12)


def test_level_and_tails():
    a, b, persons = rated_pairs(2)
    wide = stats.agreement_bootstrap(a, b, persons, draws=3_000, level=0.99)
    narrow = stats.agreement_bootstrap(a, b, persons, draws=3_000, level=0.8)
    assert wide.tails == (0.005, 0.995) and narrow.tails == (0.1, 0.9)
    assert wide.kappa.lo < narrow.kappa.lo < narrow.kappa.hi < wide.kappa.hi
    same = stats.agreement_bootstrap(a, b, persons, draws=3_000, tails=(0.005, 0.995))
    assert same == wide


def test_chunked_equals_unchunked():
    a, b, persons = rated_pairs(3)
    units = np.random.default_rng(3).integers(0, 4, size=(300, 3)).astype(float)
    units[::7, 1] = np.nan
    kw = dict(draws=5_000, seed=9)
    whole = stats.agreement_bootstrap(a, b, persons, chunk=5_000, **kw)
    whole_alpha = stats.alpha_bootstrap(units, persons, chunk=5_000, **kw)
    whole_mean = stats.mean_vs_judge(units, a, persons, chunk=5_000, **kw)
    for chunk in (13, 777, 2_000, 4_500, 10_000):   # inside, across and beyond the blocks of 2,000
        assert stats.agreement_bootstrap(a, b, persons, chunk=chunk, **kw) == whole
        # Sums of non-integer coincidences may be added in another order: allow rounding.
        got = stats.alpha_bootstrap(units, persons, chunk=chunk, **kw)
        np.testing.assert_allclose([got.lo, got.hi], [whole_alpha.lo, whole_alpha.hi], rtol=1e-12)
        got = stats.mean_vs_judge(units, a, persons, chunk=chunk, **kw)
        assert got.agreement == whole_mean.agreement
        np.testing.assert_allclose([got.mean_abs_diff.lo, got.mean_abs_diff.hi],
                                   [whole_mean.mean_abs_diff.lo, whole_mean.mean_abs_diff.hi], rtol=1e-12)


def test_two_rater_alpha_bootstrap_equals_the_agreement_alpha():
    a, b, persons = rated_pairs(4)
    pair = stats.agreement_bootstrap(a, b, persons, draws=3_000)
    alone = stats.alpha_bootstrap(np.column_stack([a, b]), persons, draws=3_000)
    np.testing.assert_allclose([alone.estimate, alone.lo, alone.hi],
                               [pair.alpha.estimate, pair.alpha.lo, pair.alpha.hi], atol=1e-12)


def test_persons_with_a_single_pair():
    a, b, _ = rated_pairs(5, n=60)
    result = stats.agreement_bootstrap(a, b, np.arange(60), draws=3_000)
    assert result.n_people == result.n_pairs == 60
    ref = stats.paired_bootstrap(np.arange(60), (a == b).astype(float), seed=stats.DEFAULT_SEED, draws=3_000)
    assert (result.exact.lo, result.exact.hi) == (ref.lo, ref.hi)
    # One person: every draw is the data itself.
    one = stats.agreement_bootstrap(a, b, ["p"] * 60, draws=500)
    assert one.n_people == 1
    for interval in (one.exact, one.within_one, one.kappa, one.alpha):
        assert interval.lo == pytest.approx(interval.estimate) and interval.hi == pytest.approx(interval.estimate)


def test_identical_grades_give_nan_kappa_and_json_null():
    a = [2] * 12
    assert math.isnan(stats.quadratic_kappa(a, a))
    assert math.isnan(stats.kappa_from_tables(stats.confusion_matrix(a, a)))
    assert math.isnan(stats.krippendorff_alpha_ordinal(np.column_stack([a, a])))
    result = stats.agreement_bootstrap(a, a, [0, 1, 2] * 4, draws=1_000)
    assert (result.exact.estimate, result.exact.lo, result.exact.hi) == (1.0, 1.0, 1.0)
    for interval in (result.kappa, result.alpha):
        assert all(math.isnan(x) for x in (interval.estimate, interval.lo, interval.hi))
    d = result.as_dict()
    assert d["kappa"] == {"estimate": None, "lo": None, "hi": None}
    assert d["exact"] == {"estimate": 1.0, "lo": 1.0, "hi": 1.0}
    assert d["confusion"][2][2] == 12 and d["tails"] == [0.025, 0.975]
    json.dumps(d, allow_nan=False)                                  # strict JSON


def test_draws_with_undefined_kappa_are_left_out():
    # Person "p" grades 2/2 twice (κ undefined alone); a draw of p only (¼ of draws) has κ NaN.
    a = [2, 2, 0, 1, 2, 3]
    b = [2, 2, 0, 2, 2, 3]
    result = stats.agreement_bootstrap(a, b, ["p", "p", "q", "q", "q", "q"], draws=2_000)
    assert np.isfinite([result.kappa.lo, result.kappa.hi]).all()
    interval = stats.Interval.from_replicates(0.5, [NAN, 0.0, NAN, 1.0, 0.5], (0.0, 1.0))
    assert (interval.lo, interval.hi) == (0.0, 1.0)
    assert math.isnan(stats.Interval.from_replicates(0.5, [NAN, NAN], (0.025, 0.975)).hi)


def test_mean_vs_judge_rounds_half_up():
    units = [[1, 2],        # mean 1.5 → 2
             [0, 1],        # 0.5 → 1
             [2, 3],        # 2.5 → 3
             [3, 3],        # 3
             [None, 1],     # a single rater: 1
             [None, None],  # no rater grade: drops out
             [2, 2]]        # judge missing: drops out
    judge = [2, 0, 3, 1, 1, 3, None]
    persons = ["x", "x", "y", "y", "z", "z", "z"]
    result = stats.mean_vs_judge(units, judge, persons, draws=2_000)
    agreement = result.agreement
    assert (agreement.n_pairs, agreement.n_people) == (5, 3)
    # Rounded means 2, 1, 3, 3, 1 against judge 2, 0, 3, 1, 1: exact 3/5, within one 4/5.
    assert agreement.confusion == stats.confusion_matrix([2, 1, 3, 3, 1], [2, 0, 3, 1, 1]).tolist()
    assert agreement.exact.estimate == pytest.approx(3 / 5)
    assert agreement.within_one.estimate == pytest.approx(4 / 5)
    # |mean − judge| = 0.5, 0.5, 0.5, 2, 0 → 3.5/5, with the unrounded means.
    assert result.mean_abs_diff.estimate == pytest.approx(0.7)
    assert agreement == stats.agreement_bootstrap([2, 1, 3, 3, 1], [2, 0, 3, 1, 1], ["x", "x", "y", "y", "z"],
                                                  draws=2_000)
    ref = stats.paired_bootstrap(["x", "x", "y", "y", "z"], [0.5, 0.5, 0.5, 2, 0],
                                 seed=stats.DEFAULT_SEED, draws=2_000)
    assert result.mean_abs_diff.lo == pytest.approx(ref.lo, abs=1e-12)
    assert result.mean_abs_diff.hi == pytest.approx(ref.hi, abs=1e-12)
    d = result.as_dict()
    assert d["mean_abs_diff"]["estimate"] == pytest.approx(0.7) and d["n_pairs"] == 5
    json.dumps(d, allow_nan=False)


# --- bad input --------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: stats.confusion_matrix([0, 4], [0, 1]), r"grade 4 is not among the categories \(0, 1, 2, 3\)"),
    (lambda: stats.exact_agreement([0, 1.5], [0, 1]), "grade 1.5 is not among"),
    (lambda: stats.within_one([0, 1, 2], [0, 1]), "equally long"),
    (lambda: stats.exact_agreement([], []), "empty"),
    (lambda: stats.confusion_matrix([0, None], [0, 1]), "missing grade"),
    (lambda: stats.confusion_matrix(["good"], ["bad"]), "must be numbers"),
    (lambda: stats.agreement_bootstrap([0, 1], [0, 4], [1, 2]), "grade 4"),
    (lambda: stats.agreement_bootstrap([0, 1], [0, 1, 2], [1, 2]), "equally long"),
    (lambda: stats.agreement_bootstrap([], [], []), "empty"),
    (lambda: stats.agreement_bootstrap([0, 1], [0, 1], [1]), "one label per pair"),
    (lambda: stats.agreement_bootstrap([0, 1], [0, 1], [1, 2], draws=0), "positive"),
    (lambda: stats.krippendorff_alpha_ordinal([[0, 4], [1, 1]]), "grade 4"),
    (lambda: stats.krippendorff_alpha_ordinal([0, 1, 2]), "2-D units × raters"),
    (lambda: stats.krippendorff_alpha_ordinal(np.empty((0, 3))), "non-empty"),
    (lambda: stats.krippendorff_alpha_ordinal([[0, None], [None, 1]]), "no pairable unit"),
    (lambda: stats.alpha_bootstrap([[0, 1], [1, 1]], [1]), "one label per pair or unit"),
    (lambda: stats.alpha_bootstrap([[0, None], [1, None]], [1, 2]), "no pairable unit"),
    (lambda: stats.mean_vs_judge([[0, 1], [1, 1]], [0], [1, 2]), "one grade per unit"),
    (lambda: stats.mean_vs_judge([[0, 1]], [4], [1]), "judge: grade 4"),
    (lambda: stats.mean_vs_judge([[None, None]], [1], [1]), "no unit has both"),
    (lambda: stats.kappa_from_tables(np.ones((3, 4))), r"\(…, K, K\)"),
])
def test_bad_input_raises_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
