"""Multi-slot workers: many requests in flight per worker process, the journal's rules unchanged.

Real `rqworker` processes of `MultiSlotWorker`, real PostgreSQL and Redis, real HTTP to the local
LLM server, which counts the requests it holds at every moment.

- The global cap and the circuit: three workers of six slots each against a cap of four — the
  server never holds more than four requests; one quota answer opens the circuit and no attempt
  is reserved after it; the server received exactly the journal's attempts.
- SIGKILL: a worker killed with all its slots in flight leaves each of them unknown; none is
  sent again until the owner decides (here: continue with them missing), and the run finishes
  with every other slot requested exactly as often as it has attempts.
"""
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from rq import Worker

from experiments.execution import control
from experiments.execution.jobs import run_enqueue
from experiments.models import ModelCall, Prediction, Project, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, journal, make_run, openai_model, request_bytes
from tests.llm_fake_server import Reply, openai_insufficient_quota, running_fake_llm
from tests.test_engine_queue import (  # noqa: F401 - fixtures
    QUEUES, REPO, Workers, live_database, redis_connection, wait_for, worker_env,
)

pytestmark = pytest.mark.slow
MULTI = "experiments.execution.workers.MultiSlotWorker"


class MultiSlotWorkers(Workers):
    """`Workers` of the multi-slot class, `slots` each (one alive runs the scheduler, unless
    `scheduler` is False: then no delayed look ever runs)."""

    def __init__(self, env, log_dir, slots: int, scheduler: bool = True):
        super().__init__({**env, "OWNWORDS_WORKER_SLOTS": str(slots)}, log_dir)
        self.scheduler = scheduler

    def start(self) -> subprocess.Popen:
        log = open(self.log_dir / f"worker-{len(self.processes)}.log", "wb")
        command = [sys.executable, "manage.py", "rqworker", *QUEUES, "--worker-class", MULTI]
        if self.scheduler and all(process.poll() is not None for process in self.processes):
            command.append("--with-scheduler")
        process = subprocess.Popen(command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        log.close()
        self.processes.append(process)
        return process


class InFlightCount:
    """Counts the requests the server holds (arrived, not yet answered), and the most at once."""

    def __init__(self, server):
        self.lock = threading.Lock()
        self.now = self.most = 0
        original = server._next_reply

        def counted(request):
            reply = original(request)
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            body = reply.body

            def answered(req):  # called when the reply is written, after its delay
                with self.lock:
                    self.now -= 1
                return body(req) if callable(body) else body

            return Reply(status=reply.status, body=answered, headers=reply.headers, delay_s=reply.delay_s)

        server._next_reply = counted


def test_multi_slot_workers_keep_the_global_cap_and_send_nothing_after_a_quota_answer(
        live_database, redis_connection, tmp_path):
    redis_connection.flushdb()
    # Two database connections lent to each worker's three slot threads (`workers.LoanedConnections`):
    # the cap and the circuit hold on that path too; the SIGKILL test below keeps one per slot.
    # Fewer slot threads per process than the cap: the cap is reached only with two processes sending
    # at once (a process with more could keep every place, handing each on to its own threads).
    env = {**worker_env(live_database), "OWNWORDS_WORKER_DB_THREADS": "2"}
    workers = MultiSlotWorkers(env, tmp_path, slots=3)
    cap = 4
    try:
        with running_fake_llm() as server:
            server.default_delay_s = 0.05
            Roles(server)
            received = []
            original = server._next_reply

            def quota_on_the_thirtieth(request):
                reply = original(request)
                received.append(request)
                return Reply(429, openai_insufficient_quota(), delay_s=0.05) if len(received) == 30 else reply

            server._next_reply = quota_on_the_thirtieth
            count = InFlightCount(server)
            project = Project.objects.create(slug="multi-cap", name="Multi-slot cap")
            run = make_run(project, build_cohort(project, sessions=12, targets=5, name="multi-cap"),
                           conditions=[QUESTION_ONLY], generator=openai_model(server, timeout_s=2.0),
                           concurrency={"openai": cap})
            for _ in range(3):
                workers.start()
            # All three listening before the first job: one process alone can send the run's first
            # 30 requests (half a second at this cap and delay) before the others have started.
            wait_for(lambda: len(Worker.all(connection=redis_connection)) == 3, 60,
                     "the three workers to register", workers)
            run_enqueue(run.pk)
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, circuit_open=True).first(), 90,
                           "the quota answer to open the circuit", workers)
            # Let every slot in flight at that moment finish and the workers go quiet.
            wait_for(lambda: not ModelCall.objects.filter(slot__run=run, outcome="").exists(), 30,
                     "the attempts in flight to be recorded", workers)
            time.sleep(1.0)
            requests = list(server.requests)
            most = count.most
        assert all(process.poll() is None for process in workers.processes), workers.logs()
    finally:
        workers.kill_all()
        redis_connection.flushdb()

    assert most == cap  # reached with 9 slots offered in three processes, never exceeded
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED and run.circuit_open
    calls = list(ModelCall.objects.filter(slot__run=run))
    [quota_call] = [c for c in calls if c.outcome == "quota"]
    assert [c for c in calls if c.reserved_at >= quota_call.finished_at] == []
    assert len(requests) == len(calls) >= 30  # the service received exactly the journal's attempts
    assert Counter(r.body for r in requests) == Counter(request_bytes(run, c.slot) for c in calls)
    held_or_pending = Slot.objects.filter(run=run, phase=Phase.GENERATION,
                                          status__in=(Slot.Status.PENDING, Slot.Status.HELD))
    assert held_or_pending.exists()
    assert not any(request_bytes(run, s) in {r.body for r in requests}
                   for s in held_or_pending.filter(status=Slot.Status.PENDING))
    # Several processes and several slots of each sent requests.
    workers_seen = {c.worker for c in calls}
    assert len({w.rsplit(":", 1)[0] for w in workers_seen}) >= 2 and len(workers_seen) > 3


def test_a_multi_slot_worker_killed_with_every_slot_in_flight_leaves_each_unknown_never_resent(
        live_database, redis_connection, tmp_path):
    redis_connection.flushdb()
    slots = 4
    workers = MultiSlotWorkers(worker_env(live_database), tmp_path, slots=slots)
    try:
        with running_fake_llm() as server:
            server.default_delay_s = 5.0  # every request is still at the server when the worker dies
            Roles(server)
            project = Project.objects.create(slug="multi-kill", name="Multi-slot crash")
            run = make_run(project, build_cohort(project, sessions=2, targets=5, name="multi-kill"),
                           conditions=[QUESTION_ONLY], generator=openai_model(server, timeout_s=1.0),
                           concurrency={"openai": slots})
            workers.start()
            run_enqueue(run.pk)
            wait_for(lambda: len(server.requests) >= slots, 60, "every slot's request at the server", workers)
            workers.kill(workers.processes[0])
            killed_at = len(server.requests)
            in_flight = list(ModelCall.objects.filter(slot__run=run, outcome=""))
            assert killed_at == slots and len(in_flight) == slots, (killed_at, in_flight)
            lost = {call.slot for call in in_flight}
            assert {r.body for r in server.requests} == {request_bytes(run, slot) for slot in lost}

            server.default_delay_s = 0.05
            for queue in QUEUES:  # the dead worker's scheduler lock, as a minute passing would
                redis_connection.delete(f"rq:scheduler-lock:{queue}")
            workers.start()
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.PAUSED).first(), 90,
                           "the run to pause for the owner's decision", workers)
            assert run.phase == Phase.GENERATION and "wait for your decision" in run.status_reason
            assert set(Slot.objects.filter(pk__in=[s.pk for s in lost]).values_list("status", flat=True)) == {
                Slot.Status.UNKNOWN}
            control.run_accept_missing(run=run, user=None, reason="as the paper: unknown slots stay missing")
            run_enqueue(run.pk)
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).first(), 90,
                           "the run to finish", workers)
            requests = Counter(r.body for r in server.requests)
    finally:
        workers.kill_all()
        redis_connection.flushdb()

    for slot in lost:
        slot.refresh_from_db()
        assert slot.status == Slot.Status.UNKNOWN
        [call] = journal(slot)
        assert call.outcome == "unknown" and call.finished_at is None
        assert requests[request_bytes(run, slot)] == 1  # sent once, never again
        assert Prediction.objects.get(slot=slot).status == Prediction.Status.MISSING
    others = list(Slot.objects.filter(run=run).exclude(pk__in=[s.pk for s in lost]))
    assert len(others) == 2 * (10 - slots)  # the other answers and their judge calls
    for slot in others:
        calls = journal(slot)
        assert slot.status == Slot.Status.OK and all(c.outcome == "ok" for c in calls)
        assert requests[request_bytes(run, slot)] == len(calls) == 1
    assert run.analysis["conditions"][QUESTION_ONLY]["missing"] == slots
