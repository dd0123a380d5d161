"""The boundary between generation and judging: a large judging phase hands out its
first part at once and the rest is planned part by part while those calls are sent, without the
run's lock, each part handed out as soon as it is planned.

Whichever way the rest gets planned — `run_plan_part` (the queue's way, also after a delayed
look while calls are under way) or a later drive that plans the whole phase under the run's
lock because the parts never came and nothing is under way — every distinct answer of a task
gets exactly one judge slot, each slot is handed out once, and the run finishes with one call
per slot.
"""
import threading
import time

import pytest
from django.db import connection, transaction

from experiments.execution import driver
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_drive, run_inline, run_plan_part
from experiments.execution.journal import slot_execute
from experiments.models import Grade, ModelCall, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, Sleeps, build_cohort, make_run, openai_model

TASKS, FIRST = 12, 5


@pytest.fixture
def generated(project, server, http, monkeypatch):
    """A run whose generation is complete, with a first judging part of FIRST calls."""
    monkeypatch.setattr(driver, "FIRST_PART_MIN", FIRST)
    monkeypatch.setattr(driver, "FIRST_PART_ROUNDS", 0)
    Roles(server, generation=lambda request: f"An answer to {hash(request.body)}.")
    run = make_run(project, build_cohort(project, sessions=4, targets=3, name="boundary"),
                   conditions=[QUESTION_ONLY], generator=openai_model(server), concurrency={"openai": 2})
    while True:  # generation is planned in parts too: until it is planned and answered
        for slot_id in run_drive(run.pk).slot_ids:
            slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="test", sleep=Sleeps())
        if Run.objects.filter(pk=run.pk, planned_phase=Phase.GENERATION).exists():
            return run


def _answer(http, slot_ids):
    for slot_id in slot_ids:
        slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="test", sleep=Sleeps())


def _finish(run, http, slot_ids):
    _answer(http, slot_ids)
    finished = run_inline(run.pk, client=http, sleep=Sleeps())
    assert finished.status == Run.Status.FINISHED
    judged = Slot.objects.filter(run=run, phase=Phase.JUDGING)
    assert judged.count() == TASKS  # one per distinct answer of a task
    assert not judged.exclude(status=Slot.Status.OK).exists()
    assert sorted(ModelCall.objects.filter(slot__in=judged).values_list("slot_id", flat=True)) == sorted(
        judged.values_list("pk", flat=True))  # one call each
    assert Grade.objects.filter(run=run, status=Grade.Status.OK).count() == TASKS


def test_the_first_part_is_handed_out_before_the_rest_is_planned_and_every_slot_once(generated, http):
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
    _finish(run, http, handed)


def test_a_look_while_the_first_part_is_under_way_leaves_the_rest_to_parts_planned_without_the_lock(
        generated, http):
    """A delayed look comes while the first part's calls are under way (and, say, the part's
    planner died): planning the rest under the run's lock would make every reservation and
    answer wait for it, so the look leaves it to `run_plan_part`, which checks the seal then."""
    run = generated
    first = run_drive(run.pk)
    assert first.plan_rest and first.seal_checked
    again = run_drive(run.pk)
    assert again.plan_rest and not again.seal_checked and not again.slot_ids
    assert Slot.objects.filter(run=run, phase=Phase.JUDGING).count() == FIRST  # nothing planned under the lock
    rest, step = (), again
    while step.plan_rest:  # what the queue's driver job does next
        step = run_plan_part(run.pk)
        rest += step.slot_ids
    assert len(rest) == TASKS - FIRST and not set(first.slot_ids) & set(rest)
    _finish(run, http, first.slot_ids + rest)


def test_a_look_with_nothing_under_way_plans_the_whole_rest_under_its_lock(generated, http):
    run = generated
    first = run_drive(run.pk)
    _answer(http, first.slot_ids)  # the first part answered, and no part came (its worker died)
    again = run_drive(run.pk)  # this look plans the rest
    assert not again.plan_rest and len(again.slot_ids) == TASKS - FIRST
    assert not set(first.slot_ids) & set(again.slot_ids)
    late = run_plan_part(run.pk)  # late and harmless: nothing more to plan or hand out
    assert not late.plan_rest and not late.slot_ids
    assert Slot.objects.filter(run=run, phase=Phase.JUDGING).count() == TASKS
    _finish(run, http, again.slot_ids)


def _waiting_on_a_lock(exclude_pid: int) -> bool:
    with connection.cursor() as cursor:
        # Statistics are a snapshot per transaction unless cleared: the caller is inside one.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> %s AND wait_event_type = 'Lock'", [exclude_pid])
        return cursor.fetchone()[0] > 0


def test_a_part_planned_while_a_drive_holds_the_run_waits_for_it_without_a_deadlock(transactional_db, generated,
                                                                                    http):
    """A drive holding the run FOR UPDATE plans the whole phase while a part (no run lock) plans
    the same keys: the part must wait for the drive before it inserts anything (a deadlock at
    K = 128 before: the part's foreign-key checks, deferred to its commit, waited for the drive, the drive's insert for
    the part's keys)."""
    run = generated
    first = run_drive(run.pk)
    assert first.plan_rest and len(first.slot_ids) == FIRST
    _answer(http, first.slot_ids)  # nothing under way: a drive plans the rest under its lock
    part, errors = [], []

    def plan_a_part():
        try:
            part.append(run_plan_part(run.pk))
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=plan_a_part)
    with transaction.atomic():
        Run.objects.select_for_update(of=("self",)).get(pk=run.pk)  # the drive's lock, taken first
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            own_pid = cursor.fetchone()[0]
        thread.start()
        deadline = time.monotonic() + 10
        while not _waiting_on_a_lock(own_pid):  # the part is blocked on the run's row
            assert time.monotonic() < deadline and thread.is_alive(), errors
            time.sleep(0.02)
        time.sleep(0.2)
        whole = run_drive(run.pk)  # plans every key, those of the waiting part included
    thread.join(timeout=30)
    assert not thread.is_alive() and not errors, errors
    assert not whole.plan_rest and len(whole.slot_ids) == TASKS - FIRST
    assert part and not part[0].slot_ids  # everything was handed out by the drive, once
    _finish(run, http, whole.slot_ids)
