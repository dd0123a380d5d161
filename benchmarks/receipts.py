"""Receipts of the same tasks at once on PostgreSQL: receipts per second,
retries and lost answers at K = 8, 32 and 128 threads.

For each K a new run (fusion and selection over two memories: per task six candidates, four
decisions and their judge calls, `tests/receipt_helpers.py`) goes through its phases; in each
phase every slot is reserved, then K slot threads, released together, receive the answers through
the journal's own step (`journal._decide_and_record`: the receipt, the slot and its results, made
again after a transient database error) in an order that keeps them on the same tasks at the same
moment. Their database steps run on min(K, --db-threads) connections lent to them, as in a
`MultiSlotWorker` (OWNWORDS_WORKER_DB_THREADS, 4 by default; PostgreSQL allows 100 connections by
default).
Printed per K and phase: receipts, seconds, receipts per second, retries (transient database
errors met and retried), lost (answers not stored: must be 0) and PostgreSQL's deadlock count.

    createdb -h 127.0.0.1 -U postgres bench_receipts     # once (the script also creates it)
    .venv/bin/python benchmarks/receipts.py               # K = 8 32 128, 40 tasks per run
    .venv/bin/python benchmarks/receipts.py --levels 8 32 --tasks 80

The database is emptied first; do not point it at real data. No model server is called: the
answers are made here (the receipt is what is measured).
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_receipts")
os.environ.setdefault("SECRET_KEY", "benchmark-only")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
# The protocols name a loopback server that is never called (the answers are made here).
os.environ.setdefault("OWNWORDS_LLM_ENDPOINTS", '[{"name": "bench-local", "url_prefix": "http://127.0.0.1:"}]')


from page_setup import ensure_database  # noqa: E402

ensure_database(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from experiments.execution.workers import LoanedConnections  # noqa: E402
from experiments.models import Project  # noqa: E402
from tests.engine_helpers import build_cohort, make_run  # noqa: E402
from tests.receipt_helpers import DECIDING, in_this_thread, receive_run  # noqa: E402

TARGETS_PER_SESSION = 10
MODEL = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "gpt-test-1", "timeout_s": 60.0}


def deadlocks() -> int:
    time.sleep(1.0)  # the closed backends report theirs as they exit
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def one_level(project, threads: int, tasks: int, db_threads: int) -> list:
    cohort = build_cohort(project, sessions=max(1, tasks // TARGETS_PER_SESSION), targets=TARGETS_PER_SESSION,
                          name=f"receipts-{threads}")
    run = make_run(project, cohort, conditions=DECIDING, generator=MODEL, name=f"receipts K={threads}",
                   concurrency={"openai": threads})
    connections = min(threads, db_threads)
    db = LoanedConnections(connections) if connections < threads else in_this_thread
    try:
        return receive_run(run, threads, db)
    finally:
        if db is not in_this_thread:
            db.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[8, 32, 128], help="K: slot threads at once")
    parser.add_argument("--tasks", type=int, default=40, help="tasks per run (a multiple of 10)")
    parser.add_argument("--db-threads", type=int, default=16, help="database connections at most (per K)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    project = Project.objects.create(slug="bench-receipts", name="Receipts benchmark")
    print(f"database: {connection.settings_dict['NAME']}; {args.tasks} tasks per run, conditions {DECIDING}")
    print(f"{'K':>4} {'conns':>5} {'phase':>11} {'receipts':>8} {'s':>6} {'receipts/s':>10} {'retries':>7} "
          f"{'lost':>4} {'deadlocks':>9}")
    lost_anywhere = 0
    for threads in args.levels:
        before = deadlocks()
        phases = one_level(project, threads, args.tasks, args.db_threads)
        counted = deadlocks() - before
        connections = min(threads, args.db_threads)
        for phase in phases:
            lost_anywhere += phase.lost
            print(f"{threads:>4} {connections:>5} {phase.phase:>11} {phase.receipts:>8} {phase.seconds:>6.2f} "
                  f"{phase.receipts / phase.seconds:>10.0f} {phase.retries:>7} {phase.lost:>4}", flush=True)
            for error in phase.errors[:3]:
                print(f"{'':>12} error: {error}")
        receipts, seconds = sum(p.receipts for p in phases), sum(p.seconds for p in phases)
        print(f"{threads:>4} {connections:>5} {'all':>11} {receipts:>8} {seconds:>6.2f} {receipts / seconds:>10.0f} "
              f"{sum(p.retries for p in phases):>7} {sum(p.lost for p in phases):>4} {counted:>9}", flush=True)
    print("retries: transient database errors met by a receipt and made again (durable.record_durably); "
          "lost: answers not stored; deadlocks: PostgreSQL's pg_stat_database count during the level.")
    sys.exit(1 if lost_anywhere else 0)


if __name__ == "__main__":
    main()
