"""`Prediction.score` and `copied_label`: what the engine stores with each answer is
what `analysis.grades.final_grades` computes from the grades, on a real run against the local
LLM server with empty answers (operational zeros), unparseable judge replies (missing grades),
invalid selections, a fusion that copies a candidate and one that writes anew, and on a
re-grade of that run by another judge; and the explorer's grade filters list exactly the tasks
`final_grades` gives each grade.
"""
import importlib
import json
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.http import QueryDict

from experiments.analysis.explorer import ExplorerQuery, explorer_page
from experiments.analysis.grades import final_grades
from experiments.core.conditions import FINAL
from experiments.execution import control
from experiments.execution.driver import run_inline
from experiments.models import CohortTask, Grade, Prediction, Run
from experiments.models.runs import Phase
from tests.engine_helpers import (
    FUSION, ONE_SHOT, QUESTION_ONLY, SELECTION, Roles, Sleeps, build_cohort, gemini_model, make_run, openai_model,
    user_text,
)

pytestmark = pytest.mark.django_db
CONDITIONS = [QUESTION_ONLY, ONE_SHOT, FUSION, SELECTION]


def judge(request):
    """Alpha 3, Beta 0, anything else 1, except Gamma: a reply without a grade (missing)."""
    predicted = user_text(request).split("[PREDICTED ANSWER]", 1)[1]
    if "Gamma" in predicted:
        return "I cannot grade this one."
    score = 3 if "Alpha" in predicted else 0 if "Beta" in predicted else 1
    if request.wire_format == "gemini":  # the re-grade's judge is harsher on Alpha
        score = min(score, 2)
    return json.dumps({"score": score, "rationale": "test grade"})


@pytest.fixture
def roles(server):
    return Roles(server, answer=["Alpha answer.", "Beta answer.", "", "Gamma answer.", "Delta answer."],
                 fusion=["Alpha answer.", "A fused answer.", "Gamma answer."],
                 selection=['{"candidate_id": "c1"}', "no usable choice", '{"candidate_id": "c3"}'],
                 judge=judge)


@pytest.fixture
def source(project, server, roles, http):
    cohort = build_cohort(project, sessions=3, targets=3, name="scores")
    run = make_run(project, cohort, conditions=CONDITIONS, generator=openai_model(server), name="scores")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    return run


def expected_score(prediction, grades) -> int | None:
    """The rule of `final_grades`, for any label (a candidate too)."""
    if prediction.status == Prediction.Status.INVALID_SELECTION:
        return 0
    if prediction.status in (Prediction.Status.OK, Prediction.Status.EMPTY):
        return grades.get((prediction.task_id, prediction.answer_sha256))
    return None


def assert_stored_as_computed(run):
    table = final_grades(run)
    grades = {(g.task_id, g.answer_sha256): g.score for g in Grade.objects.filter(run=run)}
    predictions = list(Prediction.objects.filter(run=run))
    candidates = {(p.task_id, p.condition, p.answer_sha256): p.label for p in sorted(predictions, key=lambda p: p.label)
                  if p.label != FINAL and p.answer_sha256}
    for p in predictions:
        assert p.score == expected_score(p, grades), (p.condition, p.label, p.status)
        if p.label == FINAL:
            assert p.score == table[p.condition][p.task_id]
            assert p.copied_label == candidates.get((p.task_id, p.condition, p.answer_sha256), "") if p.answer_sha256 \
                else p.copied_label == ""
    return table, predictions


def explorer_tasks(run, **params) -> set[int]:
    query = ExplorerQuery.from_params(QueryDict(urlencode(params, doseq=True)), run.protocol.conditions)
    assert not query.errors
    page = explorer_page(run, query, size=1000)
    assert page.total == len(page.rows)
    return {row["task_id"] for row in page.rows}


def assert_explorer_agrees(run, table):
    tasks = set(CohortTask.objects.filter(cohort=run.protocol.cohort).values_list("task_id", flat=True))
    for condition in CONDITIONS:
        for grade in (0, 1, 2, 3):
            assert explorer_tasks(run, condition=condition, grade=str(grade)) == {
                t for t in tasks if table[condition].get(t) == grade}, (condition, grade)
    assert explorer_tasks(run, missing="1") == {t for t in tasks if any(table[c].get(t) is None for c in CONDITIONS)}


def test_stored_scores_equal_the_computed_grades_in_a_run_and_its_regrade(project, cast, server, roles, http, source):
    table, predictions = assert_stored_as_computed(source)
    statuses = {p.status for p in predictions}
    # the run has every case the rule distinguishes
    assert {Prediction.Status.OK, Prediction.Status.EMPTY, Prediction.Status.INVALID_SELECTION} <= statuses
    assert Grade.objects.filter(run=source, status=Grade.Status.MISSING).exists()
    finals = [p for p in predictions if p.label == FINAL]
    assert any(p.score is None for p in finals) and {0, 1, 3} <= {p.score for p in finals}
    fusion = [p for p in finals if p.condition == FUSION and p.status == Prediction.Status.OK]
    assert any(p.copied_label for p in fusion) and any(not p.copied_label for p in fusion)
    assert all(p.copied_label for p in finals if p.condition == SELECTION and p.status == Prediction.Status.OK)
    assert_explorer_agrees(source, table)

    protocol = control.regrade_create(source=source, user=cast["owner"], judge=gemini_model(server))
    regrade = Run.objects.create(protocol=protocol)
    control.run_start(run=regrade)
    assert regrade.phase == Phase.JUDGING
    regrade = run_inline(regrade.pk, client=http, sleep=Sleeps())
    assert regrade.status == Run.Status.FINISHED
    regraded, _ = assert_stored_as_computed(regrade)
    assert regraded != table  # another judge: Alpha is 2 now, not 3
    assert_explorer_agrees(regrade, regraded)


def test_the_migration_backfill_writes_what_the_engine_writes(source):
    """Migration 0008's UPDATE (raw SQL, for existing rows) against `store_scores` (the ORM, for
    new ones) on the same run: every score and copied label alike."""
    backfill = importlib.import_module("experiments.migrations.0008_prediction_final_score").BACKFILL
    fields = ("pk", "score", "copied_label")
    stored = sorted(Prediction.objects.filter(run=source).values_list(*fields))
    assert any(score is not None for _, score, _ in stored) and any(label for _, _, label in stored)
    Prediction.objects.filter(run=source).update(score=None, copied_label="")
    with connection.cursor() as cursor:
        cursor.execute(backfill)
    assert sorted(Prediction.objects.filter(run=source).values_list(*fields)) == stored
