"""The rq scheduler after a Redis outage, with real processes.

A `redis-server` of this test's own (its own port, its data saved on shutdown and loaded on
start) serves a `manage.py rqworker --with-scheduler` of the resilient worker class. A job
scheduled one second ahead runs; Redis is shut down for 3 s and started again; a job scheduled
after that runs too. With rq 3.0's own scheduler the scheduler process died of the outage
(redis ConnectionError, "Scheduler … raised an exception") and rq starts a new one only at its
maintenance, ten minutes later: the second job did not run. A scheduler process killed outright
is started again by the worker within seconds, and the next scheduled job runs.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from rq import Queue
from rq.job import JobStatus

from tests.test_engine_queue import REPO, descendants, live_database, wait_for, worker_env  # noqa: F401

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
OUTAGE_S = 3.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnRedis:
    """A redis-server on its own port that the test stops (saving its data) and starts again."""

    def __init__(self, directory: Path):
        self.port, self.directory = free_port(), directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: _answers(client), 10, "redis-server to answer")

    def stop(self) -> None:
        """SHUTDOWN SAVE: every client's connection is closed and new ones are refused."""
        try:
            redis.Redis.from_url(self.url).shutdown(save=True)
        except redis.exceptions.ConnectionError:
            pass  # the server closes the connection as it goes
        self.process.wait(10)


def _answers(client) -> bool:
    try:
        return client.ping()
    except redis.exceptions.ConnectionError:
        return False


def scheduled_job_runs(queue: Queue, what: str, worker, within_s: float = 20) -> None:
    job = queue.enqueue_in(timedelta(seconds=1), os.getpid)
    wait_for(lambda: job.get_status(refresh=True) == JobStatus.FINISHED, within_s, what, worker)


class OneWorker:
    def __init__(self, process: subprocess.Popen, log: Path):
        self.process, self.log = process, log

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(REDIS_SERVER), reason="needs the redis-server binary")
def test_scheduled_jobs_still_run_after_a_three_second_redis_outage(live_database, tmp_path):  # noqa: F811
    own = OwnRedis(tmp_path)
    own.start()
    log = tmp_path / "worker.log"
    env = {**worker_env(live_database), "REDIS_URL": own.url}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", "default", "--with-scheduler",
             "--worker-class", "experiments.execution.workers.ResilientSimpleWorker"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    worker = OneWorker(process, log)
    try:
        client = redis.Redis.from_url(own.url)
        queue = Queue("default", connection=client)
        wait_for(lambda: client.exists("rq:scheduler-lock:default"), 30, "the scheduler's lock", worker)
        scheduled_job_runs(queue, "a scheduled job before the outage", worker)

        own.stop()
        time.sleep(OUTAGE_S)
        own.start()

        scheduled_job_runs(queue, "a scheduled job after the outage", worker)
        assert process.poll() is None, worker.logs()
        assert "raised an exception" not in worker.logs()

        # a scheduler process that ends for another reason is started again within seconds
        [scheduler] = descendants(process.pid)
        os.kill(scheduler, signal.SIGKILL)
        scheduled_job_runs(queue, "a scheduled job after the scheduler was killed", worker, within_s=40)
        assert descendants(process.pid) not in ([], [scheduler])
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if own.process.poll() is None:
            own.process.terminate()
            own.process.wait(10)
