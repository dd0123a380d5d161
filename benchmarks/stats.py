"""Benchmark of experiments.core.stats (issue 5): the eight-contrast family of App. B.3.

Run from the repository root:

    .venv/bin/python benchmarks/stats.py

Synthetic data of the paper's size (188 people, 1,768 tasks, raw grades 0..3,
one missing grade as in the paper's 1,767-task trait-memory contrasts), the
eight family contrasts at 100,000 draws with the family tails, and the slow
reference loop on fewer draws, extrapolated linearly to 100,000 (its cost is
proportional to the number of draws).
"""

from __future__ import annotations

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

    # ------------------------------------------------------------------
    dashboard_from_database()


def dashboard_from_database(tasks_n: int = 2_000, conditions_n: int = 10) -> None:
    """A run's dashboard recomputed from a database holding 20,000 final predictions.

    Uses a fresh SQLite file unless DATABASE_URL names another (empty) database.
    """
    import os
    import tempfile

    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/dashboard.sqlite3")
    os.environ.setdefault("SECRET_KEY", "benchmark-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from experiments import models as m
    from experiments.core.conditions import CONDITIONS as REGISTRY
    from experiments.analysis.dashboard import dashboard_refresh

    call_command("migrate", verbosity=0)
    keys = [k for k, c in REGISTRY.items() if c.runnable][:conditions_n]
    rng = np.random.default_rng(SEED)
    started = time.perf_counter()
    project = m.Project.objects.create(slug=f"bench-{int(time.time())}", name="bench")
    study = m.Study.objects.create(project=project, key="s")
    sessions = tasks_n // 5
    people = m.Person.objects.bulk_create([m.Person(project=project, label=f"p{i}") for i in range(sessions)])
    session_rows = m.Session.objects.bulk_create([
        m.Session(project=project, study=study, person=people[i], external_id=f"s{i}", source_format="jsonl",
                  source_file="bench") for i in range(sessions)])
    turns = m.Turn.objects.bulk_create([
        m.Turn(session=s, index=j, speaker="interviewer" if j % 2 == 0 else "participant", text=f"turn {j}?")
        for s in session_rows for j in range(10)], batch_size=5000)
    task_set = m.TaskSet.objects.create(project=project, min_pairs=1, min_targets=1, max_targets=5,
                                        derived_at=timezone.now())
    task_rows = m.Task.objects.bulk_create([
        m.Task(task_set=task_set, session=s, question_turn=turns[k * 10 + 2 * j], answer_turn=turns[k * 10 + 2 * j + 1],
               position=j, pair_number=j, cut=2 * j, record_cut=0)
        for k, s in enumerate(session_rows) for j in range(5)], batch_size=5000)
    cohort = m.Cohort.objects.create(project=project, task_set=task_set, name="c", seed=1,
                                     requested_size=sessions, rule={}, task_list_sha256="-")
    m.CohortTask.objects.bulk_create([m.CohortTask(cohort=cohort, task=t, position=i) for i, t in enumerate(task_rows)],
                                     batch_size=5000)
    contrasts = [{"name": f"{a} - {keys[0]}", "terms": {a: 1, keys[0]: -1}, "family": True} for a in keys[1:9]]
    protocol = m.Protocol.objects.create(project=project, name="p", cohort=cohort, conditions=keys,
                                         generator={}, judge={}, contrasts=contrasts,
                                         bootstrap={"seed": SEED, "draws": DRAWS})
    run = m.Run.objects.create(protocol=protocol, status="finished", phase="done")
    predictions, grades = [], []
    for t in task_rows:
        for key in keys:
            sha = f"{t.pk}-{key}"
            predictions.append(m.Prediction(run=run, task=t, condition=key, label="final", status="ok",
                                            text="an answer of a few words", answer_sha256=sha))
            grades.append(m.Grade(run=run, task=t, answer_sha256=sha, status="ok", score=int(rng.integers(0, 4))))
    m.Prediction.objects.bulk_create(predictions, batch_size=5000)
    m.Grade.objects.bulk_create(grades, batch_size=5000)
    print(f"\ndashboard database ({connection.vendor}): {len(predictions):,} predictions and grades, "
          f"{len(task_rows):,} tasks, {sessions} people, {len(keys)} conditions, {len(contrasts)} family contrasts "
          f"(built in {time.perf_counter() - started:.1f} s)")
    started = time.perf_counter()
    dashboard_refresh(run)
    print(f"dashboard recomputed from the database at {DRAWS:,} draws: {time.perf_counter() - started:.2f} s "
          f"(means with intervals, 8 contrasts with pointwise, family and study intervals, bounds, "
          f"decompositions, lengths, cost)")


if __name__ == "__main__":
    main()
