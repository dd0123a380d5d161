"""The explorer's judge–human disagreement filter (issue 12), registered into experiments'
explorer from AnnotationsConfig.ready (experiments never imports annotations).

An item's human consensus is its adjudicated grade when an owner decided one, otherwise its
raters' mean rounded half up, floor(mean + 1/2) in integers as in
`experiments.core.stats.agreement.mean_vs_judge`; flag-only ratings count for nothing. A task
is kept when, in any campaign of the run, an item of it has a consensus different from the
judge's grade of that answer (`RatingItem.judge_score`).
"""
from __future__ import annotations

from collections import defaultdict

from annotations.models import HumanGrade, RatingCampaign, RatingItem
from experiments.analysis.task_filters import TaskFilter, register_task_filter
from experiments.models import Run

KEY = "judge-human"


def human_consensus(grades: list[int], adjudicated: int | None) -> int | None:
    if adjudicated is not None:
        return adjudicated
    if not grades:
        return None
    return (2 * sum(grades) + len(grades)) // (2 * len(grades))


def judge_human_disagreements(run: Run) -> set[int]:
    """Task ids of `run` where an item's human consensus differs from the judge (two queries)."""
    grades = defaultdict(list)
    for item_id, grade in (HumanGrade.objects.filter(campaign__run=run, grade__isnull=False)
                           .values_list("assignment__item_id", "grade")):
        grades[item_id].append(grade)
    tasks = set()
    for pk, task_id, judge, adjudicated in (RatingItem.objects.filter(campaign__run=run)
                                            .values_list("pk", "task_id", "judge_score", "adjudication__grade")):
        consensus = human_consensus(grades.get(pk, []), adjudicated)
        if consensus is not None and judge is not None and consensus != judge:
            tasks.add(task_id)
    return tasks


def register() -> None:
    register_task_filter(TaskFilter(
        key=KEY, label="raters disagree with the judge",
        offered=lambda run: RatingCampaign.objects.filter(run=run).exists(),
        task_ids=judge_human_disagreements))
