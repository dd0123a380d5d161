"""Benchmark of the per-run paper items (Tables 26, 27; App. F centrality and routing) on a paper-size run.

Run from the repository root:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> .venv/bin/python benchmarks/per_run_items.py

A finished run of the common experiment's six memory conditions (188 people, 9 tasks each,
100,000 draws; `benchmarks/stats.build_run`), with both memories written for every session (word
counts varied so that Δn spans about −15 to 100 words), three candidate texts of about 130 words
per pool and task with grades, and fusion answers that copy a candidate on a third of the tasks.
Times `per_run_payload` (what the robustness tables' cache keeps; computed once when a run's
analysis ends), then each builder reading the cache.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.stats import build_run  # noqa: E402

WORDS = ("garden weekend family work city music school travel friends money health food time home "
         "early late small large often never always change learn teach remember choose").split()


def main(people: int = 188, tasks_per_person: int = 9) -> None:
    run, _ = build_run(people, tasks_per_person, conditions_n=6)
    from django.db import connection

    from experiments import models as m
    from experiments.analysis import report_items_per_run as items
    from experiments.analysis.grades import store_scores
    from experiments.analysis.per_run_tables import per_run_payload
    from experiments.analysis.tables import tables_refresh
    from experiments.core.canonical import sha256_text

    rng = np.random.default_rng(3)
    protocol = run.protocol
    sessions = list(m.Session.objects.filter(project=protocol.project).values_list("pk", flat=True))
    m.Memory.objects.bulk_create(
        [m.Memory(run=run, session_id=s, kind=kind, words=100,
                  text=" ".join(rng.choice(WORDS, int(n))))
         for s in sessions for kind, n in (("concrete", rng.integers(95, 200)), ("trait", rng.integers(90, 110)))])
    pools = [key for key in protocol.conditions if "fusion" in key or "selection" in key]
    candidates, grades, finals = [], [], {}
    for task_id in protocol.cohort.cohort_tasks.values_list("task_id", flat=True):
        for key in pools:
            texts = [" ".join(rng.choice(WORDS, int(rng.integers(110, 150)))) for _ in range(3)]
            for label, text in zip(("b0", "b1", "b2"), texts):
                candidates.append(m.Prediction(run=run, task_id=task_id, condition=key, label=label, status="ok",
                                               text=text, answer_sha256=sha256_text(text), evidence="",
                                               evidence_chars=0))
                grades.append(m.Grade(run=run, task_id=task_id, answer_sha256=sha256_text(text), status="ok",
                                      score=int(rng.integers(0, 4))))
            if "fusion" in key and rng.random() < 1 / 3:
                finals[task_id, key] = texts[int(rng.integers(0, 3))]
    m.Prediction.objects.bulk_create(candidates, batch_size=5000)
    m.Grade.objects.bulk_create(grades, batch_size=5000, ignore_conflicts=True)
    for (task_id, key), text in finals.items():
        m.Prediction.objects.filter(run=run, task_id=task_id, condition=key, label="final").update(
            text=text, answer_sha256=sha256_text(text))
    store_scores(run.pk)          # every prediction's score from its grade, as the engine keeps them
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    run = m.Run.objects.select_related("protocol").get(pk=run.pk)
    print(f"per-run items: run {run.pk}, {protocol.cohort.cohort_tasks.count():,} tasks, {people} people, "
          f"{len(candidates):,} candidates, {protocol.bootstrap['draws']:,} draws")
    started, cpu = time.perf_counter(), time.process_time()
    payload = per_run_payload(run)
    print(f"  per_run_payload: {time.perf_counter() - started:.1f} s wall, {time.process_time() - cpu:.1f} s CPU "
          f"({', '.join(payload)})")
    tables_refresh(run)
    for name in ("table26", "table27", "appendix_f_centrality", "appendix_f_routing"):
        started = time.perf_counter()
        item = getattr(items, name)(protocol.project, [run])
        rows = len(item.rows) if hasattr(item, "rows") else item.reason
        print(f"  {name} from the cache: {(time.perf_counter() - started) * 1000:.0f} ms ({rows} rows)")
    import os
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
