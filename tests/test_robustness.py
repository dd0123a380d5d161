"""Robustness statistics (App. I.1, I.2, I.5, I.7, I.8) against independent computations and the same draws."""
import numpy as np
import pytest
import scipy.stats

from experiments.core import stats
from experiments.core.stats import robustness as rb
from experiments.core.task_attributes import is_specific, length_ratio, log_length_gap, target_group

SEED, DRAWS = 20260918, 3_000


@pytest.fixture
def contrast():
    """Uneven people (1..6 tasks), correlated raw grades 0..3: a − b with its people."""
    rng = np.random.default_rng(5)
    person = np.repeat(np.arange(40), rng.integers(1, 7, size=40))
    a = rng.integers(0, 4, size=person.size)
    b = np.clip(a + rng.integers(-2, 2, size=person.size), 0, 3)
    labels = np.array([f"p{p:02d}" for p in person])
    return labels, a, b


def drawn_indices(n, seed, draws):
    """paired_bootstrap's draws, written out independently: PCG64(seed), blocks of 2,000."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return np.vstack([rng.integers(0, n, size=(min(2000, draws - s), n)) for s in range(0, draws, 2000)])


@pytest.mark.parametrize("chunk", [2 ** 21, 7 * 300, 7])     # 2,000 rows, 300 rows, one row at a time
def test_draw_counts_are_the_paired_bootstrap_stream_whatever_the_chunk(monkeypatch, chunk):
    monkeypatch.setattr(rb, "CHUNK_INDICES", chunk)
    idx = drawn_indices(7, 3, 4500)
    counts = np.vstack([c for _, c in rb.person_draw_counts(7, seed=3, draws=4500)])
    assert counts.shape == (4500, 7)
    assert np.array_equal(counts, np.stack([np.bincount(row, minlength=7) for row in idx]))


@pytest.mark.parametrize("chunk", [2 ** 21, 40 * 128])
def test_person_weighted_intervals_are_paired_bootstraps_to_the_bit(contrast, monkeypatch, chunk):
    monkeypatch.setattr(rb, "CHUNK_INDICES", chunk)
    person, a, b = contrast
    diff = (a - b) / 3
    got = rb.person_weighted_bootstrap(person, diff, seed=SEED, draws=DRAWS)
    expected = stats.paired_bootstrap(person, diff, seed=SEED, draws=DRAWS, weighting="person")
    assert (got.estimate, got.lo, got.hi, got.n_people) == (expected.estimate, expected.lo, expected.hi,
                                                             expected.n_people)


def test_threshold_intervals_are_paired_bootstraps_of_each_threshold(contrast):
    person, a, b = contrast
    decomposition = stats.threshold_decomposition(a, b)
    result = rb.threshold_robustness(person, decomposition.per_task, seed=SEED, draws=DRAWS)
    for k in range(3):
        expected = stats.paired_bootstrap(person, decomposition.per_task[k], seed=SEED, draws=DRAWS)
        got = result.delta[k]
        assert (got.estimate, got.lo, got.hi) == (expected.estimate, expected.lo, expected.hi)
        # ΔP≥k by hand: share of a at least k minus share of b at least k.
        assert got.estimate == pytest.approx(np.mean(a >= k + 1) - np.mean(b >= k + 1))
    estimates = [d.estimate for d in result.delta]
    assert result.smallest == int(np.argmin(estimates)) + 1 and result.largest == int(np.argmax(estimates)) + 1


@pytest.mark.parametrize("delta, share", [
    ((0.11, 0.11, -0.01), 11 / 12),      # the paper's 11/12: the lower steps 11 times the top's reverse
    ((0.03, 0.02, -0.02), 0.5),          # worst lower step 0.02 against 0.02
    ((-0.03, 0.01, 0.04), 0.0),          # ΔP≥1 already reverses the positive linear sign
    ((0.01, 0.02, 0.03), None),          # all agree: no spacing flips it
    ((-0.023, -0.01, 0.007), 0.010 / 0.017),   # negative sign, lifted by the top step
    ((0.0, 0.0, 0.0), None),
])
def test_top_step_flip_share_by_hand(delta, share):
    got = rb.top_step_flip_share(delta)
    assert got == (None if share is None else pytest.approx(share))
    if share not in (None, 0.0):
        # Just below the share every monotone spacing keeps the sign; at it, the worst one hits zero.
        s = np.sign(sum(delta))
        lower = min(s * delta[0], s * delta[1])
        at = (1 - share) * lower + share * s * delta[2]
        assert at == pytest.approx(0, abs=1e-12)
        below = (1 - share + 1e-6) * lower + (share - 1e-6) * s * delta[2]
        assert below > 0


def test_subgroups_each_a_paired_bootstrap_and_their_difference_on_the_same_draws(contrast):
    person, a, b = contrast
    diff = stats.normalize(a) - stats.normalize(b)
    rng = np.random.default_rng(2)
    labels = np.where(rng.random(diff.size) < 0.4, "specific", "other")
    result = rb.subgroups(labels, person, diff, seed=SEED, draws=DRAWS, order=["specific", "other"])
    for g in ("specific", "other"):
        expected = stats.paired_bootstrap(person[labels == g], diff[labels == g], seed=SEED, draws=DRAWS)
        assert (result.groups[g].lo, result.groups[g].hi) == (expected.lo, expected.hi)
    # The difference recomputed draw by draw from the drawn people, with a loop.
    used_people, inverse = np.unique(person, return_inverse=True)
    idx = drawn_indices(used_people.size, SEED, DRAWS)
    replicates = []
    for row in idx:
        take = np.concatenate([np.flatnonzero(inverse == i) for i in row])
        d, g = diff[take], labels[take]
        replicates.append(d[g == "specific"].mean() - d[g == "other"].mean())
    lo, hi = np.percentile(replicates, [2.5, 97.5], method="linear")
    assert result.difference.estimate == pytest.approx(diff[labels == "specific"].mean() - diff[labels == "other"].mean())
    assert (result.difference.lo, result.difference.hi) == pytest.approx((lo, hi), abs=1e-12)
    assert result.difference.undefined_draws == 0


def test_a_group_that_some_draws_leave_empty_gives_no_difference_interval():
    person = np.array(["x", "y", "y", "z"])
    diff = np.array([1.0, 0.0, 1 / 3, -1 / 3])
    labels = np.array(["rare", "common", "common", "common"])
    result = rb.subgroups(labels, person, diff, seed=1, draws=500)
    assert result.difference.lo is None and result.difference.undefined_draws > 0
    assert result.difference.estimate == pytest.approx(1.0 - 0.0)


def test_regression_point_estimate_is_least_squares_and_intervals_refit_the_same_draws(contrast):
    person, a, b = contrast
    diff = stats.normalize(a) - stats.normalize(b)
    x = np.random.default_rng(3).normal(20, 8, size=diff.size)
    result = rb.covariate_regression(person, x, diff, seed=SEED, draws=DRAWS)
    (intercept, slope), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), diff, rcond=None)
    fit = scipy.stats.linregress(x, diff)
    assert result.slope.estimate == pytest.approx(slope) == pytest.approx(fit.slope)
    assert result.intercept.estimate == pytest.approx(intercept) == pytest.approx(fit.intercept)
    labels, inverse = np.unique(person, return_inverse=True)
    slopes, intercepts = [], []
    for row in drawn_indices(labels.size, SEED, DRAWS):
        take = np.concatenate([np.flatnonzero(inverse == i) for i in row])
        (c0, c1), *_ = np.linalg.lstsq(np.column_stack([np.ones(take.size), x[take]]), diff[take], rcond=None)
        slopes.append(c1)
        intercepts.append(c0)
    assert (result.slope.lo, result.slope.hi) == pytest.approx(tuple(np.percentile(slopes, [2.5, 97.5])), abs=1e-10)
    assert (result.intercept.lo, result.intercept.hi) == pytest.approx(
        tuple(np.percentile(intercepts, [2.5, 97.5])), abs=1e-10)
    assert (result.slope.n_tasks, result.slope.n_people) == (diff.size, labels.size)


def test_regression_refuses_a_constant_covariate():
    with pytest.raises(ValueError, match="one value"):
        rb.covariate_regression(["a", "b"], [2.0, 2.0], [0.1, 0.2], seed=1, draws=10)


def test_weightings_and_exclusions_are_the_paired_bootstraps(contrast):
    person, a, b = contrast
    diff = stats.normalize(a) - stats.normalize(b)
    task, by_person = rb.weightings(person, diff, seed=SEED, draws=DRAWS)
    expected = stats.paired_bootstrap(person, diff, seed=SEED, draws=DRAWS)
    assert (task.estimate, task.lo, task.hi) == (expected.estimate, expected.lo, expected.hi)
    # Person-weighted by hand: the mean of per-person means.
    means = [diff[person == p].mean() for p in np.unique(person)]
    assert by_person.estimate == pytest.approx(np.mean(means))
    assert by_person.lo == stats.paired_bootstrap(person, diff, seed=SEED, draws=DRAWS, weighting="person").lo
    counts = {p: int((person == p).sum()) for p in np.unique(person)}
    multi = [p for p, n in counts.items() if n > 1]
    everyone, kept = rb.without_people(person, diff, multi, seed=SEED, draws=DRAWS)
    keep = ~np.isin(person, multi)
    direct = stats.paired_bootstrap(person[keep], diff[keep], seed=SEED, draws=DRAWS)
    assert (kept.estimate, kept.lo, kept.hi, kept.n_people) == (direct.estimate, direct.lo, direct.hi, direct.n_people)
    assert everyone.lo == expected.lo
    assert rb.without_people(person, diff, list(counts), seed=SEED, draws=10)[1] is None


def test_tertiles_keep_ties_together():
    x = np.array([0.5, 0.8, 1, 1, 1, 1, 1, 1.2, 1.5, 2.0])
    groups = rb.tertiles(x)
    assert set(groups[x == 1]) == {"middle"}
    assert groups[0] == "bottom" and groups[-1] == "top"
    with pytest.raises(ValueError):
        rb.tertiles([1.0, np.nan])


@pytest.mark.parametrize("text, specific", [
    ("I went to the shops and I'm tired.", False),
    ("We moved in 2019.", True),
    ("Honestly we loved living near Boston.", True),
    ("Yes. The kids liked it. I’d go again.", False),
    ("“Maybe,” she said. Then we left.", False),
    ("my friend Anna helped", True),
    ("I've been there. I'll go back", False),
])
def test_specific_reference_answers(text, specific):
    assert is_specific(text) is specific


def test_length_covariates_and_target_groups():
    assert log_length_gap(99, 9) == pytest.approx(np.log(100) - np.log(10))
    assert length_ratio(4, 4) == 1.0 and length_ratio(0, 1) == 0.5
    assert (target_group(0), target_group(3)) == ("first target", "later targets")
