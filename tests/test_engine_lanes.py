"""Refills never starve: the engine's workers run the analysis queue's jobs on a lane thread of their
own (`worker_lane.LaneMixin`), so a long analysis (of another run) does not stop the dequeue of slot
jobs and refills.

One real worker process serving every queue — a `MultiSlotWorker`, and the `ResilientSimpleWorker`
of `jobs.WORKER_COMMAND` (the command pages print; `bin/demo` and the README start it) —, real
PostgreSQL, Redis and HTTP to the local server, a window of 6 slots and no scheduler (no delayed
look can help): while a 40 s job runs on the `analysis` queue, a run's 120 slots are all answered
on refills alone, every request sent once (its own analysis then waits for the lane, and the run
finishes after it). Before the lane, the analysis held the main thread, nothing was dequeued
meanwhile and the run's first window was never handed out (so it was with the
`ResilientSimpleWorker` until it had the lane too). A warm shutdown (SIGTERM) while the lane is
busy stops the worker's listening at once: it once went on listening, took the next job and was
killed with it. Nor does a stop kill the main thread's job once the lane's job has ended (rq's one
worker state read "idle" then), or drop a job its BLPOP has just popped.
"""
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import django_rq
import pytest
from rq.job import JobStatus

from experiments.execution.jobs import run_enqueue
from experiments.models import ModelCall, Project, Run, Slot
from experiments.models.runs import Phase
from experiments.execution.jobs import WORKER_COMMAND
from experiments.execution.worker_lane import LaneMixin
from experiments.execution.workers import ResilientSimpleWorker
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, make_run, openai_model, request_bytes
from tests.llm_fake_server import running_fake_llm
from tests.test_engine_multislot import MultiSlotWorkers
from tests.test_engine_queue import (  # noqa: F401 - fixtures
    QUEUES, REPO, live_database, redis_connection, wait_for, worker_env,
)

LONG_S = 40
STARTED, ENDED = "test:lanes:analysis-started", "test:lanes:analysis-ended"


def long_analysis(seconds: float) -> None:
    """A stand-in for a long analysis of another run (run by the worker process)."""
    connection = django_rq.get_connection("default")
    connection.set(STARTED, repr(time.time()))
    time.sleep(seconds)
    connection.set(ENDED, repr(time.time()))


SIMPLE = "experiments.execution.workers.ResilientSimpleWorker"


class SimpleWorkers(MultiSlotWorkers):
    """One worker of the class `jobs.WORKER_COMMAND` names, without the scheduler."""

    def start(self) -> subprocess.Popen:
        log = open(self.log_dir / f"worker-{len(self.processes)}.log", "wb")
        process = subprocess.Popen([sys.executable, "manage.py", "rqworker", *QUEUES, "--worker-class", SIMPLE],
                                   cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        log.close()
        self.processes.append(process)
        return process


def test_the_printed_worker_command_starts_a_worker_with_the_lane():
    # The scenario below runs with this class: the command pages print starts a worker with the lane.
    assert f"--worker-class {SIMPLE} " in WORKER_COMMAND and " analysis" in WORKER_COMMAND
    assert issubclass(ResilientSimpleWorker, LaneMixin)


def marker() -> None:
    """A job that must stay on the queue (a worker asked to stop must not take it)."""


@pytest.mark.slow
@pytest.mark.parametrize("kind", [MultiSlotWorkers, SimpleWorkers])
def test_a_stop_while_the_lane_is_busy_takes_no_further_job(kind, live_database, redis_connection, tmp_path):
    redis_connection.flushdb()
    workers = kind(worker_env(live_database), tmp_path, slots=2, scheduler=False)
    seconds = 6
    try:
        process = workers.start()
        django_rq.get_queue("analysis").enqueue(long_analysis, seconds, job_timeout=seconds + 60)
        wait_for(lambda: redis_connection.get(STARTED), 60, "the analysis to start", workers)
        process.send_signal(signal.SIGTERM)  # a warm shutdown: the lane's job finishes first
        time.sleep(0.5)
        queue = django_rq.get_queue("default")
        queue.enqueue(marker)
        assert process.wait(timeout=seconds + 30) == 0, workers.logs()
        assert redis_connection.get(ENDED) is not None  # the analysis was let finish
        assert queue.count == 1  # the job enqueued after the stop is still there for another worker
    finally:
        workers.kill_all()
        redis_connection.flushdb()


@pytest.mark.slow
@pytest.mark.parametrize("kind", [MultiSlotWorkers, SimpleWorkers])
def test_a_long_analysis_does_not_starve_another_runs_refills(kind, live_database, redis_connection, tmp_path):
    redis_connection.flushdb()
    window = 6
    workers = kind({**worker_env(live_database), "OWNWORDS_HAND_OUT_WINDOW": str(window)},
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


MAIN_STARTED, MAIN_ENDED = "test:lanes:main-started", "test:lanes:main-ended"


def main_thread_job(seconds: float) -> None:
    """A stand-in for a drive or a refill: a `default` job, run in the worker's main thread."""
    connection = django_rq.get_connection("default")
    connection.set(MAIN_STARTED, repr(time.time()))
    time.sleep(seconds)
    connection.set(MAIN_ENDED, repr(time.time()))


@pytest.mark.slow
@pytest.mark.parametrize("kind", [MultiSlotWorkers, SimpleWorkers])
def test_a_stop_after_the_lanes_job_ended_lets_the_main_threads_job_finish(kind, live_database, redis_connection,
                                                                          tmp_path):
    redis_connection.flushdb()
    workers = kind(worker_env(live_database), tmp_path, slots=2, scheduler=False)
    try:
        process = workers.start()
        analysis = django_rq.get_queue("analysis").enqueue(long_analysis, 1, job_timeout=60)
        wait_for(lambda: redis_connection.get(STARTED), 60, "the analysis to start", workers)
        main = django_rq.get_queue("default").enqueue(main_thread_job, 6, job_timeout=60)
        wait_for(lambda: redis_connection.get(MAIN_STARTED), 30, "the main thread's job to start", workers)
        wait_for(lambda: analysis.get_status(refresh=True) == JobStatus.FINISHED, 30, "the analysis to end", workers)
        time.sleep(0.5)  # the lane's bookkeeping after the job (rq's execute_job set the worker idle there)
        assert redis_connection.get(MAIN_ENDED) is None  # the main thread's job still runs
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, workers.logs()
        assert redis_connection.get(MAIN_ENDED) is not None, workers.logs()  # let finish, not killed
        assert main.get_status(refresh=True) == JobStatus.FINISHED, workers.logs()
    finally:
        workers.kill_all()
        redis_connection.flushdb()


POPPED = "test:lanes:popped-job-ran"


def popped_job() -> None:
    django_rq.get_connection("default").set(POPPED, "1")


class StoppedRightAfterThePop(ResilientSimpleWorker):
    """Asked to stop (SIGTERM, as by `kill`) the moment its BLPOP has returned a job."""

    def _dequeued(self, job_id, queue):
        os.kill(os.getpid(), signal.SIGTERM)
        return super()._dequeued(job_id, queue)


def test_a_stop_right_after_the_pop_runs_the_popped_job(redis_connection):
    redis_connection.flushdb()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # rq replaces pytest's
    try:
        queue = django_rq.get_queue("default")
        job = queue.enqueue(popped_job)
        worker = StoppedRightAfterThePop([queue], connection=redis_connection)
        assert worker.work(burst=False) is True  # it ran the job it had popped, then stopped
        assert redis_connection.get(POPPED) == b"1" and job.get_status(refresh=True) == JobStatus.FINISHED
        assert queue.count == 0
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        redis_connection.flushdb()
