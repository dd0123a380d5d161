"""A phase's slots go onto the queue a window at a time (a million-slot phase would hold a
million jobs in Redis and take a minute to enqueue).

- `run_drive` and `run_refill` hand out at most the window's room (counted in the database), in
  planning order, never a slot twice, and say when to refill (only while slots are left); slots
  whose jobs were lost fill the window until a look hands them out again, whatever the room;
- the refill mark is set with the count, relative to it, so the count always passes it;
- a window's slots are found by one index scan, not one per slot due in the phase (the plan
  PostgreSQL chose for `id IN (SELECT … LIMIT w)`: quadratic in the window);
- through the real queue (multi-slot workers, PostgreSQL, Redis, HTTP to the local server) with a
  window of 6 and no scheduler, so no delayed look can help: the refills alone carry a run of 120
  slots to its end, with never more than two windows handed out and unfinished, and every request
  sent exactly once.
"""
import os
from collections import Counter

import pytest
from django.db import connection

from experiments.execution import driver
from experiments.execution.driver import run_drive, run_refill
from experiments.execution.hand_out import HAND_OUT_MIN, HAND_OUT_ROUNDS, hand_out, hand_out_window
from experiments.execution.jobs import run_enqueue
from experiments.models import ModelCall, Project, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, make_run, openai_model, request_bytes
from tests.llm_fake_server import running_fake_llm
from tests.test_engine_multislot import MultiSlotWorkers
from tests.test_engine_queue import (  # noqa: F401 - fixtures
    live_database, redis_connection, wait_for, worker_env,
)


@pytest.fixture
def small_window(settings):
    settings.OWNWORDS_HAND_OUT_WINDOW = 4


def handed_out(run):
    return list(Slot.objects.filter(run=run, dispatched_at__isnull=False).order_by("pk").values_list("pk", flat=True))


def test_a_look_hands_out_the_rooms_worth_in_planning_order_and_a_refill_the_next(db, small_window):
    project = Project.objects.create(slug="window", name="Window")
    run = make_run(project, build_cohort(project, sessions=2, targets=5, name="window"),
                   conditions=[QUESTION_ONLY], generator={"provider": "offline", "base_url": "", "model": "stand-in"})
    assert hand_out_window(run) == 4
    first = run_drive(run.pk)  # plans the generation phase; the inline driver's way: everything
    assert len(first.slot_ids) == 10 and first.refill_after is None
    Slot.objects.filter(run=run).update(dispatched_at=None)
    planned = list(Slot.objects.filter(run=run, phase=Phase.GENERATION).order_by("pk").values_list("pk", flat=True))

    def settle(ids):
        Slot.objects.filter(pk__in=ids).update(status=Slot.Status.OK)

    step = run_drive(run.pk, windowed=True)
    assert step.slot_ids == tuple(planned[:4]) and step.refill_after == 2  # refill when two are left
    assert run_drive(run.pk, windowed=True).slot_ids == ()  # the window is full
    settle(planned[:3])
    refill = run_refill(run.pk, Phase.GENERATION)
    assert refill.slot_ids == tuple(planned[4:7]) and refill.refill_after == 2
    assert run_refill(run.pk, Phase.JUDGING) == driver.Step()  # not the run's phase
    # planned[3:7] are out and their jobs were lost (no outcome, no count comes down): the window
    # is full of them until a look hands them out again, regardless of the room they fill
    assert run_refill(run.pk, Phase.GENERATION).slot_ids == ()
    again = run_drive(run.pk, windowed=True, redispatch_after_s=0)
    assert again.slot_ids == tuple(planned[3:7]) and again.refill_after == 2
    settle(planned[3:7])
    tail = run_refill(run.pk, Phase.GENERATION)
    assert tail.slot_ids == tuple(planned[7:]) and tail.refill_after is None  # all out: nothing to refill
    assert run_refill(run.pk, Phase.GENERATION).slot_ids == ()
    assert handed_out(run) == planned
    Run.objects.filter(pk=run.pk).update(status=Run.Status.PAUSED)
    Slot.objects.filter(run=run).update(dispatched_at=None, status=Slot.Status.PENDING)
    assert run_refill(run.pk, Phase.GENERATION).slot_ids == ()  # a paused run hands out nothing


def test_the_window_is_many_rounds_of_the_cap(db, settings):
    settings.OWNWORDS_HAND_OUT_WINDOW = None
    project = Project.objects.create(slug="rounds", name="Rounds")
    cohort = build_cohort(project, sessions=1, targets=1, name="rounds")
    offline = {"provider": "offline", "base_url": "", "model": "stand-in"}
    small = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=offline)
    assert hand_out_window(small) == HAND_OUT_MIN
    large = make_run(project, cohort, name="large", conditions=[QUESTION_ONLY], generator=offline,
                     concurrency={"offline": 1000})
    assert hand_out_window(large) == HAND_OUT_ROUNDS * 1000


def test_the_refill_mark_is_set_below_the_count_it_goes_with(redis_connection):
    """The mark goes with the count (one script), `refill_after` below it: the count passes it on
    its way down even when lost jobs left the count too high for good."""
    from django_rq import get_queue

    from experiments.execution import jobs
    run_id = 10 ** 9 + os.getpid()
    count_key = jobs.QUEUED_KEY.format(run_id=run_id, phase=Phase.GENERATION)
    mark_key = jobs.REFILL_KEY.format(run_id=run_id, phase=Phase.GENERATION)
    try:
        jobs.dispatch(run_id, driver.Step(slot_ids=(1, 2, 3), phase=Phase.GENERATION, refill_after=2))
        assert redis_connection.get(count_key) == b"3" and redis_connection.get(mark_key) == b"1"
        redis_connection.incrby(count_key, 100)  # a hundred jobs lost with their workers
        jobs.dispatch(run_id, driver.Step(slot_ids=tuple(range(4, 10)), phase=Phase.GENERATION, refill_after=4))
        assert redis_connection.get(count_key) == b"109" and redis_connection.get(mark_key) == b"105"
        jobs.dispatch(run_id, driver.Step(slot_ids=(10,), phase=Phase.GENERATION))  # the last: nothing to refill
        assert redis_connection.get(count_key) == b"110" and redis_connection.get(mark_key) is None
        assert 0 < redis_connection.ttl(count_key) <= jobs.KEY_TTL_S
    finally:
        redis_connection.delete(count_key, mark_key)
        get_queue(Phase.GENERATION, connection=redis_connection).empty()


def most_handed_out_at_once(run) -> int:
    """The most slots handed out and not yet answered at any moment (from the journal's times)."""
    events = []
    for slot in Slot.objects.filter(run=run).exclude(dispatched_at=None):
        finished = max(call.finished_at for call in ModelCall.objects.filter(slot=slot))
        events += [(slot.dispatched_at, 1), (finished, -1)]
    most = now = 0
    for _, change in sorted(events, key=lambda event: (event[0], event[1])):  # an end before a start at a tie
        now += change
        most = max(most, now)
    return most


@pytest.mark.slow
def test_refills_alone_carry_a_run_through_the_queue_a_window_at_a_time(live_database, redis_connection, tmp_path):
    redis_connection.flushdb()
    window = 6
    workers = MultiSlotWorkers({**worker_env(live_database), "OWNWORDS_HAND_OUT_WINDOW": str(window)},
                               tmp_path, slots=4, scheduler=False)
    try:
        with running_fake_llm() as server:
            server.default_delay_s = 0.02
            Roles(server)
            project = Project.objects.create(slug="refills", name="Refills")
            run = make_run(project, build_cohort(project, sessions=12, targets=5, name="refills"),
                           conditions=[QUESTION_ONLY], generator=openai_model(server, timeout_s=5.0),
                           concurrency={"openai": 4})
            for _ in range(2):
                workers.start()
            run_enqueue(run.pk)
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).first(), 120,
                           "the run to finish on refills alone", workers)
            requests = Counter(r.body for r in server.requests)
        assert all(process.poll() is None for process in workers.processes), workers.logs()
    finally:
        workers.kill_all()
        redis_connection.flushdb()

    slots = list(Slot.objects.filter(run=run))
    assert len(slots) == 120 and {slot.status for slot in slots} == {Slot.Status.OK}
    for slot in slots:
        assert requests[request_bytes(run, slot)] == ModelCall.objects.filter(slot=slot).count() == 1
    assert sum(requests.values()) == 120
    # Handed out a window at a time: many hand-outs, never more than two windows out at once.
    assert len({slot.dispatched_at for slot in slots}) >= 120 // window
    assert window <= most_handed_out_at_once(run) <= 2 * window


def _slot_index_scans() -> int:
    """Index scans on the slot table so far in this transaction (PostgreSQL's own counter)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT idx_scan FROM pg_stat_xact_user_tables WHERE relname = %s", [Slot._meta.db_table])
        return cursor.fetchone()[0]


def test_a_window_is_read_once_whatever_the_phase_holds(db):
    # Written `id IN (SELECT … LIMIT w)`, PostgreSQL ran the window's subquery once per slot due in
    # the phase (a nested loop semi join): quadratic, 77 ms of every 320-slot refill in the engine
    # benchmark. Now the window's last id bounds one scan.
    project = Project.objects.create(slug="window-scan", name="Window scan")
    run = make_run(project, build_cohort(project, sessions=40, targets=5, name="window-scan"),
                   conditions=[QUESTION_ONLY], generator={"provider": "offline", "base_url": "", "model": "stand-in"})
    run_drive(run.pk)  # plans the generation phase (its first part at least)
    Slot.objects.filter(run=run).update(dispatched_at=None)
    planned = list(Slot.objects.filter(run=run, phase=Phase.GENERATION).order_by("pk").values_list("pk", flat=True))
    assert len(planned) >= 60
    handed, size = [], len(planned) // 4
    while True:
        scans = _slot_index_scans()
        window = hand_out(run.pk, Phase.GENERATION, limit=size)
        assert _slot_index_scans() - scans <= 3, "the window's slots were looked up once per slot due"
        if not window:
            break
        handed += window
    assert handed == planned  # in planning order, each once
