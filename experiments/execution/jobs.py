"""RQ jobs: entry points that take ids and call one engine function (STYLE: HackSoft).

Queues: `memories`, `generation`, `decisions`, `judging` carry one job per slot of that
phase; `analysis` the statistics; `default` the driver that moves a run from phase to
phase, and the refills that put a phase's next slots on the queue (`execution.hand_out`: a
window at a time, refilled when about half is left). Any number of `rqworker` processes on any number of machines may serve them; one
of them must run with `--with-scheduler` for the driver's delayed looks (`enqueue_in`). A
`MultiSlotWorker` and a `ResilientSimpleWorker` run the `analysis` queue's jobs on a lane thread
(`worker_lane.LaneMixin`), so a long analysis never keeps the main thread from another run's refills.

The driver runs when a run is enqueued, when a phase's last open slot settles, and on a
delayed look while a phase has open slots (a worker that died mid-request leaves no word:
only a look after its lease ran out counts the slot unknown). It does not run after every
slot: that would put the run's row lock on every call's path.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid
import zlib
from datetime import timedelta
from typing import NamedTuple

import django_rq
import httpx
from django.conf import settings
from rq import Queue
from rq.suspension import WORKERS_SUSPENDED

from experiments.core.llm.transport import StdlibTransport
from experiments.execution.concurrency import REDIS_DOWN, HandoverLimiter, InflightLimiter, LuaScript, wait_for_redis
from experiments.execution.driver import Step, run_analyze, run_drive, run_plan_part, run_refill
from experiments.execution.journal import in_this_thread, phase_open, slot_execute
from experiments.execution.policy import sending_role
from experiments.execution.workers import SLOT_JOB_PREFIX

# The command that serves every queue; pages and commands print it when no worker answers.
WORKER_COMMAND = ("manage.py rqworker --with-scheduler --worker-class experiments.execution.workers.ResilientSimpleWorker "
                  "default memories generation decisions judging analysis")
SLOT_QUEUES = ("memories", "generation", "decisions", "judging")
# With the slot queues empty, a pending slot handed out this long ago lost its job: hand it out again.
REDISPATCH_AFTER_S = 60.0
RECHECK_KEY = "ownwords:recheck:{run_id}"
SLOT_RESULT_TTL_S = 60
QUEUED_KEY = "ownwords:queued:{run_id}:{phase}"  # slot jobs of the run and phase not yet finished
# When QUEUED_KEY falls to this value, the next slots of the phase are handed out (`job_refill`);
# set by a hand-out that left slots to hand out (`Step.refill_after`), gone after one that did not.
REFILL_KEY = "ownwords:refill:{run_id}:{phase}"
DISPATCH_CHUNK = 64
# The rest of a phase planned in parts: off a multi-slot worker's main thread (see `job_drive`).
PLAN_REST_QUEUE = "analysis"
PLAN_REST_TIMEOUT_S = 6 * 3600  # a million-slot phase plans in minutes; rq's default is 180 s
KEY_TTL_S = 7 * 24 * 3600

_http_client: httpx.Client | None = None
_limiter: HandoverLimiter | None = None
_lock = threading.Lock()  # a multi-slot worker's first slots ask for both at once


def http_client() -> httpx.Client:
    """One pooled client per worker process (connections are reused across jobs)."""
    global _http_client
    with _lock:
        if _http_client is None:
            # A multi-slot worker's slots share it: room for every slot's connection.
            size = max(64, settings.OWNWORDS_WORKER_SLOTS)
            # Over `StdlibTransport`: httpx's own transport costs twice its CPU per request.
            _http_client = httpx.Client(transport=StdlibTransport(max_idle_per_origin=size))
    return _http_client


def limiter() -> HandoverLimiter:
    """The process's limiter (a place freed by one slot thread goes straight to another that
    waits); its Redis client (one connection pool) serves the slot jobs' other Redis steps too
    (django_rq.get_connection opens a new pool, and so a new connection, per call)."""
    global _limiter
    with _lock:
        if _limiter is None:
            _limiter = HandoverLimiter(InflightLimiter(django_rq.get_connection("default")))
    return _limiter


def _redis():
    """The process's Redis client (the limiter's pool): a new connection per look at a queue
    would cost a connect and a handshake, several round trips, at every phase boundary."""
    return limiter().client


def _queue(name: str) -> Queue:
    return django_rq.get_queue(name, connection=_redis())


def worker_name() -> str:
    """Host, process and (in a multi-slot worker) slot thread: who reserved an attempt."""
    thread = threading.current_thread()
    where = f"{socket.gethostname()}:{os.getpid()}"
    return where if thread is threading.main_thread() else f"{where}:{thread.name}"


def dispatch(run_id: int, step: Step) -> None:
    """Put the driver's next step on the queues."""
    if step.analyze:
        _queue("analysis").enqueue(job_analyze, run_id)
    if step.slot_ids:
        queue = _queue(step.phase)
        connection = _redis()
        key = QUEUED_KEY.format(run_id=run_id, phase=step.phase)
        refill_key = REFILL_KEY.format(run_id=run_id, phase=step.phase)
        connection.eval(_COUNT_HANDED_OUT, 2, key, refill_key, len(step.slot_ids),
                        "" if step.refill_after is None else step.refill_after, KEY_TTL_S)
        # In chunks, each its own transaction: the first requests of a phase start while the rest
        # are still being queued.
        record, role = None, sending_role(step.phase)
        for start in range(0, len(step.slot_ids), DISPATCH_CHUNK):
            record = enqueue_slot_jobs(queue, step.slot_ids[start:start + DISPATCH_CHUNK], record,
                                       run_id=run_id, role=role)
    if step.recheck_in_s is not None:
        schedule_recheck(run_id, step.recheck_in_s)


# The phase's count of unfinished slot jobs goes up by the slots handed out, and the refill mark is
# set with it, atomically, `refill_after` below the new count: a refill triggers when a finished
# job takes the count down to the mark (`_after_slot`), and on its way down the count passes every
# value below where it stands. Relative to the count, not an absolute level: a count left too high
# by lost jobs still reaches a mark set below it.
_COUNT_HANDED_OUT = """
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if ARGV[2] == '' then
    redis.call('DEL', KEYS[2])
else
    redis.call('SET', KEYS[2], math.max(count - tonumber(ARGV[2]), 0), 'EX', ARGV[3])
end
return count
"""


class SlotJobRecord(NamedTuple):
    """The hash rq wrote for a slot job, but its call: what `enqueue_slot_jobs` writes for the others."""

    func_name: str
    fields: dict


def enqueue_slot_jobs(queue: Queue, slot_ids: list[int], record: SlotJobRecord | None = None, *,
                      run_id: int | None = None, role: str | None = None) -> SlotJobRecord:
    """rq's `enqueue_many` of these slots' jobs, written as rq writes them, for a fraction of its CPU.

    rq builds a Job per job and writes it with two HSETs and an RPUSH of its own: 81 µs of CPU per
    job on this project's machines (23 µs written as here), on the path of every slot, for a record that a
    multi-slot worker never reads (the job's id says its slot). `record`: rq's hash of an earlier
    slot job (None: the first of these goes through rq, and its record is returned for the next
    chunks). Each job's hash is that record with its own call (rq's `data`, the pickled function
    and arguments, compressed) and description: an ordinary rq worker reads and runs it as one of
    rq's own (tests/test_engine_queue.py). The journal is the record; rq keeps a finished job a
    minute (deleting it at once, result_ttl=0, costs the worker more than letting it expire).
    `run_id`, `role`: the run and role of every one of these slots, named in each job (`slot_job_id`)."""
    named = (run_id, role) if run_id is not None and role is not None else ()
    if record is None:
        [job] = queue.enqueue_many([Queue.prepare_data(job_slot, (slot_ids[0], *named), result_ttl=SLOT_RESULT_TTL_S,
                                                       job_id=slot_job_id(slot_ids[0], *named))])
        record = SlotJobRecord(job.func_name, {name: value for name, value in job.to_dict().items()
                                               if name not in ("data", "description")})
        slot_ids = slot_ids[1:]
        if not slot_ids:
            return record
    job_ids = [slot_job_id(slot_id, *named) for slot_id in slot_ids]
    arguments = "".join(f", {value!r}" for value in named)
    with queue.connection.pipeline() as pipe:  # MULTI/EXEC, as rq's: every job of the chunk or none
        for slot_id, job_id in zip(slot_ids, job_ids):
            call = zlib.compress(queue.serializer.dumps((record.func_name, None, (slot_id, *named), {})))
            pipe.hset(queue.job_class.key_for(job_id),
                      mapping={**record.fields, "data": call,
                               "description": f"{record.func_name}({slot_id!r}{arguments})"})
        pipe.rpush(queue.key, *job_ids)
        pipe.execute()
    return record


def slot_job_id(slot_id: int, run_id: int | None = None, role: str | None = None) -> str:
    """A slot job's id says its slot, and its run and role when given, so a multi-slot worker need not
    read the job from Redis (`workers.slot_job_arguments`), nor the slot before its reservation
    (`journal.slot_execute`)."""
    named = f"{run_id}-{role}-" if run_id is not None and role is not None else ""
    return f"{SLOT_JOB_PREFIX}{slot_id}-{named}{uuid.uuid4().hex[:12]}"


def schedule_recheck(run_id: int, delay_s: float) -> bool:
    """A delayed look at the run, unless one is due already no later than this one would be.

    Keeps one look pending per run (a Redis key holds its due time) instead of one per
    driver call. A look whose time passed long ago without running (no scheduler then)
    does not count. Returns whether a look was scheduled.
    """
    connection = _redis()
    key = RECHECK_KEY.format(run_id=run_id)
    now = time.time()
    due = now + delay_s
    pending = connection.get(key)
    if pending is not None and now - 30 <= float(pending) <= due + 0.5:
        return False
    connection.set(key, repr(due), ex=int(delay_s) + 300)
    _queue("default").enqueue_in(
        timedelta(seconds=delay_s), job_recheck, run_id, repr(due),
        job_id=f"ownwords-recheck-{run_id}-{uuid.uuid4().hex[:12]}",
    )
    return True


def _slot_queues_idle() -> bool:
    with _redis().pipeline(transaction=False) as pipeline:  # one round trip
        for name in SLOT_QUEUES:
            pipeline.llen(Queue.redis_queue_namespace_prefix + name)
        return not any(pipeline.execute())


def job_drive(run_id: int) -> None:
    redispatch = REDISPATCH_AFTER_S if _slot_queues_idle() else None
    step = run_drive(run_id, redispatch_after_s=redispatch, windowed=True)
    dispatch(run_id, step)
    if step.plan_rest:
        # The phase's first calls are on their way; the rest is planned by a job of its own on the
        # `analysis` queue, which the engine's workers run on their lane thread (`worker_lane.LANE_QUEUES`):
        # planned here, in the main thread, it kept that worker from dequeuing the very calls it
        # had just handed out (a million-slot phase: minutes before the first request).
        _queue(PLAN_REST_QUEUE).enqueue(job_plan_rest, run_id, not step.seal_checked, step.plan_from,
                                        job_timeout=PLAN_REST_TIMEOUT_S)


def job_plan_rest(run_id: int, check_seal: bool, start: int | None = None) -> None:
    """Plan the rest of a phase planned in parts, a part at a time, each handed out as soon as it
    is planned (`driver.run_plan_part`; the seal checked before the first unless the drive did)."""
    step = Step(plan_rest=True, plan_from=start)
    while step.plan_rest:
        step = run_plan_part(run_id, check_seal=check_seal, windowed=True, start=step.plan_from)
        check_seal = False
        dispatch(run_id, step)


def job_refill(run_id: int, phase: str) -> None:
    """The phase's next window of slots (its unfinished slot jobs fell to the refill mark)."""
    dispatch(run_id, run_refill(run_id, phase))


def job_recheck(run_id: int, due: str) -> None:
    connection = _redis()
    key = RECHECK_KEY.format(run_id=run_id)
    if (connection.get(key) or b"").decode() == due:
        connection.delete(key)  # this look is running: the next one may be scheduled
    job_drive(run_id)


def job_slot(slot_id: int, run_id: int | None = None, role: str | None = None, db=in_this_thread,
             done_key: str | None = None, next_from: tuple[tuple[str, str], ...] | None = None) -> str | None:
    """One slot's attempts; `run_id`, `role`: what its job says of it (`slot_job_id`; a job enqueued
    without them reads them with the slot); `db` runs its database steps (a multi-slot worker's loans).
    `done_key`: rq's record of this job, deleted with the bookkeeping below (a multi-slot
    worker keeps no other record of a slot job). `next_from`: the worker's queues in its order, as
    (name, Redis key) pairs, from which the same round trip takes the next slot job for this thread
    (`_after_slot`: its id is returned; None when none was taken)."""
    slot = slot_execute(slot_id, limiter=limiter(), client=http_client(), worker=worker_name(), db=db,
                        run_id=run_id, role=role)
    # The slot's outcome is recorded. What follows tells the driver, through Redis: if Redis is
    # away, wait for it (this worker can take no job without it anyway) and tell it then. A
    # count decremented twice only makes a later job look once more.
    while True:
        try:
            return db(_after_slot, slot, done_key, next_from)
        except REDIS_DOWN as exc:
            wait_for_redis(_redis(), what=f"the bookkeeping after slot {slot_id}", error=exc)


# KEYS: the phase's count, its refill mark, rq's record of the finished job, rq's suspension flag,
# then the worker's queues in its order; ARGV: delete the record (1/0), take a next job (1/0), the
# slot jobs' id prefix, then for each queue whether it carries slot jobs (1/0). Returns the count
# after the decrement, the refill mark, and the next slot job's id and queue (nil: none taken).
# A next job is taken only from the first queue, in the worker's order, that holds any, only when
# that queue carries slot jobs and the job at its head is one, and never while rq's workers are
# suspended: a drive, a refill or a delayed look waiting on an earlier queue (the driver's
# `default`) goes to the main thread before any further slot job, as the worker's dequeue would
# take it. A reply lost with its connection loses the job popped, as a BLPOP's would: the
# driver hands a slot out again when its job is lost (`REDISPATCH_AFTER_S`).
_AFTER_SLOT = """
local left = redis.call('DECR', KEYS[1])
local refill_at = redis.call('GET', KEYS[2])
if ARGV[1] == '1' then redis.call('DEL', KEYS[3]) end
local next_job, next_queue = false, false
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[4]) == 0 then
  for i = 5, #KEYS do
    local head = redis.call('LINDEX', KEYS[i], 0)
    if head then
      if ARGV[i - 1] == '1' and string.sub(head, 1, #ARGV[3]) == ARGV[3] then
        next_job = redis.call('LPOP', KEYS[i])
        next_queue = KEYS[i]
      end
      break
    end
  end
end
return {left, refill_at, next_job, next_queue}
"""
_after_slot_script: LuaScript | None = None


def _after_slot(slot, done_key: str | None = None,
                next_from: tuple[tuple[str, str], ...] | None = None) -> str | None:
    """The phase's count of unfinished slot jobs down by one, rq's record of this one deleted, and
    (`next_from`) the next slot job taken for this thread: one round trip. Returns that job's id."""
    global _after_slot_script
    if _after_slot_script is None:
        _after_slot_script = LuaScript(_redis(), _AFTER_SLOT)
    keys = [QUEUED_KEY.format(run_id=slot.run_id, phase=slot.phase),
            REFILL_KEY.format(run_id=slot.run_id, phase=slot.phase), done_key or "", WORKERS_SUSPENDED]
    args = ["1" if done_key is not None else "0", "1" if next_from is not None else "0", SLOT_JOB_PREFIX]
    for name, key in next_from or ():
        keys.append(key)
        args.append("1" if name in SLOT_QUEUES else "0")
    left, refill_at, next_job, next_queue = _after_slot_script(keys, args)
    try:
        # Only the phase's last jobs look whether it is settled: while others of this run and phase
        # are still queued or running, one of them will. (A lost job keeps the count above zero;
        # the delayed look drives then. An expired count reads below zero: every job looks.)
        if refill_at is not None and left == int(refill_at):
            # The count passes each value once on its way down: one refill per time the window runs low.
            _queue("default").enqueue(job_refill, slot.run_id, slot.phase)
        if left <= 0 and not phase_open(slot.run_id, slot.phase):  # the next phase may start
            job_drive(slot.run_id)
    except BaseException:
        if next_job is not None:  # this thread will not run it: back to the head of its queue
            _redis().lpush(next_queue, next_job)
        raise
    return next_job.decode() if isinstance(next_job, bytes) else next_job


def job_analyze(run_id: int) -> None:
    run_analyze(run_id)
    job_drive(run_id)


def run_enqueue(run_id: int) -> None:
    """Start (or continue) a run through the queue."""
    django_rq.get_queue("default").enqueue(job_drive, run_id)
