"""Whole-person bootstrap intervals for many survey contrasts on one stream of draws. Pure NumPy.

Each result is `stats.paired_bootstrap(cluster, diff, seed=seed, draws=draws)` to the last bit:
the same per-person sums and counts, the same PCG64 index blocks, the same row sums, division and
linear percentiles. What differs is only that one block of indices serves every statistic over
the same people, instead of being drawn again per statistic: a survey analysis has 10 or more
contrasts in two metrics over the same respondents, and drawing the indices is half the cost.

Accuracy differences are whole numbers, which `stats.shared_bootstraps` already handles by exact
integer products; normalized deviations are fractions of (options - 1), which it sends back to
`paired_bootstrap` one at a time. This module is for those.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from experiments.core.stats.paired import BootstrapResult

LEVEL_TAILS = (0.025, 0.975)  # a 95% interval, as paired_bootstrap's default


def shared_draw_bootstraps(requests: Sequence[tuple[Sequence, Sequence[float]]], *, seed: int,
                           draws: int = 100_000, block: int = 2_000) -> list[BootstrapResult]:
    """[paired_bootstrap(cluster, diff, seed=seed, draws=draws, block=block) for cluster, diff in requests]."""
    if draws < 1 or block < 1:
        raise ValueError("draws and block must be positive")
    results: list[BootstrapResult | None] = [None] * len(requests)
    groups: dict[tuple, list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]] = {}
    sizes: dict[tuple, int] = {}
    for i, (cluster, diff) in enumerate(requests):
        cluster, diff = np.asarray(cluster), np.asarray(diff, dtype=float)
        if cluster.ndim != 1 or diff.shape != cluster.shape or diff.size == 0:
            raise ValueError("cluster labels and differences must be 1-D, of equal length and not empty")
        if not np.isfinite(diff).all():
            raise ValueError("differences must be finite")
        labels, inverse = np.unique(cluster, return_inverse=True)
        n = labels.size
        sums = np.bincount(inverse, weights=diff, minlength=n)  # as paired_bootstrap builds them
        counts = np.bincount(inverse, minlength=n).astype(float)
        key = (labels.dtype.str, labels.tobytes()) if labels.dtype != object else ("O", tuple(labels.tolist()))
        groups.setdefault(key, []).append((i, sums, counts, diff))
        sizes[key] = n
    for key, members in groups.items():
        n = sizes[key]
        replicates = np.empty((len(members), draws))
        rng = np.random.Generator(np.random.PCG64(seed))
        for start in range(0, draws, block):
            m = min(block, draws - start)
            idx = rng.integers(0, n, size=(m, n))
            sampled_counts: dict[bytes, np.ndarray] = {}  # equal count vectors are summed once
            for j, (_i, sums, counts, _diff) in enumerate(members):
                counts_key = counts.tobytes()
                if counts_key not in sampled_counts:
                    sampled_counts[counts_key] = counts[idx].sum(1)
                replicates[j, start:start + m] = sums[idx].sum(1) / sampled_counts[counts_key]
        for j, (i, _sums, _counts, diff) in enumerate(members):
            lo, hi = np.percentile(replicates[j], [100 * LEVEL_TAILS[0], 100 * LEVEL_TAILS[1]], method="linear")
            results[i] = BootstrapResult(float(diff.mean()), float(lo), float(hi), int(diff.size), n, seed, draws,
                                         LEVEL_TAILS)
    return results
