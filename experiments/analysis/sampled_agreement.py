"""Judge against judge on a seeded, stratified sample of answers (paper App. I.6), for the paper report and the command.

A re-grade run (`Protocol.regrade_of`) graded the answers of its source run with a second judge;
`analysis.judges` reads agreement on every answer both graded. Here the items (task, answer
sha256) both judges graded are put in the stratum of the condition that gave the answer (the
first condition of the source protocol whose answer it is), a sample of N is drawn evenly over
the strata with a seeded PCG64 generator (`core.stats.judge_sample`), and the agreement statistics
of `core.stats.agreement_stats` (unchanged) are read on the sample and on each stratum, with
whole-person intervals at the re-grade run's recorded seed and draws. Numbers only.
"""
from __future__ import annotations

from dataclasses import dataclass

from experiments.core.stats.judge_sample import agreement_rows, stratified_sample
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import Grade, Prediction, Run, Task


@dataclass(frozen=True)
class JudgedItems:
    """The items both judges graded, in (task, answer sha256) order, with their person and stratum."""

    keys: list
    first: list
    second: list
    people: list
    strata: list


def _graded(run_id: int) -> dict:
    rows = (Grade.objects.filter(run_id=run_id, status=Grade.Status.OK).exclude(score=None)
            .values_list("task_id", "answer_sha256", "score"))
    return {(task, sha): score for task, sha, score in rows}


def judged_items(run: Run) -> JudgedItems:
    """What the re-grade ``run`` and its source run both graded (operational zeros are not grades)."""
    source = run.protocol.regrade_of
    first, second = _graded(source.pk), _graded(run.pk)
    keys = sorted(set(first) & set(second))
    people = dict(Task.objects.filter(pk__in={task for task, _ in keys}).values_list("pk", "session__person_id"))
    place = {condition: i for i, condition in enumerate(source.protocol.conditions)}
    stratum: dict = {}
    for task, sha, condition in Prediction.objects.filter(run=source, task_id__in={t for t, _ in keys}) \
            .exclude(answer_sha256="").values_list("task_id", "answer_sha256", "condition"):
        known = stratum.get((task, sha))
        if known is None or place.get(condition, len(place)) < place.get(known, len(place)):
            stratum[task, sha] = condition
    return JudgedItems(keys, [first[k] for k in keys], [second[k] for k in keys], [people[k[0]] for k in keys],
                       [stratum.get(k, "unknown") for k in keys])


def regrade_settings(run: Run) -> tuple[int, int]:
    bootstrap = run.protocol.bootstrap or {}
    return int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))


def sampled_agreement(run: Run, *, n: int, sample_seed: int) -> dict:
    """Agreement of the re-grade's judge with the source's on a stratified sample of ``n`` answers.

    Returns {"items": all judged items, "sample": its size, "strata": stratum → items in the
    sample, "rows": `AGREEMENT_COLUMNS` rows, "seed", "draws"}.
    """
    items = judged_items(run)
    seed, draws = regrade_settings(run)
    sample = stratified_sample(items.strata, n, seed=sample_seed)
    label = f"sample of {sample.size} (seed {sample_seed})"
    rows = agreement_rows(items.first, items.second, items.people, items.strata, sample, sample_label=label,
                          seed=seed, draws=draws)
    strata: dict = {}
    for i in sample.tolist():
        strata[items.strata[i]] = strata.get(items.strata[i], 0) + 1
    return {"items": len(items.keys), "sample": int(sample.size), "strata": strata, "rows": rows,
            "seed": seed, "draws": draws}
