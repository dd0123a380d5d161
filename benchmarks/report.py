"""Benchmark of the paper report on PostgreSQL: a project with RUNS finished runs of the `common`
experiment and PREDICTIONS predictions in all.

    .venv/bin/python benchmarks/report.py                     # database bench_report (dropped, rebuilt)
    PREDICTIONS=200000 .venv/bin/python benchmarks/report.py  # smaller
    REUSE=1 .venv/bin/python benchmarks/report.py             # measure again what a previous run built

Do not point it at real data: the database is dropped first. It writes with COPY one cohort of
sessions (5 tasks each) and RUNS sealed, finished runs of the common experiment's conditions on it
(default 10): each task's 8 final answers and the 12 candidates b0–b2 of its 4 fusion and
selection pools (20 predictions a task; PREDICTIONS / RUNS / 20 tasks), a judge grade 0–3 for each
(about 1% missing), and one slot with one finished call per final answer (what Tables 13–14 audit).
Each run's dashboard, robustness tables and pools are then computed (as its analysis does; timed,
not what is measured). It prints:
- the report's build (every catalog item, `refresh_report`, the queued job's work);  ≤ 60 s
- the report page served from the cache (median and max of REPEAT requests, the Django test client,
  an analyst; its number of queries);  ≤ 300 ms
"""
import os
import statistics
import time

from page_setup import REUSE, copy, django_on_scratch_database  # benchmarks/page_setup.py, beside this script

PREDICTIONS = int(os.environ.get("PREDICTIONS", 1_000_000))
RUNS = int(os.environ.get("RUNS", 10))
REPEAT = int(os.environ.get("REPEAT", 9))
DRAWS = int(os.environ.get("DRAWS", 1000))
PER_TASK = 20
TASKS = max(PREDICTIONS // RUNS // PER_TASK, 5)
SESSIONS = TASKS // 5

django_on_scratch_database("bench_report")

import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from experiments.analysis.dashboard import dashboard_refresh  # noqa: E402
from experiments.analysis.grades import store_scores  # noqa: E402
from experiments.analysis.pools import pools_refresh  # noqa: E402
from experiments.analysis.tables import tables_refresh  # noqa: E402
from experiments.core.paper_protocols import PAPER_PROTOCOLS  # noqa: E402
from experiments.data.cohort_facts import cohort_facts_copy  # noqa: E402
from experiments.execution.paper_report_build import refresh_report  # noqa: E402
from experiments.models import (Cohort, Membership, Person, Project, Protocol, Role, Run, Study,  # noqa: E402
                                TaskSet)
from experiments.models.runs import Phase  # noqa: E402

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
COMMON = PAPER_PROTOCOLS["common"]
CONDITIONS = list(COMMON.conditions)
POOLED = [j for j, key in enumerate(CONDITIONS) if "fusion" in key or "selection" in key]


def build_cohort(project):
    studies = Study.objects.bulk_create([Study(project=project, key=f"study-{i}") for i in range(20)])
    copy("experiments_person", "project_id, label", ((project.pk, f"person-{i}") for i in range(SESSIONS)))
    people = dict(Person.objects.filter(project=project).values_list("label", "pk"))
    copy("experiments_session", "project_id, study_id, person_id, external_id, language, source_format, source_file, "
         "imported_at", ((project.pk, studies[i % 20].pk, people[f"person-{i}"], f"s{i:06d}", "en", "jsonl",
                          "bench.jsonl", "2026-01-01") for i in range(SESSIONS)))
    sessions = [pk for pk, in connection.cursor().execute(
        "SELECT id FROM experiments_session WHERE project_id = %s ORDER BY external_id", [project.pk]).fetchall()]
    copy("experiments_turn", "session_id, index, speaker, text",
         ((s, i, "interviewer" if i % 2 == 0 else "participant", f"turn {i} of the session, words here {i}?")
          for s in sessions for i in range(20)))
    task_set = TaskSet.objects.create(project=project, min_pairs=10, min_targets=5, max_targets=5,
                                      derived_at="2026-01-01T00:00:00Z")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO experiments_task (task_set_id, session_id, question_turn_id, answer_turn_id, position, "
            "pair_number, cut, record_cut) SELECT %s, q.session_id, q.id, a.id, q.index / 2 - 5, q.index / 2, q.index, 10 "
            "FROM experiments_turn q JOIN experiments_turn a ON a.session_id = q.session_id AND a.index = q.index + 1 "
            "WHERE q.speaker = 'interviewer' AND q.index >= 10", [task_set.pk])
    cohort = Cohort.objects.create(project=project, task_set=task_set, name="bench", seed=1, requested_size=SESSIONS,
                                   rule={}, task_list_sha256="0" * 64)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO experiments_cohorttask (cohort_id, task_id, position) SELECT %s, t.id, "
            "ROW_NUMBER() OVER (ORDER BY s.external_id, t.position) - 1 FROM experiments_task t "
            "JOIN experiments_session s ON s.id = t.session_id WHERE s.project_id = %s", [cohort.pk, project.pk])
    cohort_facts_copy(cohort.pk)
    tasks = [pk for pk, in connection.cursor().execute(
        "SELECT task_id FROM experiments_cohorttask WHERE cohort_id = %s ORDER BY position", [cohort.pk]).fetchall()]
    return cohort, tasks


def build_run(project, cohort, tasks, r: int, rng) -> Run:
    now = timezone.now()
    protocol = Protocol.objects.create(project=project, name=f"common {r}", cohort=cohort, conditions=CONDITIONS,
                                       generator=OFFLINE, judge=OFFLINE, contrasts=list(COMMON.contrasts),
                                       bootstrap={"seed": 20260918 + r, "draws": DRAWS}, sealed_at=now,
                                       seal={"sha256": f"{r:064x}"})
    run = Run.objects.create(protocol=protocol, status=Run.Status.FINISHED, phase=Phase.DONE,
                             planned_phase=Phase.JUDGING, started_at=now, finished_at=now)
    n, k = len(tasks), len(CONDITIONS)
    scores = rng.integers(0, 4, size=(n, k))
    candidates = rng.integers(0, 4, size=(n, k, 3))
    missing = rng.random(size=(n, k)) < 0.01

    def sha(i, j, label):
        return f"{r:08x}{i:024x}{j:016x}{label:>16}"

    def predictions():
        for i, task in enumerate(tasks):
            for j, condition in enumerate(CONDITIONS):
                if missing[i, j]:
                    yield run.pk, task, condition, "final", "missing", None, "", "", "", 0, ""
                else:
                    chosen = f"b{i % 3}" if "selection" in condition else ""
                    yield run.pk, task, condition, "final", "ok", f"answer {i} {j}", sha(i, j, "final"), chosen, "", 0, ""
                if j in POOLED:
                    for b in range(3):
                        yield run.pk, task, condition, f"b{b}", "ok", f"candidate {b} of {i}", sha(i, j, f"b{b}"), "", "", 0, ""

    def grades():
        for i, task in enumerate(tasks):
            for j in range(k):
                if not missing[i, j]:
                    yield run.pk, task, sha(i, j, "final"), "ok", int(scores[i, j]), "r", ""
                if j in POOLED:
                    for b in range(3):
                        yield run.pk, task, sha(i, j, f"b{b}"), "ok", int(candidates[i, j, b]), "r", ""

    copy("experiments_prediction", "run_id, task_id, condition, label, status, text, answer_sha256, chosen_label, "
         "evidence, evidence_chars, copied_label", predictions())
    copy("experiments_grade", "run_id, task_id, answer_sha256, status, score, rationale, parse_error", grades())
    store_scores(run.pk)
    copy("experiments_slot", "run_id, phase, key, role, task_id, system, \"user\", request_sha256, prompt_refs, status, "
         "status_note, amended_attempts, updated_at",
         ((run.pk, "judging", f"judge|{i}|{j}", "judge", task, "s", "u", "0" * 64, "[]", "ok", "", 0, now)
          for i, task in enumerate(tasks) for j in range(k)))
    first = run.slots.order_by("pk").values_list("pk", flat=True).first()
    copy("experiments_modelcall", "slot_id, run_id, phase, attempt, basis, justification, worker, reserved_at, "
         "lease_until, finished_at, outcome, response_id, model_version, finish_reason, error, raw_body",
         ((first + s, run.pk, "judging", 1, "first", "", "w", now, now, now, "ok", "", "", "", "", "")
          for s in range(n * k)))
    return run


def build():
    t0 = time.perf_counter()
    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(1)
    project = Project.objects.create(slug="bench", name="bench")
    cohort, tasks = build_cohort(project)
    runs = [build_run(project, cohort, tasks, r, rng) for r in range(RUNS)]
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"  {RUNS} runs × {len(tasks):,} tasks × {PER_TASK} predictions written: {time.perf_counter() - t0:.0f} s",
          flush=True)
    t1 = time.perf_counter()
    for run in runs:
        dashboard_refresh(run)
        tables_refresh(run)
        pools_refresh(run)
    print(f"  the runs' analyses (dashboard, robustness tables, pools; {DRAWS} draws): "
          f"{time.perf_counter() - t1:.0f} s", flush=True)
    user = get_user_model().objects.create_user(username="bench-analyst", password="x")
    Membership.objects.create(project=project, user=user, role=Role.ANALYST)
    return project, user


def existing():
    call_command("migrate", verbosity=0)
    return Project.objects.get(slug="bench"), get_user_model().objects.get(username="bench-analyst")


def main():
    project, user = existing() if REUSE else build()
    with connection.cursor() as cursor:
        predictions = cursor.execute("SELECT count(*) FROM experiments_prediction").fetchone()[0]
    print(f"project: {Run.objects.filter(protocol__project=project).count()} runs, {predictions:,} predictions")
    started = time.perf_counter()
    report = refresh_report(project)
    build_s = time.perf_counter() - started
    states = {}
    for item in report.items:
        states[item["state"]] = states.get(item["state"], 0) + 1
    print(f"build: {build_s:.1f} s (target ≤ 60 s); items: {states}")
    slowest = sorted(report.items, key=lambda i: -i.get("build_seconds", 0))[:6]
    print("  slowest items: " + ", ".join(f"{i['id']} {i.get('build_seconds', 0):.1f} s" for i in slowest))
    client = Client()
    client.force_login(user)
    url = reverse("paper_report", args=[project.slug])
    client.get(url)  # warm
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200 and b'id="report-stale"' not in response.content
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    print(f"page from the cache: median {statistics.median(times):.0f} ms, max {max(times):.0f} ms "
          f"(target ≤ 300 ms), {len(queries)} queries, {len(response.content):,} bytes")


if __name__ == "__main__":
    main()
