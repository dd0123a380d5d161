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
from rq.exceptions import StopRequested
from rq.timeouts import TimerDeathPenalty, UnixSignalDeathPenalty

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
        # rq's job timeout: SIGALRM, which only the main thread may set; the lane's job a timer.
        return UnixSignalDeathPenalty if threading.current_thread() is threading.main_thread() else TimerDeathPenalty

    def _lane_possible(self, timeout, max_idle_time) -> bool:
        return (timeout is not None and max_idle_time is None
                and any(queue.name not in LANE_QUEUES for queue in self._ordered_queues))

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        self._lane_allowed = self._lane_possible(timeout, max_idle_time)
        self._dequeuing = True
        try:
            while self._lane_allowed and self._lane_busy.is_set():
                # While the lane is busy, the other queues only, coming round every few seconds to
                # listen on the lane's queues again once it is free.
                every = self._ordered_queues
                self._ordered_queues = [queue for queue in every if queue.name not in LANE_QUEUES]
                try:
                    result = super().dequeue_job_and_maintain_ttl(min(timeout, LANE_POLL_S), max_idle_time=LANE_POLL_S)
                finally:
                    self._ordered_queues = every
                if result is not None:
                    return result
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        finally:
            self._dequeuing = False

    def _shutdown(self):
        # rq's warm shutdown waits for "the current job" when the worker's state says busy, and
        # the lane's job sets that state while the main thread waits on the queues: the worker
        # went on listening, took the next job off the queue and was killed with it (a run's
        # drive lost). Waiting on the queues, it stops now; teardown waits for the lane's job.
        if self._dequeuing:
            self._stop_requested = True
            if self.scheduler:
                self.stop_scheduler()
            raise StopRequested()
        super()._shutdown()

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
            super().execute_job(job, queue)
        except Exception:
            logger.exception("job %s on the lane failed", job.id)
        finally:
            connections.close_all()  # the lane thread's connection, opened for this job
            self._lane_busy.clear()

    def teardown(self):
        self._lane.shutdown(wait=True)  # a warm shutdown lets the analysis finish
        super().teardown()
