"""Benchmark of the run page's progress on PostgreSQL: a run of SLOTS slots.

    .venv/bin/python benchmarks/run_page.py                       # database bench_run_page (dropped, rebuilt)
    SLOTS=100000 DATABASE_URL=postgres://postgres@127.0.0.1:5432/mydb .venv/bin/python benchmarks/run_page.py
    REUSE=1 .venv/bin/python benchmarks/run_page.py               # measure again what a previous run built

Do not point it at real data: the database is dropped first. It writes with COPY a running run in
its generation phase with SLOTS slots (default 1,000,000): 70% answered, each with one call that
finished over the past hour at a steady rate (the last two minutes included), 30% pending; and a
pause and a resume amendment. Then it prints the server time (median and best of REPEAT requests,
the Django test client) and the number of queries of: `progress.run_progress` alone, the run page,
and its JSON poll, and of the lookups a reservation makes under the run's lock (the phase's
recoveries; the attempts against HTTP ceilings), and a look's hand-out of one window of pending
slots against all of them, with the Redis memory of a queued slot job. The page must not grow its
query count with the run, and take ≤ 200 ms.
REUSE=1 migrates the database a previous run built and brings its last 15 minutes of calls up to now
again (so the run is "running" as measured), instead of dropping it.
"""
import os
import statistics
import time
from datetime import timedelta

from page_setup import REUSE, copy, django_on_scratch_database  # benchmarks/page_setup.py, beside this script

SLOTS = int(os.environ.get("SLOTS", 1_000_000))
REPEAT = int(os.environ.get("REPEAT", 15))

django_on_scratch_database("bench_run_page")

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from experiments.execution import progress  # noqa: E402
from experiments.execution.policy import RetryPolicy  # noqa: E402
from experiments.execution.reservation import ceiling_reached, phase_recoveries  # noqa: E402
from django.db.models import F, Max  # noqa: E402

from experiments.models import (Amendment, Cohort, Membership, ModelCall, Project, Protocol, Role,  # noqa: E402
                                Run, TaskSet)

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


def build():
    call_command("migrate", verbosity=0)
    project = Project.objects.create(slug="bench", name="Bench")
    owner = get_user_model().objects.create_user("owner", password="x")
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    task_set = TaskSet.objects.create(project=project, min_pairs=12, min_targets=5, max_targets=5,
                                      derived_at=timezone.now())
    cohort = Cohort.objects.create(project=project, task_set=task_set, name="c", requested_size=1, seed=1,
                                   task_list_sha256="0" * 64, rule={})
    protocol = Protocol.objects.create(project=project, name="p", cohort=cohort, conditions=["question-only"],
                                       generator=OFFLINE, judge=OFFLINE, concurrency={"offline": 8},
                                       sealed_at=timezone.now())
    now = timezone.now()
    run = Run.objects.create(protocol=protocol, status=Run.Status.RUNNING, phase="generation",
                             started_at=now - timedelta(hours=2))
    answered = int(SLOTS * 0.7)
    copy("experiments_slot", "run_id, phase, key, role, system, \"user\", request_sha256, prompt_refs, status, "
         "status_note, amended_attempts, updated_at",
         ((run.pk, "generation", f"gen|{i}", "generator", "s", "u", "0" * 64, "[]",
           "ok" if i < answered else "pending", "", 0, now) for i in range(SLOTS)))
    first_slot = run.slots.order_by("pk").values_list("pk", flat=True).first()
    span = 3600.0
    copy("experiments_modelcall", "slot_id, run_id, phase, attempt, basis, justification, worker, reserved_at, "
         "lease_until, finished_at, outcome, response_id, model_version, finish_reason, error, raw_body",
         ((first_slot + i, run.pk, "generation", 1, "first", "", "w",
           now - timedelta(seconds=span * (1 - i / answered) + 1),
           now, now - timedelta(seconds=span * (1 - i / answered)), "ok", "", "", "", "", "")
          for i in range(answered)))
    for kind, ago in (("pause", 5400), ("resume", 4000)):
        amendment = Amendment.objects.create(run=run, kind=kind, reason="bench", created_by=owner,
                                             payload={"held_slots_released": []} if kind == "resume" else {})
        Amendment.objects.filter(pk=amendment.pk).update(created_at=now - timedelta(seconds=ago))
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # as autovacuum would: the visibility map lets counts use the index alone
    catch_up(now)
    return project, run, owner


def catch_up(latest) -> None:
    """Building (or the time since) took a while: bring the last 15 minutes of calls up to now, so
    the run is "running" as measured (its recent pages, as in a live run, not yet vacuumed)."""
    lag = timezone.now() - latest
    ModelCall.objects.filter(finished_at__gte=latest - timedelta(seconds=900)).update(
        finished_at=F("finished_at") + lag, reserved_at=F("reserved_at") + lag)


def existing():
    call_command("migrate", verbosity=0)
    run = Run.objects.select_related("protocol__project").get(protocol__project__slug="bench")
    catch_up(ModelCall.objects.filter(run=run).aggregate(latest=Max("finished_at"))["latest"])
    return run.protocol.project, run, get_user_model().objects.get(username="owner")


def timed(fn, repeat=REPEAT):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def hand_out(run) -> None:
    """A look's hand-out of the pending slots, rolled back each time: one window (what the queue's
    driver hands out) and all of them (what it did before the window); and the Redis memory
    of a slot job, which the window bounds."""
    from django.db import transaction
    from django_rq import get_connection
    from rq import Queue

    from experiments.execution import hand_out, jobs

    window = hand_out.hand_out_window(run)
    for label, windowed in ((f"a window ({window:,})", True), ("every pending slot", False)):
        times, handed = [], 0
        for _ in range(3):
            with transaction.atomic():
                start = time.perf_counter()
                handed = len(hand_out.hand_out_next(run, windowed=windowed)[0])
                times.append((time.perf_counter() - start) * 1000)
                transaction.set_rollback(True)
        print(f"hand-out of {label:>18}: {handed:,} slots, median {statistics.median(times):7.1f} ms "
              f"(under the run's lock in a look)")
    connection_ = get_connection("default")
    queue = Queue(f"bench-hand-out-{os.getpid()}", connection=connection_)
    before = connection_.info("memory")["used_memory"]
    start = time.perf_counter()
    for first in range(0, window, jobs.DISPATCH_CHUNK):
        queue.enqueue_many([Queue.prepare_data(jobs.job_slot, (i,), result_ttl=jobs.SLOT_RESULT_TTL_S,
                                               job_id=jobs.slot_job_id(i))
                            for i in range(first, min(window, first + jobs.DISPATCH_CHUNK))])
    elapsed = time.perf_counter() - start
    per_job = (connection_.info("memory")["used_memory"] - before) / window
    queue.empty()
    queue.delete(delete_jobs=True)
    print(f"slot jobs on the queue: {per_job:,.0f} bytes of Redis each, {window / elapsed:,.0f} enqueued a second: "
          f"a window {per_job * window / 1e6:.1f} MB, all {SLOTS:,} slots {per_job * SLOTS / 1e6:,.0f} MB")


def main():
    started = time.perf_counter()
    project, run, owner = existing() if REUSE else build()
    print(f"{'reused' if REUSE else 'built'} {run.slots.count():,} slots in {time.perf_counter() - started:.0f} s")
    print("time left:", progress.pace_text(progress.run_progress(run)["pace"]))
    client = Client()
    client.force_login(owner)
    pages = {"run_progress()": lambda: progress.run_progress(run),
             "run page": lambda: client.get(reverse("run_detail", args=[project.slug, run.pk])),
             "progress.json": lambda: client.get(reverse("run_progress", args=[project.slug, run.pk]))}
    for label, fn in pages.items():
        fn()  # warm
        queries = []  # counted as they run: a request resets Django's query log when it starts
        with connection.execute_wrapper(lambda execute, sql, params, many, context: (
                queries.append(sql), execute(sql, params, many, context))[1]):
            fn()
        median, best = timed(fn)
        print(f"{label:16} median {median:7.1f} ms  best {best:7.1f} ms  queries {len(queries)}")
    # What a reservation asks under the run's lock: the phase's recoveries (every recovery) and,
    # with HTTP ceilings set, the attempts reserved (every reservation).
    ceilings = {"phase_http_ceilings": {"generation": 10 ** 9}, "run_http_ceiling": 10 ** 9}
    lookups = {"phase recoveries": lambda: phase_recoveries(run.pk, run.phase),
               "ceiling check": lambda: ceiling_reached(run, run.phase, RetryPolicy.from_settings(ceilings))}
    for label, fn in lookups.items():
        fn()
        median, best = timed(fn)
        print(f"{label:16} median {median:7.1f} ms  best {best:7.1f} ms")
    hand_out(run)
    print(f"(target: the run page ≤ 200 ms with a number of queries that does not grow with the run; "
          f"{REPEAT} requests each, wall clock: see `uptime`)")


if __name__ == "__main__":
    main()
