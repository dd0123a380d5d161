"""Migrations 0017 and 0019 carry their own SQL (frozen from `cohort_facts_copy` and
`refresh_task_grades` as they were), so a later change to those modules cannot change what the
migrations do. Each is run here on a small case stored through the historical models, and what it
writes must equal what the live function writes on the same rows — a divergence means either the
migration's copy or the live code changed the rule, and the change must be deliberate.

The database is migrated back and forward with Django's `MigrationExecutor` (hence
`transactional_db`), and left at the latest migrations afterwards.
"""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import NOT_PROVIDED
from django.utils import timezone

from experiments.analysis.task_grade_store import refresh_task_grades
from experiments.data.cohort_facts import cohort_facts_copy


def migrate(target: str | None):
    """Migrate `experiments` to `target` (None: every app to its latest); the historical apps there."""
    executor = MigrationExecutor(connection)
    targets = executor.loader.graph.leaf_nodes() if target is None else [("experiments", target)]
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture
def migrator(transactional_db):
    yield migrate
    migrate(None)


def make(model, **values):
    """A row of a historical model: the values given, something plain for every other required field."""
    for field in model._meta.concrete_fields:
        if (field.name in values or field.attname in values or field.primary_key or field.null
                or field.default is not NOT_PROVIDED or getattr(field, "auto_now_add", False)):
            continue
        kind = field.get_internal_type()
        if kind == "DateTimeField":
            values[field.name] = timezone.now()
        elif kind == "JSONField":
            values[field.name] = {}
        elif kind == "BooleanField":
            values[field.name] = False
        elif "Integer" in kind or kind in ("FloatField", "DecimalField"):
            values[field.name] = 0
        else:
            values[field.name] = "x"
    return model.objects.create(**values)


def small_cohorts(apps):
    """Two cohorts over tasks of people and studies whose names differ in case and order (code point
    ranks, ties), questions in mixed case; the second cohort holds some of the first's tasks."""
    model = lambda name: apps.get_model("experiments", name)  # noqa: E731
    project = make(model("Project"), slug="frozen", name="Frozen")
    studies = [make(model("Study"), project=project, key=key) for key in ("b", "B", "a")]
    people = [make(model("Person"), project=project, label=label) for label in ("zed", "Alice", "alice")]
    task_set = make(model("TaskSet"), project=project, min_pairs=1, min_targets=1, max_targets=3)
    tasks = []
    for i, (person, study) in enumerate([(p, s) for p in people for s in studies][:7]):
        session = make(model("Session"), project=project, person=person, study=study, external_id=f"s{i}")
        question = make(model("Turn"), session=session, index=0, speaker="interviewer", text=f"Why ÉCOLE, Mr {i}?")
        answer = make(model("Turn"), session=session, index=1, speaker="participant", text="Because.")
        tasks.append(make(model("Task"), task_set=task_set, session=session, question_turn=question,
                          answer_turn=answer, position=0, pair_number=0, cut=0, record_cut=0))
    cohorts = []
    for name, members in (("all", tasks), ("some", tasks[5:1:-1])):
        cohort = make(model("Cohort"), project=project, task_set=task_set, name=name, rule={})
        for position, task in enumerate(members):
            make(model("CohortTask"), cohort=cohort, task=task, position=position)
        cohorts.append(cohort)
    return cohorts, tasks


def facts(apps) -> list[tuple]:
    return list(apps.get_model("experiments", "CohortTask").objects.order_by("pk").values_list(
        "pk", "person_rank", "study_rank", "question_lowercase"))


def test_migration_0017_copies_the_facts_cohort_facts_copy_copies(migrator):
    cohorts, _ = small_cohorts(migrator("0016_model_call_run_phase"))
    apps = migrator("0017_explorer_cohort_facts")
    migrated = facts(apps)
    assert len(migrated) == 11 and all(None not in row for row in migrated)
    assert {row[1] for row in migrated} == {1, 2, 3} and {row[2] for row in migrated} == {1, 2, 3}
    apps.get_model("experiments", "CohortTask").objects.update(
        person_rank=None, study_rank=None, question_lowercase=None)
    for cohort in cohorts:
        cohort_facts_copy(cohort.pk)
    assert facts(apps) == migrated


def small_runs(apps):
    """Two runs of a cohort: final predictions with grades 0–3, a NULL and an out-of-range score, a
    missing condition, a condition outside the protocol, candidates that are not final, a task
    with no final prediction; the second run's protocol has no conditions."""
    model = lambda name: apps.get_model("experiments", name)  # noqa: E731
    (cohort, _), tasks = small_cohorts(apps)
    runs = []
    for conditions in (["memory", "ownwords", "question-only"], []):
        protocol = make(model("Protocol"), project=cohort.project, cohort=cohort, name=f"p{len(runs)}",
                        conditions=conditions)
        runs.append(make(model("Run"), protocol=protocol))
    predictions = [  # run, task, condition, label, score
        (0, 0, "memory", "final", 3), (0, 0, "ownwords", "final", None), (0, 0, "memory", "c1", 1),
        (0, 1, "ownwords", "final", 0), (0, 1, "question-only", "final", 12), (0, 1, "other", "final", 2),
        (0, 2, "question-only", "final", 2), (0, 3, "memory", "c1", 2),
        (1, 4, "memory", "final", 1), (1, 5, "memory", "c2", 1)]
    for run, task, condition, label, score in predictions:
        make(model("Prediction"), run=runs[run], task=tasks[task], condition=condition, label=label, score=score)
    return runs


def grades(apps) -> list[tuple]:
    return list(apps.get_model("experiments", "TaskGrades").objects.order_by("run_id", "task_id").values_list(
        "run_id", "task_id", "position", "grades"))


def test_migration_0019_writes_the_rows_refresh_task_grades_writes(migrator):
    runs = small_runs(migrator("0018_survey"))
    apps = migrator("0019_task_grades")
    migrated = grades(apps)
    # checked by hand: tasks 0–2 of the first run, task 4 of the second (positions in the cohort)
    assert [(position, row) for _, _, position, row in migrated] == [(0, "3--"), (1, "-0-"), (2, "--2"), (4, "")]
    apps.get_model("experiments", "TaskGrades").objects.all().delete()
    for run in runs:
        refresh_task_grades(run.pk, run.protocol.cohort_id, run.protocol.conditions or [])
    assert grades(apps) == migrated
