"""A candidate's centrality in its pool against its grade, and routing by pool signals (paper App. F).

App. F ("Picking among the existing candidates"): "Where candidate grades differ, a candidate's
centrality did not predict its grade (… grade points on the 0–3 scale per standard deviation …)"
and "routing by pool agreement, copy status or length ratio showed no consistent signal".

* centrality: a candidate's mean similarity to the other candidates of its pool (the consensus
  pickers' score, `core.pickers`: token F1, ROUGE-L or character 4-gram cosine);
* ``centrality_slope``: in the pools whose three grades are not all equal, the within-pool least
  squares slope of the raw grade on centrality in standard deviations (both centred on their
  pool's mean, so only differences inside a pool count; the SD is that of the centralities of
  those candidates), with a whole-person interval on `paired_bootstrap`'s draws
  (`robustness.person_draw_counts`): a pool travels with its person;
* ``pool_agreement``: the mean pairwise similarity of a pool's candidates;
* ``routing_rows``: a workflow minus the one-shot, split by a routing signal's groups (each group
  its own `paired_bootstrap`, via `robustness.subgroups`), with the difference of two groups.

Pure NumPy (and `core.pickers` for the similarities); no Django.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from experiments.core.pickers import similarity_matrix
from experiments.core.stats import robustness
from experiments.core.stats.arguments import bootstrap_tails

CENTRALITY_COLUMNS = ("Pool", "Similarity", "Pools", "Candidates", "People", "Slope per SD (grade points)",
                      "95% lo", "95% hi", "SD of centrality")
ROUTING_COLUMNS = ("Pool", "Workflow", "Signal", "Group", "Tasks", "People", "Workflow − one-shot", "95% lo",
                   "95% hi")


def centralities(texts: Sequence[str], similarity: str) -> np.ndarray:
    """Each candidate's mean similarity to the other candidates of the pool."""
    if len(texts) < 2:
        raise ValueError("centrality needs at least two candidates")
    matrix = similarity_matrix(list(texts), similarity)
    n = len(texts)
    return (matrix.sum(axis=1) - np.diag(matrix)) / (n - 1)


def pool_agreement(texts: Sequence[str], similarity: str) -> float:
    """The mean similarity over the pool's pairs of candidates."""
    return float(centralities(texts, similarity).mean())


@dataclass(frozen=True)
class Slope:
    estimate: float | None
    lo: float | None
    hi: float | None
    pools: int
    candidates: int
    people: int
    sd: float | None
    undefined_draws: int = 0  # draws whose drawn pools' centralities do not vary: no slope, so no interval


def centrality_slope(person, centrality, grades, *, seed: int, draws: int,
                     tails: tuple[float, float] | None = None) -> Slope:
    """Within-pool slope of the grade on centrality per SD, pools with unequal grades only.

    ``person`` (pools,), ``centrality`` and ``grades`` (pools, candidates): one row per pool,
    grades raw 0..3 (a pool with a missing grade or centrality is left out). The slope is
    Σ (x − x̄ₚ)(g − ḡₚ) / Σ (x − x̄ₚ)², x the centrality divided by the SD (population, over the
    kept candidates) and x̄ₚ, ḡₚ its pool's means; each bootstrap draw refits on the drawn
    people's pools (a person drawn twice counts twice), the SD held at its sample value.
    """
    person = np.asarray(person)
    x = np.asarray(centrality, dtype=float)
    g = np.asarray(grades, dtype=float)
    if x.ndim != 2 or g.shape != x.shape or person.shape != (x.shape[0],):
        raise ValueError("one person per pool and one centrality and grade per candidate")
    with np.errstate(invalid="ignore"):
        kept = np.isfinite(x).all(axis=1) & np.isfinite(g).all(axis=1) & (np.ptp(g, axis=1) > 0)
    x, g, person = x[kept], g[kept], person[kept]
    n_pools = int(kept.sum())
    if n_pools == 0:
        return Slope(None, None, None, 0, 0, 0, None)
    sd = float(x.std())
    labels, inverse = np.unique(person, return_inverse=True)
    if sd == 0:
        return Slope(None, None, None, n_pools, int(x.size), labels.size, 0.0)
    xc = (x - x.mean(axis=1, keepdims=True)) / sd
    gc = g - g.mean(axis=1, keepdims=True)
    sxy = np.bincount(inverse, weights=(xc * gc).sum(axis=1), minlength=labels.size)
    sxx = np.bincount(inverse, weights=(xc * xc).sum(axis=1), minlength=labels.size)
    if sxx.sum() == 0:
        return Slope(None, None, None, n_pools, int(x.size), labels.size, sd)
    estimate = float(sxy.sum() / sxx.sum())
    replicates = np.empty(draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        for start, counts in robustness.person_draw_counts(labels.size, seed=seed, draws=draws):
            replicates[start:start + counts.shape[0]] = (counts @ sxy) / (counts @ sxx)
    lo = hi = None
    # A draw of only people whose centralities do not vary within their pools has no slope (0/0).
    # Percentiles without those draws would describe another resampling, so there is no interval,
    # and the count says why.
    undefined = int((~np.isfinite(replicates)).sum())
    if not undefined:
        lo, hi = (float(v) for v in np.percentile(
            replicates, [100 * t for t in bootstrap_tails(0.95, tails)], method="linear"))
    return Slope(estimate, lo, hi, n_pools, int(x.size), labels.size, sd, undefined)


def routing_rows(pool: str, workflow: str, signal: str, labels, order: Sequence[str], person, diff, *,
                 seed: int, draws: int, compare: tuple[str, str] | None = None) -> list[tuple]:
    """ROUTING_COLUMNS rows: ``diff`` (workflow − one-shot, normalized) per group of ``labels``
    in ``order``, then the first compared group minus the second (default: last minus first)."""
    labels = np.asarray(labels, dtype=object)
    if labels.size == 0:
        return []
    present = [g for g in order if (labels == g).any()]
    compare = compare or ((present[-1], present[0]) if len(present) >= 2 else None)
    split = robustness.subgroups(labels, person, diff, seed=seed, draws=draws, order=list(order), compare=compare)
    rows = [(pool, workflow, signal, label, r.n_tasks, r.n_people, r.estimate, r.lo, r.hi)
            for label, r in split.groups.items()]
    if split.difference is not None:
        d = split.difference
        rows.append((pool, workflow, signal, f"{split.first} − {split.second}", d.n_tasks, d.n_people,
                     d.estimate, d.lo, d.hi))
    return rows
