"""The arguments every bootstrap of this package takes, checked and resolved in one place.

`paired`, `shared`, `reference`, `robustness`, `agreement` and `grouping` share them, so a family's
tails, a draw count or a missing grade means the same in each. Pure NumPy.
"""
from __future__ import annotations

import math

import numpy as np


def bootstrap_tails(level: float, tails: tuple[float, float] | None) -> tuple[float, float]:
    """The percentile tails of an interval: `tails` if given, else the central `level`."""
    if tails is None:
        # Rounded so that level 0.95 gives exactly 0.025 and 0.975, hence the
        # percentiles 2.5 and 97.5 the paper used, not 2.5000000000000022.
        t = round((1 - level) / 2, 12)
        tails = (t, 1 - t)
    lo, hi = float(tails[0]), float(tails[1])
    if not 0 <= lo < hi <= 1:
        raise ValueError(f"tails must satisfy 0 <= lo < hi <= 1, got {tails}")
    return (lo, hi)


def check_paired(cluster, diff) -> tuple[np.ndarray, np.ndarray]:
    """Cluster labels and per-task differences as arrays: 1-D, equal length, nonempty, finite."""
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


def check_draws(draws: int, block: int) -> None:
    if draws < 1 or block < 1:
        raise ValueError("draws and block must be positive")


def is_missing(grade) -> bool:
    """A missing grade: None or NaN (App. B.3: missing judgments remain null)."""
    return grade is None or (isinstance(grade, float) and math.isnan(grade))
