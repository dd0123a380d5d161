"""Agreement between graders on the 0–3 rubric: quadratic-weighted κ (I.6, §8)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from experiments.core.stats.paired import GRADES


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
