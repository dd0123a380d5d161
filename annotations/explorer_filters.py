"""The explorer's judge–human disagreement filter, registered into experiments'
explorer from AnnotationsConfig.ready (experiments never imports annotations).

An item's human consensus is its adjudicated grade when an owner decided one, otherwise its
raters' mean rounded half up, floor(mean + 1/2) in integers as in
`experiments.core.stats.agreement_stats.mean_vs_judge`; flag-only ratings count for nothing. A task
is kept when, in any campaign of the run, an item of it has a consensus different from the
judge's grade of that answer (`RatingItem.judge_score`).
"""
from __future__ import annotations

from django.db.models import Count, Q, Sum

from annotations.models import FIRST_SHOWING, RatingCampaign, RatingItem
from experiments.analysis.task_filters import TaskFilter, register_task_filter
from experiments.models import Run

KEY = "judge-human"


# Hidden repeats are a rater's retest, not another rating of the item.
FIRST_ONLY = Q(assignments__showing=FIRST_SHOWING)


def human_consensus(total: int | None, graded: int, adjudicated: int | None) -> int | None:
    """From the sum and number of an item's graded ratings and any adjudicated grade."""
    if adjudicated is not None:
        return adjudicated
    if not graded:
        return None
    return (2 * total + graded) // (2 * graded)


def judge_human_disagreements(run: Run) -> set[int]:
    """Task ids of `run` where an item's human consensus differs from the judge (one query)."""
    items = (RatingItem.objects.filter(campaign__run=run)
             .annotate(total=Sum("assignments__rating__grade", filter=FIRST_ONLY),
                       graded=Count("assignments__rating__grade", filter=FIRST_ONLY))
             .values_list("task_id", "judge_score", "adjudication__grade", "total", "graded"))
    return {task_id for task_id, judge, adjudicated, total, graded in items
            if judge is not None and human_consensus(total, graded, adjudicated) not in (None, judge)}


def register() -> None:
    register_task_filter(TaskFilter(
        key=KEY, label="raters disagree with the judge",
        offered=lambda run: RatingCampaign.objects.filter(run=run).exists(),
        task_ids=judge_human_disagreements))
