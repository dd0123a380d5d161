"""Grouped and combined contrasts: budget-share groups (G.1), interactions, candidate means."""
from __future__ import annotations

import math
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

from experiments.core.stats.arguments import is_missing
from experiments.core.stats.paired import BootstrapResult, PairedSet, paired_bootstrap, paired_set


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
        out[k] = None if any(is_missing(g) for g in grades) else sum(map(float, grades)) / len(grades)
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
