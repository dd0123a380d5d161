"""The engine through real Redis and real worker processes.

- The in-flight limiter: a cap holds across threads (and so across processes and machines,
  which share nothing but Redis); a holder that died frees its place when its lease ends.
- The crash test (paper App. B.2, "no terminal slot was requested again"): a worker process
  is killed with SIGKILL while a request is in flight, a new one is started, and the journal
  and the server's request log must agree: every finished slot was requested exactly as many
  times as it has attempts, the one in flight is counted unknown and never re-sent, and the
  run finishes.

Redis database 15 (ownwords_site/test_settings.py) is flushed before and after the crash test.
"""
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import django_rq
import pytest
import redis
from django.conf import settings
from django.db import connection
from rq import Queue
from rq.job import Job

from experiments.execution import control, jobs
from experiments.execution.concurrency import InflightLimiter
from experiments.execution.jobs import run_enqueue
from experiments.execution.workers import slot_job_arguments
from experiments.models import ModelCall, Prediction, Project, Run, Slot
from experiments.models.runs import Phase
from ownwords_site.env import database_url
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, journal, make_run, openai_model, request_bytes
from tests.llm_fake_server import running_fake_llm

REPO = Path(__file__).resolve().parents[1]
QUEUES = ["default", "memories", "generation", "decisions", "judging", "analysis"]


@pytest.fixture
def redis_connection():
    conn = django_rq.get_connection("default")
    try:
        conn.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"Redis is not reachable at {settings.REDIS_URL}")
    return conn


# --- the limiter ------------------------------------------------------------------------------


def test_the_cap_holds_across_six_threads(redis_connection):
    limiter = InflightLimiter(redis_connection)
    name = f"test:{uuid.uuid4().hex}"
    lock = threading.Lock()
    inside, most, entries = [0], [0], [0]
    errors = []

    def hold_a_few_times():
        try:
            for _ in range(4):
                with limiter.hold(name, 2, lease_s=10):
                    with lock:
                        inside[0] += 1
                        entries[0] += 1
                        most[0] = max(most[0], inside[0])
                    assert limiter.in_flight(name) <= 2
                    time.sleep(0.03)
                    with lock:
                        inside[0] -= 1
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hold_a_few_times) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors and not any(t.is_alive() for t in threads)
    assert entries[0] == 24
    assert most[0] == 2  # reached, never exceeded
    assert limiter.in_flight(name) == 0


def test_a_place_held_by_a_dead_holder_frees_itself_when_its_lease_ends(redis_connection):
    limiter = InflightLimiter(redis_connection)
    name = f"test:{uuid.uuid4().hex}"
    dead = limiter.hold(name, 1, lease_s=0.4)
    dead.__enter__()  # entered and never left: the holder died
    assert limiter.in_flight(name) == 1
    started = time.monotonic()
    with limiter.hold(name, 1, lease_s=5):
        waited = time.monotonic() - started
        assert limiter.in_flight(name) == 1
    assert 0.3 <= waited < 2.0
    assert limiter.in_flight(name) == 0


def test_a_cap_is_per_name(redis_connection):
    limiter = InflightLimiter(redis_connection)
    first, second = f"test:{uuid.uuid4().hex}", f"test:{uuid.uuid4().hex}"
    with limiter.hold(first, 1, lease_s=5):
        started = time.monotonic()
        with limiter.hold(second, 1, lease_s=5):
            assert time.monotonic() - started < 0.2
            assert (limiter.in_flight(first), limiter.in_flight(second)) == (1, 1)


# --- slot jobs as rq writes them ------------------------------------------------------------


def test_slot_jobs_are_written_as_rq_writes_them_and_an_ordinary_worker_reads_them(redis_connection):
    """`jobs.enqueue_slot_jobs` writes a chunk's jobs itself, after the first: each hash must be what
    rq's own enqueue_many writes for the same job (but its times), in the same order on the queue; each
    job's id names its slot, run and role, as its arguments do."""
    tag = uuid.uuid4().hex
    ours = Queue(f"test-ours-{tag}", connection=redis_connection)
    theirs = Queue(f"test-theirs-{tag}", connection=redis_connection)
    slot_ids, run_id, role = [7, 11, 13, 1_000_003], 5, "judge"
    try:
        record = jobs.enqueue_slot_jobs(ours, slot_ids[:2], run_id=run_id, role=role)
        assert jobs.enqueue_slot_jobs(ours, slot_ids[2:], record, run_id=run_id, role=role) is record
        theirs.enqueue_many([Queue.prepare_data(jobs.job_slot, (slot_id, run_id, role),
                                                result_ttl=jobs.SLOT_RESULT_TTL_S,
                                                job_id=f"{jobs.SLOT_JOB_PREFIX}{slot_id}-theirs")
                             for slot_id in slot_ids])
        our_ids = [i.decode() for i in redis_connection.lrange(ours.key, 0, -1)]
        their_ids = [i.decode() for i in redis_connection.lrange(theirs.key, 0, -1)]
        assert [slot_job_arguments(i)[0] for i in our_ids] == slot_ids == [slot_job_arguments(i)[0] for i in their_ids]
        assert [slot_job_arguments(i) for i in our_ids] == [(slot_id, run_id, role) for slot_id in slot_ids]
        for our_id, their_id, slot_id in zip(our_ids, their_ids, slot_ids):
            mine, rqs = (redis_connection.hgetall(Job.key_for(i)) for i in (our_id, their_id))
            times = (b"created_at", b"enqueued_at")
            assert {k: v for k, v in mine.items() if k not in times} == {
                k: v.replace(b"test-theirs", b"test-ours") if k == b"origin" else v
                for k, v in rqs.items() if k not in times}
            assert redis_connection.ttl(Job.key_for(our_id)) == redis_connection.ttl(Job.key_for(their_id)) == -1
            job = Job.fetch(our_id, connection=redis_connection)  # as an ordinary rq worker reads it
            assert (job.func_name, job.args, job.kwargs, job.origin) == (
                "experiments.execution.jobs.job_slot", (slot_id, run_id, role), {}, ours.name)
        assert redis_connection.sismember("rq:queues", ours.key)
    finally:
        for queue in (ours, theirs):
            for job_id in redis_connection.lrange(queue.key, 0, -1):
                redis_connection.delete(Job.key_for(job_id.decode()))
            queue.delete(delete_jobs=False)


# --- the crash test -------------------------------------------------------------------------


@pytest.fixture
def live_database(transactional_db):
    """A DATABASE_URL that worker processes can open: the test database itself (transactional_db
    commits, so they see the rows)."""
    return database_url(connection.settings_dict)


def worker_env(live_database) -> dict:
    """The environment of this test's worker processes: the live database and the test's Redis."""
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "ownwords_site.test_settings", "DATABASE_URL": live_database,
            "REDIS_URL": settings.REDIS_URL, "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO"}


class Workers:
    """rqworker processes of this test, each in its own process group (worker, work horse and
    scheduler die together, as on a machine that crashes)."""

    def __init__(self, env, log_dir):
        self.env, self.log_dir = env, log_dir
        self.processes: list[subprocess.Popen] = []

    def start(self) -> subprocess.Popen:
        log = open(self.log_dir / f"worker-{len(self.processes)}.log", "wb")
        process = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", *QUEUES, "--with-scheduler"],
            cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        self.processes.append(process)
        return process

    def kill(self, process) -> None:
        """SIGKILL the worker and everything under it. rq's work horse puts itself in a process
        group of its own (os.setpgrp), so the group alone would leave the request running."""
        family = [process.pid, *descendants(process.pid)]
        for pid in family:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(timeout=10)

    def kill_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                self.kill(process)

    def logs(self) -> str:
        return "\n".join(path.read_text(errors="replace")[-4000:] for path in sorted(self.log_dir.glob("worker-*.log")))


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_for(condition, deadline_s, what, workers=None):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError(f"timed out after {deadline_s} s waiting for {what}"
                         + (f"\n--- worker logs ---\n{workers.logs()}" if workers else ""))


@pytest.mark.slow
def test_a_worker_killed_mid_request_never_causes_a_repeat_request(live_database, redis_connection, tmp_path):
    redis_connection.flushdb()
    workers = Workers(worker_env(live_database), tmp_path)
    try:
        with running_fake_llm() as server:
            server.default_delay_s = 0.3
            Roles(server)  # answers, and judge replies that parse
            project = Project.objects.create(slug="crash", name="Crash test")
            cohort = build_cohort(project, sessions=2, targets=5, name="crash")
            run = make_run(project, cohort, conditions=[QUESTION_ONLY],
                           generator=openai_model(server, timeout_s=1.0), concurrency={"openai": 4})
            workers.start()
            run_enqueue(run.pk)

            # Kill the worker while its fourth generation request is at the server, unanswered.
            wait_for(lambda: len(server.requests) >= 4, 60, "four requests at the server", workers)
            workers.kill(workers.processes[0])
            killed_at = len(server.requests)
            in_flight = list(ModelCall.objects.filter(slot__run=run, outcome=""))
            assert len(in_flight) == 1, in_flight
            lost = in_flight[0].slot
            assert lost.phase == Phase.GENERATION
            assert server.requests[-1].body == request_bytes(run, lost)

            # A crashed machine's scheduler lock outlives it for a minute (rq's lock TTL) and a new
            # worker only retries taking it every ten; remove the dead scheduler's locks as that
            # minute passing would, so the restarted worker runs the delayed looks.
            for queue in QUEUES:
                redis_connection.delete(f"rq:scheduler-lock:{queue}")
            workers.start()

            # The unknown slot is the owner's decision: the run pauses at the end of the generation.
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.PAUSED).first(), 90,
                           "the run to pause for the owner's decision", workers)
            assert run.phase == Phase.GENERATION and "wait for your decision" in run.status_reason
            assert len(server.requests) > killed_at
            control.run_accept_missing(run=run, user=None, reason="as the paper: the unknown slot stays missing")
            run_enqueue(run.pk)
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).first(), 90,
                           "the run to finish", workers)
            requests = Counter(r.body for r in server.requests)

        # The in-flight slot is unknown, was sent once and never again.
        lost.refresh_from_db()
        assert lost.status == Slot.Status.UNKNOWN
        [call] = journal(lost)
        assert call.outcome == "unknown" and call.finished_at is None
        assert requests[request_bytes(run, lost)] == 1
        assert Prediction.objects.get(slot=lost).status == Prediction.Status.MISSING

        # Every other slot: exactly as many requests as recorded attempts, each with an outcome.
        slots = list(Slot.objects.filter(run=run).exclude(pk=lost.pk))
        assert len(slots) == 9 + 9  # nine answers, nine judge calls (the lost answer has none)
        for slot in slots:
            calls = journal(slot)
            assert slot.status in Slot.TERMINAL and slot.status != Slot.Status.UNKNOWN, slot
            assert all(c.outcome for c in calls)
            assert requests[request_bytes(run, slot)] == len(calls), slot.key
        assert sum(requests.values()) == 1 + sum(len(journal(s)) for s in slots)
        assert run.analysis["conditions"][QUESTION_ONLY]["missing"] == 1
    finally:
        workers.kill_all()
        redis_connection.flushdb()
