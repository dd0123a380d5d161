"""Benchmark of the explorer's pages on PostgreSQL.

    .venv/bin/python benchmarks/pages.py                 # database bench_pages (dropped and rebuilt)
    SESSIONS=20000 RUN_SESSIONS=2000 .venv/bin/python benchmarks/pages.py   # smaller
    REUSE=1 .venv/bin/python benchmarks/pages.py         # measure again what a previous run built
    BUILD_ONLY=1 …                                       # build, measure nothing

DATABASE_URL chooses the database (default bench_pages). Do not point it at real data: the
database is dropped first (not with REUSE=1, which only migrates it). It writes, with COPY
(what is measured is the reading, not the engine): SESSIONS sessions of 10 question/answer pairs
(default 100,000 sessions, 2,000,000 turns) with 5 tasks each; a cohort of RUN_SESSIONS of them
(default 14,286 sessions, 71,430 tasks); and a finished run with 14 conditions, whose final
answers (14 × 71,430 = 1,000,020 predictions) each get a judge grade 0–3, about 1% missing;
its fusion and selection conditions also have their candidates b0–b2 (+428,580 predictions;
selection copies one, fusion copies b0 on every third task). The stored grades
(`Prediction.score`) are then written as the engine writes them (`store_scores`, timed). Then
it prints the server time (the Django test client; an explorer page's median of REPEAT requests,
default 3, the task page's and the search's median and max of 5) of:
- the run explorer, pages 1, 2, a middle one and the last, under every filter and sort;  ≤ 150 ms
- the task page of a task with 14 conditions (unfiltered, within a filter, a sort by a − b
  and by one grade: its previous/next and place there), and its number of queries;  ≤ 50 ms, ≤ 10
- the project search over the 100,000 sessions (a rare, a middling, a common word).  ≤ 300 ms
"""
import gc
import os
import statistics
import time

from page_setup import REUSE, copy, django_on_scratch_database  # benchmarks/page_setup.py, beside this script

SESSIONS = int(os.environ.get("SESSIONS", 100_000))
RUN_SESSIONS = int(os.environ.get("RUN_SESSIONS", 14_286))
PAIRS, TARGETS = 10, 5
REPEAT = int(os.environ.get("REPEAT", 3))

django_on_scratch_database("bench_pages")

import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402

from experiments.analysis.grades import store_scores  # noqa: E402
from experiments.data.cohort_facts import cohort_facts_copy  # noqa: E402
from experiments.core.conditions import CONDITIONS as REGISTRY  # noqa: E402
from experiments.models.runs import Phase  # noqa: E402
from experiments.models import (Cohort, CohortTask, Membership, Person, Project, Protocol, Role, Run, Study,  # noqa: E402
                                TaskSet)

CONDITIONS = [k for k in REGISTRY if "fusion" not in k and "selection" not in k][:12] + [
    "memory(concrete,100w)+fusion(3)", "memory(concrete,100w)+selection(3)"]
WORDS = [f"w{i}" for i in range(3000)] + ["garden", "music", "weekend", "family", "work"]
RARE = "zeppelin"


_POOL: dict[int, list[str]] = {}


def sentence(rng, n: int) -> str:
    """One of 4,000 pre-drawn sentences of n Zipf-distributed words (drawing each is too slow)."""
    if n not in _POOL:
        _POOL[n] = [" ".join(WORDS[i] for i in rng.zipf(1.3, n) % len(WORDS)) for _ in range(4000)]
    return _POOL[n][int(rng.integers(0, 4000))]


def build():
    t0 = time.perf_counter()
    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(1)
    project = Project.objects.create(slug="bench", name="bench")
    studies = Study.objects.bulk_create([Study(project=project, key=f"study-{i}") for i in range(20)])
    copy("experiments_person", "project_id, label", ((project.pk, f"person-{i}") for i in range(SESSIONS)))
    people = dict(Person.objects.filter(project=project).values_list("label", "pk"))
    copy("experiments_session", "project_id, study_id, person_id, external_id, language, source_format, source_file, imported_at",
         ((project.pk, studies[i % 20].pk, people[f"person-{i}"], f"s{i:06d}", "en", "jsonl", "bench.jsonl", "2026-01-01")
          for i in range(SESSIONS)))
    sessions = [pk for pk, in connection.cursor().execute(
        "SELECT id FROM experiments_session WHERE project_id = %s ORDER BY external_id", [project.pk]).fetchall()]

    def turns():
        for s, session in enumerate(sessions):
            for i in range(PAIRS):
                yield session, 2 * i, "interviewer", f"What about {sentence(rng, 6)} in part {i}?"
                extra = f" {RARE}" if s % 5000 == 0 and i == PAIRS - 1 else ""
                yield session, 2 * i + 1, "participant", f"I think {sentence(rng, 14)}.{extra}"
    copy("experiments_turn", "session_id, index, speaker, text", turns())
    print(f"  {SESSIONS:,} sessions, {SESSIONS * PAIRS * 2:,} turns: {time.perf_counter() - t0:.0f} s", flush=True)
    task_set = TaskSet.objects.create(project=project, min_pairs=PAIRS, min_targets=TARGETS, max_targets=TARGETS,
                                      derived_at="2026-01-01T00:00:00Z")
    with connection.cursor() as cursor:
        # the second half's pairs: questions 2·5..2·9, answers the turn after
        cursor.execute(
            "INSERT INTO experiments_task (task_set_id, session_id, question_turn_id, answer_turn_id, position, "
            "pair_number, cut, record_cut) SELECT %s, q.session_id, q.id, a.id, q.index / 2 - 5, q.index / 2, q.index, 10 "
            "FROM experiments_turn q JOIN experiments_turn a ON a.session_id = q.session_id AND a.index = q.index + 1 "
            "WHERE q.speaker = 'interviewer' AND q.index >= 10", [task_set.pk])
    cohort = Cohort.objects.create(project=project, task_set=task_set, name="bench", seed=1, requested_size=RUN_SESSIONS,
                                   rule={}, task_list_sha256="0" * 64)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO experiments_cohorttask (cohort_id, task_id, position) SELECT %s, t.id, "
            "ROW_NUMBER() OVER (ORDER BY s.external_id, t.position) - 1 FROM experiments_task t "
            "JOIN experiments_session s ON s.id = t.session_id WHERE s.external_id < %s",
            [cohort.pk, f"s{RUN_SESSIONS:06d}"])
    cohort_facts_copy(cohort.pk)  # as cohort_draw does: what the explorer sorts and filters on
    protocol = Protocol.objects.create(project=project, name="bench", cohort=cohort, conditions=CONDITIONS,
                                       generator={"provider": "offline"}, judge={"provider": "offline"},
                                       bootstrap={"seed": 1, "draws": 1000})
    run = Run.objects.create(protocol=protocol, status=Run.Status.FINISHED, phase=Phase.DONE,
                             planned_phase=Phase.JUDGING)
    tasks = [pk for pk, in connection.cursor().execute(
        "SELECT task_id FROM experiments_cohorttask WHERE cohort_id = %s ORDER BY position", [cohort.pk]).fetchall()]
    scores = rng.integers(0, 4, size=(len(tasks), len(CONDITIONS)))
    missing = rng.random(size=scores.shape) < 0.01

    candidate_scores = rng.integers(0, 4, size=(len(tasks), len(CONDITIONS), 3))
    pooled = [j for j, key in enumerate(CONDITIONS) if "fusion" in key or "selection" in key]

    def candidate_sha(i, j, b):
        return f"{i:032x}{j:030x}b{b}"

    def final_sha(i, j):
        """Selection copies candidate b(i % 3); fusion copies b0 on every third task."""
        if "selection" in CONDITIONS[j] or ("fusion" in CONDITIONS[j] and i % 3 == 0):
            return candidate_sha(i, j, i % 3 if "selection" in CONDITIONS[j] else 0)
        return f"{i:032x}{j:032x}"

    def predictions():
        for i, task in enumerate(tasks):
            for j, condition in enumerate(CONDITIONS):
                if missing[i, j]:
                    yield run.pk, task, condition, "final", "missing", None, "", "", "", 0, ""
                else:
                    chosen = f"b{i % 3}" if "selection" in condition else ""
                    yield run.pk, task, condition, "final", "ok", f"{sentence(rng, 12)}", final_sha(i, j), chosen, "", 0, ""
                if j in pooled:
                    for b in range(3):
                        yield run.pk, task, condition, f"b{b}", "ok", sentence(rng, 12), candidate_sha(i, j, b), "", "", 0, ""

    def grades():
        for i, task in enumerate(tasks):
            for j in range(len(CONDITIONS)):
                if not missing[i, j] and final_sha(i, j) == f"{i:032x}{j:032x}":
                    yield run.pk, task, final_sha(i, j), "ok", int(scores[i, j]), "a short rationale", ""
                if j in pooled:
                    for b in range(3):
                        yield run.pk, task, candidate_sha(i, j, b), "ok", int(candidate_scores[i, j, b]), "a rationale", ""

    copy("experiments_prediction", "run_id, task_id, condition, label, status, text, answer_sha256, chosen_label, "
         "evidence, evidence_chars, copied_label", predictions())
    copy("experiments_grade", "run_id, task_id, answer_sha256, status, score, rationale, parse_error", grades())
    started = time.perf_counter()
    stored = store_scores(run.pk)  # the whole run at once, as a re-grade stores its copies
    print(f"  stored grades of {stored:,} predictions: {time.perf_counter() - started:.0f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"  {len(tasks):,} tasks in the run, {len(tasks) * len(CONDITIONS):,} final predictions "
          f"(+ {len(tasks) * len(pooled) * 3:,} fusion and selection candidates): "
          f"{time.perf_counter() - t0:.0f} s in all", flush=True)
    user = get_user_model().objects.create_user(username="bench-analyst", password="x")
    Membership.objects.create(project=project, user=user, role=Role.ANALYST)
    return run, user, tasks


_GC_PAUSES: list[float] = []  # ms of each garbage collection since the list was emptied
_GC_STARTED = [0.0]


def _gc_timer(phase, info):
    if phase == "start":
        _GC_STARTED[0] = time.perf_counter()
    else:
        _GC_PAUSES.append((time.perf_counter() - _GC_STARTED[0]) * 1000)


gc.callbacks.append(_gc_timer)


def timed(client, url, params=None, repeat=5) -> tuple[float, float, object, float]:
    """Median and max ms of `repeat` requests after a warm one, the last response, and the
    garbage collector's pause inside the slowest request (the test client runs in this process:
    a full collection over a Django process's objects can take ~100 ms of a request)."""
    client.get(url, params or {})  # warm
    times, pauses = [], []
    for _ in range(repeat):
        _GC_PAUSES.clear()
        start = time.perf_counter()
        response = client.get(url, params or {})
        times.append((time.perf_counter() - start) * 1000)
        pauses.append(sum(_GC_PAUSES))
        assert response.status_code == 200, response.status_code
    return statistics.median(times), max(times), response, pauses[times.index(max(times))]


def existing():
    call_command("migrate", verbosity=0)
    run = Run.objects.get(protocol__project__slug="bench")
    user = get_user_model().objects.get(username="bench-analyst")
    tasks = list(CohortTask.objects.filter(cohort_id=run.protocol.cohort_id).order_by("position")
                 .values_list("task_id", flat=True))
    return run, user, tasks


def main():
    run, user, tasks = existing() if REUSE else build()
    if os.environ.get("BUILD_ONLY") == "1":
        return
    client = Client()
    client.force_login(user)
    a, b = "ownwords(B=|memory|)", CONDITIONS[0]
    explorer = reverse("run_explorer", args=["bench", run.pk])
    filters = {
        "none": {}, "grade": {"condition": a, "grade": "3"},
        "two grades": {"condition": [a, b], "grade": ["3", "0"]},
        "disagreement a3 b0": {"a": a, "ga": "3", "b": b, "gb": "0"},
        "a ≠ b, sort a−b": {"a": a, "b": b, "sort": "-diff"}, "sort by grade": {"sort": f"-grade:{a}"},
        "study": {"study": "study-3"}, "person": {"person": "person-77"}, "question text": {"q": "part 7"},
        "missing": {"missing": "1"}, "copied": {"copied": "1"}, "chosen": {"chosen": "b1"},
        "answered": {"answered": CONDITIONS[-1], "sort": f"-grade:{CONDITIONS[-1]}"},
        "sort by person": {"sort": "person"},
        "everything": {"condition": a, "grade": "3", "a": a, "ga": "3", "b": b, "gb": "0", "study": "study-3",
                       "q": "part", "missing": "1", "sort": "-diff"},
    }
    print(f"\nRun explorer, {len(tasks):,} tasks × {len(CONDITIONS)} conditions (target ≤ 150 ms per page)")
    worst = 0.0
    for label, params in filters.items():
        _, _, response, _ = timed(client, explorer, params, repeat=1)
        total = int(response.content.decode().split('<p id="explorer-count"><strong>')[1].split("<")[0])
        pages = max(1, -(-total // 50))
        figures = []
        for page in sorted({1, 2, pages // 2 or 1, pages}):
            median, high, _, _ = timed(client, explorer, {**params, "page": page}, repeat=REPEAT)
            figures.append(f"p{page} {median:.0f}")
            worst = max(worst, median)
        print(f"  {label:22s} {total:>7,} tasks  " + ", ".join(figures) + " ms")
    print(f"  slowest page (median): {worst:.0f} ms")

    task = tasks[len(tasks) // 2]
    detail = reverse("prediction_detail", args=["bench", run.pk, task])
    print(f"\nTask page, {len(CONDITIONS)} conditions (target ≤ 50 ms, ≤ 10 queries)")
    for label, params in (("unfiltered", {}), ("within a filter", {"condition": a, "grade": "3"}),
                          ("within a sort a−b", {"a": a, "b": b, "sort": "-diff"}),
                          ("within a sort by grade", {"sort": f"-grade:{a}"})):
        median, high, _, pause = timed(client, detail, params)
        with CaptureQueriesContext(connection) as captured:
            client.get(detail, params)
        print(f"  {label:22s} median {median:.0f} ms, max {high:.0f} ms (garbage collection {pause:.0f} ms of it), "
              f"{len(captured)} queries")

    search = reverse("project_search", args=["bench"])
    print(f"\nSearch over {SESSIONS:,} sessions and {len(tasks) * len(CONDITIONS):,} predictions (target ≤ 300 ms)")
    for word in (RARE, "weekend music", "garden", "w1"):
        median, high, response, _ = timed(client, search, {"q": word})
        print(f"  {word!r:16s} median {median:.0f} ms, max {high:.0f} ms")


if __name__ == "__main__":
    main()
