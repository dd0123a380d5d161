"""Agreement between graders on the 0–3 rubric (I.6, §8): shares, quadratic κ, ordinal α, person-clustered intervals.

Point statistics take raw grades (``categories``, default GRADES = 0..3) and come both
from ratings and vectorized over stacks of tables, so a bootstrap draw costs a few
array operations.  Two graders (or a rater and the judge): ``confusion_matrix``,
``exact_agreement``, ``within_one``, ``quadratic_kappa``, ``kappa_from_tables``.  Any
number of raters (units × raters, NaN/None missing; a unit with fewer than two ratings
is not pairable and drops out): ``coincidence_matrix``, ``alpha_from_coincidences``,
``krippendorff_alpha_ordinal`` (Krippendorff 2011, ordinal metric).

Intervals (``agreement_bootstrap``, ``alpha_bootstrap``, ``mean_vs_judge``) resample
whole people as ``paired.paired_bootstrap`` does: a fresh ``PCG64(seed)``, people in
``np.unique`` order, blocks of 2,000 draws of P person indices with replacement, linear
percentiles at ``bootstrap_tails(level, tails)``; the same seed and people resample the same
people as any paired contrast.  Each person's ratings are summed once into a table
(P × K × K); a draw's table is its multiplicity counts @ the person tables.  ``chunk``
draws are counted at a time (about 24 bytes × chunk × P, besides one block of indices);
any chunk gives the same figures.  Draws whose statistic is NaN leave the percentiles.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from experiments.core.stats.arguments import bootstrap_tails
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED, GRADES

# Draws per random block: paired_bootstrap's blocks (G.2), hence its random stream.
BLOCK = 2_000


def _json_number(x: float) -> float | None:
    return None if math.isnan(x) else x


@dataclass(frozen=True)
class Interval:
    """A point estimate and its percentile interval; NaN where undefined."""

    estimate: float
    lo: float
    hi: float

    @classmethod
    def from_replicates(cls, estimate: float, replicates, tails: tuple[float, float]) -> Interval:
        """Linear percentiles over the defined draws; lo = hi = NaN when no draw is defined."""
        r = np.asarray(replicates, dtype=float)
        r = r[~np.isnan(r)]
        if r.size == 0:
            return cls(float(estimate), math.nan, math.nan)
        lo, hi = np.percentile(r, [100 * tails[0], 100 * tails[1]], method="linear")
        return cls(float(estimate), float(lo), float(hi))

    def as_dict(self) -> dict[str, float | None]:
        return {name: _json_number(x) for name, x in asdict(self).items()}


@dataclass(frozen=True)
class AgreementResult:
    """Agreement of two graders over paired grades, with whole-person intervals.

    ``confusion`` counts pairs, rows = first grader (``a``), columns = second (``b``);
    ``alpha`` is the ordinal α of the two columns as a units × 2 matrix.
    """

    n_pairs: int
    n_people: int
    draws: int
    seed: int
    confusion: list[list[int]]
    exact: Interval
    within_one: Interval
    kappa: Interval
    alpha: Interval
    tails: tuple[float, float] = (0.025, 0.975)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe: plain numbers and lists, NaN as None."""
        return {"n_pairs": self.n_pairs, "n_people": self.n_people, "draws": self.draws,
                "seed": self.seed, "tails": list(self.tails),
                "confusion": [list(row) for row in self.confusion],
                "exact": self.exact.as_dict(), "within_one": self.within_one.as_dict(),
                "kappa": self.kappa.as_dict(), "alpha": self.alpha.as_dict()}


@dataclass(frozen=True)
class MeanVsJudge:
    """The raters' mean grade per unit against the judge (see ``mean_vs_judge``)."""

    agreement: AgreementResult   # rounded rater mean (rows) vs judge (columns)
    mean_abs_diff: Interval      # |unrounded rater mean − judge|, raw grade points

    def as_dict(self) -> dict[str, Any]:
        return {**self.agreement.as_dict(), "mean_abs_diff": self.mean_abs_diff.as_dict()}


# --- Grades → category positions ------------------------------------------------------------------

def _codes(values, categories: Sequence[Any], *, what: str, missing_ok: bool = False) -> np.ndarray:
    """Positions of ``values`` among ``categories``, −1 where missing; ValueError otherwise."""
    try:
        v = np.asarray(values, dtype=float)
        cats = np.asarray(categories, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: grades must be numbers from {tuple(categories)} "
                         "(None or NaN where missing)") from None
    if cats.ndim != 1 or cats.size < 2 or np.unique(cats).size != cats.size:
        raise ValueError("categories must be at least two distinct numbers")
    missing = np.isnan(v)
    if missing.any() and not missing_ok:
        raise ValueError(f"{what} has a missing grade; keep only the pairs both graders graded")
    match = v[..., None] == cats
    unknown = ~match.any(-1) & ~missing
    if unknown.any():
        raise ValueError(f"{what}: grade {v[unknown][0]:g} is not among the categories "
                         f"{tuple(categories)}")
    return np.where(missing, -1, match.argmax(-1))


def _pair_codes(a, b, categories: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    ia = _codes(a, categories, what="a")
    ib = _codes(b, categories, what="b")
    if ia.ndim != 1 or ia.shape != ib.shape:
        raise ValueError(f"a and b must be 1-D and equally long, got shapes {ia.shape} and {ib.shape}")
    if ia.size == 0:
        raise ValueError("no rated pairs: a and b are empty")
    return ia, ib


def _value_counts(units, categories: Sequence[Any], *, stack: bool = False) -> np.ndarray:
    """(…, units, K): how many raters gave each category to each unit."""
    codes = _codes(units, categories, what="units", missing_ok=True)
    if codes.ndim < 2 or (codes.ndim > 2 and not stack) or codes.shape[-2] == 0:
        raise ValueError(f"units must be a non-empty 2-D units × raters array, got shape {codes.shape}")
    return (codes[..., None] == np.arange(len(categories))).sum(-2)


# --- Two graders: tables, shares, quadratic κ -----------------------------------------------------

def confusion_matrix(a, b, categories: Sequence[Any] = GRADES) -> np.ndarray:
    """K × K integer counts of the pairs (a_i, b_i); rows are ``a``, columns ``b``."""
    ia, ib = _pair_codes(a, b, categories)
    k = len(categories)
    return np.bincount(ia * k + ib, minlength=k * k).reshape(k, k)


def _shares(tables) -> tuple[np.ndarray, np.ndarray]:
    """Exact and within-one-step shares of a stack of tables (…, K, K)."""
    t = np.asarray(tables, dtype=float)
    i, j = np.indices(t.shape[-2:])
    n = t.sum((-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (t * (i == j)).sum((-2, -1)) / n, (t * (abs(i - j) <= 1)).sum((-2, -1)) / n


def exact_agreement(a, b, categories: Sequence[Any] = GRADES) -> float:
    """Share of pairs with a_i = b_i."""
    return float(_shares(confusion_matrix(a, b, categories))[0])


def within_one(a, b, categories: Sequence[Any] = GRADES) -> float:
    """Share of pairs at most one category apart (|a_i − b_i| ≤ 1 on the 0..3 grades)."""
    return float(_shares(confusion_matrix(a, b, categories))[1])


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


def kappa_from_tables(tables) -> np.ndarray:
    """``quadratic_kappa`` of each table of a stack (…, K, K) → (…); NaN where chance disagreement is 0."""
    t = np.asarray(tables, dtype=float)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] < 2:
        raise ValueError(f"tables must be (…, K, K) with K ≥ 2, got shape {t.shape}")
    k = t.shape[-1]
    i, j = np.indices((k, k))
    w = (i - j) ** 2 / (k - 1) ** 2
    n = t.sum((-2, -1))[..., None, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = t.sum(-1)[..., :, None] * t.sum(-2)[..., None, :] / n
        chance = (w * expected).sum((-2, -1))
        kappa = 1 - (w * t).sum((-2, -1)) / chance
    return np.where(chance == 0, np.nan, kappa)[()]


# --- Any number of raters: coincidences, ordinal α (Krippendorff 2011) ----------------------------

def _unit_coincidences(counts) -> np.ndarray:
    """Each unit's share of the coincidence matrix, (n nᵀ − diag n) / (m − 1); zero when m < 2."""
    c = np.asarray(counts, dtype=float)
    m = c.sum(-1)
    pairs = c[..., :, None] * c[..., None, :] - c[..., None] * np.eye(c.shape[-1])
    return pairs / np.maximum(m - 1, 1)[..., None, None]


def coincidence_matrix(units, categories: Sequence[Any] = GRADES) -> np.ndarray:
    """Coincidences o_ck of a units × raters array (stacks: …, units, raters → …, K, K).

    Every ordered pair of ratings of one unit by two different raters adds
    1 / (m_u − 1), m_u the unit's number of ratings; units with m_u < 2 add nothing.
    """
    return _unit_coincidences(_value_counts(units, categories, stack=True)).sum(-3)


def alpha_from_coincidences(coinc) -> np.ndarray:
    """Ordinal α of each coincidence matrix of a stack (…, K, K) → (…).

    α = 1 − (n − 1) Σ o_ck δ²_ck / Σ n_c n_k δ²_ck with n_c the marginals, n = Σ n_c and
    the ordinal metric δ²_ck = (Σ_{g=c..k} n_g − (n_c + n_k)/2)² (Krippendorff 2011).
    NaN where expected disagreement is 0 (one category only) or nothing is pairable.
    """
    o = np.asarray(coinc, dtype=float)
    if o.ndim < 2 or o.shape[-1] != o.shape[-2] or o.shape[-1] < 2:
        raise ValueError(f"coincidences must be (…, K, K) with K ≥ 2, got shape {o.shape}")
    k = o.shape[-1]
    nv = o.sum(-1)
    n = nv.sum(-1)
    cum = np.concatenate([np.zeros(nv.shape[:-1] + (1,)), np.cumsum(nv, -1)], -1)
    i, j = np.indices((k, k))
    between = cum[..., np.maximum(i, j) + 1] - cum[..., np.minimum(i, j)]   # Σ_{g=c..k} n_g
    delta = (between - (nv[..., :, None] + nv[..., None, :]) / 2) ** 2
    observed = (o * delta).sum((-2, -1))
    expected = (nv[..., :, None] * nv[..., None, :] * delta).sum((-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1 - (n - 1) * observed / expected
    return np.where(expected == 0, np.nan, alpha)[()]


def krippendorff_alpha_ordinal(units, categories: Sequence[Any] = GRADES) -> float:
    """Krippendorff's ordinal α of a units × raters array (NaN/None where a rater gave no grade)."""
    coinc = _unit_coincidences(_value_counts(units, categories)).sum(-3)
    if coinc.sum() == 0:
        raise ValueError("no pairable unit: every unit has fewer than two ratings")
    return float(alpha_from_coincidences(coinc))


# --- Whole-person bootstrap on per-person tables --------------------------------------------------

def _labels(persons, n: int) -> np.ndarray:
    labels = np.asarray(persons)
    if labels.ndim != 1 or labels.size != n:
        raise ValueError(f"persons must give one label per pair or unit: {labels.size} labels for {n}")
    return labels


def _index_chunks(rng: np.random.Generator, n_people: int, draws: int, chunk: int) -> Iterator[np.ndarray]:
    """paired_bootstrap's person indices (blocks of 2,000 draws × P), handed out ``chunk`` draws at a time."""
    pieces, have = [], 0
    for start in range(0, draws, BLOCK):
        pieces.append(rng.integers(0, n_people, size=(min(BLOCK, draws - start), n_people)))
        have += pieces[-1].shape[0]
        last = start + BLOCK >= draws
        while have >= chunk or (last and have):
            rows = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            yield rows[:chunk]
            rest = rows[chunk:]
            pieces, have = ([rest] if len(rest) else []), len(rest)


def _bootstrap(labels, rows: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], *, draws: int,
               seed: int, tails: tuple[float, float], chunk: int) -> tuple[list[Interval], int]:
    """Intervals of ``statistic`` (summed rows, m × F → m × S) under whole-person resampling.

    ``rows`` holds one row per pair or unit; each person's rows are summed once, and a
    draw's sums are its multiplicity counts @ those person sums.
    """
    if draws < 1 or chunk < 1:
        raise ValueError("draws and chunk must be positive")
    inverse = np.unique(labels, return_inverse=True)[1].reshape(-1)
    n_people = int(inverse.max()) + 1
    person_rows = np.stack([np.bincount(inverse, weights=col, minlength=n_people) for col in rows.T], axis=1)
    estimate = statistic(person_rows.sum(0, keepdims=True))[0]
    rng = np.random.Generator(np.random.PCG64(seed))
    replicates = []
    for idx in _index_chunks(rng, n_people, draws, chunk):
        m = idx.shape[0]
        idx += np.arange(0, m * n_people, n_people)[:, None]      # draw d's people → d·P + p
        counts = np.bincount(idx.ravel(), minlength=m * n_people)
        replicates.append(statistic(counts.reshape(m, n_people).astype(float) @ person_rows))
    reps = np.concatenate(replicates)
    return [Interval.from_replicates(estimate[s], reps[:, s], tails) for s in range(reps.shape[1])], n_people


def _agreement(ia: np.ndarray, ib: np.ndarray, persons, extra: np.ndarray | None, *,
               draws: int, seed: int, level: float, tails, chunk: int) -> tuple[AgreementResult, Interval | None]:
    """Shared engine of agreement_bootstrap and mean_vs_judge; ``extra`` is a per-pair value to average."""
    tails = bootstrap_tails(level, tails)
    labels = _labels(persons, ia.size)
    k = len(GRADES)
    cells = np.zeros((ia.size, k * k))
    cells[np.arange(ia.size), ia * k + ib] = 1
    rows = cells if extra is None else np.column_stack([cells, extra])

    def statistic(sums: np.ndarray) -> np.ndarray:
        t = sums[:, :k * k].reshape(-1, k, k)
        exact, within = _shares(t)
        columns = [exact, within, kappa_from_tables(t), alpha_from_coincidences(t + t.swapaxes(-1, -2))]
        if extra is not None:
            columns.append(sums[:, k * k] / t.sum((-2, -1)))
        return np.stack(columns, axis=-1)

    intervals, n_people = _bootstrap(labels, rows, statistic, draws=draws, seed=seed, tails=tails, chunk=chunk)
    confusion = np.bincount(ia * k + ib, minlength=k * k).reshape(k, k).tolist()
    result = AgreementResult(int(ia.size), n_people, int(draws), int(seed), confusion, *intervals[:4], tails=tails)
    return result, (intervals[4] if extra is not None else None)


def agreement_bootstrap(a, b, persons, *, draws: int = DEFAULT_DRAWS, seed: int = DEFAULT_SEED,
                        level: float = 0.95, tails: tuple[float, float] | None = None,
                        chunk: int = BLOCK) -> AgreementResult:
    """Exact, within-one, quadratic κ and ordinal α of paired grades, with whole-person intervals.

    ``a`` and ``b`` are the grades 0..3 of two raters (or a rater and the judge) on the
    same items, no missing values; ``persons`` labels each pair's person (the cluster
    that is resampled whole).  ``tails`` overrides ``level`` as in paired_bootstrap.
    """
    ia, ib = _pair_codes(a, b, GRADES)
    return _agreement(ia, ib, persons, None, draws=draws, seed=seed, level=level,
                      tails=tails, chunk=chunk)[0]


def alpha_bootstrap(units, persons, *, draws: int = DEFAULT_DRAWS, seed: int = DEFAULT_SEED,
                    level: float = 0.95, tails: tuple[float, float] | None = None,
                    chunk: int = BLOCK) -> Interval:
    """Ordinal α of a units × raters array (NaN missing) with a whole-person interval.

    ``persons`` labels each unit.  Units with fewer than two ratings drop out first,
    and only the people with a pairable unit are resampled.
    """
    counts = _value_counts(units, GRADES)
    labels = _labels(persons, counts.shape[0])
    keep = counts.sum(-1) >= 2
    if not keep.any():
        raise ValueError("no pairable unit: every unit has fewer than two ratings")
    k = len(GRADES)
    rows = _unit_coincidences(counts[keep]).reshape(-1, k * k)
    intervals, _ = _bootstrap(labels[keep], rows,
                              lambda s: alpha_from_coincidences(s.reshape(-1, k, k))[:, None],
                              draws=draws, seed=seed, tails=bootstrap_tails(level, tails), chunk=chunk)
    return intervals[0]


def mean_vs_judge(units, judge, persons, *, draws: int = DEFAULT_DRAWS, seed: int = DEFAULT_SEED,
                  level: float = 0.95, tails: tuple[float, float] | None = None,
                  chunk: int = BLOCK) -> MeanVsJudge:
    """Agreement of the raters' mean grade per unit with the judge, whole-person intervals.

    ``units`` is units × raters (NaN/None missing), ``judge`` one grade per unit,
    ``persons`` one label per unit.  Units without any rater grade or without a judge
    grade drop out (``n_pairs`` counts the rest); a single rater's grade is its mean.

    Rounding: exact, within-one, κ and α compare the judge with the mean rounded
    half-up to a grade, floor(mean + 1/2), so a tie between two raters goes to the
    higher grade (1.5 → 2, 2.5 → 3) whatever its parity; NumPy's round-half-even
    would send 0.5 → 0 but 1.5 → 2.  It is done in integers, (2s + m) // 2m for s
    the sum of m grades, so no floating point sits near a half.  ``mean_abs_diff``
    uses the unrounded mean: the mean over units of |rater mean − judge|, raw points.
    """
    counts = _value_counts(units, GRADES)
    j = _codes(judge, GRADES, what="judge", missing_ok=True)
    if j.ndim != 1 or j.size != counts.shape[0]:
        raise ValueError(f"judge must give one grade per unit: {j.size} grades for {counts.shape[0]} units")
    labels = _labels(persons, counts.shape[0])
    m = counts.sum(-1)
    keep = (m > 0) & (j >= 0)
    if not keep.any():
        raise ValueError("no unit has both a rater grade and a judge grade")
    m, j = m[keep], j[keep]
    s = counts[keep] @ np.arange(len(GRADES))     # GRADES are 0..3: positions are the grades
    rounded = (2 * s + m) // (2 * m)
    result, mad = _agreement(rounded, j, labels[keep], np.abs(s / m - j), draws=draws, seed=seed,
                             level=level, tails=tails, chunk=chunk)
    return MeanVsJudge(result, mad)
