"""Explorer filters that other apps provide, so that experiments never imports them.

An app registers a `TaskFilter` from its AppConfig.ready (annotations registers the judge–human
disagreement); the explorer offers it, as `filter=<key>` in the URL, on the runs for which
`offered(run)` is true, and keeps the tasks `task_ids(run)` returns.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from experiments.models import Run


@dataclass(frozen=True)
class TaskFilter:
    key: str  # the URL's value, e.g. "judge-human"
    label: str  # the words beside its checkbox
    offered: Callable[[Run], bool]  # shown for this run (e.g. it has a rating campaign)
    task_ids: Callable[[Run], Iterable[int]]  # the run's tasks it keeps


TASK_FILTERS: dict[str, TaskFilter] = {}


def register_task_filter(task_filter: TaskFilter) -> None:
    """Add (or replace, on a second ready()) a filter under its key."""
    TASK_FILTERS[task_filter.key] = task_filter


def offered_filters(run: Run) -> list[TaskFilter]:
    return [f for f in TASK_FILTERS.values() if f.offered(run)]
