"""Robustness of one paired contrast (paper App. I.1, I.2, I.5, I.7, I.8), on the paper's bootstrap stream.

Every interval here resamples whole people with NumPy PCG64 from the analysis seed, in the
stream of `paired_bootstrap` (blocks of 2,000 draws, people in ``np.unique`` order, linear
percentiles), so an interval is reproducible by seed:

* a ΔP≥k interval, a subgroup's interval and an interval after exclusions *are*
  ``paired_bootstrap`` intervals (computed through ``shared_bootstraps``, identical to the bit);
* a difference between two subgroups and a regression's slope and intercept are new statistics
  computed on the draws ``paired_bootstrap`` makes over the people of both groups (of the
  regression): ``person_draw_counts`` yields those draws as counts per person, and the tests
  recompute replicates directly from the drawn indices.

Units: per-task differences as given (normally normalized, ``PairedSet.diff``); ΔP≥k in shares.
Pure NumPy; imports no Django.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterator, Sequence

import numpy as np

from experiments.core.stats.arguments import bootstrap_tails, check_draws, check_paired
from experiments.core.stats.paired import BootstrapResult, MAX_GRADE
from experiments.core.stats.shared import BootstrapRequest, shared_bootstraps

BLOCK = 2_000


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile interval (None when some draws leave it undefined)."""

    estimate: float
    lo: float | None
    hi: float | None
    n_tasks: int
    n_people: int
    undefined_draws: int = 0   # draws in which the statistic had no value (an empty group)


# Draws are generated this many indices at a time (rows × people): memory stays bounded for any
# number of people. PCG64 integers continue seamlessly across calls, so the draws are those of
# paired_bootstrap's blocks of 2,000 whatever the chunk (tests check it).
CHUNK_INDICES = 2 ** 21


def _index_chunks(n_people: int, *, seed: int, draws: int, block: int = BLOCK) -> Iterator[tuple[int, np.ndarray]]:
    """``(first draw, idx)``: the people drawn, ``idx[r]`` for draw ``first + r``, in paired_bootstrap's stream."""
    check_draws(draws, block)
    rows = max(1, min(block, CHUNK_INDICES // max(n_people, 1)))
    rng = np.random.Generator(np.random.PCG64(seed))
    for start in range(0, draws, rows):
        m = min(rows, draws - start)
        yield start, rng.integers(0, n_people, size=(m, n_people))


def person_draw_counts(n_people: int, *, seed: int, draws: int, block: int = BLOCK) -> Iterator[tuple[int, np.ndarray]]:
    """``(first draw, counts)`` per chunk: how often each person was drawn, in ``paired_bootstrap``'s stream.

    ``counts[r, i]`` is the number of times person ``i`` (``np.unique`` order) appears in draw
    ``first + r``; the indices are ``rng.integers(0, n, size=(m, n))`` of ``PCG64(seed)``.
    """
    for start, idx in _index_chunks(n_people, seed=seed, draws=draws, block=block):
        m = idx.shape[0]
        flat = (idx + (np.arange(m) * n_people)[:, None]).ravel()
        yield start, np.bincount(flat, minlength=m * n_people).reshape(m, n_people).astype(float)


def person_weighted_bootstrap(person, diff, *, seed: int, draws: int,
                              tails: tuple[float, float] | None = None) -> BootstrapResult:
    """``paired_bootstrap(..., weighting="person")`` to the last bit, in bounded memory (I.8).

    Each replicate is computed as paired_bootstrap computes it, per-person means summed over the
    drawn people in draw order, chunk by chunk instead of 2,000 draws at once.
    """
    person, diff = check_paired(person, diff)
    tails = bootstrap_tails(0.95, tails)
    _, inverse = np.unique(person, return_inverse=True)
    n = int(inverse.max()) + 1
    S = np.bincount(inverse, weights=diff, minlength=n)
    N = np.bincount(inverse, minlength=n).astype(float)
    S, N = S / N, np.ones(n)
    replicates = np.empty(draws)
    for start, idx in _index_chunks(n, seed=seed, draws=draws):
        replicates[start:start + idx.shape[0]] = S[idx].sum(1) / N[idx].sum(1)
    lo, hi = np.percentile(replicates, [100 * tails[0], 100 * tails[1]], method="linear")
    return BootstrapResult(float(S.mean()), float(lo), float(hi), int(diff.size), n, seed, draws, tails, "person")


def _percentile_interval(replicates: np.ndarray, tails: tuple[float, float]) -> tuple[float | None, float | None, int]:
    undefined = int(np.isnan(replicates).sum())
    if undefined:
        return None, None, undefined
    lo, hi = np.percentile(replicates, [100 * tails[0], 100 * tails[1]], method="linear")
    return float(lo), float(hi), 0


# --------------------------------------------------------------------------
# I.1: thresholds, bounds under monotone rescoring, the top step's share
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class ThresholdRobustness:
    """ΔP≥k with intervals; the range any monotone rescoring can give; the top step's flip share."""

    delta: tuple[Interval, Interval, Interval]
    smallest: int            # k of the smallest ΔP≥k: the lower bound under any monotone rescoring
    largest: int             # k of the largest: the upper bound
    same_sign: bool          # all three ΔP≥k agree in sign: the sign holds under every spacing
    top_step_share: float | None


def top_step_flip_share(delta: Sequence[float]) -> float | None:
    """The least share of the score range on the step 2 → 3 at which some monotone rescoring flips the sign.

    A monotone scoring with the endpoints 0 and 1 gives the steps 0→1, 1→2, 2→3 weights
    w1, w2, w3 ≥ 0 summing to 1, and the difference Σ w_k ΔP≥k (linear: all 1/3).  With the top
    step's share w3 fixed, the worst case puts the rest, 1 − w3, on the lower step least
    favourable to the linear sign s; the sign is lost (zero or reversed) from
    w3* = s·e / (s·e − s·ΔP≥3), e that lower step's ΔP.  Returns 0 when a lower step alone
    already reverses (or zeroes) the sign, None when no share does (the top step agrees, or
    the linear difference is zero).  Paper I.1: "less than 11/12 of the score range to the step
    from grade 2 to grade 3 (the linear scale gives 1/3)".
    """
    d = np.asarray(delta, dtype=float)
    if d.shape != (MAX_GRADE,):
        raise ValueError("three threshold differences ΔP≥1, ΔP≥2, ΔP≥3")
    linear = float(d.sum())
    if abs(linear) <= 1e-12:
        return None
    s = 1.0 if linear > 0 else -1.0
    worst_lower = min(s * d[0], s * d[1])
    if worst_lower <= 0:
        return 0.0
    top = s * d[2]
    if top > 0:
        return None
    return float(worst_lower / (worst_lower - top))


def threshold_robustness(person, per_task, *, seed: int, draws: int,
                         tails: tuple[float, float] | None = None) -> ThresholdRobustness:
    """I.1 with intervals: ``per_task`` is ``ThresholdDecomposition.per_task`` (3 × tasks), one person per task.

    Each ΔP≥k interval is ``paired_bootstrap(person, per_task[k-1], seed=seed)``: the three share
    the contrast's people, hence its draws.
    """
    per_task = np.asarray(per_task, dtype=float)
    if per_task.ndim != 2 or per_task.shape[0] != MAX_GRADE:
        raise ValueError("per_task must be (3, tasks)")
    tails = bootstrap_tails(0.95, tails)
    results = shared_bootstraps([BootstrapRequest(person, row, (tails,)) for row in per_task],
                                seed=seed, draws=draws)
    intervals = tuple(Interval(r[0].estimate, r[0].lo, r[0].hi, r[0].n_tasks, r[0].n_people) for r in results)
    estimates = [i.estimate for i in intervals]
    signs = {int(np.sign(round(e, 12))) for e in estimates}
    return ThresholdRobustness(intervals, int(np.argmin(estimates)) + 1, int(np.argmax(estimates)) + 1,
                               len(signs) == 1 and 0 not in signs, top_step_flip_share(estimates))


# --------------------------------------------------------------------------
# Subgroups (I.2, I.4) and their difference
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Subgroups:
    """One interval per group (each its own contrast) and the difference ``first − second`` of two groups."""

    groups: dict
    first: Hashable | None
    second: Hashable | None
    difference: Interval | None


def subgroups(labels, person, diff, *, seed: int, draws: int, order: Sequence[Hashable] | None = None,
              compare: tuple[Hashable, Hashable] | None = None,
              tails: tuple[float, float] | None = None) -> Subgroups:
    """A contrast split by a task attribute; the difference between two groups with its interval.

    Each group is its own contrast over its own people (``paired_bootstrap`` on the group's tasks,
    as ``group_by`` without averaging).  The difference of the group means ``first − second``
    (``compare``; default the first and last groups of ``order``) is bootstrapped on the draws of
    the people of either group: each draw's group means from the same resampled people.  A draw
    that leaves a group without tasks leaves the difference undefined, and the interval is then
    not given (``undefined_draws`` says in how many).
    """
    person, diff = check_paired(person, diff)
    labels = np.asarray(labels, dtype=object)
    if labels.shape != diff.shape:
        raise ValueError("one label per task")
    tails = bootstrap_tails(0.95, tails)
    present = list(dict.fromkeys(labels.tolist()))
    names = [g for g in order if g in present] if order is not None else present
    requests = [BootstrapRequest(person[labels == g], diff[labels == g], (tails,)) for g in names]
    results = shared_bootstraps(requests, seed=seed, draws=draws)
    groups = {g: r[0] for g, r in zip(names, results)}
    if compare is None:
        compare = (names[0], names[-1]) if len(names) >= 2 else (None, None)
    first, second = compare
    if first not in groups or second not in groups or first == second:
        return Subgroups(groups, first, second, None)
    return Subgroups(groups, first, second,
                     group_difference(labels == first, labels == second, person, diff,
                                      seed=seed, draws=draws, tails=tails))


def group_difference(in_first, in_second, person, diff, *, seed: int, draws: int,
                     tails: tuple[float, float] | None = None) -> Interval:
    """Mean of ``diff`` over the first group minus over the second, resampling the people of both."""
    person, diff = check_paired(person, diff)
    tails = bootstrap_tails(0.95, tails)
    in_first, in_second = np.asarray(in_first, dtype=bool), np.asarray(in_second, dtype=bool)
    used = in_first | in_second
    labels, inverse = np.unique(person[used], return_inverse=True)
    n = labels.size
    d, a, b = diff[used], in_first[used], in_second[used]
    sums_a = np.bincount(inverse, weights=np.where(a, d, 0.0), minlength=n)
    sums_b = np.bincount(inverse, weights=np.where(b, d, 0.0), minlength=n)
    count_a = np.bincount(inverse, weights=a.astype(float), minlength=n)
    count_b = np.bincount(inverse, weights=b.astype(float), minlength=n)
    estimate = float(d[a].mean() - d[b].mean())
    replicates = np.empty(draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        for start, counts in person_draw_counts(n, seed=seed, draws=draws):
            replicates[start:start + counts.shape[0]] = (counts @ sums_a) / (counts @ count_a) \
                - (counts @ sums_b) / (counts @ count_b)
    replicates[~np.isfinite(replicates)] = np.nan
    lo, hi, undefined = _percentile_interval(replicates, tails)
    return Interval(estimate, lo, hi, int(used.sum()), n, undefined)


def tertiles(values) -> np.ndarray:
    """'bottom', 'middle' or 'top' per value: below the 1/3 quantile, above the 2/3 quantile, else middle.

    Quantiles are NumPy's linear ones; values equal to an edge go to the middle, so a run of
    ties (a length ratio of exactly 1, I.3) stays in one group.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise ValueError("tertiles need a non-empty 1-D array of finite values")
    low, high = np.quantile(x, [1 / 3, 2 / 3], method="linear")
    return np.where(x < low, "bottom", np.where(x > high, "top", "middle")).astype(object)


TERTILES = ("bottom", "middle", "top")


# --------------------------------------------------------------------------
# Regression of the per-task difference on a covariate (I.2, I.7)
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Regression:
    """Task-weighted least squares diff = intercept + slope·x, with whole-person bootstrap intervals."""

    slope: Interval
    intercept: Interval


def covariate_regression(person, x, diff, *, seed: int, draws: int,
                         tails: tuple[float, float] | None = None) -> Regression:
    """Ordinary least squares of the per-task difference on ``x``, every task weighing the same.

    Each draw refits on the resampled people's tasks (a person drawn twice counts twice), on
    ``paired_bootstrap``'s draws; a draw whose tasks all share one ``x`` has no slope and
    makes the interval undefined.  The intercept is the fitted difference at ``x = 0``.
    """
    person, diff = check_paired(person, diff)
    x = np.asarray(x, dtype=float)
    if x.shape != diff.shape or not np.isfinite(x).all():
        raise ValueError("one finite covariate value per task")
    if np.ptp(x) == 0:
        raise ValueError("the covariate takes one value on every task: no slope")
    tails = bootstrap_tails(0.95, tails)
    # Centred covariate: the normal equations stay well conditioned far from x = 0.
    centre = float(x.mean())
    xc = x - centre
    slope = float(np.dot(xc, diff - diff.mean()) / np.dot(xc, xc))
    intercept = float(diff.mean() - slope * centre)
    labels, inverse = np.unique(person, return_inverse=True)
    n = labels.size
    per_person = np.column_stack([np.bincount(inverse, weights=w, minlength=n)
                                  for w in (np.ones_like(xc), xc, diff, xc * xc, xc * diff)])
    slopes, intercepts = np.empty(draws), np.empty(draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        for start, counts in person_draw_counts(n, seed=seed, draws=draws):
            N, Sx, Sy, Sxx, Sxy = (counts @ per_person).T
            b = (N * Sxy - Sx * Sy) / (N * Sxx - Sx * Sx)
            rows = slice(start, start + counts.shape[0])
            slopes[rows] = b
            intercepts[rows] = (Sy - b * Sx) / N - b * centre
    bad = ~np.isfinite(slopes) | ~np.isfinite(intercepts)
    slopes[bad] = intercepts[bad] = np.nan
    s_lo, s_hi, undefined = _percentile_interval(slopes, tails)
    i_lo, i_hi, _ = _percentile_interval(intercepts, tails)
    return Regression(Interval(slope, s_lo, s_hi, int(diff.size), n, undefined),
                      Interval(intercept, i_lo, i_hi, int(diff.size), n, undefined))


# --------------------------------------------------------------------------
# Weightings and exclusions (I.5, I.8)
# --------------------------------------------------------------------------

def weightings(person, diff, *, seed: int, draws: int,
               tails: tuple[float, float] | None = None) -> tuple[BootstrapResult, BootstrapResult]:
    """The task-weighted and the person-weighted estimate, each with its interval on the same draws (I.8)."""
    tails = bootstrap_tails(0.95, tails)
    task = shared_bootstraps([BootstrapRequest(person, diff, (tails,))], seed=seed, draws=draws)[0][0]
    return task, person_weighted_bootstrap(person, diff, seed=seed, draws=draws, tails=tails)


def without_people(person, diff, excluded, *, seed: int, draws: int,
                   tails: tuple[float, float] | None = None) -> tuple[BootstrapResult, BootstrapResult | None]:
    """The contrast on all tasks and without the ``excluded`` people (I.5): both, the second None when nobody is left."""
    person, diff = check_paired(person, diff)
    tails = bootstrap_tails(0.95, tails)
    keep = ~np.isin(person, np.asarray(list(excluded), dtype=person.dtype) if len(excluded) else person[:0])
    requests = [BootstrapRequest(person, diff, (tails,))]
    if keep.any():
        requests.append(BootstrapRequest(person[keep], diff[keep], (tails,)))
    results = shared_bootstraps(requests, seed=seed, draws=draws)
    return results[0][0], (results[1][0] if keep.any() else None)
