"""Benchmark of the JSON API's cursor pages: every page of a run's predictions, as a notebook reads them.

    .venv/bin/python benchmarks/api_pages.py            # benchmarks/pages.py's data (1,000,020 final answers
                                                         # + 428,580 candidates), database bench_pages, rebuilt
    SESSIONS=20000 RUN_SESSIONS=2000 .venv/bin/python benchmarks/api_pages.py   # smaller
    REUSE=1 .venv/bin/python benchmarks/api_pages.py    # on what benchmarks/pages.py (or this) built before

The data is benchmarks/pages.py's (its `build`, on the same scratch database), and a second run (of
the project "bench-later") whose LATER_ROWS answers (default 50,000) were written after the first's.
The process then starts as the server does (ownwords_site/wsgi.py: every view loaded, gc.freeze();
FREEZE=0: not) and an analyst's token pages through /api/v1/projects/<slug>/runs/<id>/predictions of
each run with the default page size (500), cursor after cursor to the end, timing each request on the
server side (the Django test client, authentication, rate limit, audit entry and JSON included).
It prints the median, 99th percentile and slowest page against the target (≤ 150 ms a page), this
process's CPU a page, the longest garbage collection and the slowest statements, then EVERY page
over the target with where its time went: this process's CPU, garbage collection (wall and CPU),
its statements (time, number, the slowest). A page over the target with ~13 ms of CPU and no long
collection waited: for PostgreSQL (itself waiting for a CPU or the disk), Redis or a CPU of its own.
Then the run's numeric export in pages of EXPORT_LIMIT (5,000) rows (EXPORT=0: not).
"""
import gc
import os
import statistics
import time
from typing import NamedTuple

os.environ.setdefault("OWNWORDS_API_RATE_PER_MINUTE", str(10**9))  # the benchmark is one token's burst

import pages  # noqa: E402  benchmarks/pages.py beside this script: sets Django up on its scratch database

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from experiments.data.api_tokens import token_create  # noqa: E402
from experiments.models import Membership, Prediction, Project, Protocol, Role, Run  # noqa: E402
from experiments.models.runs import Phase  # noqa: E402

LIMIT = int(os.environ.get("LIMIT", 500))
EXPORT_LIMIT = int(os.environ.get("EXPORT_LIMIT", 5000))
LATER_ROWS = int(os.environ.get("LATER_ROWS", 50_000))


class Page(NamedTuple):
    number: int  # 1-based
    ms: float  # the request, server side (the Django test client, in this process)
    cpu_ms: float  # this process's CPU time in it (the rest: waiting for PostgreSQL, Redis or a CPU)
    gc_ms: float  # garbage collection inside it: its wall time and its CPU time (a collection
    gc_cpu_ms: float  # during which the process waited for a CPU shows a long wall time and a short CPU one)
    sql_ms: float  # its statements, as the driver waited for them
    queries: int
    slowest_sql: str  # the start of its slowest statement


gc_wall: list[float] = []  # ms of each garbage collection since the lists were emptied
gc_cpu: list[float] = []
_gc_started = [0.0, 0.0]


def _gc_timer(phase, info):
    if phase == "start":
        _gc_started[:] = time.perf_counter(), time.process_time()
    else:
        gc_wall.append((time.perf_counter() - _gc_started[0]) * 1000)
        gc_cpu.append((time.process_time() - _gc_started[1]) * 1000)


gc.callbacks.append(_gc_timer)


def page_through(client, path, limit) -> tuple[list[Page], int]:
    """Every page of a list, cursor after cursor: each page's timing, and the rows."""
    pages_seen, rows, cursor = [], 0, None
    statements: list[tuple[float, str]] = []

    def timed_statement(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append(((time.perf_counter() - started) * 1000, sql))

    with connection.execute_wrapper(timed_statement):
        while True:
            statements.clear()
            gc_wall.clear()
            gc_cpu.clear()
            t0, cpu0 = time.perf_counter(), time.process_time()
            response = client.get(path, {"limit": limit, **({"cursor": cursor} if cursor else {})})
            ms, cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - cpu0) * 1000
            pages_seen.append(Page(len(pages_seen) + 1, ms, cpu_ms, sum(gc_wall), sum(gc_cpu),
                                   sum(t for t, _ in statements), len(statements), max(statements)[1][:60]))
            assert response.status_code == 200, response.content[:300]
            body = response.json()
            rows += len(body["items"])
            if not (cursor := body["next_cursor"]):
                return pages_seen, rows


def report(what, seen: list[Page], rows, limit, seconds, target):
    times = sorted(p.ms for p in seen)
    load = os.getloadavg()
    print(f"\nJSON API, {what}: {rows:,} rows in {len(times):,} pages of {limit} "
          f"({seconds:.0f} s in all{f'; target ≤ {target} ms a page' if target else ''}; load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs)")
    print(f"  median {statistics.median(times):.1f} ms, 99th percentile {times[int(0.99 * (len(times) - 1))]:.1f} ms, "
          f"slowest {times[-1]:.1f} ms, fastest {times[0]:.1f} ms"
          + (f"; {sum(t > target for t in times)} pages over {target} ms" if target else ""))
    cpu = sorted(p.cpu_ms for p in seen)
    print(f"  this process's CPU a page: median {statistics.median(cpu):.1f} ms, slowest {cpu[-1]:.1f} ms; "
          f"the longest garbage collection {max(p.gc_cpu_ms for p in seen):.1f} ms of CPU; the slowest statements "
          f"{max(p.sql_ms for p in seen):.1f} ms (a page over the target with little CPU waited: for PostgreSQL, "
          "Redis or a CPU)")
    slow = sorted(seen, key=lambda p: -p.ms)[:10] if target is None else [p for p in seen if p.ms > target]
    for page in slow:  # every page over the target (without one, the ten slowest), and where its time went
        print(f"    page {page.number:>5}: {page.ms:6.1f} ms (CPU {page.cpu_ms:.1f} ms, garbage collection "
              f"{page.gc_ms:.1f} ms, of CPU {page.gc_cpu_ms:.1f}, "
              f"{page.queries} statements {page.sql_ms:.1f} ms, the slowest {page.slowest_sql}…)")


def later_run(run, user):
    """A run of another project ("bench-later") whose LATER_ROWS answers (the first run's first ones,
    copied) were written after all of the first run's: ids above every one of them, as a run started
    after another gets them. Made once (REUSE=1 finds it)."""
    found = Run.objects.filter(protocol__project__slug="bench-later").first()
    if found is not None:
        return found
    project = Project.objects.create(slug="bench-later", name="bench-later")
    Membership.objects.create(project=project, user=user, role=Role.ANALYST)
    source = run.protocol
    protocol = Protocol.objects.create(project=project, name="later", cohort=source.cohort,
                                       conditions=source.conditions, generator=source.generator, judge=source.judge,
                                       bootstrap=source.bootstrap)
    later = Run.objects.create(protocol=protocol, status=Run.Status.FINISHED, phase=Phase.DONE,
                               planned_phase=Phase.JUDGING)
    columns = ("task_id, condition, label, status, text, answer_sha256, chosen_label, evidence, evidence_chars, "
               "copied_label, budget, score")
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO experiments_prediction (run_id, {columns}) SELECT %s, {columns} "
                       "FROM experiments_prediction WHERE run_id = %s ORDER BY id LIMIT %s",
                       [later.pk, run.pk, LATER_ROWS])
        cursor.execute("ANALYZE experiments_prediction")
    return later


def main():
    run, user, tasks = pages.existing() if pages.REUSE else pages.build()
    later = later_run(run, user)
    if os.environ.get("FREEZE", "1") == "1":
        import ownwords_site.wsgi  # noqa: F401  the server's start: every view loaded, then gc.freeze()
    token = token_create(user, "benchmark")[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    base = f"/api/v1/projects/bench/runs/{run.pk}"
    client.get(base + "/grades", {"limit": 1})  # the first request of a process loads the API's modules
    started = time.perf_counter()
    seen, rows = page_through(client, base + "/predictions", LIMIT)
    assert rows == Prediction.objects.filter(run=run).count()
    report("predictions of a run", seen, rows, LIMIT, time.perf_counter() - started, 150)
    started = time.perf_counter()
    seen, rows = page_through(client, f"/api/v1/projects/bench-later/runs/{later.pk}/predictions", LIMIT)
    assert rows == LATER_ROWS
    report("predictions of a run written after the first", seen, rows, LIMIT, time.perf_counter() - started, 150)
    if os.environ.get("EXPORT", "1") == "1":
        started = time.perf_counter()
        seen, rows = page_through(client, base + "/export", EXPORT_LIMIT)
        assert rows == len(tasks) * len(run.protocol.conditions)
        report("the numeric export (task × condition)", seen, rows, EXPORT_LIMIT, time.perf_counter() - started,
               None)


if __name__ == "__main__":
    main()
