"""One paired contrast (paper B.3, G.2, I.8): paired sets, the whole-person bootstrap, family tails, missing-score bounds, the sign test.

Units: see the package docstring (`experiments.core.stats`). Pure NumPy.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Mapping, NamedTuple, Sequence

import numpy as np

from experiments.core.stats.arguments import bootstrap_tails, check_draws, check_paired, is_missing

# The analysis defaults (G.2): one seed for every contrast of a run, 100,000 draws.
DEFAULT_SEED = 20260918
DEFAULT_DRAWS = 100_000

GRADES = (0, 1, 2, 3)
MAX_GRADE = 3

# A per-person or per-task difference this close to zero counts as a tie.
# Normalized differences are sums of multiples of 1/3, which floating point
# cannot always cancel exactly (1/3 - 1 + 2/3 is -1.1e-16, not 0).
ZERO_TOLERANCE = 1e-12

# I.1: the identity normalized difference = (1/3)·Σ ΔP≥k holds exactly for
# integer grades; the paper saw discrepancies below 1e-17.  Anything above this
# is a corrupt grade (outside 0..3, fractional, NaN), not rounding.
IDENTITY_TOLERANCE = 1e-12


def normalize(grades) -> np.ndarray:
    """Raw 0..3 grades → normalized [0, 1] scores (App. B.3); NaN stays NaN."""
    return np.asarray(grades, dtype=float) / MAX_GRADE


# --------------------------------------------------------------------------
# Whole-person (cluster) bootstrap, App. B.3 and G.2
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class BootstrapResult:
    """A paired estimate with its bootstrap interval.

    ``n_people`` counts resampled clusters: people for ``paired_bootstrap``,
    studies for ``study_bootstrap``.  ``replicates`` is kept only on request.
    """

    estimate: float
    lo: float
    hi: float
    n_tasks: int
    n_people: int
    seed: int
    draws: int
    tails: tuple[float, float]
    weighting: str = "task"
    replicates: np.ndarray | None = field(default=None, repr=False, compare=False)


def family_tails(m: int, alpha: float = 0.05) -> tuple[float, float]:
    """Bonferroni tails α/(2m) and 1 − α/(2m) for a family of m contrasts.

    App. B.3: the eight-contrast family uses 0.003125 and 0.996875.
    """
    if m < 1:
        raise ValueError("a family has at least one contrast")
    t = alpha / (2 * m)
    return (t, 1 - t)


def paired_bootstrap(person, diff, *, seed: int, draws: int = 100_000,
                     block: int = 2_000, level: float = 0.95,
                     tails: tuple[float, float] | None = None,
                     weighting: str = "task",
                     keep_replicates: bool = False) -> BootstrapResult:
    """Task-weighted paired estimate with a whole-person bootstrap interval.

    App. B.3: "Bootstrap draws resample people with replacement, then divide
    the sampled sum of task differences by the sampled number of tasks. All
    sessions belonging to a sampled person travel together."  G.2: NumPy PCG64,
    100,000 draws in blocks of 2,000, linear percentiles.

    ``person`` is any cluster label (people here; studies in
    ``study_bootstrap``), one per task; ``diff`` the per-task paired
    differences.  People are taken in ``np.unique`` order, and every call
    starts a fresh ``PCG64(seed)`` generator, so contrasts with the same
    participant set consume the same random stream (B.3).

    ``weighting="person"`` gives every person equal weight (I.8): each
    person contributes the mean of their tasks instead of their sum, with the
    same resampled people.
    """
    person, diff = check_paired(person, diff)
    check_draws(draws, block)
    tails = bootstrap_tails(level, tails)
    _, inverse = np.unique(person, return_inverse=True)
    n_people = int(inverse.max()) + 1
    S = np.bincount(inverse, weights=diff, minlength=n_people)   # per-person sums
    N = np.bincount(inverse, minlength=n_people).astype(float)   # per-person task counts
    if weighting == "task":
        estimate = float(diff.mean())
    elif weighting == "person":
        S, N = S / N, np.ones(n_people)                          # each person counts once
        estimate = float(S.mean())
    else:
        raise ValueError("weighting must be 'task' or 'person'")

    rng = np.random.Generator(np.random.PCG64(seed))
    replicates = np.empty(draws)
    for start in range(0, draws, block):
        m = min(block, draws - start)
        idx = rng.integers(0, n_people, size=(m, n_people))
        # One row per draw: sampled sum of differences / sampled task count.
        replicates[start:start + m] = S[idx].sum(1) / N[idx].sum(1)
    lo, hi = np.percentile(replicates, [100 * tails[0], 100 * tails[1]], method="linear")
    return BootstrapResult(estimate, float(lo), float(hi), int(diff.size), n_people,
                           seed, draws, tails, weighting,
                           replicates if keep_replicates else None)


def study_bootstrap(study, diff, *, seed: int, **kwargs) -> BootstrapResult:
    """Study-level resampling: the same bootstrap with studies as clusters.

    A whole study (all its people and tasks) travels together; the result's
    ``n_people`` then counts studies.
    """
    return paired_bootstrap(study, diff, seed=seed, **kwargs)


def person_weighted(person, diff) -> float:
    """Person-weighted point estimate: the mean of per-person mean differences (I.8)."""
    person, diff = check_paired(person, diff)
    _, inverse = np.unique(person, return_inverse=True)
    sums = np.bincount(inverse, weights=diff)
    counts = np.bincount(inverse)
    return float(np.mean(sums / counts))


# --------------------------------------------------------------------------
# Missing scores, App. B.3
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class MissingBounds:
    """Deterministic completion bounds (normalized units); not a confidence interval."""

    lo: float
    hi: float
    n_tasks: int
    n_missing: int   # missing grades that enter the contrast (nonzero coefficient)


def missing_bounds(coefficients: Sequence[float], grades_matrix, *,
                   divisor: float = 1.0) -> MissingBounds:
    """Bounds on a linear contrast over *all planned tasks*, missing grades free.

    App. B.3: each missing raw grade may be anything in [0, 3], so a missing
    term with coefficient c contributes between min(0, 3c) and max(0, 3c);
    observed grades keep their contribution c·g.  Sum over all planned tasks
    and divide by 3 × planned tasks, and by ``divisor`` for an averaging
    factor in the contrast (e.g. 4 for a mean over four budgets written with
    ±1 coefficients).  A non-missing operational zero is an observed 0.

    ``grades_matrix`` has one row per planned task and one column per
    coefficient, raw grades with NaN (or None) where the grade is missing.
    """
    c = np.asarray(coefficients, dtype=float)
    g = np.asarray(grades_matrix, dtype=float)
    if g.ndim != 2 or g.shape[1] != c.size or g.shape[0] == 0:
        raise ValueError("grades_matrix must be (planned tasks, len(coefficients))")
    missing = np.isnan(g)
    observed = g[~missing]
    if observed.size and (observed.min() < 0 or observed.max() > MAX_GRADE):
        raise ValueError("observed grades must lie in 0..3")
    known = np.where(missing, 0.0, g) @ c
    low_missing = missing @ np.minimum(0.0, MAX_GRADE * c)
    high_missing = missing @ np.maximum(0.0, MAX_GRADE * c)
    scale = MAX_GRADE * g.shape[0] * divisor
    return MissingBounds(float((known + low_missing).sum() / scale),
                         float((known + high_missing).sum() / scale),
                         int(g.shape[0]),
                         int(missing[:, c != 0].sum()))


# --------------------------------------------------------------------------
# Sign test and agreement
# --------------------------------------------------------------------------

class SignTest(NamedTuple):
    negative: int    # people whose summed difference is below zero
    positive: int
    zero: int
    p_value: float   # exact two-sided binomial(n = negative + positive, 1/2)


def sign_test(person, diff) -> SignTest:
    """Exact two-sided sign test over people with a nonzero difference (B.3).

    Each person's sign is the sign of the sum (equivalently the mean) of their
    task differences; people with zero difference are dropped.  Under the null
    the count below zero is Binomial(n, 1/2), which is symmetric, so the
    two-sided p is 2·P(X ≤ min(neg, pos)), capped at 1, computed exactly with
    integers.  Paper: 85 below, 44 above (59 equal) gives p = 0.0004.
    """
    person, diff = check_paired(person, diff)
    _, inverse = np.unique(person, return_inverse=True)
    sums = np.bincount(inverse, weights=diff)
    negative = int(np.sum(sums < -ZERO_TOLERANCE))
    positive = int(np.sum(sums > ZERO_TOLERANCE))
    zero = sums.size - negative - positive
    n = negative + positive
    # Σ C(n, i) for i ≤ min(neg, pos), each coefficient from the previous one: exact integers,
    # linear in the count instead of one fresh math.comb per term (20,000 people: seconds).
    tail = term = 1
    for i in range(min(negative, positive)):
        term = term * (n - i) // (i + 1)
        tail += term
    p = min(1.0, 2 * tail / 2 ** n)          # exact big-integer ratio, one rounding
    return SignTest(negative, positive, zero, p)


# --------------------------------------------------------------------------
# Paired sets of jointly observed tasks, App. B.3
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class PairedSet:
    """The jointly observed tasks of a contrast (App. B.3).

    ``grades`` is (conditions, tasks) in raw units; ``planned`` counts tasks
    planned for any of the conditions, ``lost`` those dropped because some
    condition's grade is missing, ``missing[j]`` the planned tasks missing
    under condition j.
    """

    keys: tuple
    grades: np.ndarray = field(repr=False, compare=False)
    person: np.ndarray | None = field(repr=False, compare=False)
    planned: int
    lost: int
    missing: tuple[int, ...]

    @property
    def n_tasks(self) -> int:
        return len(self.keys)

    def diff(self, coefficients: Sequence[float] = (1, -1), *,
             divisor: float = 1.0) -> np.ndarray:
        """Per-task normalized contrast Σ_j c_j g_j / (3 · divisor)."""
        c = np.asarray(coefficients, dtype=float)
        if c.size != self.grades.shape[0]:
            raise ValueError("one coefficient per condition")
        return (c @ self.grades) / (MAX_GRADE * divisor)


def paired_set(*conditions: Mapping[Hashable, float | None],
               person: Mapping | Callable | None = None) -> PairedSet:
    """Tasks graded under every condition, and how many were lost (B.3).

    Each condition maps task key → grade, with ``None`` (or NaN, or an absent
    key) for a missing grade.  Only jointly observed tasks enter a paired
    estimate; "if missingness changes a contrast's paired set, its denominator
    and covered people are reported explicitly".  ``person`` (a mapping or a
    function of the task key) labels each kept task for the bootstrap.
    Keys keep their first-seen order across the conditions.
    """
    if not conditions:
        raise ValueError("at least one condition")
    planned = list(dict.fromkeys(k for cond in conditions for k in cond))
    kept = [k for k in planned
            if all(not is_missing(cond.get(k)) for cond in conditions)]
    grades = np.array([[float(cond[k]) for k in kept] for cond in conditions],
                      dtype=float).reshape(len(conditions), len(kept))
    people = None
    if person is not None:
        label = person if callable(person) else person.__getitem__
        people = np.asarray([label(k) for k in kept])
    missing = tuple(sum(is_missing(cond.get(k)) for k in planned) for cond in conditions)
    return PairedSet(tuple(kept), grades, people, len(planned),
                     len(planned) - len(kept), missing)


def paired_matrix(grades, keys: Sequence[Hashable], person=None) -> PairedSet:
    """``paired_set`` for conditions given as rows of one (conditions, tasks) array, NaN missing.

    Every key is planned under every condition (as when each mapping has all keys); the
    result equals ``paired_set`` of the rows as mappings, without a loop over tasks.
    """
    g = np.asarray(grades, dtype=float)
    if g.ndim != 2 or g.shape[0] == 0 or g.shape[1] != len(keys):
        raise ValueError("grades must be (conditions, tasks) with one key per task")
    missing = np.isnan(g)
    kept = ~missing.any(axis=0)
    people = None if person is None else np.asarray(person)[kept]
    return PairedSet(tuple(np.asarray(keys)[kept].tolist()), np.ascontiguousarray(g[:, kept]), people,
                     len(keys), int(len(keys) - kept.sum()), tuple(int(m) for m in missing.sum(axis=1)))
