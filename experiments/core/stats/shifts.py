"""Where a contrast's grades move (paper I.1): ΔP≥k threshold decomposition, transition tables, wins/ties/losses."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import numpy as np

from experiments.core.stats.paired import GRADES, IDENTITY_TOLERANCE, MAX_GRADE, ZERO_TOLERANCE


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
