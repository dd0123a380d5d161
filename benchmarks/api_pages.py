"""Benchmark of the JSON API's cursor pages: every page of a run's predictions, as a notebook reads them.

    .venv/bin/python benchmarks/api_pages.py            # benchmarks/pages.py's data (1,000,020 final answers
                                                         # + 428,580 candidates), database bench_pages, rebuilt
    SESSIONS=20000 RUN_SESSIONS=2000 .venv/bin/python benchmarks/api_pages.py   # smaller
    REUSE=1 .venv/bin/python benchmarks/api_pages.py    # on what benchmarks/pages.py (or this) built before

The data is benchmarks/pages.py's (its `build`, on the same scratch database); an analyst's token
then pages through /api/v1/projects/bench/runs/<id>/predictions with the default page size (500),
cursor after cursor to the end, timing each request on the server side (the Django test client,
authentication, rate limit, audit entry and JSON included). It prints the median, 95th percentile
and slowest page against the target: ≤ 150 ms a page.
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


def main():
    run, user, _ = pages.existing() if pages.REUSE else pages.build()
    token = token_create(user, "benchmark")[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    path = f"/api/v1/projects/bench/runs/{run.pk}/predictions"
    total = Prediction.objects.filter(run=run).count()
    times, rows, cursor = [], 0, None
    started = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        response = client.get(path, {"limit": LIMIT, **({"cursor": cursor} if cursor else {})})
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.content[:300]
        body = response.json()
        rows += len(body["items"])
        if not (cursor := body["next_cursor"]):
            break
    assert rows == total, (rows, total)
    times.sort()
    print(f"\nJSON API, predictions of a run: {rows:,} rows in {len(times):,} pages of {LIMIT} "
          f"({time.perf_counter() - started:.0f} s in all; target ≤ 150 ms a page)")
    print(f"  median {statistics.median(times):.0f} ms, 95th percentile {times[int(0.95 * (len(times) - 1))]:.0f} ms, "
          f"slowest {times[-1]:.0f} ms, fastest {times[0]:.0f} ms")


if __name__ == "__main__":
    main()
