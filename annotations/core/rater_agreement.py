"""Agreement of human raters with each other and with the judge (paper §3.2, §8, I.6).

Pure: a `RatingTable` (items × raters, plain numbers) in, a JSON-safe payload out, every
statistic from `experiments.core.stats.agreement_stats`. Choices, fixed here once:

* Grades are the raw 0..3 rubric grades. An item (one distinct answer text of a task) is
  one unit; its person is the cluster that the whole-person bootstrap resamples (App. B.3),
  with the run protocol's seed and draws, a fresh PCG64(seed) for every figure, 95 %
  linear-percentile intervals.
* A flag-only rating (no grade) counts as a rating done and a flag, never in agreement.
* Between raters: for k = 2 an item's two grades are one pair. For k > 2 (or when a
  reassignment left an item with more grades) every unordered pair of raters who graded
  the item is a pair, oriented lower rater label first (R1 before R2), so an item with m
  grades gives m(m − 1)/2 pairs. Exact and within-one shares do not depend on the
  orientation; the pooled κ is then an average-like figure over rater pairs, not Cohen's
  κ of one pair, so Krippendorff's ordinal α over the items × raters table (all raters,
  missing allowed) is the multi-rater figure to quote. α drops items with fewer than two
  grades.
* Raters vs judge, "pooled": every graded rating against the judge's grade of its item.
  Each rater vs judge: that rater's grades. Raters' mean vs judge: `mean_vs_judge`
  (the mean rounded half up for exact, within-one, κ and α; |mean − judge| unrounded).
* Per condition: an item counts for every condition that produced its text.
* Per rater: agreement with the other raters pools every pair on the items the rater
  shares with anyone, oriented this rater first; gold accuracy compares the rater's grade
  with the owner's gold grade (exact and within one step), counts only, no interval.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.core.stats.agreement_stats import agreement_bootstrap, alpha_bootstrap, mean_vs_judge
from experiments.core.stats.paired import MAX_GRADE, paired_bootstrap

# Part of what a cached payload depends on: bump it when a figure changes meaning or the payload
# gains a key (2: counts.raters_who_rated).
AGREEMENT_VERSION = "2"
LEVEL = 0.95


@dataclass(frozen=True)
class Rating:
    """One rater's rating of one item: indices into the table's items and raters."""

    item: int
    rater: int
    grade: int | None
    flagged: bool = False
    seconds: float | None = None


@dataclass(frozen=True)
class RatingTable:
    """A campaign's ratings as plain numbers, one entry per item in each parallel tuple.

    ``person`` labels the cluster of each item; ``raters`` are the column labels (R1, R2 …);
    ``judge``, ``gold`` and ``adjudicated`` are raw grades or None.
    """

    numbers: tuple[int, ...]
    person: tuple
    conditions: tuple[tuple[str, ...], ...]
    judge: tuple[int | None, ...]
    gold: tuple[int | None, ...]
    adjudicated: tuple[int | None, ...]
    raters: tuple[str, ...]
    ratings: tuple[Rating, ...]

    def __post_init__(self):
        n = len(self.numbers)
        if not (len(self.person) == len(self.conditions) == len(self.judge) == len(self.gold)
                == len(self.adjudicated) == n):
            raise ValueError("numbers, person, conditions, judge, gold and adjudicated must be parallel")
        seen = set()
        for r in self.ratings:
            if not (0 <= r.item < n and 0 <= r.rater < len(self.raters)):
                raise ValueError(f"rating {r} points outside the table")
            if (r.item, r.rater) in seen:
                raise ValueError(f"item {self.numbers[r.item]} has two ratings by {self.raters[r.rater]}")
            if r.grade is not None and r.grade not in (0, 1, 2, 3):
                raise ValueError(f"grade {r.grade!r} is not 0..3")
            seen.add((r.item, r.rater))

    def grades(self) -> np.ndarray:
        """items × raters raw grades, NaN where a rater gave no grade (not assigned, open, flag-only)."""
        out = np.full((len(self.numbers), len(self.raters)), np.nan)
        for r in self.ratings:
            if r.grade is not None:
                out[r.item, r.rater] = r.grade
        return out

    def item_mean(self) -> np.ndarray:
        """Per item: the mean of its raters' grades (raw 0..3, fractional), NaN when none."""
        g = self.grades()
        n = (~np.isnan(g)).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, np.nansum(g, 1) / np.maximum(n, 1), np.nan)


def rater_pairs(grades: np.ndarray, mask: np.ndarray | None = None, *, rater: int | None = None):
    """(a, b, item index) of every pair of grades of the same item (see the module docstring).

    With ``rater``: only the pairs that include that rater, oriented with them first.
    """
    a, b, unit = [], [], []
    rows = range(grades.shape[0]) if mask is None else np.flatnonzero(mask)
    for i in rows:
        cols = np.flatnonzero(~np.isnan(grades[i]))
        if rater is not None:
            if rater not in cols:
                continue
            pairs = [(rater, q) for q in cols if q != rater]
        else:
            pairs = [(p, q) for x, p in enumerate(cols) for q in cols[x + 1:]]
        for p, q in pairs:
            a.append(int(grades[i, p]))
            b.append(int(grades[i, q]))
            unit.append(int(i))
    return a, b, unit


def _agreement(a, b, persons, boot) -> dict | None:
    return agreement_bootstrap(a, b, persons, **boot).as_dict() if len(a) else None


def _mean_interval(persons, values, boot) -> dict | None:
    """A mean of per-item values with its whole-person interval (a "difference" against zero)."""
    if not len(values):
        return None
    r = paired_bootstrap(persons, values, seed=boot["seed"], draws=boot["draws"], level=boot["level"])
    return {"estimate": r.estimate, "lo": r.lo, "hi": r.hi, "n": r.n_tasks, "people": r.n_people}


def between_raters(grades: np.ndarray, person: np.ndarray, mask: np.ndarray, boot: dict) -> dict:
    """Rater-vs-rater pairs (exact, within-one, κ, their confusion) and ordinal α over all raters."""
    a, b, unit = rater_pairs(grades, mask)
    pairable = mask & ((~np.isnan(grades)).sum(1) >= 2)
    alpha = None
    if pairable.any():
        alpha = alpha_bootstrap(grades[pairable], person[pairable], **boot).as_dict()
    return {"pairs": _agreement(a, b, person[unit] if unit else [], boot), "alpha": alpha,
            "items": int(pairable.sum())}


def versus_judge(grades: np.ndarray, judge: np.ndarray, person: np.ndarray, mask: np.ndarray,
                 boot: dict) -> dict:
    """Every graded rating against the judge (pooled), and the raters' mean against the judge."""
    has_judge = mask & ~np.isnan(judge)
    rows, cols = np.nonzero(~np.isnan(grades) & has_judge[:, None])
    pooled = _agreement(grades[rows, cols].astype(int).tolist(), judge[rows].astype(int).tolist(),
                        person[rows], boot)
    graded = has_judge & (~np.isnan(grades)).any(1)
    mean = None
    if graded.any():
        mean = mean_vs_judge(grades[graded], judge[graded], person[graded], **boot).as_dict()
    return {"pooled": pooled, "mean": mean}


def levels(grades: np.ndarray, judge: np.ndarray, person: np.ndarray, mask: np.ndarray, boot: dict) -> dict:
    """Mean normalized score of the raters' mean and of the judge on the same items, and their difference."""
    n = (~np.isnan(grades)).sum(1)
    keep = mask & (n > 0) & ~np.isnan(judge)
    human = np.nansum(grades[keep], 1) / n[keep] / MAX_GRADE
    machine = judge[keep] / MAX_GRADE
    people = person[keep]
    return {"raters_mean": _mean_interval(people, human, boot), "judge": _mean_interval(people, machine, boot),
            "difference": _mean_interval(people, human - machine, boot)}


def rater_rows(table: RatingTable, grades: np.ndarray, person: np.ndarray, boot: dict) -> list[dict]:
    """Per rater: ratings done, flags, median seconds, grade distribution, agreement, gold accuracy."""
    rows = []
    for r, label in enumerate(table.raters):
        mine = [x for x in table.ratings if x.rater == r]
        seconds = [x.seconds for x in mine if x.seconds is not None]
        graded = [x for x in mine if x.grade is not None]
        a, b, unit = rater_pairs(grades, rater=r)
        on_judge = [x for x in graded if table.judge[x.item] is not None]
        on_gold = [x for x in graded if table.gold[x.item] is not None]
        exact = sum(x.grade == table.gold[x.item] for x in on_gold)
        within = sum(abs(x.grade - table.gold[x.item]) <= 1 for x in on_gold)
        rows.append({
            "rater": label,
            "ratings": len(mine),
            "graded": len(graded),
            "flagged": sum(x.flagged for x in mine),
            "flag_only": sum(x.flagged and x.grade is None for x in mine),
            "median_seconds": float(np.median(seconds)) if seconds else None,
            "distribution": [sum(x.grade == g for x in graded) for g in range(MAX_GRADE + 1)],
            "vs_others": _agreement(a, b, person[unit] if unit else [], boot),
            "vs_judge": _agreement([x.grade for x in on_judge], [table.judge[x.item] for x in on_judge],
                                   person[[x.item for x in on_judge]] if on_judge else [], boot),
            "gold": {"items": len(on_gold), "exact": exact, "within_one": within,
                     "exact_share": exact / len(on_gold) if on_gold else None,
                     "within_one_share": within / len(on_gold) if on_gold else None},
        })
    return rows


def counts(table: RatingTable, grades: np.ndarray, k: int, dispute_spread: int) -> dict:
    n_graded = (~np.isnan(grades)).sum(1)
    spread = np.zeros(len(n_graded))
    several = n_graded >= 2
    spread[several] = np.nanmax(grades[several], 1) - np.nanmin(grades[several], 1)
    return {
        "items": len(table.numbers),
        "rated_items": int((n_graded > 0).sum()),
        "complete_items": int((n_graded >= k).sum()),
        "ratings": len(table.ratings),
        "graded": int(n_graded.sum()),
        "flagged": sum(r.flagged for r in table.ratings),
        "flag_only": sum(r.flagged and r.grade is None for r in table.ratings),
        "raters": len(table.raters),
        "raters_who_rated": len({r.rater for r in table.ratings}),
        "people": len(set(table.person)),
        "gold_items": sum(g is not None for g in table.gold),
        "disputed_items": int((spread >= dispute_spread).sum()),
        "adjudicated_items": sum(g is not None for g in table.adjudicated),
        "judged_items": sum(g is not None for g in table.judge),
        "ratings_per_item": k,
    }


def agreement_payload(table: RatingTable, *, conditions, k: int, seed: int, draws: int,
                      dispute_spread: int = 2) -> dict:
    """Every agreement figure of a campaign (keys listed in `annotations.campaign_agreement`)."""
    boot = {"seed": int(seed), "draws": int(draws), "level": LEVEL}
    grades = table.grades()
    person = np.asarray(table.person)
    judge = np.array([np.nan if g is None else g for g in table.judge], dtype=float)
    every = np.ones(len(table.numbers), dtype=bool)
    by_condition = []
    for condition in conditions:
        mask = np.array([condition in c for c in table.conditions], dtype=bool)
        by_condition.append({
            "condition": condition, "items": int(mask.sum()),
            "rated_items": int((mask & (~np.isnan(grades)).any(1)).sum()),
            "between": between_raters(grades, person, mask, boot),
            "vs_judge": versus_judge(grades, judge, person, mask, boot),
            "levels": levels(grades, judge, person, mask, boot),
        })
    return {
        "version": AGREEMENT_VERSION, "seed": boot["seed"], "draws": boot["draws"], "level": LEVEL,
        "raters": list(table.raters),
        "counts": counts(table, grades, k, dispute_spread),
        "between": between_raters(grades, person, every, boot),
        "vs_judge": versus_judge(grades, judge, person, every, boot),
        "levels": levels(grades, judge, person, every, boot),
        "conditions": by_condition,
        "per_rater": rater_rows(table, grades, person, boot),
    }


def retest_agreement(pairs, *, percent: int, seed: int, draws: int) -> dict:
    """The intra-rater retest: each rater's grade at the first showing against their grade at the
    hidden repeat, pooled over raters, with whole-person intervals — the ceiling a judge's
    agreement with the raters is read against. ``pairs``: [person, first, repeat] rows."""
    boot = {"seed": int(seed), "draws": int(draws), "level": LEVEL}
    persons = [p[0] for p in pairs]
    return {"percent": int(percent),
            "pairs": _agreement([p[1] for p in pairs], [p[2] for p in pairs], persons, boot)}
