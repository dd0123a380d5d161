"""The in-flight limiter's hand-over between the slot threads of one process, on real Redis.

A place given back while another thread of the same process waits goes to it directly; the cap,
each holder's own cap and the leases stay Redis's:
- many threads of two "processes" (two limiters on one Redis) never hold more than the cap, and
  places do go from thread to thread;
- a place is not handed to a waiter whose own cap the count exceeds: it is given back instead;
- a handed-over place's lease is the new holder's (renewed), not what was left of the old one;
- within `HOLD_S` beyond a lease a hand-over needs no Redis; past it, the token is renewed;
- the journal hands a place on before the receipt is stored only for an answer: a quota answer
  keeps its place until the circuit is open in the database;
- a waiting thread's first attempt is reserved in the same statement as the answer that frees
  its place (one commit for both).
"""
import threading
import time
import uuid

import django_rq
import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from experiments.execution import concurrency
from experiments.execution.concurrency import HandoverLimiter, InflightLimiter
from experiments.execution.driver import run_drive
from experiments.execution.journal import slot_execute
from experiments.execution.policy import limiter_name, model_config
from experiments.models import ModelCall, Run, Slot
from tests.engine_helpers import QUESTION_ONLY, Sleeps, build_cohort, make_run, openai_model
from tests.llm_fake_server import Reply, answer, openai_insufficient_quota


@pytest.fixture
def redis_connection():
    conn = django_rq.get_connection("default")
    try:
        conn.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"Redis is not reachable at {settings.REDIS_URL}")
    return conn


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


def test_a_place_is_counted_in_redis_through_every_holders_lease_and_renewed_only_past_the_hold(
        redis_connection, monkeypatch):
    """Redis counts a place a hand-over limiter took for lease + HOLD_S: a hand-over within that
    margin touches no Redis (the token's expiry unchanged), one past it renews the token for the
    new holder's lease + HOLD_S; a holder that dies holding it loses it at that expiry."""
    monkeypatch.setattr(concurrency, "HOLD_S", 1.0)
    name = f"test:{uuid.uuid4().hex}"
    key = concurrency.KEY_PREFIX + name

    def counted_for_s(token):  # seconds Redis still counts the token, by Redis's clock
        seconds, micros = redis_connection.time()
        return redis_connection.zscore(key, token) - (seconds + micros / 1e6)

    here = CountingHandover(InflightLimiter(redis_connection))
    place = here.acquire(name, 1, lease_s=0.5)
    assert 1.3 < counted_for_s(place.token) <= 1.5
    expiry = redis_connection.zscore(key, place.token)

    handed = here._take_over(place, 1, 0.5)  # within the hold: this process only
    assert handed is not None and handed.token == place.token
    assert redis_connection.zscore(key, place.token) == expiry
    assert handed.expires >= place.expires and handed.counted_until == place.counted_until

    time.sleep(1.1)  # now + lease is past what Redis counts: the hand-over asks Redis
    renewed = here._take_over(handed, 1, 0.5)
    assert renewed is not None and renewed.token == place.token
    assert 1.3 < counted_for_s(place.token) <= 1.5 and renewed.counted_until > handed.counted_until + 1.0
    assert here.kept == 2 and here.in_flight(name) == 1

    time.sleep(0.6)  # past the new holder's lease, within the hold: still counted
    assert here.in_flight(name) == 1
    time.sleep(1.0)  # the holder "died" without giving it back: Redis dropped it
    assert here.in_flight(name) == 0


# --- the journal's side: who may take a place before the receipt is stored ----------------------


class Watching(HandoverLimiter):
    """Notes each hand-over and release with how many receipts of the run were stored then."""

    def __init__(self, limiter, run):
        super().__init__(limiter)
        self.run, self.events = run, []

    def _stored(self) -> int:
        return ModelCall.objects.filter(slot__run=self.run).exclude(outcome="").count()

    def pass_on(self, place):
        handed = super().pass_on(place)
        if threading.current_thread() is threading.main_thread():
            self.events.append(("handed" if handed else "kept", self._stored()))
        return handed

    def release(self, place):
        if threading.current_thread() is threading.main_thread():
            self.events.append(("released", self._stored()))
        super().release(place)


@pytest.mark.parametrize("quota", [False, True], ids=["answer", "quota answer"])
def test_an_answer_hands_its_place_on_before_its_receipt_a_quota_answer_only_after(
        project, server, redis_connection, quota):
    run = make_run(project, build_cohort(project, sessions=1, name="handover"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), concurrency={"openai": 1})
    [slot_id] = run_drive(run.pk).slot_ids
    limiter = Watching(InflightLimiter(redis_connection), run)
    name = limiter_name(model_config(run.protocol.generator))
    got = []
    waiters = [threading.Thread(target=lambda: got.append(limiter.acquire(name, 1, lease_s=10))) for _ in range(2)]

    def reply(request):
        # Two threads of this "process" wait for the one place: one asks Redis, one waits here.
        for waiter in waiters:
            waiter.start()
            wait_until(lambda: waiter.is_alive() and (name in limiter._asking))
        wait_until(lambda: len(limiter._waiting.get(name, ())) == 1)
        return openai_insufficient_quota() if quota else answer(request, "Handed on.")

    server.script(Reply(status=429, body=reply) if quota else Reply(body=reply))
    with httpx.Client(trust_env=False) as client:
        slot_execute(slot_id, limiter=limiter, client=client, worker="test", sleep=Sleeps())
    if quota:
        # The circuit must be open before anyone else may send: the place waits for the receipt
        # (and is then handed to the waiting thread by the release itself).
        assert limiter.events == [("released", 1), ("handed", 1)]
        assert Run.objects.get(pk=run.pk).circuit_open
    else:
        assert limiter.events == [("handed", 0)]  # taken over before the receipt was stored
        assert Slot.objects.get(pk=slot_id).status == Slot.Status.OK
    wait_until(lambda: len(got) == 1)
    assert limiter.in_flight(name) == 1  # one place, now the waiting thread's
    limiter.release(got[0])
    wait_until(lambda: len(got) == 2)
    limiter.release(got[1])
    for waiter in waiters:
        waiter.join(timeout=10)
    assert limiter.in_flight(name) == 0


def _three_threads_one_place(run, redis_connection, server):
    """One place (cap 1), three slot threads of one "process": A sends; B asks Redis; C waits in
    the process (with its ticket, when tickets are on). A's answer frees the place for C; B gets
    it through Redis after C's answer. Returns the slots (A, B, C); per slot with a call while C's
    request was in flight, (the call row's xmin, reserved_at, finished_at); and when the server
    answered A."""
    first, asking, waiting = run_drive(run.pk).slot_ids
    limiter = HandoverLimiter(InflightLimiter(redis_connection))
    name = limiter_name(model_config(run.protocol.generator))
    errors = []

    def execute(slot_id):
        try:
            with httpx.Client(trust_env=False) as client:
                slot_execute(slot_id, limiter=limiter, client=client, worker=f"test-{slot_id}", sleep=Sleeps())
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = {slot_id: threading.Thread(target=execute, args=(slot_id,)) for slot_id in (first, asking, waiting)}
    moments = {}

    def reply(request):
        threads[asking].start()
        wait_until(lambda: name in limiter._asking)  # B asks Redis (the cap is full)
        threads[waiting].start()
        wait_until(lambda: len(limiter._waiting.get(name, ())) == 1)  # C waits here
        moments["A answered"] = timezone.now()
        return answer(request, "The first answer.")

    reservations = {}

    def reply_to_c(request):
        # C's request, in flight: its call row is as its reservation left it (A's row as A's receipt).
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT slot_id, xmin::text, reserved_at, finished_at FROM {ModelCall._meta.db_table} "
                               "WHERE run_id = %s", [run.pk])
                reservations.update({slot_id: rest for slot_id, *rest in cursor.fetchall()})
        finally:
            connection.close()
        return answer(request, "The second answer.")

    server.script(Reply(body=reply), Reply(body=reply_to_c))
    threads[first].start()
    for thread in threads.values():
        thread.join(timeout=30)
    assert not errors and not any(thread.is_alive() for thread in threads.values()), errors
    assert set(Slot.objects.filter(run=run).values_list("status", flat=True)) == {Slot.Status.OK}
    assert ModelCall.objects.filter(run=run).count() == 3  # one call each
    assert set(reservations) == {first, waiting}  # B had not reserved yet: the place was C's
    # B reserved on its own, after C's answer gave the place back through Redis.
    b_call = ModelCall.objects.get(slot_id=asking)
    assert b_call.reserved_at > ModelCall.objects.get(slot_id=waiting).finished_at
    assert limiter.in_flight(name) == 0
    return (first, asking, waiting), reservations, moments["A answered"]


def test_a_waiting_threads_first_attempt_is_reserved_in_the_statement_of_the_answer_that_frees_its_place(
        transactional_db, project, server, redis_connection, settings):
    """With OWNWORDS_RESERVE_WITH_RECEIPT on, C's first attempt is reserved in the same statement
    (one transaction) as A's receipt; B reserves on its own. Each slot gets one call and one answer."""
    settings.OWNWORDS_RESERVE_WITH_RECEIPT = True
    run = make_run(project, build_cohort(project, sessions=3, name="ticket"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), concurrency={"openai": 1})
    (first, _, waiting), reservations, _ = _three_threads_one_place(run, redis_connection, server)
    # C's reservation and A's receipt: one transaction (the same xmin), one time.
    assert reservations[waiting][0] == reservations[first][0]
    assert reservations[waiting][1] == reservations[first][2]


def test_a_waiting_thread_handed_a_place_reserves_its_own_attempt_by_default(
        transactional_db, project, server, redis_connection, settings):
    """The default (OWNWORDS_RESERVE_WITH_RECEIPT off): C is handed A's place with A's answer and
    reserves its own first attempt, a transaction of its own, not A's receipt's; still one call
    and one answer per slot, and the cap of one place is never passed (B only after C)."""
    assert settings.OWNWORDS_RESERVE_WITH_RECEIPT is False
    run = make_run(project, build_cohort(project, sessions=3, name="own"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), concurrency={"openai": 1})
    (first, _, waiting), reservations, a_answered = _three_threads_one_place(run, redis_connection, server)
    assert reservations[waiting][0] != reservations[first][0]  # its own transaction
    assert reservations[waiting][1] >= a_answered  # reserved only once A's place was free
