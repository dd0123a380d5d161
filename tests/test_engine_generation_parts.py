"""Base generation planned in parts, as judging is: a large phase hands out its first part under
the run's lock and the rest is planned part by part without it (`driver.run_plan_part`), so its
first request does not wait for the whole phase to be planned.

- the parts make exactly the slots (keys, requests, order) and predictions of the phase planned
  at once, each handed out once, and the run finishes with one call per slot;
- a part with no start given (a look after the planner died) finds where the planned tasks end by
  bisection and plans the rest, nothing twice;
- a changed seal stops the parts (the drive then stops the run saying why).
"""
import pytest

from experiments.execution import driver, generation_parts
from experiments.execution.driver import run_drive, run_inline, run_plan_part
from experiments.models import ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, Sleeps, build_cohort, make_run, openai_model

TASKS, FIRST = 12, 3


def _planned(run):
    slots = list(Slot.objects.filter(run=run, phase=Phase.GENERATION).order_by("pk")
                 .values_list("key", "request_sha256", "task_id"))
    predictions = sorted(Prediction.objects.filter(run=run).values_list("task_id", "condition", "label",
                                                                        "slot__key", "status", "budget"))
    return slots, predictions


@pytest.fixture
def parts(monkeypatch):
    monkeypatch.setattr(driver, "FIRST_PART_MIN", FIRST)
    monkeypatch.setattr(driver, "FIRST_PART_ROUNDS", 0)


def _run(project, server, name, cohort=None):
    cohort = cohort or build_cohort(project, sessions=4, targets=3, name=name)
    return make_run(project, cohort, name=name, conditions=[QUESTION_ONLY], generator=openai_model(server),
                    concurrency={"openai": 2}), cohort


def test_generation_parts_plan_what_the_whole_phase_would_each_slot_handed_out_once(
        project, server, http, parts, monkeypatch):
    Roles(server)
    run, cohort = _run(project, server, "parts")
    first = run_drive(run.pk)
    assert (first.phase, first.plan_rest, len(first.slot_ids), first.plan_from) == (Phase.GENERATION, True, FIRST, FIRST)
    run.refresh_from_db()
    assert run.planned_phase != Phase.GENERATION
    second = run_plan_part(run.pk, start=first.plan_from)  # as large as all before it: FIRST again
    assert (second.plan_rest, len(second.slot_ids), second.plan_from) == (True, FIRST, 2 * FIRST)
    third = run_plan_part(run.pk, start=second.plan_from)  # 2 * FIRST: the 6 left, and no more
    assert (third.plan_rest, len(third.slot_ids), third.plan_from) == (False, TASKS - 2 * FIRST, TASKS)
    run.refresh_from_db()
    assert run.planned_phase == Phase.GENERATION
    handed = first.slot_ids + second.slot_ids + third.slot_ids
    assert len(set(handed)) == TASKS
    parted = _planned(run)

    # The same protocol planned at once (a first part larger than the cohort).
    monkeypatch.setattr(driver, "FIRST_PART_MIN", 10 * TASKS)
    whole, _ = _run(project, server, "whole", cohort=cohort)
    at_once = run_drive(whole.pk)
    assert not at_once.plan_rest and len(at_once.slot_ids) == TASKS
    slots, predictions = _planned(whole)
    assert [row[:2] for row in parted[0]] == [row[:2] for row in slots]  # same keys and requests, same order
    assert parted[1] == predictions and len(predictions) == TASKS

    finished = run_inline(run.pk, client=http, sleep=Sleeps())
    assert finished.status == Run.Status.FINISHED
    generated = Slot.objects.filter(run=run, phase=Phase.GENERATION)
    assert generated.count() == TASKS and not generated.exclude(status=Slot.Status.OK).exists()
    assert ModelCall.objects.filter(slot__in=generated).count() == TASKS  # one call each


def test_a_part_without_a_start_finds_where_the_planned_tasks_end(project, server, parts):
    Roles(server)
    run, _ = _run(project, server, "bisect")
    first = run_drive(run.pk)
    assert len(first.slot_ids) == FIRST
    assert generation_parts.planned_upto(run) == FIRST
    rest = run_plan_part(run.pk)  # no start: bisection
    assert (rest.plan_from, len(rest.slot_ids)) == (2 * FIRST, FIRST)
    assert generation_parts.planned_upto(run) == 2 * FIRST
    last = run_plan_part(run.pk)
    assert not last.plan_rest and last.plan_from == TASKS
    keys = list(Slot.objects.filter(run=run, phase=Phase.GENERATION).values_list("key", flat=True))
    assert len(keys) == len(set(keys)) == TASKS
    assert Prediction.objects.filter(run=run).count() == TASKS


def test_a_changed_seal_stops_the_parts(project, server, parts, monkeypatch):
    Roles(server)
    run, _ = _run(project, server, "seal")
    first = run_drive(run.pk)
    assert first.plan_rest
    monkeypatch.setattr(driver, "seal_mismatches", lambda protocol, code=False: ["prompt file x changed"])
    assert run_plan_part(run.pk, start=first.plan_from) == driver.Step()
    assert Slot.objects.filter(run=run, phase=Phase.GENERATION).count() == FIRST
