"""A multi-slot worker's slot thread takes its next slot job itself, in its bookkeeping's round trip.

`jobs._after_slot` (one Lua script on the real Redis): the phase's count down by one, rq's record of
the finished job deleted, and, when asked (`next_from`: the worker's queues in its order), the
next slot job popped for the same thread — only from the first queue that holds any job, only a
slot job, never while rq's workers are suspended. A drive or refill waiting on `default` stays
there for the main thread, so slot threads feeding themselves cannot starve it. A next job taken
whose thread then fails goes back to the head of its queue.
"""
from types import SimpleNamespace

import pytest
from rq import Queue
from rq.suspension import resume, suspend

from experiments.execution import jobs
from experiments.execution.jobs import QUEUED_KEY, REFILL_KEY, _after_slot, slot_job_id
from tests.test_engine_queue import redis_connection  # noqa: F401 - fixture

ORDER = ("default", "memories", "generation", "decisions", "judging", "analysis")
SLOT = SimpleNamespace(run_id=987654, phase="generation")


@pytest.fixture
def queues(redis_connection):  # noqa: F811 - the fixture
    redis_connection.flushdb()
    keys = {name: Queue.redis_queue_namespace_prefix + name for name in ORDER}
    # The phase's count stays high: no call here drives the run (its run does not exist).
    redis_connection.set(QUEUED_KEY.format(run_id=SLOT.run_id, phase=SLOT.phase), 100)
    yield keys
    resume(redis_connection)
    redis_connection.flushdb()


def worker_order(keys):
    return tuple((name, keys[name]) for name in ORDER)


def test_the_next_slot_job_is_taken_with_the_bookkeeping(redis_connection, queues):  # noqa: F811
    first, second = slot_job_id(11), slot_job_id(12)
    redis_connection.rpush(queues["generation"], first, second)
    redis_connection.rpush(queues["judging"], slot_job_id(13))
    done = "rq:job:" + slot_job_id(10)
    redis_connection.set(done, "x")

    taken = _after_slot(SLOT, done, worker_order(queues))

    assert taken == first  # the head of the first queue, in the worker's order, that holds a job
    assert [x.decode() for x in redis_connection.lrange(queues["generation"], 0, -1)] == [second]
    assert redis_connection.llen(queues["judging"]) == 1
    assert not redis_connection.exists(done)
    assert int(redis_connection.get(QUEUED_KEY.format(run_id=SLOT.run_id, phase=SLOT.phase))) == 99


def test_without_the_workers_queues_nothing_is_taken(redis_connection, queues):  # noqa: F811
    redis_connection.rpush(queues["generation"], slot_job_id(11))
    assert _after_slot(SLOT) is None
    assert redis_connection.llen(queues["generation"]) == 1
    assert int(redis_connection.get(QUEUED_KEY.format(run_id=SLOT.run_id, phase=SLOT.phase))) == 99


def test_a_drive_or_refill_waiting_on_default_goes_to_the_main_thread_first(redis_connection, queues):  # noqa: F811
    redis_connection.rpush(queues["default"], "some-refill-job")
    redis_connection.rpush(queues["generation"], slot_job_id(11))
    assert _after_slot(SLOT, None, worker_order(queues)) is None
    assert redis_connection.llen(queues["default"]) == 1 and redis_connection.llen(queues["generation"]) == 1


def test_a_job_that_is_not_a_slot_job_is_left_where_it_is(redis_connection, queues):  # noqa: F811
    redis_connection.rpush(queues["generation"], "not-a-slot-job", slot_job_id(11))
    assert _after_slot(SLOT, None, worker_order(queues)) is None
    assert redis_connection.llen(queues["generation"]) == 2
    # Nor a slot job on a queue that carries none (the analysis lane's queue).
    redis_connection.delete(queues["generation"])
    redis_connection.rpush(queues["analysis"], slot_job_id(12))
    assert _after_slot(SLOT, None, worker_order(queues)) is None
    assert redis_connection.llen(queues["analysis"]) == 1


def test_nothing_is_taken_while_the_workers_are_suspended(redis_connection, queues):  # noqa: F811
    redis_connection.rpush(queues["generation"], slot_job_id(11))
    suspend(redis_connection)
    assert _after_slot(SLOT, None, worker_order(queues)) is None
    resume(redis_connection)
    assert _after_slot(SLOT, None, worker_order(queues)) is not None


def test_the_refill_is_queued_and_a_taken_job_given_back_when_the_rest_fails(redis_connection, queues,  # noqa: F811
                                                                             monkeypatch):
    count = QUEUED_KEY.format(run_id=SLOT.run_id, phase=SLOT.phase)
    redis_connection.set(REFILL_KEY.format(run_id=SLOT.run_id, phase=SLOT.phase), 99)
    first = slot_job_id(11)
    redis_connection.rpush(queues["generation"], first, slot_job_id(12))

    def enqueue_fails(*args, **kwargs):
        raise RuntimeError("the refill could not be queued")

    monkeypatch.setattr(Queue, "enqueue", enqueue_fails)
    with pytest.raises(RuntimeError):
        _after_slot(SLOT, None, worker_order(queues))
    # The thread runs no job after a failure: the one it took is at the head of its queue again.
    assert redis_connection.lindex(queues["generation"], 0).decode() == first
    assert redis_connection.llen(queues["generation"]) == 2
    monkeypatch.undo()

    redis_connection.set(count, 100)
    assert _after_slot(SLOT, None, worker_order(queues)) == first  # the count reaches the mark: a refill
    assert jobs.job_refill.__name__ in redis_connection.hget(
        "rq:job:" + redis_connection.lindex(queues["default"], 0).decode(), "description").decode()
