"""Base generation planned in parts (`driver.run_plan_part`), as judging is: the cohort's tasks in
cohort order, a part at a time, each part's slots and predictions those the whole phase would have
(`planning.plan_generation(part=...)`), inserted in one transaction."""
from __future__ import annotations

from experiments.execution.planning import plan_generation
from experiments.models import CohortTask, Prediction, Run, Slot
from experiments.models.runs import Phase

# A generation part's tasks at most: a million-slot phase is planned a bounded batch of prompts
# at a time (each part's slots and predictions are built in memory, then inserted).
PART_MAX = 5000


def cohort_part(run: Run, start: int, size: int) -> list:
    """The cohort's tasks at positions start.. start + size - 1 of its order (as `cohort_tasks`),
    with what planning a part reads of them: the question's turn and the session (its person's id
    for the wrong-person control). The person, the study and the answer's turn are left out: three
    joins and three model instances per task that no part's planning reads."""
    entries = (CohortTask.objects.filter(cohort_id=run.protocol.cohort_id)
               .select_related("task__session", "task__question_turn")
               .order_by("position")[start:start + size])
    return [entry.task for entry in entries]


def plan_part(run: Run, start: int, size: int) -> tuple[bool, int]:
    """Plan base generation for the cohort's next `size` tasks from `start`; (complete, next start)."""
    tasks = cohort_part(run, start, size + 1)  # one more: whether any are left
    part = tasks[:size]
    if part:
        plan_generation(run, part=part)
    return len(tasks) <= size, start + len(part)


def planned_upto(run: Run) -> int:
    """Where the next generation part starts when no caller says (a look after a planner died):
    the first cohort position whose task has nothing planned, found by bisection (parts are planned
    in cohort order, each in one transaction). A task that plans nothing of its own (a session's
    tag choice planned with an earlier task) may make it start earlier: planning again is harmless."""
    order = CohortTask.objects.filter(cohort_id=run.protocol.cohort_id).order_by("position")
    low, high = 0, order.count()
    while low < high:
        middle = (low + high) // 2
        task_id = order.values_list("task_id", flat=True)[middle]
        planned = (Slot.objects.filter(run=run, phase=Phase.GENERATION, task_id=task_id).exists()
                   or Prediction.objects.filter(run=run, task_id=task_id).exists())
        if planned:
            low = middle + 1
        else:
            high = middle
    return low
