"""`TaskGrades`: a run's grades of one task under every condition, as one short string.

The explorer filters and sorts on grades: "OwnWords 3, memory 0", "sort by a − b". Read from the
final predictions, each such filter joins one prediction per task and condition (two index
lookups per task for a − b: 142,860 at a million predictions). One row per run × task holding
one character per condition, in the protocol's condition order, lets the page read one row per
task instead: '0'–'3' the condition's final grade (`Prediction.score`), '-' when it is missing
(no final answer yet, no grade, or missing). `analysis.task_grade_store` keeps it equal to the final
predictions' scores wherever they are written (`analysis.grades.store_scores`, and the journal's
one-statement result path in `execution.outcomes`); migration 0019 wrote it for the runs before.

A task with no row has no final answer with a grade (nothing wrote one yet). Each row also
carries the task's cohort position, so that the explorer lists the tasks a grade filter keeps,
in order, from these rows without joining the cohort's.
"""
from django.db import models

from experiments.models.data import Task
from experiments.models.runs import Run


class TaskGrades(models.Model):
    # db_index off: the (run, task) constraint's index serves every lookup by run
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    # the task's position in the run's cohort (`CohortTask.position`), copied so that a filter on
    # grades lists and orders the run's tasks from these rows alone
    position = models.PositiveIntegerField(null=True, blank=True)
    grades = models.TextField(help_text="per condition of the protocol, in its order: '0'–'3' or '-'")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "task"], name="task_grades_once")]
