"""RQ jobs: entry points that take ids and call one engine function (STYLE: HackSoft).

Queues: `memories`, `generation`, `decisions`, `judging` carry one job per slot of that
phase; `analysis` the statistics; `default` the driver that moves a run from phase to
phase. Any number of `rqworker` processes on any number of machines may serve them.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta

import django_rq
import httpx
from rq import Queue

from experiments.concurrency import InflightLimiter
from experiments.engine import Step, run_analyze, run_drive, slot_execute
from experiments.models import Slot

_http_client: httpx.Client | None = None
_limiter: InflightLimiter | None = None


def http_client() -> httpx.Client:
    """One pooled client per worker process (connections are reused across jobs)."""
    global _http_client
    if _http_client is None:
        _http_client = httpx.Client(limits=httpx.Limits(max_connections=64, max_keepalive_connections=64))
    return _http_client


def limiter() -> InflightLimiter:
    global _limiter
    if _limiter is None:
        _limiter = InflightLimiter(django_rq.get_connection("default"))
    return _limiter


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def dispatch(run_id: int, step: Step) -> None:
    """Put the driver's next step on the queues."""
    if step.analyze:
        django_rq.get_queue("analysis").enqueue(job_analyze, run_id)
    elif step.slot_ids:
        queue = django_rq.get_queue(step.phase)
        queue.enqueue_many([Queue.prepare_data(job_slot, (slot_id,)) for slot_id in step.slot_ids])
    elif step.recheck_in_s is not None:
        # One scheduled look per run: the same job id replaces an earlier one.
        django_rq.get_queue("default").enqueue_in(
            timedelta(seconds=step.recheck_in_s), job_drive, run_id, job_id=f"ownwords-drive-{run_id}"
        )


def job_drive(run_id: int) -> None:
    dispatch(run_id, run_drive(run_id))


def job_slot(slot_id: int) -> None:
    slot_execute(slot_id, limiter=limiter(), client=http_client(), worker=worker_name())
    job_drive(Slot.objects.values_list("run_id", flat=True).get(pk=slot_id))


def job_analyze(run_id: int) -> None:
    run_analyze(run_id)
    job_drive(run_id)


def run_enqueue(run_id: int) -> None:
    """Start (or continue) a run through the queue."""
    django_rq.get_queue("default").enqueue(job_drive, run_id)
