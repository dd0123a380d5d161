"""Pool diagnostics (App. I.3) on small hand-checked pools; χ² and the binomial test against scipy."""
import numpy as np
import pytest
from scipy import stats as scipy_stats

from experiments.core import stats
from experiments.core.stats.exact import binomial_test, chi2_sf, chi2_uniform
from experiments.core.stats.pool_stats import (
    Draws, Pool, display_positions, fusion_copies, oracle_match, picker_rows, pool_counts, word_counts,
)

NAN = np.nan


@pytest.mark.parametrize("df", [1, 2, 3, 5, 10, 37])
@pytest.mark.parametrize("x", [0.001, 0.5, 1.9, 2.0, 7.3, 40.0, 157.25, 400.0])
def test_chi2_survival_function_equals_scipy(x, df):
    assert chi2_sf(x, df) == pytest.approx(scipy_stats.chi2.sf(x, df), rel=1e-10, abs=1e-300)


def test_chi2_against_uniform_equals_scipy_chisquare():
    for counts in ([833, 425, 510], [732, 446, 589], [10, 10, 10], [0, 0, 7]):
        statistic, p = chi2_uniform(counts)
        expected = scipy_stats.chisquare(counts)
        assert statistic == pytest.approx(expected.statistic, rel=1e-12)
        assert p == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)
    # the paper's concrete-memory positions: χ²₂ = 157.25
    assert chi2_uniform([833, 425, 510])[0] == pytest.approx(157.25, abs=0.005)


@pytest.mark.parametrize("k, n", [(583, 1768), (614, 1767), (0, 10), (10, 10), (3, 9), (4, 9), (1, 1), (50, 120)])
def test_binomial_test_equals_scipy(k, n):
    assert binomial_test(k, n, 1 / 3) == pytest.approx(scipy_stats.binomtest(k, n, 1 / 3).pvalue, rel=1e-9)


def test_binomial_test_refuses_impossible_counts():
    with pytest.raises(ValueError):
        binomial_test(5, 4, 0.5)


def small_pool():
    """Six tasks of three people, checked by hand below.

    task  b0 b1 b2   selection picks  fusion (copies)
    0     3  1  0    b0 (grade 3)     = b1 (one copy)
    1     1  1  1    b2 (grade 1)     new text, grade 2
    2     0  0  0    b1 (grade 0)     = b0 and b1 (two copies)
    3     2  3  2    b2 (grade 2)     new text, grade 3
    4     0  2  2    invalid (0)      new text, grade 0
    5     1  nan 3   none (pool incomplete)
    """
    return Pool(
        name="memory(concrete,100w)",
        person=np.array([1, 1, 2, 2, 3, 3]),
        candidates=np.array([[3, 1, 0, 2, 0, 1], [1, 1, 0, 3, 2, NAN], [0, 1, 0, 2, 2, 3]], dtype=float),
        display=np.array([[0, 1, 2, 0, 1, 2], [1, 2, 0, 1, 2, 0], [2, 0, 1, 2, 0, 1]]),
        words=np.array([[10, 5, 7, 9, 4, 3], [20, 5, 7, 9, 6, NAN], [30, 6, 8, 1, 8, 5]], dtype=float),
        selection_grade=np.array([3, 1, 0, 2, 0, NAN]),
        selection_pick=np.array([0, 2, 1, 2, -1, -1]),
        selection_words=np.array([10, 6, 7, 1, NAN, NAN]),
        fusion_grade=np.array([1, 2, 0, 3, 0, NAN]),
        fusion_copies=np.array([1, 0, 2, 0, 0, 0]),
        fusion_copied=np.array([1, -1, 0, -1, -1, -1]),
        fusion_words=np.array([20, 4, 7, 12, 3, NAN]),
    )


def test_pool_counts_by_hand():
    assert pool_counts(small_pool()) == {"tasks": 6, "complete": 5, "all_equal": 2, "all_zero": 1, "unequal": 3}


def test_oracle_match_by_hand():
    pool = small_pool()
    draws = Draws(seed=5, draws=400)
    overall, unequal = oracle_match(pool, draws)
    draws.compute()
    # matches: task 0 (3 = best 3), 1 (all equal), 2 (all zero), 3 (2 ≠ 3), 4 (invalid 0 ≠ 2) → 3 of 5
    assert (overall["n"], overall["matches"]) == (5, 3) and overall["rate"] == pytest.approx(0.6)
    # a random pick's chance: 1/3, 3/3, 3/3, 1/3, 2/3
    assert overall["expected"] == pytest.approx((1 / 3 + 1 + 1 + 1 / 3 + 2 / 3) / 5)
    assert (unequal["n"], unequal["matches"]) == (3, 1)
    assert unequal["expected"] == pytest.approx((1 / 3 + 1 / 3 + 2 / 3) / 3)
    assert unequal["estimate"] == pytest.approx(1 / 3 - unequal["expected"])
    # the interval is paired_bootstrap's on the same per-task differences and people
    diff = np.array([1 - 1 / 3, 0 - 1 / 3, 0 - 2 / 3])
    direct = stats.paired_bootstrap([1, 2, 3], diff, seed=5, draws=400)
    assert (unequal["lo"], unequal["hi"]) == pytest.approx((direct.lo, direct.hi), abs=1e-15)
    rate = stats.paired_bootstrap([1, 1, 2, 2, 3], [1, 1, 1, 0, 0], seed=5, draws=400)
    assert (overall["rate_lo"], overall["rate_hi"]) == (rate.lo, rate.hi)


def test_display_positions_by_hand():
    pool = small_pool()
    draws = Draws(seed=5, draws=300)
    shown = display_positions(pool, draws)
    draws.compute()
    # valid picks: t0 b0 shown 0; t1 b2 shown 0; t2 b1 shown 0; t3 b2 shown 2
    assert shown["chosen"] == [3, 0, 1] and shown["n"] == 4
    assert shown["chi2"] == pytest.approx(scipy_stats.chisquare([3, 0, 1]).statistic)
    assert shown["p"] == pytest.approx(scipy_stats.chisquare([3, 0, 1]).pvalue)
    assert shown["b0_shown"] == [2, 1, 1]
    assert (shown["b0_picked"]["k"], shown["b0_picked"]["n"]) == (1, 4)
    assert shown["b0_picked"]["p"] == pytest.approx(scipy_stats.binomtest(1, 4, 1 / 3).pvalue)
    # selection − b0 by b0's display position: shown first in tasks 0 and 3, second in 1 and 4, third in 2
    first, second, third = shown["selection_minus_b0"]
    assert (first["n_tasks"], second["n_tasks"], third["n_tasks"]) == (2, 2, 1)
    assert first["estimate"] == pytest.approx(((3 - 3) + (2 - 2)) / 2 / 3)
    assert second["estimate"] == pytest.approx(((1 - 1) + (0 - 0)) / 2 / 3) and third["estimate"] == 0
    # three distinct lengths among valid picks: t0 (10, 20, 30; picked b0, not the longest), t3 (9, 9, 1: no)
    assert (shown["longest"]["n"], shown["longest"]["k"]) == (1, 0)


def test_fusion_copies_by_hand():
    pool = small_pool()
    draws = Draws(seed=5, draws=300)
    fusion = fusion_copies(pool, draws)
    draws.compute()
    assert (fusion["n"], fusion["copies"]) == (5, 2)
    # the one single copy (task 0) copied b1, shown second
    assert fusion["single_copy_position"] == [0, 1, 0]
    copy, new = fusion["split"]
    assert copy["n_tasks"] == 2 and copy["estimate"] == pytest.approx(((1 - 3) + (0 - 0)) / 2 / 3)
    assert new["n_tasks"] == 3 and new["estimate"] == pytest.approx(((2 - 1) + (3 - 2) + (0 - 0)) / 3 / 3)
    direct = stats.paired_bootstrap([1, 2, 3], np.array([1, 1, 0]) / 3, seed=5, draws=300)
    assert (new["lo"], new["hi"]) == (direct.lo, direct.hi)


def test_word_counts_by_hand():
    pool = small_pool()
    draws = Draws(seed=5, draws=300)
    words = word_counts(pool, draws)
    draws.compute()
    by_name = {row["answers"]: row for row in words["conditions"]}
    assert by_name["b1"]["n"] == 5 and by_name["b1"]["median"] == 7
    assert by_name["fusion"]["mean"] == pytest.approx((20 + 4 + 7 + 12 + 3) / 5)
    fusion_minus_b0 = words["differences"][0]
    assert fusion_minus_b0["difference"] == "fusion − b0" and fusion_minus_b0["n_tasks"] == 5
    assert fusion_minus_b0["estimate"] == pytest.approx((10 - 1 + 0 + 3 - 1) / 5)
    direct = stats.paired_bootstrap([1, 1, 2, 2, 3], [10, -1, 0, 3, -1], seed=5, draws=300)
    assert (fusion_minus_b0["lo"], fusion_minus_b0["hi"]) == (direct.lo, direct.hi)


def test_picker_rows_are_paired_contrasts_on_jointly_graded_tasks():
    person = np.array([1, 1, 2, 2, 3, 3])
    picked = {"longest": np.array([3, 1, 0, 2, 2, NAN])}
    mean = np.array([4 / 3, 1, 0, 7 / 3, 4 / 3, NAN])
    draws = Draws(seed=9, draws=250)
    (row,) = picker_rows(person, picked, {"candidate mean": mean}, draws)
    draws.compute()
    diff = (np.array([3, 1, 0, 2, 2]) - mean[:5]) / 3
    (contrast,) = row["contrasts"]
    assert contrast["n_tasks"] == 5 and contrast["estimate"] == pytest.approx(diff.mean())
    direct = stats.paired_bootstrap([1, 1, 2, 2, 3], diff, seed=9, draws=250)
    # ninths ride the shared draws as 3 × the difference: equal up to the last bits
    assert (contrast["lo"], contrast["hi"]) == pytest.approx((direct.lo, direct.hi), abs=1e-12)
    assert contrast["lo"] < contrast["hi"]
    assert (contrast["wins"], contrast["ties"], contrast["losses"]) == (2, 2, 1)   # 3 > 4/3, 2 > 4/3; 1 = 1, 0 = 0; 2 < 7/3
    assert row["mean_estimate"] == pytest.approx(8 / 15)


def test_ninths_on_the_shared_draws_equal_paired_bootstrap_at_the_paper_s_size():
    rng = np.random.default_rng(3)
    person = rng.integers(0, 188, 1768)
    diff = (3 * rng.integers(0, 4, 1768) - rng.integers(0, 10, 1768)) / 9
    draws = Draws(seed=20260918, draws=20_000)
    row = {}
    draws.interval(row, "", person, diff)
    draws.compute()
    direct = stats.paired_bootstrap(person, diff, seed=20260918, draws=20_000)
    assert (row["lo"], row["hi"]) == pytest.approx((direct.lo, direct.hi), abs=1e-12)
    assert row["estimate"] == direct.estimate and row["people"] == direct.n_people


def test_a_pool_without_a_valid_selection_has_no_chi_square_and_no_nan():
    pool = small_pool()
    pool = Pool(**{**pool.__dict__, "selection_pick": np.full(6, -1)})
    draws = Draws(seed=5, draws=100)
    shown = display_positions(pool, draws)
    draws.compute()
    assert shown["chosen"] == [0, 0, 0] and shown["chi2"] is None and shown["p"] is None
    assert shown["b0_picked"]["n"] == 0 and shown["b0_picked"]["rate"] is None
