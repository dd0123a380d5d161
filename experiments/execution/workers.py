"""rq workers that wait out a Redis outage instead of quitting (issue 11).

rq's own loop retries only while it waits for a job; a Redis error anywhere else — the
heartbeat after a job, the bookkeeping of a finished job, the suspension check, maintenance —
ends the worker ("found an unhandled exception, quitting") and it stays down. These workers
log such an error, wait with backoff until Redis answers again, and carry on. The job that
was running has already recorded its outcome in the database (the journal is the record);
only rq's view of that job may be stale, which its registries' cleanup repairs.

    manage.py rqworker --worker-class experiments.execution.workers.ResilientSimpleWorker ...
"""
from __future__ import annotations

from rq.worker import SimpleWorker, Worker

from experiments.execution.concurrency import REDIS_DOWN, wait_for_redis


class ResilientMixin:
    """Every step of rq's loop outside the dequeue, made to survive Redis going away."""

    def _survive(self, what: str, step, *args, **kwargs):
        while True:
            try:
                return step(*args, **kwargs)
            except REDIS_DOWN as exc:
                wait_for_redis(self.connection, what=what, error=exc)

    def heartbeat(self, *args, **kwargs):
        return self._survive("the worker's heartbeat", super().heartbeat, *args, **kwargs)

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


class ResilientSimpleWorker(ResilientMixin, SimpleWorker):
    """rq's SimpleWorker (no fork per job: the engine's choice), surviving Redis outages."""


class ResilientWorker(ResilientMixin, Worker):
    """rq's forking Worker, surviving Redis outages."""
