"""The lane: a worker's analysis jobs on a thread of their own, so its main thread keeps dequeuing.

A job in rq's main thread stops the dequeue itself: a 60 s analysis of one run left every other
run's slot jobs and refills on the queue for 60 s, and a phase's queue ran dry because nobody
handed out its next window. `LaneMixin` gives both engine workers (`workers.ResilientSimpleWorker`,
`workers.MultiSlotWorker`) a lane for the `analysis` queue.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from django.db import connections
from rq.exceptions import NoSuchJobError, StopRequested
from rq.timeouts import TimerDeathPenalty, UnixSignalDeathPenalty
from rq.worker import WorkerStatus

from experiments.execution.concurrency import REDIS_DOWN, wait_for_redis

logger = logging.getLogger(__name__)

SLOT_JOB = "experiments.execution.jobs.job_slot"
# These queues' jobs run on a lane thread of their own, not in the main thread that dequeues: a
# long analysis, or the planning of a large phase's rest (`jobs.job_plan_rest`), must not stop the
# dequeue of slots and refills (`LaneMixin`).
LANE_QUEUES = ("analysis",)
LANE_POLL_S = 2


class LaneMixin:
    """The analysis queue's jobs (`LANE_QUEUES`) on a lane thread of their own, one at a time.

    Why a lane for the analysis, and not the refills: a job in the main thread stops the dequeue
    itself, so a 60 s analysis of one run left every other run's slot jobs and refills on the
    queue for 60 s — the phase's queue ran dry because nobody handed out its next window. Moving
    refills to a thread would not help while the main thread is not dequeuing; moving the analysis
    off it does, and keeps every job that hands out or settles slots (drive, refill, look) where it
    was, one at a time, in queue order. The analysis is also the one job whose length grows with
    the cohort (bootstraps, tables) and does not touch the hand-out. One worker process still
    serves every queue (`bin/demo`, the README's commands), so no queue is left without a worker.
    While the lane is busy the worker does not listen on its queues: a second analysis stays on
    the queue for another worker (or for this one once the lane is free). In burst mode (rq's
    tests and one-off drains) everything runs in the main thread, rq's way: a burst worker that
    stops when its queues are empty must see the jobs an analysis enqueues.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lane")
        self._lane_busy = threading.Event()
        self._lane_allowed = False  # set by the dequeue: not in burst mode, and other queues to serve
        self._dequeuing = False  # the main thread waits on the queues (`_shutdown`)

    @property
    def death_penalty_class(self):
        # rq's job timeout: SIGALRM, which only the main thread may set; the lane's job a timer,
        # which raises the timeout in the lane thread between two bytecodes: a job blocked in one
        # call (a sleep, a socket read, a long C computation) runs on until that call returns.
        return UnixSignalDeathPenalty if threading.current_thread() is threading.main_thread() else TimerDeathPenalty

    def _lane_possible(self, timeout, max_idle_time) -> bool:
        return (timeout is not None and max_idle_time is None
                and any(queue.name not in LANE_QUEUES for queue in self._ordered_queues))

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        self._lane_allowed = self._lane_possible(timeout, max_idle_time)
        if timeout is None or max_idle_time is not None:  # burst or idle-limited: rq's own way
            self._dequeuing = True
            try:
                return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            finally:
                self._dequeuing = False
        return self._dequeue(timeout)

    def _dequeue(self, timeout: int):
        """The next job of the worker's queues, in their order, by a BLPOP of its own (`_pop`): rq's
        dequeue stays "waiting" through the fetch of the job it popped, where a stop lost the job."""
        if self.get_state() != WorkerStatus.IDLE:  # a slot job leaves it so: no write per slot job
            self.set_state(WorkerStatus.IDLE)
        every = {queue.key: queue for queue in self._ordered_queues}
        while not self._stop_requested:
            # While the lane is busy, the other queues only, coming round every few seconds to
            # listen on the lane's queues again once it is free (one job at a time).
            lane_busy = self._lane_allowed and self._lane_busy.is_set()
            keys = ({key: queue for key, queue in every.items() if queue.name not in LANE_QUEUES}
                    if lane_busy else every)
            self.heartbeat()
            if self.should_run_maintenance_tasks:
                self.run_maintenance_tasks()
            try:
                popped = self._pop(list(keys), min(timeout, LANE_POLL_S) if lane_busy else timeout)
                if popped is None:
                    continue
                key, job_id = (part.decode() if isinstance(part, bytes) else part for part in popped)
                job = self._dequeued(job_id, keys[key])
            except REDIS_DOWN as exc:  # (a job popped whose fetch failed is lost, as in rq's dequeue)
                wait_for_redis(self.connection, what="the dequeue", error=exc)
                continue
            if job is not None:
                self.reorder_queues(reference_queue=keys[key])  # rq's --dequeue-strategy, for the next dequeue
                return job, keys[key]
        return None

    def _pop(self, keys: list, timeout: int):
        """One BLPOP. A stop asked for while it waits ends it (`_shutdown` raises), but not once it
        returned: the job it popped is then run (a warm shutdown's "current job"), never dropped."""
        self._dequeuing = True
        try:
            if self._stop_requested:  # asked for since the loop last looked: do not start waiting
                return None
            return self.connection.blpop(keys, timeout)
        finally:
            self._dequeuing = False

    def _dequeued(self, job_id: str, queue):
        """The job a pop returned, fetched as rq does; None when it no longer exists."""
        try:
            job = self.job_class.fetch(job_id, connection=self.connection, serializer=self.serializer)
        except NoSuchJobError:
            return None
        self.log.info("Worker %s: %s: %s", self.name, queue.name, job.id)
        return job

    def _shutdown(self):
        # rq's warm shutdown raises StopRequested unless the worker's state says busy, and so
        # killed the main thread's job whenever the lane's job had set that state (it is one
        # attribute for the whole worker). Here a stop never raises inside a job: it is asked for
        # (the loop ends before its next dequeue, teardown waits for the lane's job), and only a
        # wait on the queues (`_pop`, or rq's dequeue in burst mode) is ended at once.
        self._stop_requested = True
        try:
            self.set_shutdown_requested_date()
        except REDIS_DOWN:
            pass  # a record for rq's listings only; nothing may be raised into a running job
        if self.scheduler:
            self.stop_scheduler()
        if self._dequeuing:
            raise StopRequested()

    def set_state(self, state, pipeline=None):
        # The worker's state is the main thread's: the lane's job leaves it alone (rq's execute_job
        # ends with IDLE, which said "idle" while the main thread ran a drive or a refill).
        if threading.current_thread() is threading.main_thread():
            super().set_state(state, pipeline=pipeline)

    def _is_lane_job(self, job, queue) -> bool:
        return self._lane_allowed and queue.name in LANE_QUEUES and getattr(job, "func_name", None) != SLOT_JOB

    def execute_job(self, job, queue):
        if not self._is_lane_job(job, queue):
            return super().execute_job(job, queue)  # here, in the main thread, rq's way
        self._lane_busy.set()
        try:
            self._lane.submit(self._run_lane_job, job, queue)
        except BaseException:
            self._lane_busy.clear()
            raise

    def _run_lane_job(self, job, queue) -> None:
        """An analysis job, rq's way (its registries, result, failure record), on the lane thread."""
        try:
            try:
                super().execute_job(job, queue)
            except Exception:
                logger.exception("job %s on the lane failed", job.id)
            finally:
                connections.close_all()  # the lane thread's connection, opened for this job
        finally:
            # Its own finally: the job's timeout (an exception raised in this thread by a timer,
            # `death_penalty_class`) can land in the one above; the lane must be free again.
            self._lane_busy.clear()

    def teardown(self):
        self._lane.shutdown(wait=True)  # a warm shutdown lets the analysis finish
        super().teardown()
