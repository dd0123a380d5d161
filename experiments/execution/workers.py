"""rq workers that wait out a Redis outage instead of quitting.

rq's own loop retries only while it waits for a job; a Redis error anywhere else — the
heartbeat after a job, the bookkeeping of a finished job, the suspension check, maintenance —
ends the worker ("found an unhandled exception, quitting") and it stays down. These workers
log such an error, wait with backoff until Redis answers again, and carry on. The job that
was running has already recorded its outcome in the database (the journal is the record);
only rq's view of that job may be stale, which its registries' cleanup repairs.

    manage.py rqworker --worker-class experiments.execution.workers.ResilientSimpleWorker ...

`MultiSlotWorker` carries many slots at once: K requests in flight need a handful of
processes, not K.

    OWNWORDS_WORKER_SLOTS=32 manage.py rqworker --worker-class experiments.execution.workers.MultiSlotWorker ...
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections
from dataclasses import dataclass, field

from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.scheduler import RQScheduler
from rq.utils import import_attribute
from rq.worker import SimpleWorker, Worker

from experiments.execution.concurrency import REDIS_DOWN, backoff_delays, wait_for_redis
from experiments.execution.worker_lane import SLOT_JOB, LaneMixin
from experiments.models import Slot

logger = logging.getLogger(__name__)


# How often, at the longest, a worker running the scheduler checks that its process is alive.
SCHEDULER_CHECK_S = 10


class ResilientScheduler(RQScheduler):
    """rq's scheduler (the process of `--with-scheduler` that enqueues the driver's delayed looks),
    waiting out a Redis outage instead of dying of it.

    rq 3.0 runs its scheduler's loop (`RQScheduler.work`: locks, heartbeat, enqueueing the jobs
    due) with no handling of Redis errors: a 3 s outage ended the process ("Scheduler … raised an
    exception"), and the worker starts a new one only at its maintenance, every 10 minutes, so
    no delayed look ran meanwhile. Here each of those steps waits for Redis (PING with
    backoff) and the loop goes on; a stop asked for meanwhile (SIGTERM) ends the wait."""

    def _survive(self, what: str, step, *args, **kwargs):
        while True:
            try:
                return step(*args, **kwargs)
            except REDIS_DOWN as exc:
                if self._stop_requested or not self._wait_for_redis(what, exc):
                    return None

    def _wait_for_redis(self, what: str, error: Exception) -> bool:
        """True once Redis answers; False when a stop is asked for first."""
        logger.error("Redis went away during %s (%s); the scheduler waits for it", what, error)
        for delay in backoff_delays():
            if self._stop_requested:
                return False
            time.sleep(delay)
            try:
                self.connection.ping()
            except REDIS_DOWN:
                continue
            logger.warning("Redis answers again; the scheduler carries on")
            return True

    def register_birth(self):
        return self._survive("the scheduler's registration", super().register_birth)

    def acquire_locks(self, auto_start=False):
        return self._survive("the scheduler's locks", super().acquire_locks, auto_start) or set()

    def heartbeat(self):
        return self._survive("the scheduler's heartbeat", super().heartbeat)

    def enqueue_scheduled_jobs(self):
        return self._survive("the enqueueing of scheduled jobs", super().enqueue_scheduled_jobs)


class ResilientMixin:
    """Every step of rq's loop outside the dequeue, made to survive Redis going away; and its
    scheduler (`--with-scheduler`) too (`ResilientScheduler`), started again should it end."""

    def _survive(self, what: str, step, *args, **kwargs):
        while True:
            try:
                return step(*args, **kwargs)
            except REDIS_DOWN as exc:
                wait_for_redis(self.connection, what=what, error=exc)

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=DEFAULT_LOGGING_DATE_FORMAT,
                         log_format=DEFAULT_LOGGING_FORMAT):
        # rq's own `_start_scheduler`, with the scheduler that survives Redis outages.
        self.scheduler = ResilientScheduler(
            self.queues, connection=self.connection, serializer=self.serializer, date_format=date_format,
            log_format=log_format, logging_level=logging_level if logging_level is not None else self.log.level)
        self.scheduler.acquire_locks()
        if self.scheduler.acquired_locks:
            if burst:
                try:
                    self.scheduler.register_birth()
                    self.scheduler.enqueue_scheduled_jobs()
                finally:
                    self.scheduler.release_locks()
                    self.scheduler.register_death()
            else:
                self.scheduler.start()

    def _restart_dead_scheduler(self) -> None:
        """A scheduler process that ended (killed, or an error other than Redis's) is started
        again at the worker's next heartbeat, not at rq's maintenance ten minutes later."""
        process = getattr(self.scheduler, "_process", None)
        if process is not None and not process.is_alive():
            logger.warning("the scheduler process %s ended (exit code %s); starting it again",
                           process.pid, process.exitcode)
            self.scheduler.acquire_locks(auto_start=True)

    def heartbeat(self, *args, **kwargs):
        self._restart_dead_scheduler()
        return self._survive("the worker's heartbeat", super().heartbeat, *args, **kwargs)

    @property
    def dequeue_timeout(self) -> int:
        # An idle worker beats once per dequeue timeout (rq: worker_ttl - 15 s, ~7 minutes); the
        # scheduler's worker comes round every SCHEDULER_CHECK_S, so a dead scheduler is noticed.
        timeout = super().dequeue_timeout
        return min(timeout, SCHEDULER_CHECK_S) if getattr(self, "scheduler", None) is not None else timeout

    def check_for_suspension(self, *args, **kwargs):
        return self._survive("the suspension check", super().check_for_suspension, *args, **kwargs)

    def run_maintenance_tasks(self, *args, **kwargs):
        return self._survive("maintenance", super().run_maintenance_tasks, *args, **kwargs)

    def execute_job(self, job, queue):
        # Never run a job twice: after an outage the job is given up (its slot's outcome is in
        # the database; a slot it left pending is handed out again by the driver).
        try:
            return super().execute_job(job, queue)
        except REDIS_DOWN as exc:
            wait_for_redis(self.connection, what=f"the bookkeeping of job {job.id}", error=exc)


class ResilientSimpleWorker(LaneMixin, ResilientMixin, SimpleWorker):
    """rq's SimpleWorker (no fork per job: the engine's choice), surviving Redis outages, with the
    analysis on a lane thread (`LaneMixin`): a long analysis never keeps it from the refills."""


class ResilientWorker(ResilientMixin, Worker):
    """rq's forking Worker, surviving Redis outages."""


HEARTBEAT_EVERY_S = 5.0


def database_step(step, *args, **kwargs):
    """Run one database step on this thread's connection, which it keeps for the next one."""
    try:
        return step(*args, **kwargs)
    except DatabaseError:
        # A connection broken (e.g. by a database restart) is replaced at the next step.
        # (close_old_connections would also close a healthy one at every step when
        # CONN_MAX_AGE is 0: a new PostgreSQL backend per statement.)
        if connection.connection is not None and not connection.is_usable():
            connection.close()
        raise


class LoanedConnections:
    """A few database connections, lent to a worker's slot threads one database step at a time,
    so that the number of connections does not grow with the number of slots.

    The slot thread runs its step itself on the borrowed connection. Handing each step to a pool of
    database threads instead (as before) cost two thread switches per step, 0.9 ms of the workers'
    CPU per call with 38 slot threads per process (benchmarks/engine-results.md, 7 Dec 2026).
    Django keeps a connection per thread: the borrowed one takes the thread's place for the step and
    is taken back after it; it allows sharing between threads, as only one uses it at a time."""

    def __init__(self, count: int, alias: str = DEFAULT_DB_ALIAS):
        self.alias = alias
        self._available = threading.BoundedSemaphore(count)
        self._lock = threading.Lock()
        self._idle: list = []

    def __call__(self, step, *args, **kwargs):
        with self._available:
            with self._lock:
                borrowed = self._idle.pop() if self._idle else None
            if borrowed is None:
                borrowed = connections.create_connection(self.alias)
                borrowed.inc_thread_sharing()
            # A slot thread has no connection of its own (each job's end closes any); should it have
            # one, it is put back after the step rather than dropped unclosed.
            own = [c for c in connections.all(initialized_only=True) if c.alias == self.alias]
            connections[self.alias] = borrowed
            try:
                return database_step(step, *args, **kwargs)
            finally:
                if own:
                    connections[self.alias] = own[0]
                else:
                    del connections[self.alias]
                with self._lock:
                    self._idle.append(borrowed)

    def shutdown(self) -> None:
        """Close the connections not lent out (at the worker's end, after its slot threads)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for borrowed in idle:
            borrowed.close()


SLOT_JOB_PREFIX = "ownwords-slot-"


def slot_job_arguments(job_id: str) -> tuple | None:
    """`jobs.job_slot`'s arguments as a slot job's id says them (`jobs.slot_job_id`): (slot id, run id,
    role), or (slot id,) for an id that names only its slot; None for any other job."""
    if not job_id.startswith(SLOT_JOB_PREFIX):
        return None
    parts = job_id[len(SLOT_JOB_PREFIX):].split("-")
    if not parts[0].isdigit():
        return None
    if len(parts) == 4 and parts[1].isdigit() and parts[2] in Slot.Role.values:
        return int(parts[0]), int(parts[1]), parts[2]
    return (int(parts[0]),)


@dataclass(frozen=True)
class SlotJob:
    """A slot job as a multi-slot worker knows it: its id says everything it needs."""

    id: str
    key: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    func_name: str = SLOT_JOB


class MultiSlotWorker(ResilientSimpleWorker):
    """A SimpleWorker that carries up to `OWNWORDS_WORKER_SLOTS` slot jobs at once (threads).

    Each slot job (`jobs.job_slot`) runs on a thread of its own from dequeue to the end of its
    attempts, and that thread then takes the next slot job itself in the same round trip as its
    bookkeeping (`jobs._after_slot`), while no job of an earlier queue waits (a drive or refill on
    `default` goes to the main thread first, as its dequeue would take it); its database steps run
    on a connection of the slot thread's own, or on one of `OWNWORDS_WORKER_DB_THREADS` connections
    lent to the slot threads (`LoanedConnections`) when there are more slots,
    its requests over the process's one pooled httpx client. The journal's rules are those of
    any worker: the global in-flight cap is Redis's (the limiter), the circuit and every
    reservation the database's, so threads of one process and processes on many machines are
    alike to them. The driver's jobs (drives, refills, delayed looks) run in the main thread, rq's
    way; the analysis queue's jobs on the lane thread (`LaneMixin`; in burst mode, the main thread).

    rq's per-job bookkeeping (started registry, result, the job's hash read and deserialised) is
    skipped for slot jobs: the journal is their record, and a slot job lost with its worker is
    found by the driver (lease expiry, re-dispatch of pending slots), as for any worker that dies.
    Any rq worker can still run the same jobs the ordinary way.
    """

    def __init__(self, *args, **kwargs):
        self._last_beat = self._last_suspension_check = 0.0
        super().__init__(*args, **kwargs)
        # A slot thread woken with an in-flight place (`concurrency.Handing`) waits for the GIL
        # behind threads parsing answers; a short switch interval shortens that wait (settings.py).
        sys.setswitchinterval(settings.OWNWORDS_WORKER_SWITCH_S)
        self.slots = settings.OWNWORDS_WORKER_SLOTS
        self._free = threading.BoundedSemaphore(self.slots)
        self._slot_threads = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="slot")
        db_threads = settings.OWNWORDS_WORKER_DB_THREADS
        # As many connections as slots: each slot thread keeps its own. Fewer: a few connections
        # lent to the slot threads step by step (each thread still runs its own steps).
        self.database = LoanedConnections(db_threads) if db_threads < self.slots else None

    def heartbeat(self, timeout=None, pipeline=None):
        # rq beats after every job and every dequeue (three Redis commands each): with a slot
        # job every few milliseconds, once every few seconds keeps the worker registered
        # (worker_ttl is minutes) at a fraction of the cost. Beats inside a pipeline (a
        # non-slot job's bookkeeping) always go through.
        now = time.monotonic()
        if pipeline is None and timeout is None and now - self._last_beat < HEARTBEAT_EVERY_S:
            return
        self._last_beat = now
        return super().heartbeat(timeout, pipeline)

    def check_for_suspension(self, burst):
        # rq asks Redis before every job; once a second is soon enough to notice `rq suspend`.
        now = time.monotonic()
        if now - self._last_suspension_check >= 1.0:
            self._last_suspension_check = now
            return super().check_for_suspension(burst)

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        # A job is taken off the queue only when a slot is free for it: a job this worker
        # cannot start yet stays where another worker can take it (and is not lost with this one).
        while not self._free.acquire(timeout=HEARTBEAT_EVERY_S):
            if self._stop_requested:
                return None
            self.heartbeat()
        result = None
        try:
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)  # `LaneMixin._dequeue`
        finally:
            if result is None:
                self._free.release()
        return result

    def _dequeued(self, job_id: str, queue):
        # A slot job, whose id says its slot (`jobs.slot_job_id`), is not read from Redis at all:
        # the slot id is all it carries. Anything else is fetched and run as rq would.
        return self._slot_job(job_id) or super()._dequeued(job_id, queue)

    def execute_job(self, job, queue):
        if not isinstance(job, SlotJob) and job.func_name != SLOT_JOB:
            try:
                return super().execute_job(job, queue)  # on the lane (`LaneMixin`), else in the main thread
            finally:
                self._free.release()  # neither takes a slot thread's place
        try:
            self._slot_threads.submit(self._run_slot_job, job, queue)
        except BaseException:
            self._free.release()
            raise

    def _run_slot_job(self, job, queue) -> None:
        # A slot job's thread takes the worker's next slot job itself, in the round trip of its
        # bookkeeping (`jobs._after_slot`), and runs it here: no dequeue in the main thread, no
        # hand-over between threads, per slot. Only while no job of an earlier queue (a drive, a
        # refill) waits, rq's workers are not suspended and no stop was asked for: otherwise the
        # thread is given back and the main thread's dequeue goes on as rq's.
        while job is not None:
            job = self._run_one_slot_job(job, queue)

    def _run_one_slot_job(self, job, queue) -> SlotJob | None:
        forgotten, next_id = False, None
        try:
            # `jobs.job_slot` (SLOT_JOB), found by name as rq does: workers sit below jobs,
            # which names its slot jobs with this module's prefix. A SlotJob's record goes with
            # the job's own bookkeeping (one round trip for both).
            own = {"done_key": job.key} if isinstance(job, SlotJob) else {}
            if own and not self._stop_requested:
                own["next_from"] = tuple((q.name, q.key) for q in self._ordered_queues)
            next_id = import_attribute(job.func_name)(*job.args, db=self.database or database_step, **job.kwargs,
                                                      **own)
            forgotten = bool(own)
        except Exception:
            logger.exception("slot job %s (%s) failed", job.id, job.args)
        finally:
            if self.database is not None:
                connections.close_all()  # nothing should be open on a slot thread; if it is, let it go
            next_job = self._slot_job(next_id) if forgotten else None
            if next_job is None:
                self._free.release()
            if not forgotten:
                self._forget(job, queue)
        return next_job

    def _slot_job(self, job_id) -> SlotJob | None:
        arguments = slot_job_arguments(job_id) if isinstance(job_id, str) else None
        return SlotJob(job_id, self.job_class.key_for(job_id), arguments) if arguments is not None else None

    def _forget(self, job, queue) -> None:
        """rq's record of a slot job: gone once it ran (the journal is the record)."""
        try:
            with self.connection.pipeline() as pipeline:
                pipeline.delete(job.key)
                if len(self.queues) == 1 and not isinstance(job, SlotJob):  # rq moved it to an intermediate list
                    pipeline.lrem(queue.intermediate_queue_key, 1, job.id)
                pipeline.execute()
        except REDIS_DOWN:
            pass  # the job's key expires by itself; nothing reads it

    def teardown(self):
        # A warm shutdown lets the slots in flight finish and record their outcomes.
        self._slot_threads.shutdown(wait=True)
        if self.database is not None:
            self.database.shutdown()
        super().teardown()
