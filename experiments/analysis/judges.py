"""Judge against judge (paper App. H, I.6): a re-grade run's grades beside its source run's.

The two runs graded the same answers, so agreement is read on the (task, answer sha256) items
both judges graded — operational zeros (empty answers, invalid selections) are rules, not
judgments, and stay out. The interval resamples whole people, as every interval of a run does.
Numbers only, never text: viewers may see all of it.
"""
from __future__ import annotations

import math


from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import Grade, Run, Task

from experiments.core.stats.agreement_stats import agreement_bootstrap



def shared_grades(run: Run) -> tuple[list[int], list[int], list]:
    """(first judge's grades, second judge's, person per item) on the items both graded."""
    first = dict(_graded(run.protocol.regrade_of_id))
    items = [(key, first[key], score) for key, score in _graded(run.pk) if key in first]
    people = dict(Task.objects.filter(pk__in={key[0] for key, _, _ in items})
                  .values_list("pk", "session__person_id"))
    return [f for _, f, _ in items], [s for _, _, s in items], [people[key[0]] for key, _, _ in items]


def _graded(run_id: int) -> list[tuple[tuple[int, str], int]]:
    rows = (Grade.objects.filter(run_id=run_id, status=Grade.Status.OK).exclude(score=None)
            .order_by("task_id", "answer_sha256").values_list("task_id", "answer_sha256", "score"))
    return [((task_id, sha), score) for task_id, sha, score in rows]


def judge_comparison(run: Run) -> dict:
    """Agreement of the re-grade's judge with the source run's, and what each graded."""
    protocol = run.protocol
    source = protocol.regrade_of
    first, second, people = shared_grades(run)
    result = {
        "source_run": source.pk,
        "same_judge": protocol.judge == source.protocol.judge,
        "first_judge": _label(source.protocol.judge),
        "second_judge": _label(protocol.judge),
        "graded": {"first": _count(source.pk), "second": _count(run.pk)},
        "agreement": None,
    }
    if first:
        seed = int(protocol.bootstrap.get("seed", DEFAULT_SEED))
        draws = int(protocol.bootstrap.get("draws", DEFAULT_DRAWS))
        result["agreement"] = _finite(agreement_bootstrap(first, second, people, draws=draws, seed=seed).as_dict())
    return result


def contrasts_side_by_side(run: Run) -> list[dict]:
    """Each planned contrast under the first judge (the source run) and the second (this run)."""
    first = {c["name"]: c for c in (run.protocol.regrade_of.analysis or {}).get("contrasts", [])}
    return [{"name": c["name"], "second": c, "first": first.get(c["name"])}
            for c in (run.analysis or {}).get("contrasts", [])]


def _count(run_id: int) -> int:
    return Grade.objects.filter(run_id=run_id, status=Grade.Status.OK).exclude(score=None).count()


def _label(judge: dict) -> str:
    return f"{judge.get('provider')} · {judge.get('model')}" if isinstance(judge, dict) else str(judge)


def _finite(value):
    """NaN (κ when a judge used one grade only) as null: JSON has no NaN."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
