"""The budget sweep grouped by the share of the source a budget covers (App. G.1, beside Table 18).
Pure Python and NumPy, no Django.

At each memory length w of a sweep the budget B_w is the memory's character count; a task's
share is B_w over the length of its permitted source (the whole record's evidence), binned by
`stats.budget_share_group` (below a quarter, a quarter to a half, a half to nearly all, all of
it). The paper's four contrasts are computed per group, each on the (task, budget) rows where
both its conditions are graded, and "a task enters a group with the mean of its budgets that fall
in it" (`stats.group_by`); each group and contrast is its own whole-person bootstrap with the
run's seed and the paper's 20,000 draws. Differences are normalized (raw / 3).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from experiments.core.stats import BUDGET_SHARE_GROUPS, budget_share_group, group_by

SHARE_GROUP_DRAWS = 20_000
WHOLE, OWN, MEM, REC = "whole record", "OwnWords", "memory", "most recent sentences"
# The paper's columns, in its order: (column, first condition, second condition).
CONTRASTS = ((f"{WHOLE} − {OWN}", WHOLE, OWN), (f"{WHOLE} − {MEM}", WHOLE, MEM),
             (f"{WHOLE} − {REC}", WHOLE, REC), (f"{OWN} − {MEM}", OWN, MEM))
CSV_COLUMNS = ["group", "contrast", "estimate", "lo", "hi", "n_tasks", "n_people", "seed", "draws"]


@dataclass
class SweepLength:
    """One memory length of the sweep: B_w per task (NaN unknown, e.g. the memory failed) and the
    raw grades of the memory, OwnWords and recency at that length (None: not in the run)."""
    words: int
    budget: np.ndarray
    grades: dict = field(default_factory=dict)     # MEM / OWN / REC → raw grades per task (NaN missing)


def share_groups(task_ids, person, source, whole, lengths: list[SweepLength], *, seed: int,
                 draws: int = SHARE_GROUP_DRAWS) -> list[dict]:
    """One row per (group, contrast) in BUDGET_SHARE_GROUPS × CONTRASTS order, groups with no task
    left out: the estimate, its 95% interval, tasks and people.

    ``task_ids``, ``person``, ``source`` (the source's characters, NaN unknown) and ``whole`` (the
    whole record's raw grades) are parallel per task.
    """
    task_ids, person = np.asarray(task_ids), np.asarray(person)
    source = np.asarray(source, dtype=float)
    rows_by_group: dict[str, list[dict]] = {g: [] for g in BUDGET_SHARE_GROUPS}
    for column, first, second in CONTRASTS:
        labels, people, diffs, tasks = [], [], [], []
        for length in lengths:
            a = whole if first == WHOLE else length.grades.get(first)
            b = length.grades.get(second)
            if a is None or b is None:
                continue
            a, b, budget = (np.asarray(x, dtype=float) for x in (a, b, length.budget))
            kept = ~(np.isnan(a) | np.isnan(b) | np.isnan(budget) | np.isnan(source))
            for i in np.flatnonzero(kept):
                labels.append(budget_share_group(budget[i], source[i]))
                people.append(person[i])
                diffs.append((a[i] - b[i]) / 3)
                tasks.append(task_ids[i])
        if not labels:
            continue
        results = group_by(labels, people, diffs, task=tasks, seed=seed, draws=draws, order=BUDGET_SHARE_GROUPS)
        for group, result in results.items():
            rows_by_group[group].append({"group": group, "contrast": column, "estimate": result.estimate,
                                         "lo": result.lo, "hi": result.hi, "n_tasks": result.n_tasks,
                                         "n_people": result.n_people, "seed": seed, "draws": draws})
    return [row for group in BUDGET_SHARE_GROUPS for row in rows_by_group[group]]


def pivot(rows: list[dict]) -> list[dict]:
    """Rows → the paper's layout: one entry per group, ``cells`` in CONTRASTS order (None: not run)."""
    out = []
    for group in BUDGET_SHARE_GROUPS:
        mine = {r["contrast"]: r for r in rows if r["group"] == group}
        if mine:
            out.append({"group": group, "tasks": max(r["n_tasks"] for r in mine.values()),
                        "cells": [mine.get(column) for column, _, _ in CONTRASTS]})
    return out
