"""Benchmark of the JSON API's cursor pages: every page of a run's predictions, as a notebook reads them.

    .venv/bin/python benchmarks/api_pages.py            # benchmarks/pages.py's data (1,000,020 final answers
                                                         # + 428,580 candidates), database bench_pages, rebuilt
    SESSIONS=20000 RUN_SESSIONS=2000 .venv/bin/python benchmarks/api_pages.py   # smaller
    REUSE=1 .venv/bin/python benchmarks/api_pages.py    # on what benchmarks/pages.py (or this) built before

The data is benchmarks/pages.py's (its `build`, on the same scratch database); an analyst's token
then pages through /api/v1/projects/bench/runs/<id>/predictions with the default page size (500),
cursor after cursor to the end, timing each request on the server side (the Django test client,
authentication, rate limit, audit entry and JSON included). It prints the median, 95th percentile
and slowest page against the target: ≤ 150 ms a page. Then the same through the run's numeric export
in pages of EXPORT_LIMIT (5,000) rows (EXPORT=0: not).
"""
import os
import statistics
import time

os.environ.setdefault("OWNWORDS_API_RATE_PER_MINUTE", str(10**9))  # the benchmark is one token's burst

import pages  # noqa: E402  benchmarks/pages.py beside this script: sets Django up on its scratch database

from django.test import Client  # noqa: E402

from experiments.data.api_tokens import token_create  # noqa: E402
from experiments.models import Prediction  # noqa: E402

LIMIT = int(os.environ.get("LIMIT", 500))
EXPORT_LIMIT = int(os.environ.get("EXPORT_LIMIT", 5000))


def page_through(client, path, limit):
    """Every page of a list, cursor after cursor: (server times in ms, rows)."""
    times, rows, cursor = [], 0, None
    while True:
        t0 = time.perf_counter()
        response = client.get(path, {"limit": limit, **({"cursor": cursor} if cursor else {})})
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.content[:300]
        body = response.json()
        rows += len(body["items"])
        if not (cursor := body["next_cursor"]):
            return sorted(times), rows


def report(what, times, rows, limit, seconds, target):
    print(f"\nJSON API, {what}: {rows:,} rows in {len(times):,} pages of {limit} "
          f"({seconds:.0f} s in all{f'; target ≤ {target} ms a page' if target else ''})")
    print(f"  median {statistics.median(times):.0f} ms, 95th percentile {times[int(0.95 * (len(times) - 1))]:.0f} ms, "
          f"slowest {times[-1]:.0f} ms, fastest {times[0]:.0f} ms"
          + (f"; {sum(t > target for t in times)} pages over {target} ms" if target else ""))


def main():
    run, user, tasks = pages.existing() if pages.REUSE else pages.build()
    token = token_create(user, "benchmark")[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    base = f"/api/v1/projects/bench/runs/{run.pk}"
    client.get(base + "/grades", {"limit": 1})  # the first request of a process loads the API's modules
    started = time.perf_counter()
    times, rows = page_through(client, base + "/predictions", LIMIT)
    assert rows == Prediction.objects.filter(run=run).count()
    report("predictions of a run", times, rows, LIMIT, time.perf_counter() - started, 150)
    if os.environ.get("EXPORT", "1") == "1":
        started = time.perf_counter()
        times, rows = page_through(client, base + "/export", EXPORT_LIMIT)
        assert rows == len(tasks) * len(run.protocol.conditions)
        report("the numeric export (task × condition)", times, rows, EXPORT_LIMIT, time.perf_counter() - started,
               None)


if __name__ == "__main__":
    main()
