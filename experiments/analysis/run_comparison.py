"""Two or more runs on the same cohort side by side: numbers only.

Each condition's mean in each run (normalized grade, whole-person interval as on the dashboard),
and, for one chosen condition, the paired contrast of every later run against the first: per
task, the later run's normalized grade minus the first run's, over the tasks graded in both,
with the project's whole-person bootstrap under the first run's protocol seed and draws,
exactly as `analysis.dashboard` computes a planned contrast. Every interval of the page uses
that one seed, so they share their draws (`stats.shared_bootstraps`): each equals
`stats.paired_bootstrap` of its statistic to the last bit, drawn once for all.
"""
from __future__ import annotations

from experiments.analysis.grades import final_grades
from experiments.core import stats
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.data.sessions import cohort_tasks
from experiments.models import Run


class ComparisonError(ValueError):
    """The runs cannot be compared (another cohort, an unknown condition)."""


def compare_runs(runs: list[Run], condition: str) -> dict:
    """Means per condition and run, and the chosen condition's paired contrasts (see module)."""
    cohorts = {run.protocol.cohort_id for run in runs}
    if len(cohorts) != 1:
        raise ComparisonError("runs can be compared only on the same cohort; these use "
                              f"{len(cohorts)} different cohorts")
    first = runs[0].protocol
    seed = int(first.bootstrap.get("seed", DEFAULT_SEED))
    draws = int(first.bootstrap.get("draws", DEFAULT_DRAWS))
    tasks = cohort_tasks(first.cohort)
    person = {t.pk: t.session.person_id for t in tasks}
    tables = [final_grades(run) for run in runs]
    conditions = list(dict.fromkeys(key for run in runs for key in run.protocol.conditions))
    common = [key for key in conditions if all(key in run.protocol.conditions for run in runs)]
    if condition and condition not in common:
        raise ComparisonError(f"{condition!r} is not a condition of every run")
    condition = condition or (common[0] if common else "")
    # Every statistic of the page first (as bootstrap requests), then one shared pass of draws.
    requests, means = [], []
    for key in conditions:
        cells = []
        for table in tables:
            graded = [t.pk for t in tasks if table.get(key, {}).get(t.pk) is not None]
            cell = {"present": key in table, "graded": len(graded), "mean": None, "lo": None, "hi": None}
            if graded:
                cell["request"] = len(requests)
                requests.append(stats.BootstrapRequest([person[t] for t in graded],
                                                       stats.normalize([table[key][t] for t in graded])))
            cells.append(cell)
        means.append({"condition": key, "cells": cells})
    contrasts = [_contrast(tables[0].get(condition, {}), table.get(condition, {}), tasks, person, requests)
                 | {"run": run} for run, table in zip(runs[1:], tables[1:])] if condition else []
    results = stats.shared_bootstraps(requests, seed=seed, draws=draws)
    for cell in (cell for row in means for cell in row["cells"] if "request" in cell):
        result = results[cell.pop("request")][0]
        cell.update(mean=result.estimate, lo=result.lo, hi=result.hi)
    for row in (row for row in contrasts if "request" in row):
        result = results[row.pop("request")][0]
        row.update(estimate=result.estimate, lo=result.lo, hi=result.hi, people=result.n_people)
    return {"runs": runs, "conditions": conditions, "common": common, "condition": condition,
            "means": means, "contrasts": contrasts, "seed": seed, "draws": draws, "tasks": len(tasks)}


def _contrast(base: dict, other: dict, tasks, person, requests: list) -> dict:
    """`other` minus `base` on the tasks graded in both (normalized units); its interval is
    requested in `requests` (filled in by the caller's shared pass)."""
    paired = stats.paired_set({t.pk: other.get(t.pk) for t in tasks}, {t.pk: base.get(t.pk) for t in tasks},
                              person=person)
    row = {"n_tasks": paired.n_tasks, "lost": paired.lost, "estimate": None}
    if paired.n_tasks:
        diff = paired.diff((1, -1))
        wtl = stats.win_tie_loss(diff)
        row.update(request=len(requests), wins=wtl.wins, ties=wtl.ties, losses=wtl.losses)
        requests.append(stats.BootstrapRequest(paired.person, diff))
    return row
