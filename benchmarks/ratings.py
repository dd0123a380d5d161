"""Benchmark of human ratings: campaign creation, the next item, agreement.

    .venv/bin/python benchmarks/ratings.py                  # PostgreSQL bench_ratings (created if missing)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_ratings .venv/bin/python benchmarks/ratings.py

The database is emptied first; do not point it at real data. It builds a finished run with
10,000 distinct answers (1,000 sessions × 5 tasks × 2 conditions; predictions and judge
grades written directly, since what is measured is the campaign, not the run), then prints:
- the time to create a 10,000-item campaign (k = 2, 5 raters: 20,000 assignments);   target ≤ 5 s
- the server time of the rater's next item through the JSON view (median, p95, max over
  200 items rated in between) and its number of queries, which must not grow;          target ≤ 50 ms
- agreement with 100,000-draw whole-person intervals over 5,000 doubly rated items.    target ≤ 3 s
- a pairwise campaign of 10,000 pairs (4 conditions, every pair of them, over the same 1,000
  people; a seeded stratified sample of the 30,000 candidates, k = 2, 5 raters);        target ≤ 5 s
- its results (win rates, Bradley–Terry, the judge's order) with 100,000-draw intervals over
  20,000 preferences (written directly), each part timed.                               target ≤ 3 s
- the same with an LLM pairwise-judge run over the run present (every compared pair in both
  orders, 60,000 verdicts written directly): the whole results with the judge's numbers,
  target ≤ 3 s; then the results page read back from the cache,                         target ≤ 100 ms
  the one query that checks the stored numbers are current (the campaign's results epoch), and
  that one changed preference makes them stale.
  Each also prints the CPU seconds spent (every thread) and the load average beside the wall time.

    .venv/bin/python benchmarks/ratings.py --concurrent 20  # 20 raters of one campaign rating at once
    .venv/bin/python benchmarks/ratings.py --pairwise       # only the pairwise campaign and its results

builds a smaller run (200 sessions: 2,000 items, k = 2) and a campaign of that many raters, then
each rater, a thread with its own connection, stores --per-rater ratings as fast as it can
(`rating_record`, one transaction each); it prints ratings/s and the latency of a rating
(p50, p95, max), and checks every rating was stored once.
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_ratings")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("SECRET_KEY", "benchmark-only")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")

if os.environ["DATABASE_URL"].startswith("postgres"):
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", os.environ["DATABASE_URL"].rsplit("/", 1)[1]],
                   capture_output=True)

import django  # noqa: E402
from django.conf import settings  # noqa: E402

django.setup()
# The results page's {% static %} tags without a collectstatic run (production's storage reads its manifest).
settings.STORAGES = {**settings.STORAGES,
                     "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}

import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402

from annotations.campaigns import campaign_create  # noqa: E402
from annotations.models import Assignment, HumanGrade  # noqa: E402
from annotations.rating import rater_item, rating_record  # noqa: E402
from experiments.core.conditions import FINAL  # noqa: E402
from experiments.core.interviews.records import ParsedSession, ParsedTurn  # noqa: E402
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED  # noqa: E402
from experiments.core.tasks import TaskRule  # noqa: E402
from experiments.data.sessions import cohort_draw, sessions_import  # noqa: E402
from experiments.core.canonical import sha256_text  # noqa: E402
from experiments.models import Grade, Membership, Prediction, Project, Protocol, Role, Run, Task  # noqa: E402

SESSIONS, TARGETS, CONDITIONS = 1_000, 5, ["question-only", "whole-record"]
# Two more conditions for the pairwise campaign: 6 pairs × 5,000 tasks = 30,000 candidate pairs.
PAIR_CONDITIONS = CONDITIONS + ["memory(concrete,100w)+one-shot", "ownwords(B=|memory|)"]
PAIRS = 10_000
RATERS = [f"bench-rater-{i}" for i in range(5)]
NEXT_ITEMS = 200
CONCURRENT_SESSIONS = 200


def build_run(sessions: int = SESSIONS, raters=RATERS, conditions=CONDITIONS) -> Run:
    turns = []
    for i in range(12):
        turns += [ParsedTurn("interviewer", f"What about part {i} of your work?"),
                  ParsedTurn("participant", f"Part {i} is where I spend most afternoons, honestly.")]
    parsed = [ParsedSession(session_id=f"b{s}", person_id=f"person-{s}", study_id=f"s{s % 3}", language="en",
                            screener=(), turns=tuple(turns), location=f"line {s}") for s in range(sessions)]
    project = Project.objects.create(slug="bench", name="bench")
    sessions_import(project=project, parsed=parsed, source_format="jsonl", source_file="bench.jsonl",
                    task_rule=TaskRule(min_pairs=12, min_targets=TARGETS, max_targets=TARGETS))
    cohort = cohort_draw(project=project, name="all", size=sessions, seed=1)
    protocol = Protocol.objects.create(project=project, name="bench", cohort=cohort, conditions=list(conditions),
                                       generator={"provider": "offline"}, judge={"provider": "offline"})
    run = Run.objects.create(protocol=protocol, status=Run.Status.FINISHED)
    rng = np.random.default_rng(1)
    predictions, grades = [], []
    for task_id in Task.objects.filter(task_set__project=project).values_list("pk", flat=True):
        for condition in conditions:
            text = f"{condition} says task {task_id} is about afternoons"
            sha = sha256_text(text)
            predictions.append(Prediction(run=run, task_id=task_id, condition=condition, label=FINAL,
                                          status=Prediction.Status.OK, text=text, answer_sha256=sha))
            grades.append(Grade(run=run, task_id=task_id, answer_sha256=sha, status=Grade.Status.OK,
                                score=int(rng.integers(0, 4))))
    Prediction.objects.bulk_create(predictions, batch_size=5000)
    Grade.objects.bulk_create(grades, batch_size=5000)
    User = get_user_model()
    for name in raters:
        Membership.objects.create(project=project, user=User.objects.create_user(name), role=Role.RATER)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--concurrent", type=int, metavar="RATERS", help="only: RATERS raters rating at once")
    parser.add_argument("--per-rater", type=int, default=50, help="ratings each concurrent rater stores")
    parser.add_argument("--pairwise", action="store_true", help="only: the pairwise campaign and its results")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    print(f"database: PostgreSQL {connection.pg_version} {connection.settings_dict['NAME']}")
    if args.concurrent:
        concurrent(args.concurrent, args.per_rater)
        return
    t0 = time.perf_counter()
    run = build_run(conditions=PAIR_CONDITIONS)
    print(f"set-up: {Prediction.objects.count():,} predictions in {time.perf_counter() - t0:.1f} s")
    if args.pairwise:
        pairwise(run)
        return

    t0 = time.perf_counter()
    campaign = campaign_create(run=run, name="bench", conditions=CONDITIONS, raters=RATERS, seed=3)
    created = time.perf_counter() - t0
    print(f"campaign of {campaign.items.count():,} items, {campaign.assignments.count():,} assignments: "
          f"{created:.2f} s (target ≤ 5 s)")

    user = campaign.raters.get(user__username=RATERS[0]).user
    client = Client()
    client.force_login(user)
    url = reverse("rate_item", args=[campaign.project.slug, campaign.pk])
    times, queries = [], []
    for _ in range(NEXT_ITEMS):
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - t0)
        queries.append(len(ctx))
        item = response.json()["item"]
        rating_record(campaign=campaign, user=user, assignment_id=item["assignment"], grade=2, seconds=3)
    ms = sorted(t * 1000 for t in times)
    print(f"next item through the JSON view, {NEXT_ITEMS} items: median {statistics.median(ms):.1f} ms, "
          f"p95 {ms[int(0.95 * len(ms))]:.1f} ms, max {ms[-1]:.1f} ms (target ≤ 50 ms); "
          f"queries per request {min(queries)}–{max(queries)} (session and user included)")
    with CaptureQueriesContext(connection) as ctx:
        rater_item(campaign, user)
    print(f"rater_item alone: {len(ctx)} queries")

    agreement()
    pairwise(run)


def concurrent(raters: int, per_rater: int) -> None:
    """`raters` threads, each a rater of one campaign with its own connection, rate at once."""
    names = [f"bench-rater-{i}" for i in range(raters)]
    run = build_run(CONCURRENT_SESSIONS, names)
    campaign = campaign_create(run=run, name="concurrent", conditions=CONDITIONS, raters=names, seed=3)
    queues = {r.user: list(Assignment.objects.filter(campaign=campaign, rater=r.user).order_by("position")
                           .values_list("pk", flat=True)[:per_rater])
              for r in campaign.raters.select_related("user")}
    began, latencies, errors = [], [], []
    start = threading.Barrier(raters, action=lambda: began.append(time.perf_counter()))

    def rate(user, queue):
        try:
            connection.ensure_connection()
            start.wait()
            for n, pk in enumerate(queue):
                t0 = time.perf_counter()
                rating_record(campaign=campaign, user=user, assignment_id=pk, grade=n % 4, seconds=3.0)
                latencies.append(time.perf_counter() - t0)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            start.abort()
        finally:
            connection.close()

    threads = [threading.Thread(target=rate, args=item) for item in queues.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - began[0]
    if errors:
        raise errors[0]
    stored = HumanGrade.objects.filter(campaign=campaign).count()
    assert stored == len(latencies) == sum(map(len, queues.values())), (stored, len(latencies))
    ms = sorted(t * 1000 for t in latencies)
    print(f"{raters} raters of one campaign at once, {len(ms):,} ratings (each stored once): "
          f"{len(ms) / took:.0f} ratings/s; a rating p50 {statistics.median(ms):.1f} ms, "
          f"p95 {ms[int(0.95 * len(ms))]:.1f} ms, max {ms[-1]:.1f} ms")


def agreement() -> None:
    from experiments.core.stats.agreement_stats import agreement_bootstrap
    rng = np.random.default_rng(5)
    items, people = 5_000, 500
    persons = np.sort(rng.integers(0, people, items))
    truth = rng.integers(0, 4, items)
    a = np.clip(truth + rng.choice([-1, 0, 0, 1], items), 0, 3)
    b = np.clip(truth + rng.choice([-1, 0, 0, 1], items), 0, 3)
    t0 = time.perf_counter()
    result = agreement_bootstrap(a, b, persons, draws=DEFAULT_DRAWS, seed=DEFAULT_SEED)
    took = time.perf_counter() - t0
    print(f"agreement of 2 raters, {items:,} items, {people} people, {DEFAULT_DRAWS:,} draws: {took:.2f} s "
          f"(target ≤ 3 s); κ {result.kappa.estimate:.3f} [{result.kappa.lo:.3f}, {result.kappa.hi:.3f}], "
          f"α {result.alpha.estimate:.3f} [{result.alpha.lo:.3f}, {result.alpha.hi:.3f}]")


def cpu_and_load(cpu_start: float) -> str:
    """The process's CPU seconds since `cpu_start` (all its threads) and the load average: on a
    shared, loaded machine the wall time says as much about the others as about this code."""
    return f"; CPU {time.process_time() - cpu_start:.2f} s, load average {os.getloadavg()[0]:.1f}"


def pairwise(run: Run) -> None:
    """A 10,000-pair campaign over the run, 20,000 preferences written directly, its results."""
    from django.utils import timezone

    from annotations.core.pairwise import bradley_terry, judge_order_agreement, win_rates
    from annotations.pairwise import pairwise_campaign_create, pairwise_results, results_inputs

    t0, c0 = time.perf_counter(), time.process_time()
    campaign = pairwise_campaign_create(run=run, name="bench pairs", conditions=PAIR_CONDITIONS, raters=RATERS,
                                        sample="stratified", sample_size=PAIRS, seed=3)
    created = time.perf_counter() - t0
    print(f"pairwise campaign of {campaign.items.count():,} pairs ({len(PAIR_CONDITIONS)} conditions, "
          f"{sum(p['items'] for p in campaign.pairs):,} candidates), {campaign.assignments.count():,} "
          f"assignments: {created:.2f} s (target ≤ 5 s){cpu_and_load(c0)}")
    rng = np.random.default_rng(7)
    now = timezone.now()
    rows = list(Assignment.objects.filter(campaign=campaign).values_list("pk", "rater_id"))
    picks = rng.choice(["a", "b", "tie"], size=len(rows), p=[0.45, 0.4, 0.15])
    HumanGrade.objects.bulk_create([
        HumanGrade(assignment_id=pk, campaign=campaign, rater_id=rater_id, preference=str(pick), created_at=now,
                   updated_at=now) for (pk, rater_id), pick in zip(rows, picks)], batch_size=5000)
    t0, c0 = time.perf_counter(), time.process_time()
    payload = pairwise_results(campaign, use_cache=False)
    took = time.perf_counter() - t0
    seed, draws = payload["seed"], payload["draws"]
    print(f"pairwise results, {payload['ratings']:,} preferences, {payload['bradley_terry']['people']:,} people, "
          f"{draws:,} draws: {took:.2f} s (target ≤ 3 s){cpu_and_load(c0)}")
    inputs, _ = results_inputs(campaign)
    ratings = inputs["rows"]
    for name, part in (("win rates", lambda: win_rates(ratings, seed=seed, draws=draws)),
                       ("Bradley–Terry", lambda: bradley_terry(ratings, inputs["conditions"], seed=seed,
                                                                draws=draws)),
                       ("judge's order", lambda: judge_order_agreement(ratings, seed=seed, draws=draws))):
        t0 = time.perf_counter()
        part()
        print(f"  of which {name}: {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    results_inputs(campaign)
    print(f"  reading the preferences (and the cache key): {time.perf_counter() - t0:.2f} s")
    bt = payload["bradley_terry"]
    print("  Bradley–Terry: " + ", ".join(f"{c['condition']} {c['theta']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]"
                                          for c in bt["conditions"]) + f"; dropped draws {bt['dropped_draws']}")
    pairwise_with_judge(campaign)


def judge_run_written(source: Run, pairs: list[list[str]]) -> Run:
    """A finished pairwise-judge run over `source`: a settled call with a seeded verdict for every
    compared pair in both orders, written directly (what is measured is the results, not the run)."""
    from django.utils import timezone

    from experiments.analysis.pairwise_verdicts import compared_pairs, order_keys
    from experiments.models import ModelCall, Slot
    from experiments.models.runs import Phase

    base = source.protocol
    protocol = Protocol.objects.create(
        project=base.project, name="bench pairwise judge", cohort=base.cohort, conditions=list(base.conditions),
        generator=base.generator, judge=base.judge, bootstrap=base.bootstrap, regrade_of=source,
        kind=Protocol.Kind.PAIRWISE, pairwise_pairs=pairs)
    run = Run.objects.create(protocol=protocol, status=Run.Status.FINISHED)
    rng = np.random.default_rng(11)
    keys = [key for x, y, task_id, a, b in compared_pairs(source, pairs) for key in order_keys(task_id, a, b)]
    slots = Slot.objects.bulk_create([
        Slot(run=run, phase=Phase.JUDGING, key=key, role=Slot.Role.JUDGE, system="", user="", request_sha256="",
             status=Slot.Status.OK) for key in keys], batch_size=5000)
    now = timezone.now()
    verdicts = rng.choice(["A", "B", "tie"], size=len(slots), p=[0.45, 0.4, 0.15])
    ModelCall.objects.bulk_create([
        ModelCall(slot=slot, run=run, phase=Phase.JUDGING, attempt=1, reserved_at=now, lease_until=now,
                  finished_at=now, outcome=ModelCall.Outcome.OK, model_version="bench-judge",
                  text=f'{{"preferred": "{verdict}"}}') for slot, verdict in zip(slots, verdicts)], batch_size=5000)
    return run


def pairwise_with_judge(campaign) -> None:
    """The campaign's results with a pairwise-judge run present: computed (as the queue's job does),
    then the results page as a viewer reads it from the cache."""
    from annotations.pairwise import (
        judge_payload, pairwise_results, pairwise_results_for_page, results_inputs, verdicts_digest,
    )
    from annotations.results_epoch_sql import results_epoch

    t0 = time.perf_counter()
    run = judge_run_written(campaign.run, [[p["x"], p["y"]] for p in campaign.pairs])
    print(f"pairwise-judge run of {2 * sum(p['items'] for p in campaign.pairs):,} verdicts written in "
          f"{time.perf_counter() - t0:.1f} s")
    t0, c0 = time.perf_counter(), time.process_time()
    payload = pairwise_results(campaign, use_cache=False)
    took = time.perf_counter() - t0
    judged = sum(r["judge"]["tasks"] for r in payload["llm_judge"]["rows"] if r["judge"])
    print(f"pairwise results with the LLM judge's numbers ({judged:,} judged items, {payload['draws']:,} draws): "
          f"{took:.2f} s (target ≤ 3 s){cpu_and_load(c0)}")
    inputs, _ = results_inputs(campaign)
    t0 = time.perf_counter()
    judge_payload(campaign, inputs["llm_judge"], inputs["rows"], seed=payload["seed"], draws=payload["draws"])
    print(f"  of which the judge's numbers: {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    verdicts_digest(run)
    print(f"  the digest of the judge's replies (in the inputs' sha256, read only after the epoch moved): "
          f"{time.perf_counter() - t0:.2f} s")
    User = get_user_model()
    viewer = User.objects.create_user("bench-viewer")
    Membership.objects.create(project=campaign.project, user=viewer, role=Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    url = reverse("pairwise_results", args=[campaign.project.slug, campaign.pk])
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - t0)
        page = response.content.decode()
        assert response.status_code == 200 and 'id="results-stale"' not in page, response.status_code
        assert 'id="people-vs-llm-judge"' in page and f"The LLM judge is run {run.pk} " in page
    print(f"results page from the cache with the judge's numbers, 5 loads: median "
          f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms (target ≤ 100 ms)"
          f"; load average {os.getloadavg()[0]:.1f}")
    t0 = time.perf_counter()
    with CaptureQueriesContext(connection) as ctx:
        pairwise_results_for_page(campaign, enqueue=lambda campaign_id, sha: True)
    print(f"  of which the check that the stored numbers are current: {len(ctx)} query, "
          f"{(time.perf_counter() - t0) * 1000:.1f} ms (epoch {results_epoch(campaign.pk)})")
    # One preference changed: the next view must not call the stored numbers current.
    HumanGrade.objects.filter(pk=HumanGrade.objects.filter(campaign=campaign, preference="a").values("pk")[:1]
                              ).update(preference="b")
    t0 = time.perf_counter()
    _, current = pairwise_results_for_page(campaign, enqueue=lambda campaign_id, sha: True)
    assert not current, "a changed preference left the stored numbers current"
    print(f"  after one preference changed: stale, queued again in {time.perf_counter() - t0:.2f} s "
          f"(inputs read and hashed; epoch {results_epoch(campaign.pk)})")


if __name__ == "__main__":
    main()
