"""Refills never starve: a multi-slot worker runs the analysis queue's jobs on a lane thread of its
own, so a long analysis (of another run) does not stop the dequeue of slot jobs and refills.

One real `MultiSlotWorker` process serving every queue, real PostgreSQL, Redis and HTTP to the
local server, a window of 6 slots and no scheduler (no delayed look can help): while a 40 s job
runs on the `analysis` queue, a run's 120 slots are all answered on refills alone, every request
sent once (its own analysis then waits for the lane, and the run finishes after it). Before the lane, the analysis held the main thread, nothing was dequeued meanwhile and
the run's first window was never handed out.
"""
import time
from collections import Counter

import django_rq
import pytest

from experiments.execution.jobs import run_enqueue
from experiments.models import ModelCall, Project, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, make_run, openai_model, request_bytes
from tests.llm_fake_server import running_fake_llm
from tests.test_engine_multislot import MultiSlotWorkers
from tests.test_engine_queue import (  # noqa: F401 - fixtures
    live_database, redis_connection, wait_for, worker_env,
)

LONG_S = 40
STARTED, ENDED = "test:lanes:analysis-started", "test:lanes:analysis-ended"


def long_analysis(seconds: float) -> None:
    """A stand-in for a long analysis of another run (run by the worker process)."""
    connection = django_rq.get_connection("default")
    connection.set(STARTED, repr(time.time()))
    time.sleep(seconds)
    connection.set(ENDED, repr(time.time()))


@pytest.mark.slow
def test_a_long_analysis_does_not_starve_another_runs_refills(live_database, redis_connection, tmp_path):
    redis_connection.flushdb()
    window = 6
    workers = MultiSlotWorkers({**worker_env(live_database), "OWNWORDS_HAND_OUT_WINDOW": str(window)},
                               tmp_path, slots=4, scheduler=False)
    try:
        with running_fake_llm() as server:
            server.default_delay_s = 0.02
            Roles(server)
            project = Project.objects.create(slug="lanes", name="Lanes")
            run = make_run(project, build_cohort(project, sessions=12, targets=5, name="lanes"),
                           conditions=[QUESTION_ONLY], generator=openai_model(server, timeout_s=5.0),
                           concurrency={"openai": 4})
            workers.start()
            django_rq.get_queue("analysis").enqueue(long_analysis, LONG_S, job_timeout=LONG_S + 60)
            wait_for(lambda: redis_connection.get(STARTED), 60, "the long analysis to start", workers)
            run_enqueue(run.pk)
            # Every slot of both phases answered (the run's own analysis then waits for the lane).
            wait_for(lambda: Run.objects.filter(pk=run.pk, phase=Phase.ANALYSIS).exists(), LONG_S - 5,
                     "the run's slots to be answered while the analysis runs", workers)
            answered_at = time.time()
            requests = Counter(r.body for r in server.requests)
            assert redis_connection.get(ENDED) is None  # the long analysis was still running all along
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).first(), LONG_S + 60,
                           "the run to finish after the long analysis", workers)
        assert float(redis_connection.get(ENDED)) > answered_at
        assert all(process.poll() is None for process in workers.processes), workers.logs()
    finally:
        workers.kill_all()
        redis_connection.flushdb()

    slots = list(Slot.objects.filter(run=run))
    assert len(slots) == 120 and {slot.status for slot in slots} == {Slot.Status.OK}
    for slot in slots:
        assert requests[request_bytes(run, slot)] == ModelCall.objects.filter(slot=slot).count() == 1
    # Handed out a window at a time: the refills carried it, not one hand-out.
    assert len({slot.dispatched_at for slot in slots}) >= 120 // window
