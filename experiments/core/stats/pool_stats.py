"""Fusion and selection diagnostics of candidate pools (paper App. I.3, Tables 10, 11, 28) and picker contrasts.

A *pool* is one memory's three candidates b0, b1, b2 over a run's tasks (b0 the one-shot),
with what the selector chose and what fusion wrote. Everything is arrays in task order;
intervals are whole-person bootstrap intervals from one shared stream of draws
(`shared.shared_bootstraps`: PCG64, the run's seed, linear percentiles), each equal to
`paired_bootstrap` on its own differences. Rates and differences are in their own units
(a rate 0..1, words), grade contrasts normalized (raw / 3) as everywhere else.
Pure NumPy; no Django.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.core.stats.exact import binomial_test, chi2_uniform
from experiments.core.stats.paired import MAX_GRADE
from experiments.core.stats.shared import BootstrapRequest, shared_bootstraps
from experiments.core.stats.shifts import win_tie_loss

POSITIONS = 3


@dataclass(frozen=True)
class Pool:
    """One memory's pools over T tasks. Grades raw 0..3, NaN missing; picks are candidate
    indices, -1 for none (no decision, or an invalid selection, whose grade is 0)."""

    name: str
    person: np.ndarray                 # (T,) person label of each task
    candidates: np.ndarray             # (3, T) grades of b0, b1, b2
    display: np.ndarray                # (3, T) display position 0..2 of b0, b1, b2
    words: np.ndarray                  # (3, T) whitespace word counts, NaN without a text
    selection_grade: np.ndarray | None = None
    selection_pick: np.ndarray | None = None
    selection_words: np.ndarray | None = None
    fusion_grade: np.ndarray | None = None
    fusion_copies: np.ndarray | None = None   # (T,) candidates byte-identical to the fused answer
    fusion_copied: np.ndarray | None = None   # (T,) the first such candidate, -1 none
    fusion_words: np.ndarray | None = None


class Draws:
    """Bootstrap requests collected over a whole page, computed on one shared stream."""

    def __init__(self, seed: int, draws: int):
        self.seed, self.draws = seed, draws
        self.requests: list[BootstrapRequest] = []
        self.targets: list[tuple[dict, str]] = []

    def interval(self, target: dict, prefix: str, person: np.ndarray, values: np.ndarray) -> None:
        """``target[prefix + lo/hi]`` and ``target["people"]`` filled by `compute`; the estimate now.

        Differences in ninths (a grade minus a candidate mean) are bootstrapped as 3 × the
        difference, which is in thirds and so rides the shared draws instead of a pass of its
        own, and divided by 3: the same resampled people, an interval equal to
        `paired_bootstrap`'s on the difference itself up to the last bits (tests: 1e-12).
        """
        target[f"{prefix}estimate"] = float(values.mean()) if values.size else None
        target[f"{prefix}lo"] = target[f"{prefix}hi"] = None
        if values.size:
            scale = 3.0 if _ninths_only(values) else 1.0
            # 3 × a ninth, written as an exact third (k / 3) so that the shared draws take it
            request = np.rint(values * MAX_GRADE ** 2) / MAX_GRADE if scale != 1 else values
            self.requests.append(BootstrapRequest(person, request))
            self.targets.append((target, prefix, scale))

    def compute(self) -> None:
        results = shared_bootstraps(self.requests, seed=self.seed, draws=self.draws)
        for (target, prefix, scale), (result,) in zip(self.targets, results):
            target.update({f"{prefix}lo": result.lo / scale, f"{prefix}hi": result.hi / scale,
                           "people": result.n_people})


def _ninths_only(values: np.ndarray) -> bool:
    """Whether ``values`` are ninths (3 × values exact thirds) and not thirds already."""
    thirds = np.rint(values * MAX_GRADE)
    if np.array_equal(thirds / MAX_GRADE, values):
        return False
    tripled = values * MAX_GRADE
    return bool(np.allclose(np.rint(tripled * MAX_GRADE) / MAX_GRADE, tripled, rtol=0, atol=1e-12))


def _count(mask: np.ndarray) -> int:
    return int(np.count_nonzero(mask))


def pool_counts(pool: Pool) -> dict:
    """Complete, all-equal and all-zero pools (App. I.3): all-equal pools leave nothing to select."""
    g = pool.candidates
    complete = ~np.isnan(g).any(axis=0)
    equal = complete & (np.nanmax(g, axis=0, initial=-1) == np.nanmin(g, axis=0, initial=99))
    zero = complete & (np.nan_to_num(g, nan=1).max(axis=0) == 0)
    return {"tasks": int(g.shape[1]), "complete": _count(complete), "all_equal": _count(equal),
            "all_zero": _count(zero), "unequal": _count(complete & ~equal)}


def oracle_match(pool: Pool, draws: Draws) -> list[dict]:
    """Selector–oracle score match, overall and in pools with unequal grades, against a random pick.

    A match is a selection whose grade equals the best candidate's (an invalid selection keeps
    its zero); it needs a complete pool and a decision. A uniformly random pick matches with
    probability (candidates at the top grade) / 3; the difference match − that is in exact
    thirds, (3·match − top) / 3.
    """
    if pool.selection_grade is None:
        return []
    g = pool.candidates
    complete = ~np.isnan(g).any(axis=0) & ~np.isnan(pool.selection_grade)
    best = np.where(complete, np.nan_to_num(g).max(axis=0), np.nan)
    top = (np.nan_to_num(g, nan=-1) == best).sum(axis=0)
    match = (pool.selection_grade == best).astype(float)
    unequal = complete & (top < POSITIONS)
    rows = []
    for label, mask in (("all complete pools", complete), ("pools with unequal grades", unequal)):
        n, k = _count(mask), int(match[mask].sum())
        row = {"pools": label, "n": n, "matches": k, "rate": k / n if n else None,
               "expected": float((top[mask] / POSITIONS).mean()) if n else None}
        draws.interval(row, "rate_", pool.person[mask], match[mask])
        draws.interval(row, "", pool.person[mask], (POSITIONS * match[mask] - top[mask]) / POSITIONS)
        rows.append(row)
    return rows


def display_positions(pool: Pool, draws: Draws) -> dict | None:
    """Where the selector's choice was shown (χ² against uniform), how often it chose b0
    (exact binomial against one in three), and how often the longest of three distinct lengths."""
    if pool.selection_pick is None:
        return None
    pick = pool.selection_pick
    valid = pick >= 0
    shown = np.take_along_axis(pool.display, np.where(valid, pick, 0)[None, :], axis=0)[0]
    chosen = [_count(valid & (shown == p)) for p in range(POSITIONS)]
    chi2, p_chi2 = chi2_uniform(chosen) if sum(chosen) else (None, None)   # JSON has no NaN
    b0_shown = [_count(valid & (pool.display[0] == p)) for p in range(POSITIONS)]
    n = _count(valid)
    b0 = (pick[valid] == 0).astype(float)
    picked_b0 = {"n": n, "k": int(b0.sum()), "rate": float(b0.mean()) if n else None,
                 "p": binomial_test(int(b0.sum()), n, 1 / POSITIONS) if n else None}
    draws.interval(picked_b0, "rate_", pool.person[valid], b0)
    words = pool.words
    distinct = valid & ~np.isnan(words).any(axis=0)
    distinct &= (words[0] != words[1]) & (words[0] != words[2]) & (words[1] != words[2])
    longest = np.nanargmax(np.nan_to_num(words, nan=-1), axis=0)
    k_longest = _count(distinct & (pick == longest))
    n_distinct = _count(distinct)
    # Selection − one-shot by where b0 was shown (App. I.3): did the display order favour it?
    by_b0_position = []
    graded = ~np.isnan(pool.selection_grade) & ~np.isnan(pool.candidates[0])
    for position in range(POSITIONS):
        mask = graded & (pool.display[0] == position)
        row = {"b0_shown": position + 1, "n_tasks": _count(mask)}
        draws.interval(row, "", pool.person[mask], (pool.selection_grade[mask] - pool.candidates[0][mask]) / MAX_GRADE)
        by_b0_position.append(row)
    return {"chosen": chosen, "n": n, "chi2": chi2, "p": p_chi2, "df": POSITIONS - 1, "b0_shown": b0_shown,
            "b0_picked": picked_b0, "selection_minus_b0": by_b0_position,
            "longest": {"n": n_distinct, "k": k_longest, "rate": k_longest / n_distinct if n_distinct else None,
                        "expected": 1 / POSITIONS}}


def fusion_copies(pool: Pool, draws: Draws) -> dict | None:
    """Fusion's byte copies of a candidate, where the copied candidate was shown, and the
    fusion − one-shot (b0) difference split by copy status (self-selected groups: descriptive)."""
    if pool.fusion_grade is None:
        return None
    answered = ~np.isnan(pool.fusion_words)
    copy = answered & (pool.fusion_copies > 0)
    single = answered & (pool.fusion_copies == 1)
    position = np.take_along_axis(pool.display, np.where(single, pool.fusion_copied, 0)[None, :], axis=0)[0]
    n = _count(answered)
    out = {"n": n, "copies": _count(copy), "rate": _count(copy) / n if n else None,
           "single_copy_position": [_count(single & (position == p)) for p in range(POSITIONS)], "split": []}
    paired = ~np.isnan(pool.fusion_grade) & ~np.isnan(pool.candidates[0])
    for label, mask in (("copy of a candidate", copy & paired), ("not a copy", ~copy & paired)):
        row = {"group": label, "n_tasks": _count(mask),
               "fusion_mean": float(pool.fusion_grade[mask].mean() / MAX_GRADE) if mask.any() else None,
               "one_shot_mean": float(pool.candidates[0][mask].mean() / MAX_GRADE) if mask.any() else None}
        draws.interval(row, "", pool.person[mask], (pool.fusion_grade[mask] - pool.candidates[0][mask]) / MAX_GRADE)
        out["split"].append(row)
    return out


def word_counts(pool: Pool, draws: Draws) -> dict:
    """Mean and median words of b0..b2, fusion and selection, and their paired differences from b0."""
    columns = {f"b{i}": pool.words[i] for i in range(POSITIONS)}
    columns["fusion"] = pool.fusion_words
    columns["selection"] = pool.selection_words
    rows, differences = [], []
    for name, words in columns.items():
        if words is None:
            continue
        seen = words[~np.isnan(words)]
        rows.append({"answers": name, "n": int(seen.size), "mean": float(seen.mean()) if seen.size else None,
                     "median": float(np.median(seen)) if seen.size else None})
        if name in ("fusion", "selection"):
            both = ~np.isnan(words) & ~np.isnan(pool.words[0])
            row = {"difference": f"{name} − b0", "n_tasks": _count(both)}
            draws.interval(row, "", pool.person[both], words[both] - pool.words[0][both])
            differences.append(row)
    return {"conditions": rows, "differences": differences}


def pool_diagnostics(pool: Pool, draws: Draws) -> dict:
    """Every App. I.3 diagnostic of one pool; intervals filled by ``draws.compute()``."""
    return {"pool": pool.name, **pool_counts(pool), "oracle_match": oracle_match(pool, draws),
            "display": display_positions(pool, draws), "fusion": fusion_copies(pool, draws),
            "words": word_counts(pool, draws)}


def picker_rows(person: np.ndarray, picked: dict[str, np.ndarray], comparators: dict[str, np.ndarray],
                draws: Draws) -> list[dict]:
    """One row per picker: its mean, and its paired contrast with each comparator.

    ``picked[rule]`` is the grade each task's pick inherits (raw, NaN where the rule had no
    complete pool); a contrast uses the tasks where both are graded.
    """
    rows = []
    for rule, grades in picked.items():
        seen = ~np.isnan(grades)
        row = {"picker": rule, "n_tasks": _count(seen), "contrasts": []}
        draws.interval(row, "mean_", person[seen], grades[seen] / MAX_GRADE)
        for name, other in comparators.items():
            both = seen & ~np.isnan(other)
            diff = (grades[both] - other[both]) / MAX_GRADE
            wtl = win_tie_loss(diff)
            contrast = {"versus": name, "n_tasks": _count(both), "wins": wtl.wins, "ties": wtl.ties,
                        "losses": wtl.losses}
            draws.interval(contrast, "", person[both], diff)
            row["contrasts"].append(contrast)
        rows.append(row)
    return rows
