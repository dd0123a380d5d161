"""Benchmark of the candidate pools page from the database: one common-experiment-sized run.

Run from the repository root (a fresh database on the embedded server unless DATABASE_URL names another database):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> .venv/bin/python benchmarks/pools.py [--repeat 3]

Builds 188 people, 1,768 tasks and the predictions of 12 conditions (two memories × b0, b1,
b2, fusion, selection; the whole record; the current dialogue) with answers of about 135
words and their grades, then times `pools_refresh` (reading every pool prediction, the
pickers' text rules, the diagnostics and the picker contrasts at 100,000 draws) in fresh
processes, with CPU time (this machine is shared: wall time depends on the load).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.stats import DRAWS, PEOPLE, SEED, TASKS, setup_django  # noqa: E402

MEMORIES = ("memory(concrete,100w)", "memory(trait,100w)")


def build() -> int:
    setup_django()
    from django.core.management import call_command
    from django.utils import timezone

    from experiments import models as m
    from experiments.analysis.grades import store_scores
    from experiments.core.canonical import sha256_text

    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(14)
    project = m.Project.objects.create(slug=f"pools-{time.time_ns()}", name="pools bench")
    study = m.Study.objects.create(project=project, key="s")
    task_set = m.TaskSet.objects.create(project=project, min_pairs=1, min_targets=1, max_targets=20,
                                        derived_at=timezone.now())
    cohort = m.Cohort.objects.create(project=project, task_set=task_set, name="c", seed=1, requested_size=PEOPLE,
                                     rule={}, task_list_sha256="-")
    per_person = 5 + rng.multinomial(TASKS - 5 * PEOPLE, np.full(PEOPLE, 1 / PEOPLE))
    persons = m.Person.objects.bulk_create([m.Person(project=project, label=f"p{i}") for i in range(PEOPLE)])
    sessions = m.Session.objects.bulk_create([
        m.Session(project=project, study=study, person=p, external_id=f"s{i}", source_format="jsonl",
                  source_file="bench") for i, p in enumerate(persons)])
    turns = m.Turn.objects.bulk_create([
        m.Turn(session=s, index=j, speaker="interviewer" if j % 2 == 0 else "participant",
               text=f"What about part {j} of your work?" if j % 2 == 0 else "an answer")
        for s, n in zip(sessions, per_person) for j in range(2 * n)], batch_size=5000)
    tasks, k = [], 0
    for s, n in zip(sessions, per_person):
        for j in range(n):
            tasks.append(m.Task(task_set=task_set, session=s, question_turn=turns[k + 2 * j],
                                answer_turn=turns[k + 2 * j + 1], position=j, pair_number=j, cut=2 * j, record_cut=0))
        k += 2 * n
    tasks = m.Task.objects.bulk_create(tasks, batch_size=5000)
    m.CohortTask.objects.bulk_create([m.CohortTask(cohort=cohort, task=t, position=i) for i, t in enumerate(tasks)],
                                     batch_size=5000)
    conditions = [f"{memory}+{w}" for memory in MEMORIES for w in ("one-shot", "fusion(3)", "selection(3)")]
    conditions += ["whole-record", "current-dialogue"]
    protocol = m.Protocol.objects.create(project=project, name="p", cohort=cohort, conditions=conditions,
                                         generator={}, judge={}, contrasts=[], bootstrap={"seed": SEED, "draws": DRAWS})
    run = m.Run.objects.create(protocol=protocol, status="finished", phase="done")
    vocabulary = np.array([f"w{i}" for i in range(600)])
    predictions, grades = [], {}

    def answer(task, condition, label, text, status="ok", chosen=""):
        sha = sha256_text(text)
        predictions.append(m.Prediction(run=run, task=task, condition=condition, label=label, status=status,
                                        text=text, answer_sha256=sha, chosen_label=chosen))
        grades.setdefault((task.pk, sha), int(rng.integers(0, 4)))

    for task in tasks:
        for memory in MEMORIES:
            pool = [" ".join(rng.choice(vocabulary, int(rng.normal(135, 30)))) for _ in range(3)]
            answer(task, f"{memory}+one-shot", "final", pool[0])
            for workflow in ("fusion(3)", "selection(3)"):
                for i, text in enumerate(pool):
                    answer(task, f"{memory}+{workflow}", f"b{i}", text)
            copy = rng.random() < 0.4
            answer(task, f"{memory}+fusion(3)", "final",
                   pool[int(rng.integers(0, 3))] if copy else " ".join(rng.choice(vocabulary, 130)))
            chosen = int(rng.integers(0, 3))
            answer(task, f"{memory}+selection(3)", "final", pool[chosen], chosen=f"b{chosen}")
        for condition in ("whole-record", "current-dialogue"):
            answer(task, condition, "final", " ".join(rng.choice(vocabulary, 90)))
    m.Prediction.objects.bulk_create(predictions, batch_size=5000)
    m.Grade.objects.bulk_create([m.Grade(run=run, task_id=t, answer_sha256=sha, status="ok", score=score)
                                 for (t, sha), score in grades.items()], batch_size=5000)
    store_scores(run.pk)
    print(f"built run {run.pk}: {len(tasks)} tasks, {PEOPLE} people, {len(predictions):,} predictions")
    return run.pk


def time_refresh(run_id: int) -> None:
    setup_django()
    from experiments.analysis.pools import pools_refresh
    from experiments.models import Run

    run = Run.objects.select_related("protocol").get(pk=run_id)
    started, cpu = time.perf_counter(), time.process_time()
    pools_refresh(run)
    print(f"{time.perf_counter() - started:.3f} {time.process_time() - cpu:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", type=int, help="time an existing benchmark run again")
    parser.add_argument("--time-refresh", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.time_refresh:
        time_refresh(args.time_refresh)
        sys.exit()
    run_id = args.run or build()
    walls, cpus = [], []
    for _ in range(args.repeat):
        out = subprocess.run([sys.executable, __file__, "--time-refresh", str(run_id)], check=True,
                             capture_output=True, text=True, env=os.environ).stdout.split()
        walls.append(float(out[0]))
        cpus.append(float(out[1]))
    print(f"pools page recomputed from the database ({DRAWS:,} draws; pickers, diagnostics, contrasts), "
          f"{args.repeat} fresh processes: wall best {min(walls):.2f} s, median {statistics.median(walls):.2f} s; "
          f"CPU of the process best {min(cpus):.2f} s, median {statistics.median(cpus):.2f} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
