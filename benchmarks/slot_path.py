"""The worker's Python CPU per call on the slot path, split by step, in one process.

A local model server (tests/llm_fake_server.py, in this process, answering at once) and a run of
N question-only tasks prepared in the benchmark's database: its generation slots, then its judge
slots, each go through `journal.slot_execute` (with the process's real `HandoverLimiter` on Redis,
cap 8, and httpx over `StdlibTransport`, as a worker has them) and then `jobs._after_slot` (its
Redis bookkeeping; the phase's count is set high, so no slot drives the run). Once on 1 thread and
once, with a new run, on 8 threads taking slots from one list.

Printed per phase and thread count: the thread CPU (`time.thread_time`, the slot thread's own, so
the in-process server's threads are not counted) per slot, in all and by step:
  prepare  `slot_reads.prepare` (the slot's row, the protocol, the role's settings, the endpoint check),
           or `named_slot` for a slot named as its job names it (`--read-first`: every slot read first)
  build    `wire.build_request` and the retry policy
  reserve  `next_reservation` + `reserve` (the attempt's committed row), or `reserve_named_first` (the
           attempt's row and the slot's read in one statement)
  limiter  `acquire` + `release` / hand-over of the in-flight place
  send     `client.send` (httpx, the transport, the response's classification)
  record   `_decide_and_record` (the decision and the receipt with the slot's results)
  after    `jobs._after_slot`
  other    the rest of `slot_execute` (and the wrappers' own cost, about 1 µs per step)

    createdb -h 127.0.0.1 -U postgres bench_slot_path          # once (the script also creates it)
    .venv/bin/python benchmarks/slot_path.py --tasks 400
    .venv/bin/python benchmarks/slot_path.py --tasks 400 --profile /tmp/slot.prof   # cProfile of the 1-thread run

To compare two versions, copy each tree (`git archive <commit> | tar -x -C /tmp/old`), put this
script in both, run them alternately and compare only runs taken together. The database and its
Redis database (REDIS_URL, db 14 by default) are emptied first; do not point them at real data.
"""
import argparse
import os
import queue
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_slot_path")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("SECRET_KEY", "benchmark-only")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
os.environ.setdefault("OWNWORDS_LLM_ENDPOINTS", '[{"name": "bench-local", "url_prefix": "http://127.0.0.1:"}]')

from page_setup import ensure_database  # noqa: E402

ensure_database(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402

from experiments.core.llm import client as llm_client  # noqa: E402
from experiments.execution import jobs, journal  # noqa: E402
from experiments.execution.driver import run_drive  # noqa: E402
from experiments.execution.policy import sending_role  # noqa: E402
from experiments.models import Project, Slot  # noqa: E402
from experiments.models.runs import Phase  # noqa: E402
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, make_run, openai_model  # noqa: E402
from tests.llm_fake_server import running_fake_llm  # noqa: E402

CAP = 8
STEPS = ("prepare", "build", "reserve", "limiter", "send", "record", "after", "other")
_local = threading.local()


def _spent() -> dict:
    spent = getattr(_local, "spent", None)
    if spent is None:
        spent = _local.spent = defaultdict(float)
    return spent


def timed(step: str, function):
    """`function`, its thread CPU added to `step` of the calling thread (nested steps are not
    counted twice: the outer step's time excludes what an inner timed step took)."""
    def wrapper(*args, **kwargs):
        spent = _spent()
        inner_before = spent["_inner"]
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            took = time.thread_time() - started
            inner = spent["_inner"] - inner_before
            spent[step] += took - inner
            spent["_inner"] = inner_before + took
    return wrapper


def instrument() -> None:
    journal.prepare = timed("prepare", journal.prepare)
    journal.named_slot = timed("prepare", journal.named_slot)
    journal.reserve_named_first = timed("reserve", journal.reserve_named_first)
    journal.build_request = timed("build", journal.build_request)
    journal.run_retry_policy = timed("build", journal.run_retry_policy)
    journal.current_cap = timed("build", journal.current_cap)
    journal.limiter_name = timed("build", journal.limiter_name)
    journal.next_reservation = timed("reserve", journal.next_reservation)
    journal.reserve = timed("reserve", journal.reserve)
    llm_client.send = timed("send", llm_client.send)
    journal._decide_and_record = timed("record", journal._decide_and_record)
    journal._hand_on = timed("limiter", journal._hand_on)
    limiter = jobs.limiter()
    limiter.acquire = timed("limiter", limiter.acquire)
    limiter.release = timed("limiter", limiter.release)


def phases(run, threads: int, http, limiter, read_first: bool = False) -> dict[str, list[dict]]:
    """The run's generation and judging slots through `execute`, a hand-out at a time (a phase
    is handed out in windows and planned in parts: the driver is asked again until it moves on)."""
    per_phase: dict[str, list[dict]] = defaultdict(list)
    while True:
        step = run_drive(run.pk)
        if step.phase not in (Phase.GENERATION, Phase.JUDGING):
            return per_phase
        slot_ids = list(Slot.objects.filter(run=run, phase=step.phase, status=Slot.Status.PENDING)
                        .order_by("pk").values_list("pk", flat=True))
        assert slot_ids, step
        # Named as a worker's slot job names them (`jobs.slot_job_id`), unless every slot is read first.
        named = {} if read_first else dict(run_id=run.pk, role=sending_role(step.phase))
        per_phase[step.phase] += execute(slot_ids, threads, http, limiter, named)


def execute(slot_ids: list[int], threads: int, http, limiter, named: dict) -> list[dict]:
    """Each slot through `slot_execute` and `_after_slot` on `threads` threads; per slot its steps' CPU."""
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for slot_id in slot_ids:
        todo.put(slot_id)
    per_slot: list[dict] = []
    lock = threading.Lock()

    def work():
        try:
            while True:
                try:
                    slot_id = todo.get_nowait()
                except queue.Empty:
                    return
                spent = _spent()
                spent.clear()
                started = time.thread_time()
                slot = journal.slot_execute(slot_id, limiter=limiter, client=http, worker="bench-slot-path",
                                            **named)
                after_started = time.thread_time()
                jobs._after_slot(slot)
                spent["after"] += time.thread_time() - after_started
                total = time.thread_time() - started
                figures = {step: spent[step] for step in STEPS if step != "other"}
                figures["other"] = total - sum(figures.values())
                figures["total"] = total
                with lock:
                    per_slot.append(figures)
        finally:
            connections.close_all()

    if threads == 1:  # in this thread, so that a profiler enabled here sees it
        work()
        return per_slot
    workers = [threading.Thread(target=work, name=f"slot-{i}") for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return per_slot


def report(label: str, per_slot: list[dict]) -> None:
    mean = {key: statistics.fmean(f[key] for f in per_slot) * 1e6 for key in (*STEPS, "total")}
    median = statistics.median(f["total"] for f in per_slot) * 1e6
    print(f"{label:<18} {len(per_slot):>5} {mean['total']:>7.0f} {median:>7.0f} "
          + " ".join(f"{mean[step]:>7.0f}" for step in STEPS), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=400, help="tasks per run (a multiple of 5): N slots per phase")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--profile", help="write a cProfile of the 1-thread run here")
    parser.add_argument("--read-first", action="store_true",
                        help="read every slot before its reservation (as a job naming only its slot)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    redis = jobs.limiter().client
    redis.flushdb()
    project = Project.objects.create(slug="bench-slot-path", name="Slot path benchmark")
    limiter = jobs.limiter()
    http = jobs.http_client()
    instrument()
    with running_fake_llm() as server:
        Roles(server)

        def new_run(tasks: int, name: str):
            cohort = build_cohort(project, sessions=max(1, tasks // 5), targets=5, name=name)
            run = make_run(project, cohort, conditions=[QUESTION_ONLY], name=name,
                           generator=openai_model(server, timeout_s=10.0), concurrency={"openai": CAP})
            for phase in (Phase.GENERATION, Phase.JUDGING):  # no slot's `_after_slot` drives the run
                redis.set(jobs.QUEUED_KEY.format(run_id=run.pk, phase=phase), 10**9)
            return run

        phases(new_run(10, "warm-up"), 1, http, limiter)  # imports, caches, connections
        print(f"database {connection.settings_dict['NAME']}; {args.tasks} tasks per run; CPU µs per slot "
              "(mean; total's median too)")
        print(f"{'phase/threads':<18} {'slots':>5} {'total':>7} {'median':>7} " + " ".join(f"{s:>7}" for s in STEPS))
        for threads in args.threads:
            run = new_run(args.tasks, f"run-{threads}")
            profiler = None
            if args.profile and threads == 1:
                import cProfile
                profiler = cProfile.Profile(time.thread_time)  # CPU, not waiting
                profiler.enable()
            per_phase = phases(run, threads, http, limiter, args.read_first)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(args.profile)
            for phase, per_slot in per_phase.items():
                assert len(per_slot) == args.tasks, (phase, len(per_slot))
                report(f"{phase}/{threads}", per_slot)
            statuses = set(Slot.objects.filter(run=run).values_list("status", flat=True))
            assert statuses == {Slot.Status.OK}, statuses
    print(f"load: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
