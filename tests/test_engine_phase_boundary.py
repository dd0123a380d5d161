"""The boundary between generation and judging (issue 13): a large judging phase hands out its
first part at once and the rest is planned part by part while those calls are sent, without the
run's lock, each part handed out as soon as it is planned.

Whichever way the rest gets planned — `run_plan_part` (the queue's way) or a later drive that
plans the whole phase under the run's lock because the parts never came — every distinct answer
of a task gets exactly one judge slot, each slot is handed out once, and the run finishes with
one call per slot.
"""
import httpx
import pytest

from experiments.execution import driver
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_drive, run_inline, run_plan_part
from experiments.execution.journal import slot_execute
from experiments.models import Grade, ModelCall, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, Sleeps, build_cohort, make_run, openai_model

TASKS, FIRST = 12, 5


@pytest.fixture
def client():
    with httpx.Client(trust_env=False) as http_client:
        yield http_client


@pytest.fixture
def generated(project, server, client, monkeypatch):
    """A run whose generation is complete, with a first judging part of FIRST calls."""
    monkeypatch.setattr(driver, "FIRST_PART_MIN", FIRST)
    monkeypatch.setattr(driver, "FIRST_PART_ROUNDS", 0)
    Roles(server, generation=lambda request: f"An answer to {hash(request.body)}.")
    run = make_run(project, build_cohort(project, sessions=4, targets=3, name="boundary"),
                   conditions=[QUESTION_ONLY], generator=openai_model(server), concurrency={"openai": 2})
    for slot_id in run_drive(run.pk).slot_ids:
        slot_execute(slot_id, limiter=NoLimiter(), client=client, worker="test", sleep=Sleeps())
    return run


def _finish(run, client, slot_ids):
    for slot_id in slot_ids:
        slot_execute(slot_id, limiter=NoLimiter(), client=client, worker="test", sleep=Sleeps())
    finished = run_inline(run.pk, client=client, sleep=Sleeps())
    assert finished.status == Run.Status.FINISHED
    judged = Slot.objects.filter(run=run, phase=Phase.JUDGING)
    assert judged.count() == TASKS  # one per distinct answer of a task
    assert not judged.exclude(status=Slot.Status.OK).exists()
    assert sorted(ModelCall.objects.filter(slot__in=judged).values_list("slot_id", flat=True)) == sorted(
        judged.values_list("pk", flat=True))  # one call each
    assert Grade.objects.filter(run=run, status=Grade.Status.OK).count() == TASKS


def test_the_first_part_is_handed_out_before_the_rest_is_planned_and_every_slot_once(generated, client):
    run = generated
    first = run_drive(run.pk)
    assert (first.phase, first.plan_rest, len(first.slot_ids)) == (Phase.JUDGING, True, FIRST)
    run.refresh_from_db()
    assert run.planned_phase != Phase.JUDGING  # not marked planned: any drive would plan again
    assert Slot.objects.filter(run=run, phase=Phase.JUDGING).count() == FIRST

    second = run_plan_part(run.pk)  # as large as all before it: FIRST again
    assert (second.plan_rest, len(second.slot_ids)) == (True, FIRST)
    last = run_plan_part(run.pk)  # up to 2 * FIRST: the 2 left
    assert (last.plan_rest, len(last.slot_ids)) == (False, TASKS - 2 * FIRST)
    run.refresh_from_db()
    assert run.planned_phase == Phase.JUDGING
    handed = first.slot_ids + second.slot_ids + last.slot_ids
    assert len(set(handed)) == TASKS
    after = run_drive(run.pk)
    assert not after.plan_rest and not after.slot_ids  # every slot was handed out once
    _finish(run, client, handed)


def test_a_drive_before_the_rest_was_planned_plans_the_whole_phase_under_its_lock(generated, client):
    run = generated
    first = run_drive(run.pk)
    assert first.plan_rest
    again = run_drive(run.pk)  # no part came (its worker died): this look plans the rest
    assert not again.plan_rest and len(again.slot_ids) == TASKS - FIRST
    assert not set(first.slot_ids) & set(again.slot_ids)
    late = run_plan_part(run.pk)  # late and harmless: nothing more to plan or hand out
    assert not late.plan_rest and not late.slot_ids
    assert Slot.objects.filter(run=run, phase=Phase.JUDGING).count() == TASKS
    _finish(run, client, first.slot_ids + again.slot_ids)
