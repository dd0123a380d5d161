"""Benchmark of experiments.core.stats: the eight-contrast family of App. B.3.

Run from the repository root:

    .venv/bin/python benchmarks/stats.py
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> .venv/bin/python benchmarks/stats.py \
        --dashboard-only --people 4000 20000 --repeat 3

    .venv/bin/python benchmarks/stats.py --diagnostics      # pool diagnostics and pickers
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> .venv/bin/python benchmarks/stats.py --tables

The second form times the dashboard's targets: a dashboard of 200,000 and 1,000,000 predictions
(4,000 and 20,000 people, 10 conditions, 8 family contrasts, 100,000 draws) on PostgreSQL,
each refresh in a fresh process with its peak resident memory. The third computes the
robustness tables of a paper-size run once and serves the tables page, its CSV and its LaTeX from
the cache (target: ≤ 200 ms).

Synthetic data of the paper's size (188 people, 1,768 tasks, raw grades 0..3,
one missing grade as in the paper's 1,767-task trait-memory contrasts), the
eight family contrasts at 100,000 draws with the family tails, and the slow
reference loop on fewer draws, extrapolated linearly to 100,000 (its cost is
proportional to the number of draws).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.core import stats  # noqa: E402

PEOPLE, TASKS = 188, 1_768
SEED = 20260918                 # App. B.3
DRAWS = 100_000
LOOP_DRAWS = 10_000             # the loop runs on these and is extrapolated
CONDITIONS = ("one-shot C", "fusion C", "selection C",
              "one-shot T", "fusion T", "selection T",
              "whole record", "current dialogue")

# The family of App. B.3 as (name, conditions, coefficients).
FAMILY = [
    ("fusion − one-shot (concrete)", ("fusion C", "one-shot C"), (1, -1)),
    ("fusion − one-shot (trait)", ("fusion T", "one-shot T"), (1, -1)),
    ("concrete − trait under fusion", ("fusion C", "fusion T"), (1, -1)),
    ("interaction γ", ("fusion C", "one-shot C", "fusion T", "one-shot T"), (1, -1, -1, 1)),
    ("fusion − selection (concrete)", ("fusion C", "selection C"), (1, -1)),
    ("fusion − selection (trait)", ("fusion T", "selection T"), (1, -1)),
    ("fusion C − whole record", ("fusion C", "whole record"), (1, -1)),
    ("fusion C − current dialogue", ("fusion C", "current dialogue"), (1, -1)),
]


def synthetic_grades(seed: int = 1) -> dict[str, dict[tuple[int, int], int | None]]:
    """Per-condition {(person, task): grade} with correlated grades, uneven people."""
    rng = np.random.default_rng(seed)
    per_person = 5 + rng.multinomial(TASKS - 5 * PEOPLE, np.full(PEOPLE, 1 / PEOPLE))
    keys = [(p, t) for p in range(PEOPLE) for t in range(per_person[p])]
    base = rng.integers(0, 4, size=len(keys))           # how answerable the task is
    grades = {}
    for shift, name in zip(np.linspace(-0.2, 0.3, len(CONDITIONS)), CONDITIONS):
        noise = rng.choice([-1, 0, 1], size=len(keys), p=[0.25 + shift / 2, 0.5, 0.25 - shift / 2])
        grades[name] = dict(zip(keys, np.clip(base + noise, 0, 3).tolist()))
    grades["fusion T"][keys[100]] = None                 # one missing judgment
    return grades


def main() -> None:
    grades = synthetic_grades()
    tails = stats.family_tails(len(FAMILY))
    owner = lambda key: key[0]  # noqa: E731
    print(f"{PEOPLE} people, {TASKS} tasks; {DRAWS:,} draws per contrast, tails {tails}; "
          f"numpy {np.__version__}")
    print(f"{'contrast':32s} {'tasks':>5s} {'estimate':>9s} {'family interval':>21s} "
          f"{'fast s':>7s} {'loop s*':>8s} {'ratio':>6s}")
    fast_total = loop_total = 0.0
    for name, conds, coefficients in FAMILY:
        paired = stats.paired_set(*(grades[c] for c in conds), person=owner)
        diff = paired.diff(coefficients)

        t0 = time.perf_counter()
        r = stats.paired_bootstrap(paired.person, diff, seed=SEED, draws=DRAWS, tails=tails)
        fast = time.perf_counter() - t0

        t0 = time.perf_counter()
        slow = stats.paired_bootstrap_loop(paired.person, diff, seed=SEED,
                                           draws=LOOP_DRAWS, tails=tails)
        loop = (time.perf_counter() - t0) * DRAWS / LOOP_DRAWS
        # Same stream: the fast code on the loop's draws must give the loop's interval.
        check = stats.paired_bootstrap(paired.person, diff, seed=SEED, draws=LOOP_DRAWS, tails=tails)
        assert abs(check.lo - slow.lo) < 1e-12 and abs(check.hi - slow.hi) < 1e-12, name

        fast_total += fast
        loop_total += loop
        print(f"{name:32s} {r.n_tasks:5d} {r.estimate:+9.4f} [{r.lo:+.4f}, {r.hi:+.4f}] "
              f"{fast:7.3f} {loop:8.2f} {loop / fast:5.0f}x")
    print(f"{'family of 8':32s} {'':5s} {'':9s} {'':21s} {fast_total:7.3f} {loop_total:8.2f} "
          f"{loop_total / fast_total:5.0f}x")
    print(f"* loop seconds extrapolated linearly from {LOOP_DRAWS:,} draws to {DRAWS:,}; "
          "the loop and the vectorised code agreed on those draws.")

    # The same family on one shared stream of draws: identical intervals.
    requests, separate = [], []
    for name, conds, coefficients in FAMILY:
        paired = stats.paired_set(*(grades[c] for c in conds), person=owner)
        requests.append(stats.BootstrapRequest(paired.person, paired.diff(coefficients), (tails,)))
        separate.append(stats.paired_bootstrap(paired.person, paired.diff(coefficients), seed=SEED, draws=DRAWS,
                                               tails=tails))
    t0 = time.perf_counter()
    shared = stats.shared_bootstraps(requests, seed=SEED, draws=DRAWS)
    elapsed = time.perf_counter() - t0
    assert [r[0] for r in shared] == separate, "shared draws must give the separate intervals bit for bit"
    print(f"{'family of 8, shared draws':32s} {'':5s} {'':9s} {'identical intervals':>21s} {elapsed:7.3f}")



def dashboard_from_database(people: int, tasks_per_person: int = 5, conditions_n: int = 10,
                            repeat: int = 3) -> None:
    """A run's dashboard recomputed from the database: people × tasks × conditions final predictions.

    Each timing runs `dashboard_refresh` in a fresh process, which reports its wall time and
    peak resident memory.
    """
    run, started = build_run(people, tasks_per_person, conditions_n)
    print(f"\nbuilt run {run.pk} in {time.perf_counter() - started:.1f} s (time it again with --run {run.pk})")
    time_refreshes(run.pk, repeat)


def build_run(people: int, tasks_per_person: int = 5, conditions_n: int = 10):
    """A finished benchmark run of people × tasks × conditions final predictions, graded; (run, start time).

    Uses a fresh database on the embedded server unless DATABASE_URL names another database.  The predictions and
    grades are written by SQL (INSERT … SELECT).
    """
    setup_django()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from experiments import models as m
    from experiments.core.conditions import CONDITIONS as REGISTRY

    call_command("migrate", verbosity=0)
    keys = [k for k, c in REGISTRY.items() if c.runnable][:conditions_n]
    started = time.perf_counter()
    project = m.Project.objects.create(slug=f"bench-{time.time_ns()}", name="bench")
    study = m.Study.objects.create(project=project, key="s")
    task_set = m.TaskSet.objects.create(project=project, min_pairs=1, min_targets=1, max_targets=5,
                                        derived_at=timezone.now())
    cohort = m.Cohort.objects.create(project=project, task_set=task_set, name="c", seed=1,
                                     requested_size=people, rule={}, task_list_sha256="-")
    position = 0
    for first in range(0, people, 2_000):             # batches keep the builder's memory small
        batch = range(first, min(people, first + 2_000))
        persons = m.Person.objects.bulk_create([m.Person(project=project, label=f"p{i}") for i in batch])
        sessions = m.Session.objects.bulk_create([
            m.Session(project=project, study=study, person=p, external_id=f"s{i}", source_format="jsonl",
                      source_file="bench") for i, p in zip(batch, persons)])
        turns = m.Turn.objects.bulk_create([
            m.Turn(session=s, index=j, speaker="interviewer" if j % 2 == 0 else "participant", text=f"turn {j}?")
            for s in sessions for j in range(2 * tasks_per_person)], batch_size=5000)
        tasks = m.Task.objects.bulk_create([
            m.Task(task_set=task_set, session=s, question_turn=turns[k * 2 * tasks_per_person + 2 * j],
                   answer_turn=turns[k * 2 * tasks_per_person + 2 * j + 1], position=j, pair_number=j, cut=2 * j,
                   record_cut=0)
            for k, s in enumerate(sessions) for j in range(tasks_per_person)], batch_size=5000)
        m.CohortTask.objects.bulk_create([m.CohortTask(cohort=cohort, task=t, position=position + i)
                                          for i, t in enumerate(tasks)], batch_size=5000)
        position += len(tasks)
    contrasts = [{"name": f"{a} - {keys[0]}", "terms": {a: 1, keys[0]: -1}, "family": True} for a in keys[1:9]]
    protocol = m.Protocol.objects.create(project=project, name="p", cohort=cohort, conditions=keys,
                                         generator={}, judge={}, contrasts=contrasts,
                                         bootstrap={"seed": SEED, "draws": DRAWS})
    run = m.Run.objects.create(protocol=protocol, status="finished", phase="done")
    # One final prediction per task and condition, and its grade: a deterministic hash for the score.
    conditions_sql = " UNION ALL ".join(f"SELECT {i} AS k, %s AS name" for i in range(len(keys)))
    sha = "CAST(ct.task_id AS TEXT) || '-' || CAST(c.k AS TEXT)"
    source = (f"FROM {m.CohortTask._meta.db_table} ct CROSS JOIN ({conditions_sql}) c WHERE ct.cohort_id = %s")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {m.Prediction._meta.db_table} (run_id, task_id, condition, label, status, text, "
            "answer_sha256, chosen_label, evidence, evidence_chars, copied_label) "
            f"SELECT %s, ct.task_id, c.name, 'final', 'ok', 'an answer of a few words', {sha}, '', '', 0, '' {source}",
            [run.pk, *keys, cohort.pk])
        cursor.execute(
            f"INSERT INTO {m.Grade._meta.db_table} (run_id, task_id, answer_sha256, status, score, rationale, "
            f"parse_error) SELECT %s, ct.task_id, {sha}, 'ok', "
            f"((ct.task_id * 1103515245 + c.k * 12345 + {SEED}) %% 2147483648) / 65536 %% 4, '', '' {source}",
            [run.pk, *keys, cohort.pk])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return run, started


def time_refreshes(run_id: int, repeat: int) -> None:
    from django.db import connection

    from experiments import models as m

    run = m.Run.objects.select_related("protocol").get(pk=run_id)
    protocol = run.protocol
    print(f"dashboard database (PostgreSQL {connection.pg_version}): run {run_id}, "
          f"{m.Prediction.objects.filter(run=run).count():,} predictions and grades, "
          f"{protocol.cohort.tasks.count():,} tasks, "
          f"{m.Person.objects.filter(sessions__tasks__cohorts=protocol.cohort).distinct().count():,} people, "
          f"{len(protocol.conditions)} conditions, {len(protocol.contrasts)} family contrasts")
    times, peaks, cpus = [], [], []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, __file__, "--time-dashboard", str(run_id)], check=True,
                             capture_output=True, text=True, env=os.environ).stdout.split()
        times.append(float(out[0]))
        peaks.append(float(out[1]))
        cpus.append(float(out[2]))
    print(f"dashboard recomputed from the database at {DRAWS:,} draws (means with intervals, 8 contrasts with "
          f"pointwise, family and study intervals, bounds, decompositions, sweep, lengths, cost), "
          f"{repeat} fresh processes: best {min(times):.2f} s, median {statistics.median(times):.2f} s; "
          f"peak RSS best {min(peaks):.0f} MB, median {statistics.median(peaks):.0f} MB, max {max(peaks):.0f} MB; "
          f"CPU of the process (not PostgreSQL's) best {min(cpus):.2f} s, median {statistics.median(cpus):.2f} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def time_dashboard(run_id: int) -> None:
    """Child process of `dashboard_from_database`: prints seconds, peak RSS (MB) and CPU seconds of one refresh."""
    setup_django()
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.models import Run

    run = Run.objects.select_related("protocol").get(pk=run_id)
    started, cpu = time.perf_counter(), time.process_time()
    dashboard_refresh(run)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"{elapsed:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {cpu:.3f}")


def diagnostics_benchmark(repeat: int = 3) -> None:
    """The pool diagnostics (App. I.3) and picker contrasts of one common-experiment run.

    1,768 tasks of 188 people × 12 conditions (two memories × b0, b1, b2, fusion, selection;
    the whole record; the current dialogue), 100,000 draws, everything on one shared stream as
    the pools page computes it; then the pickers' text rules on answers of about 140 words.
    """
    from experiments.core import pickers
    from experiments.core.stats.pool_stats import Draws, Pool, picker_rows, pool_diagnostics

    rng = np.random.default_rng(14)
    per_person = 5 + rng.multinomial(TASKS - 5 * PEOPLE, np.full(PEOPLE, 1 / PEOPLE))
    person = np.repeat(np.arange(PEOPLE), per_person)
    pools = []
    for name in ("memory(concrete,100w)", "memory(trait,100w)"):
        base = rng.integers(0, 4, TASKS)
        grades = np.clip(base + rng.choice([-1, 0, 0, 1], size=(3, TASKS)), 0, 3).astype(float)
        grades[1, 7] = np.nan                                # one pool lacks a candidate
        display = np.argsort(rng.random((3, TASKS)), axis=0)
        words = rng.normal(135, 30, (3, TASKS)).round()
        pick = rng.integers(0, 3, TASKS)
        copied = np.where(rng.random(TASKS) < 0.4, rng.integers(0, 3, TASKS), -1)
        take = np.take_along_axis
        pools.append(Pool(
            name=name, person=person, candidates=grades, display=display, words=words,
            selection_grade=take(grades, pick[None], 0)[0], selection_pick=pick,
            selection_words=take(words, pick[None], 0)[0],
            fusion_grade=np.where(copied >= 0, take(grades, np.maximum(copied, 0)[None], 0)[0],
                                  np.clip(base + rng.choice([-1, 0, 1], TASKS), 0, 3)),
            fusion_copies=(copied >= 0).astype(int), fusion_copied=copied,
            fusion_words=words[0] + rng.integers(-5, 5, TASKS)))
    timings = []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        draws = Draws(SEED, DRAWS)
        diagnostics = [pool_diagnostics(pool, draws) for pool in pools]
        draws.compute()
        diagnostics_s = (time.perf_counter() - started, time.process_time() - cpu)
        started, cpu = time.perf_counter(), time.process_time()
        draws = Draws(SEED, DRAWS)
        for pool in pools:
            complete = ~np.isnan(pool.candidates).any(axis=0)
            picked = {rule: pool.candidates[rng.integers(0, 3, TASKS), np.arange(TASKS)]
                      for rule in (*pickers.POOL_RULES, *pickers.CROSS_MEMORY)}
            comparators = {"candidate mean": np.where(complete, np.nan_to_num(pool.candidates).sum(0) / 3, np.nan),
                           "one-shot (b0)": pool.candidates[0], "prompted selector": pool.selection_grade,
                           "fusion": pool.fusion_grade}
            picker_rows(person, picked, comparators, draws)
        draws.compute()
        timings.append((diagnostics_s, (time.perf_counter() - started, time.process_time() - cpu)))
    match = diagnostics[0]["oracle_match"][1]
    print(f"pool diagnostics, {TASKS} tasks × 12 conditions, {PEOPLE} people, {DRAWS:,} draws: "
          f"unequal-pool match {match['matches']}/{match['n']}, difference {match['estimate']:+.4f} "
          f"[{match['lo']:+.4f}, {match['hi']:+.4f}]")
    for label, k in (("diagnostics (both pools, every interval)", 0), ("picker contrasts (14 rules × 4 comparators × 2 pools)", 1)):
        print(f"  {label}: wall best {min(t[k][0] for t in timings):.2f} s, "
              f"CPU best {min(t[k][1] for t in timings):.2f} s, median {statistics.median(t[k][1] for t in timings):.2f} s")
    vocabulary = [f"w{i}" for i in range(400)]
    texts = [[" ".join(rng.choice(vocabulary, int(n))) for n in rng.normal(135, 30, 8).clip(5)] for _ in range(TASKS)]
    started, cpu = time.perf_counter(), time.process_time()
    for t in texts:
        pickers.task_picks([t[0:3], t[3:6]], [t[6], t[7]])
    print(f"  pickers' text rules on {TASKS} tasks × two pools of ~135-word answers: "
          f"wall {time.perf_counter() - started:.2f} s, CPU {time.process_time() - cpu:.2f} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def tables_benchmark(people: int = 188, tasks_per_person: int = 9, conditions_n: int = 12,
                     repeat: int = 20) -> None:
    """The robustness tables of a paper-size run (188 people, 1,692 tasks, 12 conditions, 8 contrasts,
    100,000 draws) computed once, then the tables page, its CSV and its LaTeX served from the cache."""
    setup_django()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from experiments import models as m
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.analysis.tables import tables_refresh

    run, _ = build_run(people, tasks_per_person, conditions_n)
    # Answers of varied length and evidence of varied size, so the length subgroups and regressions run.
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {m.Prediction._meta.db_table} SET text = substr(CAST(%s AS TEXT), 1, CAST("
                       "5 * (1 + (task_id * 7 + length(condition) * 13) %% 60) AS INTEGER)), "
                       "evidence_chars = (task_id * 31 + length(condition) * 17) %% 3000 WHERE run_id = %s",
                       ["word " * 61, run.pk])
    run = m.Run.objects.select_related("protocol").get(pk=run.pk)
    print(f"\ntables: run {run.pk}, {run.protocol.cohort.tasks.count():,} tasks, {people} people, "
          f"{len(run.protocol.conditions)} conditions, {len(run.protocol.contrasts)} contrasts, {DRAWS:,} draws "
          f"(PostgreSQL {connection.pg_version})")
    for name, step in (("dashboard_refresh", dashboard_refresh), ("tables_refresh", tables_refresh)):
        started, cpu = time.perf_counter(), time.process_time()
        step(run)
        print(f"  {name}: {time.perf_counter() - started:.2f} s wall, {time.process_time() - cpu:.2f} s CPU")
    user = get_user_model().objects.create_user(username=f"bench-{time.time_ns()}", password="x" * 12)
    m.Membership.objects.create(project=run.protocol.project, user=user, role=m.Role.VIEWER)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    url = reverse("run_tables", args=[run.protocol.project.slug, run.pk])
    for label, suffix in (("page", ""), ("CSV", "?format=csv"), ("LaTeX", "?format=latex")):
        assert client.get(url + suffix).status_code == 200      # warm
        walls, cpus = [], []
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.process_time()
            response = client.get(url + suffix)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
            assert response.status_code == 200
        print(f"  tables {label} from cache, {repeat} requests: median {statistics.median(walls) * 1000:.0f} ms "
              f"wall (best {min(walls) * 1000:.0f}), median {statistics.median(cpus) * 1000:.0f} ms CPU of this "
              f"process; {len(response.content):,} bytes")
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def setup_django() -> None:
    if not os.environ.get("DATABASE_URL"):
        from ownwords_site import embedded
        os.environ["DATABASE_URL"] = embedded.fresh_postgres_url(Path(__file__).resolve().parents[1] / "var",
                                                                 "bench_dashboard")
    os.environ.setdefault("SECRET_KEY", "benchmark-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
    import django
    from django.conf import settings

    django.setup()
    # The tables page's {% static %} tags without a collectstatic run (production's storage reads its manifest).
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, nargs="*", default=[400],
                        help="dashboard sizes in people (5 tasks each, 10 conditions): 4000 is 200,000 "
                             "predictions, 20000 is 1,000,000")
    parser.add_argument("--repeat", type=int, default=3, help="timed dashboard refreshes per size")
    parser.add_argument("--dashboard-only", action="store_true", help="skip the paper-size family")
    parser.add_argument("--run", type=int, nargs="*", default=[], help="time existing benchmark runs again")
    parser.add_argument("--time-dashboard", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--diagnostics", action="store_true",
                        help="only the pool diagnostics and pickers of one common-experiment run")
    parser.add_argument("--tables", action="store_true",
                        help="only the robustness tables of a paper-size run: compute once, then the page from cache")
    args = parser.parse_args()
    if args.time_dashboard:
        time_dashboard(args.time_dashboard)
    elif args.diagnostics:
        diagnostics_benchmark(args.repeat)
    elif args.tables:
        tables_benchmark()
    else:
        if not args.dashboard_only:
            main()
        if args.run:
            setup_django()
        for run_id in args.run:
            time_refreshes(run_id, args.repeat)
        for n in args.people if not args.run else []:
            dashboard_from_database(n, repeat=args.repeat)
