"""The seal check at a phase boundary is constant in the cohort's size: the cohort's task list
hash is read as last computed while nothing it reads has changed (an epoch that every statement
changing a cohort entry, task, session, person, study or turn moves on, migration 0029).

- the hash read is the hash computed, and read again it costs one query (no hashing of the list);
- a change of a turn's text, a person's label, a task's cut or a cohort entry moves the epoch: the
  next check computes the hash again and the seal check says the task list changed;
- a change elsewhere (a run's slots, a project) does not.
"""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from experiments.execution.kind_table import cohort_task_list_sha256, cohort_task_list_sha256_checked
from experiments.execution.sealing import seal_mismatches
from experiments.execution.task_list_sql import task_list_epoch
from experiments.models import CohortTask, Person, Project, Task, Turn
from tests.engine_helpers import QUESTION_ONLY, build_cohort, make_run

OFFLINE = {"provider": "offline", "base_url": "", "model": "stand-in"}


@pytest.fixture
def cohort(db):
    project = Project.objects.create(slug="epoch", name="Epoch")
    return build_cohort(project, sessions=3, targets=2, name="epoch")


def test_the_hash_read_is_the_hash_computed_and_read_again_costs_one_query(cohort):
    full = cohort_task_list_sha256(cohort)
    assert full == cohort.task_list_sha256  # as drawn
    assert cohort_task_list_sha256_checked(cohort) == full
    with CaptureQueriesContext(connection) as queries:
        assert cohort_task_list_sha256_checked(cohort) == full
    assert len(queries) == 1 and "experiments_task_list_epoch" in queries[0]["sql"]


@pytest.mark.parametrize("change", ["turn text", "person label", "task cut", "cohort entry"])
def test_a_change_of_what_the_hash_reads_moves_the_epoch_and_is_seen(cohort, change):
    before = cohort_task_list_sha256_checked(cohort)
    epoch = task_list_epoch(cohort.pk)[0]
    task = Task.objects.filter(cohort_entries__cohort=cohort).order_by("pk").first()
    if change == "turn text":
        Turn.objects.filter(pk=task.question_turn_id).update(text="A question nobody asked")
    elif change == "person label":
        Person.objects.filter(pk=task.session.person_id).update(label="someone-else")
    elif change == "task cut":
        Task.objects.filter(pk=task.pk).update(cut=task.cut - 1)
    else:
        CohortTask.objects.filter(cohort=cohort, task=task).delete()
    assert task_list_epoch(cohort.pk)[0] > epoch
    after = cohort_task_list_sha256_checked(cohort)
    assert after != before and after == cohort_task_list_sha256(cohort)


def test_a_change_elsewhere_leaves_the_epoch(cohort):
    cohort_task_list_sha256_checked(cohort)
    epoch = task_list_epoch(cohort.pk)[0]
    Project.objects.filter(pk=cohort.project_id).update(name="Epoch, renamed")
    assert task_list_epoch(cohort.pk)[0] == epoch


def test_a_changed_turn_after_sealing_fails_the_seal_check(cohort):
    run = make_run(cohort.project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE)
    assert seal_mismatches(run.protocol, code=False) == []  # read from the stored hash
    task = Task.objects.filter(cohort_entries__cohort=cohort).first()
    Turn.objects.filter(pk=task.answer_turn_id).update(text="Not what was said")
    problems = seal_mismatches(run.protocol, code=False)
    assert len(problems) == 1 and problems[0].startswith("the task list changed")
