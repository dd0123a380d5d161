"""A run's planned contrasts recomputed under human grades, beside the judge on the same tasks.

Pure: the campaign's `RatingTable` plus, per condition, which item each task's final
answer is (``task_items``: condition → {task → item index}); `annotations.contrasts`
gathers both. For each planned contrast (``protocol.contrasts``, parsed as the run
dashboard does: ``name``, ``terms`` {condition: coefficient}, ``family``, ``criterion``):

* The grade of a task under a condition is that of the item its final answer maps to,
  read three ways, one row each:
  - ``judge``: the run's judge grade of that item;
  - ``raters_mean``: the mean of the raters' grades of the item (raw 0..3, so a multiple of
    1/m for m grades; flag-only ratings do not count). The mean keeps every rater's
    information and treats a 1-vs-2 split as 1.5, on the same linear scale the paper's
    normalization already assumes (§3.2); the per-rater-normalized alternative (each
    rater's grade / 3, averaged) is the same number, because the normalization is linear;
  - ``adjudicated``: the owner's adjudicated grade where there is one (only disputed items
    have one), else the raters' mean.
* All three rows use ONE common set of tasks: those where every term condition's answer
  is a campaign item with at least one rater grade and a judge grade. So tasks whose
  answer was not sampled, not yet rated, or an operational zero (empty answer, invalid
  selection: never rated) drop out of every row alike; the judge row is the judge on
  exactly the tasks the humans graded, not the run's full-sample estimate.
* Per task, the normalized difference Σ c_j g_j / 3, then the project's task-weighted
  estimate with its whole-person paired bootstrap (`paired_bootstrap`: protocol seed and
  draws, 95 % linear percentiles; family contrasts also at the run's Bonferroni tails
  over all its family contrasts, from the same draws).

`paired_bootstrap` checks only that differences are finite (``check_paired``), not that
grades are integers, so fractional means go through the same estimator unchanged. What
does assume integer grades (the threshold decomposition, transition tables) is not
computed here.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from annotations.core.rater_agreement import RatingTable
from experiments.core.stats.paired import MAX_GRADE, family_tails, paired_bootstrap, paired_set, person_weighted
from experiments.core.stats.shifts import win_tie_loss

SOURCES = (
    ("judge", "judge"),
    ("raters_mean", "raters' mean"),
    ("adjudicated", "adjudicated, else raters' mean"),
)


def task_grades(table: RatingTable, task_items: Mapping[str, Mapping]) -> dict[str, dict[str, dict]]:
    """source → condition → {task → raw grade (fractional for means) or None}."""
    mean = table.item_mean()
    out: dict[str, dict[str, dict]] = {source: {} for source, _ in SOURCES}
    for condition, items in task_items.items():
        for source, _ in SOURCES:
            out[source][condition] = {}
        for task, i in items.items():
            human = None if np.isnan(mean[i]) else float(mean[i])
            out["judge"][condition][task] = table.judge[i]
            out["raters_mean"][condition][task] = human
            adjudicated = table.adjudicated[i]
            out["adjudicated"][condition][task] = human if adjudicated is None else float(adjudicated)
    return out


def task_person(table: RatingTable, task_items: Mapping[str, Mapping]) -> dict:
    """task → the person of its items (one person per task)."""
    person = {}
    for items in task_items.values():
        for task, i in items.items():
            if person.setdefault(task, table.person[i]) != table.person[i]:
                raise ValueError(f"task {task!r} has items of two people")
    return person


def _source_row(source, label, people, diff, *, seed, draws, family, tails, criterion) -> dict:
    result = paired_bootstrap(people, diff, seed=seed, draws=draws, keep_replicates=family)
    wtl = win_tie_loss(diff)
    row = {"source": source, "label": label, "estimate": result.estimate, "lo": result.lo, "hi": result.hi,
           "person_weighted": person_weighted(people, diff), "wins": wtl.wins, "ties": wtl.ties,
           "losses": wtl.losses, "family_lo": None, "family_hi": None, "criterion_met": None}
    if family:
        lo, hi = np.percentile(result.replicates, [100 * tails[0], 100 * tails[1]], method="linear")
        row.update(family_lo=float(lo), family_hi=float(hi))
    if criterion == "interval_above_zero":
        row["criterion_met"] = bool(result.lo > 0)
    return row


def human_contrasts(planned: list[dict], table: RatingTable, task_items: Mapping[str, Mapping], *,
                    planned_tasks: int, seed: int, draws: int) -> list[dict]:
    """One entry per planned contrast: its common task set and a row per grade source."""
    grades = task_grades(table, task_items)
    person = task_person(table, task_items)
    n_family = sum(1 for c in planned if c.get("family"))
    tails = family_tails(n_family) if n_family else None
    out = []
    for contrast in planned:
        names = list(contrast["terms"])
        coefficients = np.array([float(contrast["terms"][n]) for n in names])
        entry = {"name": contrast["name"], "terms": contrast["terms"], "family": bool(contrast.get("family")),
                 "criterion": contrast.get("criterion"), "planned": planned_tasks, "seed": int(seed),
                 "draws": int(draws), "rated": True, "reason": "", "tasks_with_items": 0, "n_tasks": 0, "people": 0,
                 "rows": []}
        unrated = [n for n in names if n not in task_items]
        if unrated:
            entry.update(rated=False, reason="not rated in this campaign: " + ", ".join(unrated))
            out.append(entry)
            continue
        columns = [grades[source][n] for source, _ in SOURCES for n in names]
        paired = paired_set(*columns, person=person)
        entry.update(n_tasks=paired.n_tasks, tasks_with_items=paired.planned)
        if not paired.n_tasks:
            entry["reason"] = "no task has a rated item under every term"
            out.append(entry)
            continue
        entry["people"] = int(len(np.unique(paired.person)))
        for j, (source, label) in enumerate(SOURCES):
            block = paired.grades[j * len(names):(j + 1) * len(names)]
            diff = coefficients @ block / MAX_GRADE
            entry["rows"].append(_source_row(source, label, paired.person, diff, seed=seed, draws=draws,
                                             family=entry["family"], tails=tails,
                                             criterion=entry["criterion"]))
        out.append(entry)
    return out
