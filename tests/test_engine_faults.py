"""The engine under faults (worker loss, outages and the quota circuit's race), with real parts.

PostgreSQL, real Redis, real HTTP to the local LLM server (tests/llm_fake_server.py), and a
TCP proxy of this file's own between the engine and Redis, which a test cuts (every open
connection closed, new ones refused) and restores.

- An answer that arrived is recorded first: Redis cut after the response arrives and before
  the in-flight place is given back → the receipt is committed anyway, the place is given back
  once Redis returns, and the worker (a thread here; an rqworker process in the slow test)
  carries on.
- No slot in flight forever: a worker that died during a recovery's cooldown had no request
  unanswered, so its slot goes back to pending and its recovery is sent once, by another worker.
  (A worker SIGKILLed mid-request leaves an unknown slot never re-sent: tests/test_engine_queue.py.)
- The circuit race: with many workers sending, one quota answer → no attempt is reserved after
  the circuit opened; the service receives exactly the attempts in the journal.
"""
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from experiments.core.llm.wire import Outcome, OutcomeKind
from experiments.execution.concurrency import InflightLimiter, NoLimiter
from experiments.execution.driver import run_drive
from experiments.execution.jobs import run_enqueue
from experiments.execution.journal import _record, _reserve, slot_execute
from experiments.execution.policy import LEASE_GRACE_S, Decision, limiter_name, model_config
from experiments.models import ModelCall, Project, Run, Slot
from tests.engine_helpers import (
    QUESTION_ONLY, TIMEOUT_S, Roles, Sleeps, build_cohort, journal, make_run, openai_model, request_bytes,
)
from tests.llm_fake_server import Reply, answer, openai_insufficient_quota, openai_rate_limited, running_fake_llm
from tests.test_engine_queue import QUEUES, REPO, Workers, live_database, redis_connection, wait_for  # noqa: F401

FIRST, RECOVERY = ModelCall.Basis.FIRST, ModelCall.Basis.RECOVERY
# How long the slow test keeps Redis away; ENGINE_FAULTS_OUTAGE_S=32 shows the ≥ 30 s of the issue.
OUTAGE_S = float(os.environ.get("ENGINE_FAULTS_OUTAGE_S", "3"))


class TcpProxy:
    """A threaded TCP proxy to `target` that a test can cut and restore.

    Cut: every open connection is closed and new ones are closed as soon as accepted, as when
    Redis restarts or the network drops. Restore: connections go through again.
    """

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, db: int) -> str:
        """The proxy's address with the credentials of the tests' Redis (the embedded one has a password)."""
        password = urlsplit(settings.REDIS_URL).password
        return f"redis://{f':{password}@' if password else ''}127.0.0.1:{self.port}/{db}"

    def cut(self) -> None:
        self.open.clear()
        with self._lock:
            doomed, self._sockets = self._sockets, set()
        for sock in doomed:
            _close(sock)

    def restore(self) -> None:
        self.open.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open.is_set():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@pytest.fixture
def redis_proxy(redis_connection):
    parts = urlsplit(settings.REDIS_URL)
    proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    yield proxy
    proxy.close()


def redis_db() -> int:
    return int(urlsplit(settings.REDIS_URL).path.lstrip("/") or 0)


# --- 1. an answer that arrived is recorded first -------------------------------------------------


def test_redis_cut_between_the_answer_and_the_release_loses_nothing_and_the_worker_carries_on(
        project, server, http, redis_connection, redis_proxy):
    run = make_run(project, build_cohort(project, sessions=2, name="cut"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), concurrency={"openai": 2})
    step = run_drive(run.pk)
    first, second = Slot.objects.filter(pk__in=step.slot_ids).order_by("pk")
    limiter = InflightLimiter(redis.Redis.from_url(redis_proxy.url(redis_db())))
    name = limiter_name(model_config(run.protocol.generator))
    restored_at = []

    def restore_later():
        time.sleep(2.0)
        restored_at.append(timezone.now())
        redis_proxy.restore()

    def cut_then_answer(request):
        # The answer is on its way and Redis goes away: the place cannot be given back now.
        redis_proxy.cut()
        threading.Thread(target=restore_later, daemon=True).start()
        return answer(request, "Recorded first.")

    server.script(Reply(body=cut_then_answer))
    slot_execute(first.pk, limiter=limiter, client=http, worker="test", sleep=Sleeps())  # raises nothing

    # The receipt was committed while Redis was away.
    assert not restored_at
    first.refresh_from_db()
    assert first.status == Slot.Status.OK
    [call] = journal(first)
    assert (call.outcome, call.text, call.http_status) == ("ok", "Recorded first.", 200)
    assert call.response_id == "chatcmpl-test-1" and call.model_version == "gpt-test-1"
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (11, 7, 18)
    assert call.elapsed_s is not None and call.finished_at is not None

    # Once Redis is back the place is given back (well before its lease would free it) ...
    direct = InflightLimiter(redis_connection)
    wait_for(lambda: restored_at and direct.in_flight(name) == 0, 8, "the place to be given back")
    assert timezone.now() - call.reserved_at < timedelta(seconds=TIMEOUT_S + LEASE_GRACE_S)
    # ... and the same worker carries on with the next slot through the same limiter.
    slot_execute(second.pk, limiter=limiter, client=http, worker="test", sleep=Sleeps())
    second.refresh_from_db()
    assert second.status == Slot.Status.OK
    assert [r.body for r in server.requests] == [request_bytes(run, first), request_bytes(run, second)]
    assert direct.in_flight(name) == 0


def test_a_place_is_waited_for_while_redis_is_away_and_taken_when_it_returns(redis_connection, redis_proxy):
    limiter = InflightLimiter(redis.Redis.from_url(redis_proxy.url(redis_db())))
    redis_proxy.cut()
    threading.Timer(1.0, redis_proxy.restore).start()
    started = time.monotonic()
    with limiter.hold("test:outage", 1, lease_s=5):
        assert time.monotonic() - started >= 1.0
        assert InflightLimiter(redis_connection).in_flight("test:outage") == 1
    assert InflightLimiter(redis_connection).in_flight("test:outage") == 0


@pytest.mark.slow
def test_an_rq_worker_survives_a_redis_outage_mid_run_and_finishes_the_run(
        live_database, redis_connection, redis_proxy, tmp_path):
    redis_connection.flushdb()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ownwords_site.test_settings", "DATABASE_URL": live_database,
           "REDIS_URL": redis_proxy.url(redis_db()), "PYTHONUNBUFFERED": "1"}
    workers = Workers(env, tmp_path)
    outage = {}
    try:
        with running_fake_llm() as server:
            Roles(server)
            project = Project.objects.create(slug="outage", name="Outage test")
            run = make_run(project, build_cohort(project, sessions=1, targets=3, name="outage"),
                           conditions=[QUESTION_ONLY], generator=openai_model(server, timeout_s=1.0))

            def cut_then_answer(request):
                redis_proxy.cut()
                outage["cut"] = time.monotonic()
                threading.Timer(OUTAGE_S, redis_proxy.restore).start()
                return answer(request, "Alpha answer.")

            server.script(Reply(body=cut_then_answer))
            process = subprocess.Popen(
                [sys.executable, "manage.py", "rqworker", *QUEUES, "--worker-class",
                 "experiments.execution.workers.ResilientSimpleWorker"],
                cwd=REPO, env=env, stdout=open(tmp_path / "worker-0.log", "wb"), stderr=subprocess.STDOUT,
                start_new_session=True)
            workers.processes.append(process)
            run_enqueue(run.pk)
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).first(),
                           OUTAGE_S + 40, "the run to finish after the outage", workers)
            assert process.poll() is None, workers.logs()  # still serving
            log = (tmp_path / "worker-0.log").read_text(errors="replace")
            assert "Redis went away" in log and "carrying on" in log  # it met the outage and waited it out
            requests = len(server.requests)
        calls = ModelCall.objects.filter(slot__run=run)
        assert calls.count() == requests == 6  # three answers, three grades: nothing lost, nothing repeated
        assert set(calls.values_list("outcome", flat=True)) == {"ok"}
        assert set(Slot.objects.filter(run=run).values_list("status", flat=True)) == {Slot.Status.OK}
    finally:
        workers.kill_all()
        redis_connection.flushdb()


# --- 2. no slot in flight forever ---------------------------------------------------------------


class WorkerDied(BaseException):
    """What the journal sees of a worker killed during its cooldown: it stops there."""


def _die(seconds):
    raise WorkerDied


def test_a_worker_dead_in_its_cooldown_leaves_its_slot_pending_and_the_recovery_is_sent_once(
        project, server, http):
    run = make_run(project, build_cohort(project), conditions=[QUESTION_ONLY], generator=openai_model(server))
    [slot_id] = run_drive(run.pk).slot_ids
    slot = Slot.objects.get(pk=slot_id)
    server.script(Reply(429, openai_rate_limited()))
    with pytest.raises(WorkerDied):
        slot_execute(slot.pk, limiter=NoLimiter(), client=http, worker="dies", sleep=Sleeps(then=_die))
    slot.refresh_from_db()
    assert slot.status == Slot.Status.IN_FLIGHT and slot.retry_at is not None
    run_drive(run.pk)  # its lease has not run out: nothing changes
    assert Slot.objects.get(pk=slot.pk).status == Slot.Status.IN_FLIGHT

    # The recovery was due a lease ago and nobody reserved it: the worker is gone.
    Slot.objects.filter(pk=slot.pk).update(retry_at=timezone.now() - timedelta(seconds=TIMEOUT_S + LEASE_GRACE_S + 1))
    step = run_drive(run.pk)
    slot.refresh_from_db()
    assert slot.status == Slot.Status.PENDING and slot.pk in step.slot_ids  # handed out again
    assert "its worker stopped during the cooldown" in slot.status_note

    slot_execute(slot.pk, limiter=NoLimiter(), client=http, worker="other", sleep=Sleeps())
    slot_execute(slot.pk, limiter=NoLimiter(), client=http, worker="duplicate", sleep=Sleeps())
    slot.refresh_from_db()
    assert slot.status == Slot.Status.OK
    calls = journal(slot)
    assert [(c.basis, c.outcome, c.worker) for c in calls] == [(FIRST, "transient", "dies"),
                                                              (RECOVERY, "ok", "other")]
    assert calls[1].justification.startswith("recovery 1 of 2 after output-free HTTP 429")
    assert [r.body for r in server.requests] == [request_bytes(run, slot)] * 2  # the identical request, once more


# --- 4. the circuit race --------------------------------------------------------------------------


def test_a_reservation_waits_for_the_circuit_being_opened_and_then_sees_it_open(transactional_db, server):
    project = Project.objects.create(slug="race", name="Race")
    run = make_run(project, build_cohort(project, sessions=2, name="race"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server))
    quota_slot, other = Slot.objects.filter(pk__in=run_drive(run.pk).slot_ids).order_by("pk")
    reservation = _reserve(quota_slot.pk, basis=FIRST, justification="", worker="a", lease_s=30)
    recording, done = threading.Event(), threading.Event()

    def record_quota_slowly():
        try:
            with transaction.atomic():  # the quota answer's recording, caught before its commit
                _record(reservation.call_id, Outcome(OutcomeKind.QUOTA, http_status=429, error="quota"),
                        Decision(retry=False, wait_s=0.0, justification="no retry"), quota_slot)
                recording.set()
                time.sleep(0.5)
        finally:
            done.set()
            connection.close()

    threading.Thread(target=record_quota_slowly).start()
    assert recording.wait(10)
    started = time.monotonic()
    assert _reserve(other.pk, basis=FIRST, justification="", worker="b", lease_s=30) is None
    assert done.is_set() and time.monotonic() - started > 0.2  # it waited for the commit
    assert not ModelCall.objects.filter(slot=other).exists()
    assert Slot.objects.get(pk=other.pk).status == Slot.Status.PENDING
    assert Run.objects.get(pk=run.pk).circuit_open


def test_a_slot_job_handed_out_twice_is_refused_without_waiting_for_the_runs_lock(transactional_db, server):
    """The second job of a slot already in flight must not queue for the run's row: while one
    waits FOR UPDATE, every other reservation (FOR SHARE) queues behind it (seen as seconds of
    idle places when a part of a phase was handed out twice)."""
    project = Project.objects.create(slug="twice", name="Twice")
    run = make_run(project, build_cohort(project, sessions=1, name="twice"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server))
    slot_id = run_drive(run.pk).slot_ids[0]
    assert _reserve(slot_id, basis=FIRST, justification="", worker="a", lease_s=30) is not None
    held, release = threading.Event(), threading.Event()

    def hold_the_run():
        try:
            with transaction.atomic():  # a drive holding the run's row
                Run.objects.select_for_update().get(pk=run.pk)
                held.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_run)
    holder.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        assert _reserve(slot_id, basis=FIRST, justification="", worker="b", lease_s=30) is None
        assert time.monotonic() - started < 2.0 and not release.is_set()  # answered while the lock was held
    finally:
        release.set()
        holder.join(10)
    assert ModelCall.objects.filter(slot_id=slot_id).count() == 1


@pytest.mark.slow
def test_many_workers_one_quota_answer_no_attempt_reserved_after_the_circuit_opened(
        transactional_db, redis_connection):
    with running_fake_llm() as server:
        server.default_delay_s = 0.02
        project = Project.objects.create(slug="race-many", name="Race")
        run = make_run(project, build_cohort(project, sessions=60, name="many"), conditions=[QUESTION_ONLY],
                       generator=openai_model(server, timeout_s=2.0), concurrency={"openai": 12})
        todo = queue.Queue()
        for slot_id in run_drive(run.pk).slot_ids:
            todo.put(slot_id)
        original = server._next_reply
        received = []

        def quota_on_the_twentieth(request):
            reply = original(request)
            received.append(time.monotonic())
            return Reply(429, openai_insufficient_quota()) if len(received) == 20 else reply

        server._next_reply = quota_on_the_twentieth
        limiter = InflightLimiter(redis_connection)
        errors = []

        def worker(n):
            try:
                with httpx.Client(trust_env=False) as http:
                    while True:
                        try:
                            slot_id = todo.get_nowait()
                        except queue.Empty:
                            return
                        slot_execute(slot_id, limiter=limiter, client=http, worker=f"t{n}", sleep=Sleeps())
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        requests = list(server.requests)

    run.refresh_from_db()
    assert run.circuit_open and run.status == Run.Status.PAUSED
    calls = list(ModelCall.objects.filter(slot__run=run))
    [quota_call] = [c for c in calls if c.outcome == "quota"]
    late = [c for c in calls if c.reserved_at >= quota_call.finished_at]
    assert late == []  # every attempt was reserved before the circuit opened
    assert len(requests) == len(calls)  # the service received exactly the journal's attempts
    sent = {r.body for r in requests}
    unsent = Slot.objects.filter(run=run, status=Slot.Status.PENDING)
    assert unsent.exists() and not any(request_bytes(run, slot) in sent for slot in unsent)
