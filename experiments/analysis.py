"""The analysis phase: per-condition means and the protocol's planned contrasts, computed
from the grades by `experiments.stats` (paper App. B.3). The dashboards of the analysis
issue read what this stores on the run."""
from __future__ import annotations

import numpy as np

from experiments import stats
from experiments.models import Grade, Prediction, Run
from experiments.planning import FINAL
from experiments.services import cohort_tasks

DEFAULT_SEED = 20260918
DEFAULT_DRAWS = 100_000


def final_grades(run: Run) -> dict[str, dict[int, int | None]]:
    """condition → {task id → raw grade 0..3, or None when missing}.

    An invalid selection and an empty answer are operational zeros; a selection carries
    the grade of the answer it copied (same text, same grade within a task).
    """
    grades = {
        (task_id, sha): score
        for task_id, sha, score in Grade.objects.filter(run=run).values_list("task_id", "answer_sha256", "score")
    }
    table: dict[str, dict[int, int | None]] = {key: {} for key in run.protocol.conditions}
    for condition, task_id, status, sha in Prediction.objects.filter(run=run, label=FINAL).values_list(
        "condition", "task_id", "status", "answer_sha256"
    ):
        if status == Prediction.Status.INVALID_SELECTION:
            score = 0
        elif status in (Prediction.Status.OK, Prediction.Status.EMPTY):
            score = grades.get((task_id, sha))
        else:
            score = None
        table.setdefault(condition, {})[task_id] = score
    return table


def analysis_compute(run: Run) -> dict:
    protocol = run.protocol
    tasks = cohort_tasks(protocol.cohort)
    person_of = {task.pk: task.session.person_id for task in tasks}
    table = final_grades(run)
    seed = int(protocol.bootstrap.get("seed", DEFAULT_SEED))
    draws = int(protocol.bootstrap.get("draws", DEFAULT_DRAWS))

    conditions = {}
    for key in protocol.conditions:
        observed = [g for g in table.get(key, {}).values() if g is not None]
        conditions[key] = {
            "planned": len(tasks),
            "graded": len(observed),
            "missing": len(tasks) - len(observed),
            "mean": float(np.mean(stats.normalize(observed))) if observed else None,
        }

    family = [c for c in protocol.contrasts if c.get("family")]
    family_tails = stats.family_tails(len(family)) if family else None
    contrasts = []
    for contrast in protocol.contrasts:
        names = list(contrast["terms"])
        coefficients = [float(contrast["terms"][n]) for n in names]
        paired = stats.paired_set(*[{t.pk: table.get(n, {}).get(t.pk) for t in tasks} for n in names],
                                  person=person_of)
        entry = {"name": contrast["name"], "terms": contrast["terms"], "planned": paired.planned,
                 "n_tasks": paired.n_tasks, "lost": paired.lost, "seed": seed, "draws": draws,
                 "family": bool(contrast.get("family")), "criterion": contrast.get("criterion")}
        if paired.n_tasks:
            diff = paired.diff(coefficients)
            pointwise = stats.paired_bootstrap(paired.person, diff, seed=seed, draws=draws)
            entry.update(estimate=pointwise.estimate, lo=pointwise.lo, hi=pointwise.hi,
                         n_people=pointwise.n_people)
            if entry["family"]:
                fam = stats.paired_bootstrap(paired.person, diff, seed=seed, draws=draws, tails=family_tails)
                entry.update(family_lo=fam.lo, family_hi=fam.hi)
            wtl = stats.win_tie_loss(diff)
            entry.update(wins=wtl.wins, ties=wtl.ties, losses=wtl.losses)
            if entry["criterion"] == "interval_above_zero":
                entry["criterion_met"] = bool(pointwise.lo > 0)
        contrasts.append(entry)
    return {"conditions": conditions, "contrasts": contrasts, "family_tails": family_tails,
            "seed": seed, "draws": draws, "tasks": len(tasks)}
