"""The in-flight limiter's hand-over between the slot threads of one process (issue 13), on real Redis.

A place given back while another thread of the same process waits goes to it directly; the cap,
each holder's own cap and the leases stay Redis's:
- many threads of two "processes" (two limiters on one Redis) never hold more than the cap, and
  places do go from thread to thread;
- a place is not handed to a waiter whose own cap the count exceeds: it is given back instead;
- a handed-over place's lease is the new holder's (renewed), not what was left of the old one.
"""
import threading
import time
import uuid

from experiments.execution.concurrency import HandoverLimiter, InflightLimiter
from tests.test_engine_queue import redis_connection  # noqa: F401


class CountingHandover(HandoverLimiter):
    """Counts the places kept through a hand-over."""

    def __init__(self, limiter):
        super().__init__(limiter)
        self.kept = 0

    def _take_over(self, place, cap, lease_s):
        taken = super()._take_over(place, cap, lease_s)
        self.kept += taken is not None
        return taken


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_threads_of_two_processes_never_pass_the_cap_and_places_go_from_thread_to_thread(redis_connection):
    name, cap = f"test:{uuid.uuid4().hex}", 3
    processes = [CountingHandover(InflightLimiter(redis_connection)) for _ in range(2)]
    lock, inside, most, entries, errors = threading.Lock(), [0], [0], [0], []

    def hold_a_few_times(limiter):
        try:
            for _ in range(6):
                with limiter.hold(name, cap, lease_s=10):
                    with lock:
                        inside[0] += 1
                        entries[0] += 1
                        most[0] = max(most[0], inside[0])
                    assert limiter.in_flight(name) <= cap
                    time.sleep(0.02)
                    with lock:
                        inside[0] -= 1
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hold_a_few_times, args=(processes[n % 2],)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert entries[0] == 60
    assert most[0] == cap
    assert sum(p.kept for p in processes) > 0  # hand-overs happened
    assert processes[0].in_flight(name) == 0


def test_a_place_is_not_handed_to_a_waiter_whose_cap_the_count_exceeds(redis_connection):
    name = f"test:{uuid.uuid4().hex}"
    elsewhere = InflightLimiter(redis_connection)  # another process: two places under a cap of 3
    others = [elsewhere.acquire(name, 3, lease_s=10) for _ in range(2)]
    here = CountingHandover(InflightLimiter(redis_connection))
    mine = here.acquire(name, 3, lease_s=10)  # the count is 3 now
    got = {}

    def wait_for(label, cap):
        got[label] = here.acquire(name, cap, lease_s=10)

    asking = threading.Thread(target=wait_for, args=("cap 3", 3))
    asking.start()
    wait_until(lambda: name in here._asking)
    small = threading.Thread(target=wait_for, args=("cap 2", 2))
    small.start()
    wait_until(lambda: len(here._waiting.get(name, ())) == 1)

    here.release(mine)  # offered to the cap-2 waiter first: 3 in flight > 2, so given back
    asking.join(timeout=10)
    assert "cap 3" in got and "cap 2" not in got
    assert here.in_flight(name) == 3 and here.kept == 0
    for place in others:
        elsewhere.release(place)
    small.join(timeout=10)
    assert "cap 2" in got and here.in_flight(name) == 2
    here.release(got["cap 3"])
    here.release(got["cap 2"])
    assert here.in_flight(name) == 0


def test_a_handed_over_place_carries_the_new_holders_lease(redis_connection):
    name = f"test:{uuid.uuid4().hex}"
    here = CountingHandover(InflightLimiter(redis_connection))
    first = here.acquire(name, 2, lease_s=0.5)
    blocker = InflightLimiter(redis_connection).acquire(name, 2, lease_s=10)  # the cap is full
    got = {}
    threads = [threading.Thread(target=lambda label=label: got.__setitem__(label, here.acquire(name, 2, lease_s=10)))
               for label in ("asking", "waiting")]
    threads[0].start()
    wait_until(lambda: name in here._asking)
    threads[1].start()
    wait_until(lambda: len(here._waiting.get(name, ())) == 1)
    here.release(first)
    threads[1].join(timeout=10)
    assert "waiting" in got and here.kept == 1
    time.sleep(0.8)  # past the first holder's lease: the token is the new holder's for 10 s
    assert here.in_flight(name) == 2 and "asking" not in got
    here.release(got["waiting"])
    threads[0].join(timeout=10)
    assert "asking" in got
    for place in (got["asking"], blocker):
        InflightLimiter(redis_connection).release(place)
    assert here.in_flight(name) == 0
