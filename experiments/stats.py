"""Paired statistics of the paper, in pure NumPy (no Django; issue 5).

Everything here works on plain arrays and mappings so that the numbers of a
dashboard, of ``manage.py contrast`` and of a notebook come from one place.

Units
-----
Grades are the judge's raw integer content grades 0..3 (``None``/NaN when a
judgment is missing; App. B.3 "Missing judgments remain null").  The paper
reports *normalized* scores, raw / 3 in [0, 1] (App. B.3: "The factor of three
normalizes the raw grades to [0, 1]").  In this module:

* ``PairedSet.diff``, ``interaction``, ``ThresholdDecomposition.difference`` and
  ``missing_bounds`` return **normalized** differences (raw contrast / 3);
* ``ThresholdDecomposition.delta`` holds ΔP≥k, differences of *shares* of tasks;
* ``paired_bootstrap``, ``person_weighted``, ``sign_test``, ``win_tie_loss`` and
  ``group_by`` take per-task differences in whatever unit they are given
  (normally the normalized ones from ``PairedSet.diff``) and return that unit;
* ``transition_table`` and ``quadratic_kappa`` take raw grades.

Paper sections: B.3 (paired estimator, whole-person bootstrap, family tails,
missing-score bounds, sign test), G.1 (grouping by budget share), G.2 (100,000
PCG64 draws in blocks of 2,000, linear percentiles), I.1 (threshold
decomposition, transitions), I.8 (person-weighted estimates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

__all__ = [
    "GRADES", "BUDGET_SHARE_GROUPS",
    "BootstrapResult", "ThresholdDecomposition", "MissingBounds", "PairedSet",
    "SignTest", "WinTieLoss",
    "normalize", "paired_bootstrap", "paired_bootstrap_loop", "study_bootstrap",
    "family_tails", "person_weighted", "threshold_decomposition",
    "transition_table", "win_tie_loss", "missing_bounds", "sign_test",
    "quadratic_kappa", "paired_set", "interaction", "candidate_mean",
    "group_by", "budget_share_group",
]

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


def _tails(level: float, tails: tuple[float, float] | None) -> tuple[float, float]:
    if tails is None:
        # Rounded so that level 0.95 gives exactly 0.025 and 0.975, hence the
        # percentiles 2.5 and 97.5 the paper used, not 2.5000000000000022.
        t = round((1 - level) / 2, 12)
        tails = (t, 1 - t)
    lo, hi = float(tails[0]), float(tails[1])
    if not 0 <= lo < hi <= 1:
        raise ValueError(f"tails must satisfy 0 <= lo < hi <= 1, got {tails}")
    return (lo, hi)


def _check_paired(cluster, diff) -> tuple[np.ndarray, np.ndarray]:
    cluster = np.asarray(cluster)
    diff = np.asarray(diff, dtype=float)
    if cluster.ndim != 1 or diff.shape != cluster.shape:
        raise ValueError("cluster labels and differences must be 1-D and of equal length")
    if diff.size == 0:
        raise ValueError("no paired tasks")
    if not np.isfinite(diff).all():
        # A NaN here is a missing grade that slipped past paired_set().
        raise ValueError("differences must be finite; drop missing grades with paired_set()")
    return cluster, diff


def _check_draws(draws: int, block: int) -> None:
    if draws < 1 or block < 1:
        raise ValueError("draws and block must be positive")


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
    person, diff = _check_paired(person, diff)
    _check_draws(draws, block)
    tails = _tails(level, tails)
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


def _percentile_linear(sorted_values: list[float], q: float) -> float:
    """Hyndman & Fan type 7 (NumPy's "linear"), from its textbook definition."""
    h = (len(sorted_values) - 1) * q
    below = math.floor(h)
    if below + 1 >= len(sorted_values):
        return sorted_values[-1]
    a, b = sorted_values[below], sorted_values[below + 1]
    return a + (h - below) * (b - a)


def paired_bootstrap_loop(person, diff, *, seed: int, draws: int = 100_000,
                          block: int = 2_000, level: float = 0.95,
                          tails: tuple[float, float] | None = None,
                          weighting: str = "task",
                          keep_replicates: bool = False) -> BootstrapResult:
    """Slow, obviously correct reference for ``paired_bootstrap``.

    Plain Python loops over draws and sampled people.  It makes the same
    generator calls (one ``integers`` block per ``block`` draws), so it
    resamples exactly the same people; only the floating-point order of the
    sums and the percentile formula are its own.  Used by the tests and by
    ``benchmarks/stats.py``; never by the app.
    """
    person = [p.item() if isinstance(p, np.generic) else p for p in np.asarray(person)]
    diff = [float(d) for d in diff]
    _check_paired(person, diff)
    _check_draws(draws, block)
    tails = _tails(level, tails)
    people = sorted(set(person))
    position = {p: i for i, p in enumerate(people)}
    S = [0.0] * len(people)
    N = [0.0] * len(people)
    for p, d in zip(person, diff):
        S[position[p]] += d
        N[position[p]] += 1
    if weighting == "person":
        S = [s / n for s, n in zip(S, N)]
        N = [1.0] * len(people)
    elif weighting != "task":
        raise ValueError("weighting must be 'task' or 'person'")
    estimate = sum(S) / sum(N)

    rng = np.random.Generator(np.random.PCG64(seed))
    replicates = []
    done = 0
    while done < draws:
        m = min(block, draws - done)
        idx = rng.integers(0, len(people), size=(m, len(people)))
        for row in idx.tolist():
            total, count = 0.0, 0.0
            for j in row:
                total += S[j]
                count += N[j]
            replicates.append(total / count)
        done += m
    ordered = sorted(replicates)
    lo = _percentile_linear(ordered, tails[0])
    hi = _percentile_linear(ordered, tails[1])
    return BootstrapResult(estimate, lo, hi, len(diff), len(people), seed, draws,
                           tails, weighting,
                           np.array(replicates) if keep_replicates else None)


def person_weighted(person, diff) -> float:
    """Person-weighted point estimate: the mean of per-person mean differences (I.8)."""
    person, diff = _check_paired(person, diff)
    _, inverse = np.unique(person, return_inverse=True)
    sums = np.bincount(inverse, weights=diff)
    counts = np.bincount(inverse)
    return float(np.mean(sums / counts))


# --------------------------------------------------------------------------
# Ordinal scale, App. I.1
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class ThresholdDecomposition:
    """ΔP≥k for k = 1..3 and the normalized difference they decompose (I.1).

    ``per_task[k-1]`` is the per-task threshold difference, to bootstrap a
    ΔP≥k interval with ``paired_bootstrap`` on the contrast's people.
    """

    delta: tuple[float, float, float]
    difference: float
    per_task: np.ndarray = field(repr=False, compare=False)
    n_tasks: int = 0


def threshold_decomposition(*grades, coefficients: Sequence[float] = (1, -1)
                            ) -> ThresholdDecomposition:
    """ΔP≥k of a linear contrast of raw grades, with the I.1 identity checked.

    ``threshold_decomposition(a, b)`` decomposes a − b; the interaction γ is
    ``threshold_decomposition(a, b, c, d, coefficients=(1, -1, -1, 1))``.
    For integer grades g = Σ_{k=1..3} 1[g ≥ k], so the normalized difference
    equals (1/3)·Σ_k ΔP≥k exactly.  The identity is checked per task and for
    the means; a violation means a grade outside 0..3, fractional or missing,
    and raises ValueError (not ``assert``, which ``python -O`` would drop).
    """
    if len(grades) != len(coefficients):
        raise ValueError("one coefficient per grade array")
    g = np.asarray(grades, dtype=float)           # (conditions, tasks)
    if g.ndim != 2 or g.shape[1] == 0:
        raise ValueError("grade arrays must be 1-D, equally long and non-empty")
    c = np.asarray(coefficients, dtype=float)
    thresholds = np.arange(1, MAX_GRADE + 1)
    at_least = (g[None, :, :] >= thresholds[:, None, None]).astype(float)  # (k, cond, task)
    per_task = np.tensordot(c, at_least, axes=([0], [1]))                  # (k, task)
    raw = c @ g                                                            # per-task raw contrast
    delta = per_task.mean(axis=1)
    difference = float(np.mean(raw) / MAX_GRADE)
    task_gap = np.abs(per_task.sum(axis=0) - raw)
    mean_gap = abs(delta.sum() / MAX_GRADE - difference)
    if not (np.all(task_gap <= IDENTITY_TOLERANCE) and mean_gap <= IDENTITY_TOLERANCE):
        worst = float(np.nanmax(task_gap)) if np.isfinite(task_gap).any() else float("nan")
        raise ValueError(
            "threshold identity violated (grades must be integers 0..3, none missing): "
            f"largest per-task gap {worst}, gap of the means {mean_gap}")
    return ThresholdDecomposition(tuple(float(x) for x in delta), difference,
                                  per_task, int(g.shape[1]))


def _integer_grades(grades, name: str) -> np.ndarray:
    g = np.asarray(grades, dtype=float)
    if g.ndim != 1 or not np.isin(g, GRADES).all():
        raise ValueError(f"{name}: expected a 1-D array of integer grades 0..3")
    return g.astype(int)


def transition_table(a, b) -> np.ndarray:
    """4×4 paired grade counts: row = grade under ``a``, column = grade under ``b``.

    The paper's Table 25 puts the second-named condition in the rows, so its
    block for "A minus B" is ``transition_table(B, A)``.
    """
    a = _integer_grades(a, "a")
    b = _integer_grades(b, "b")
    if a.shape != b.shape:
        raise ValueError("a and b must be paired (equal length)")
    table = np.zeros((len(GRADES), len(GRADES)), dtype=int)
    np.add.at(table, (a, b), 1)
    return table


class WinTieLoss(NamedTuple):
    wins: int     # tasks with difference > 0 (the first-named condition scored higher)
    ties: int
    losses: int


def win_tie_loss(diff) -> WinTieLoss:
    """Counts of positive, zero and negative per-task differences (Table 25)."""
    d = np.asarray(diff, dtype=float)
    return WinTieLoss(int(np.sum(d > ZERO_TOLERANCE)),
                      int(np.sum(np.abs(d) <= ZERO_TOLERANCE)),
                      int(np.sum(d < -ZERO_TOLERANCE)))


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
    person, diff = _check_paired(person, diff)
    _, inverse = np.unique(person, return_inverse=True)
    sums = np.bincount(inverse, weights=diff)
    negative = int(np.sum(sums < -ZERO_TOLERANCE))
    positive = int(np.sum(sums > ZERO_TOLERANCE))
    zero = sums.size - negative - positive
    n = negative + positive
    tail = sum(math.comb(n, i) for i in range(min(negative, positive) + 1))
    p = min(1.0, 2 * tail / 2 ** n)          # exact big-integer ratio, one rounding
    return SignTest(negative, positive, zero, p)


def quadratic_kappa(a, b, categories: Sequence[Any] = GRADES) -> float:
    """Quadratic-weighted Cohen's kappa between two raters (I.6, Section 8).

    κ = 1 − Σ w·O / Σ w·E with w_ij = (i − j)² / (K − 1)², O the observed
    and E the chance (outer product of marginals) agreement table.  Returns
    NaN when chance disagreement is zero (both raters use one category).
    """
    position = {c: i for i, c in enumerate(categories)}
    a, b = list(np.asarray(a).tolist()), list(np.asarray(b).tolist())
    if len(a) != len(b) or not a:
        raise ValueError("two equally long, non-empty ratings")
    try:
        ia = np.array([position[x] for x in a])
        ib = np.array([position[x] for x in b])
    except KeyError as e:
        raise ValueError(f"rating {e.args[0]!r} is not among the categories") from None
    k = len(categories)
    observed = np.zeros((k, k))
    np.add.at(observed, (ia, ib), 1)
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    i, j = np.indices((k, k))
    w = (i - j) ** 2 / (k - 1) ** 2
    chance = float((w * expected).sum())
    if chance == 0:
        return float("nan")
    return float(1 - (w * observed).sum() / chance)


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


def _missing(grade) -> bool:
    return grade is None or (isinstance(grade, float) and math.isnan(grade))


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
            if all(not _missing(cond.get(k)) for cond in conditions)]
    grades = np.array([[float(cond[k]) for k in kept] for cond in conditions],
                      dtype=float).reshape(len(conditions), len(kept))
    people = None
    if person is not None:
        label = person if callable(person) else person.__getitem__
        people = np.asarray([label(k) for k in kept])
    missing = tuple(sum(_missing(cond.get(k)) for k in planned) for cond in conditions)
    return PairedSet(tuple(kept), grades, people, len(planned),
                     len(planned) - len(kept), missing)


def interaction(a, b, c, d, *, person=None) -> tuple[PairedSet, np.ndarray]:
    """Difference of two differences, (a − b) − (c − d), on the four-cell common set.

    B.3: "The four-cell interaction always uses a four-cell common set."
    Returns the paired set and its per-task normalized interaction.
    """
    paired = paired_set(a, b, c, d, person=person)
    return paired, paired.diff((1, -1, -1, 1))


def candidate_mean(*candidates: Mapping[Hashable, float | None]) -> dict:
    """Per-task mean grade of a pool's candidates, as a comparator condition.

    Table 9: "Candidate mean is the mean of b0, b1 and b2 for that task and
    memory".  A task is missing (None) unless every candidate is graded, as in
    the complete pools of Table 10.  Feed the result to ``paired_set``.
    """
    keys = dict.fromkeys(k for cand in candidates for k in cand)
    out = {}
    for k in keys:
        grades = [cand.get(k) for cand in candidates]
        out[k] = None if any(_missing(g) for g in grades) else sum(map(float, grades)) / len(grades)
    return out


# --------------------------------------------------------------------------
# Grouping by a task attribute, App. G.1
# --------------------------------------------------------------------------

BUDGET_SHARE_GROUPS = ("below a quarter", "a quarter to a half",
                       "a half to nearly all", "all of it")


def budget_share_group(budget: float, source_length: float) -> str:
    """G.1's bins of the share of the source a budget covers.

    The paper names the bins but not their edges; we read them as
    [0, 1/4), [1/4, 1/2), [1/2, 1) and ≥ 1 ("all of it": the budget holds the
    whole source, which is then passed unchanged).
    """
    share = budget / source_length if source_length > 0 else math.inf
    if share >= 1:
        return BUDGET_SHARE_GROUPS[3]
    if share >= 0.5:
        return BUDGET_SHARE_GROUPS[2]
    if share >= 0.25:
        return BUDGET_SHARE_GROUPS[1]
    return BUDGET_SHARE_GROUPS[0]


def group_by(values: Iterable[Hashable], person, diff, *, seed: int,
             task: Iterable[Hashable] | None = None,
             order: Sequence[Hashable] | None = None,
             **bootstrap) -> dict[Hashable, BootstrapResult]:
    """Any contrast split by a task attribute, one bootstrap per group.

    ``values``, ``person``, ``diff`` (and ``task``) are parallel rows.  With
    ``task``, rows of the same task in the same group are averaged first —
    G.1: "a task enters a group with the mean of its budgets that fall in it".
    Each group is its own contrast with a fresh generator from ``seed``.
    Groups come in ``order`` if given (labels absent from the data are
    skipped), else in first-seen order.
    """
    values = list(values)
    person = list(np.asarray(person).tolist())
    diff = [float(x) for x in diff]
    task = list(range(len(values))) if task is None else list(task)
    if not len(values) == len(person) == len(diff) == len(task):
        raise ValueError("values, person, diff and task must be parallel")
    rows: dict[Hashable, dict[Hashable, list]] = {}
    for g, p, d, t in zip(values, person, diff, task):
        cell = rows.setdefault(g, {}).setdefault(t, [p, 0.0, 0])
        if cell[0] != p:
            raise ValueError(f"task {t!r} has more than one person")
        cell[1] += d
        cell[2] += 1
    labels = [g for g in order if g in rows] if order is not None else list(rows)
    out = {}
    for g in labels:
        cells = list(rows[g].values())
        out[g] = paired_bootstrap([c[0] for c in cells], [c[1] / c[2] for c in cells],
                                  seed=seed, **bootstrap)
    return out
