"""The run page: a progress bar per phase, a time-left estimate that is right early on
and while paused, amendments as sentences, and a query count that does not grow with the run."""
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from experiments.execution import control, progress
from experiments.models import Amendment, ModelCall, Run, Slot
from experiments.models.runs import Phase
from tests.test_pages_runs import make_protocol, started_run
from experiments.data.sessions import cohort_draw


@pytest.fixture
def run(imported, cast):
    cohort = cohort_draw(project=imported, name="c1", size=2, seed=1)
    protocol = make_protocol(imported, cohort, "sealed", sealed=True, user=cast["owner"])
    run = started_run(protocol)
    Run.objects.filter(pk=run.pk).update(phase=Phase.GENERATION)
    run.refresh_from_db()
    return run


def add_slots(run, n, *, ended_at=(), status=Slot.Status.PENDING, latency_s=2.0, start=0):
    """`n` generation slots; those given an end time in `ended_at` answered then, one call each."""
    slots = Slot.objects.bulk_create([
        Slot(run=run, phase=Phase.GENERATION, key=f"gen|{start + i}", role=Slot.Role.GENERATOR, system="s", user="u",
             request_sha256="0" * 64, status=Slot.Status.OK if i < len(ended_at) else status)
        for i in range(n)])
    ModelCall.objects.bulk_create([
        ModelCall(slot=slot, run=run, phase=slot.phase, attempt=1, reserved_at=end - timedelta(seconds=latency_s),
                  lease_until=end,
                  finished_at=end, outcome="ok") for slot, end in zip(slots, ended_at)])
    return slots


def set_time(model_row, **fields):
    type(model_row).objects.filter(pk=model_row.pk).update(**fields)
    model_row.refresh_from_db()


def test_early_on_the_rate_counts_only_the_time_the_phase_has_run(run):
    now = timezone.now()
    set_time(run, started_at=now - timedelta(seconds=10))
    # 5 slots ended in the 10 s since the start (the first request went out at once): 0.5 a second.
    add_slots(run, 100, ended_at=[now - timedelta(seconds=8 - 2 * i) for i in range(5)], latency_s=2)
    pace = progress.phase_pace(run, progress.run_progress(run)["phases"][1], now=now)
    assert pace["state"] == "running" and pace["remaining"] == 95 and pace["completions"] == 5
    assert pace["window_s"] == pytest.approx(10, abs=0.01)
    assert pace["eta_s"] == pytest.approx(190, rel=0.01)  # 95 slots at 0.5 a second; a 120 s window would say 2280


def test_the_rate_follows_the_recent_window_not_the_whole_run(run):
    now = timezone.now()
    set_time(run, started_at=now - timedelta(seconds=1000))
    # Slow at first (one every 10 s), then one a second over the last 120 s.
    slow = [now - timedelta(seconds=1000 - 10 * i) for i in range(1, 80)]
    fast = [now - timedelta(seconds=119.5 - i) for i in range(120)]
    add_slots(run, len(slow) + len(fast) + 60, ended_at=slow + fast)
    pace = progress.phase_pace(run, progress.run_progress(run)["phases"][1], now=now)
    assert pace["completions"] == 120
    assert pace["eta_s"] == pytest.approx(60, rel=0.02)


def test_while_paused_the_estimate_stands_still_and_paused_time_is_not_counted(run, cast):
    now = timezone.now()
    set_time(run, started_at=now - timedelta(seconds=1000))
    # One a second until the pause, 600 s ago; 50 slots left.
    ended = [now - timedelta(seconds=720 - i) for i in range(120)]
    add_slots(run, 170, ended_at=ended)
    control.run_pause(run=run, user=cast["owner"], reason="lunch")
    set_time(Amendment.objects.get(run=run), created_at=now - timedelta(seconds=600))
    run.refresh_from_db()
    for later in (0, 3600):
        pace = progress.phase_pace(run, progress.run_progress(run)["phases"][1], now=now + timedelta(seconds=later))
        assert pace["state"] == "paused"
        assert pace["eta_s"] == pytest.approx(50, rel=0.02)
    assert progress.pace_text(pace).startswith("paused: about 50 s of running time once resumed")
    # Resumed 4 s ago: the window starts at the resume; 2 slots since then, 2 s apart after the first request.
    control.run_resume(run=run, user=cast["owner"], reason="back")
    set_time(Amendment.objects.get(run=run, kind=Amendment.Kind.RESUME), created_at=now - timedelta(seconds=4))
    run.refresh_from_db()
    add_slots(run, 2, ended_at=[now - timedelta(seconds=2), now], latency_s=2, start=1000)
    Slot.objects.filter(run=run, status=Slot.Status.PENDING, key__in=[f"gen|{i}" for i in range(120, 122)]).update(
        status=Slot.Status.FAILED)  # keep the count of open slots at 48
    pace = progress.phase_pace(run, progress.run_progress(run)["phases"][1], now=now)
    assert pace["state"] == "running" and pace["completions"] == 2 and pace["window_s"] == pytest.approx(4, abs=0.01)
    assert pace["eta_s"] == pytest.approx(48 * 2, rel=0.02)


def test_no_estimate_before_any_slot_ended(run):
    add_slots(run, 10)
    pace = progress.phase_pace(run, progress.run_progress(run)["phases"][1])
    assert pace["eta_s"] is None
    assert progress.pace_text(pace) == "estimating: no slot of this phase ended in the last 15 min 0 s of running time"


def test_the_page_shows_bars_time_left_and_amendments_in_words(client, run, cast):
    now = timezone.now()
    set_time(run, started_at=now - timedelta(seconds=30))
    add_slots(run, 40, ended_at=[now - timedelta(seconds=25 - i) for i in range(10)])
    control.run_pause(run=run, user=cast["owner"], reason="check the answers")
    control.run_set_concurrency(run=run, user=cast["owner"], provider="offline", cap=3, reason="gentler")
    client.force_login(cast["viewer"])
    body = client.get(reverse("run_detail", args=[run.protocol.project.slug, run.pk])).content.decode()
    assert '<progress max="40" value="10" aria-label="Base generation: 10 of 40 slots ended"></progress> 25%' in body
    assert "paused: about" in body and "paused time not counted" in body
    assert "Paused: nothing more was sent until a resume" in body
    assert "At most 3 requests in flight to offline" in body
    assert "{&#x27;concurrency&#x27;" not in body and "{'concurrency'" not in body  # no raw payload


def test_amendment_sentences_for_every_kind():
    def text(kind, payload):
        return progress.amendment_text(Amendment(kind=kind, payload=payload))
    assert text("resume", {"held_slots_released": ["a", "b"], "was": "stopped", "circuit_was_open": True,
                           "allowance": 1}) == ("resumed the stopped run and closed the quota circuit; 2 held slots "
                                                "may each send 1 more identical request")
    assert text("reissue_unknown", {"slots": ["a"], "phase": "judging", "requests": 1, "input_tokens": 10,
                                    "output_tokens": 3, "tokens_known_for": 1}) == (
        "re-issued 1 slot of the judging phase without an answer, one identical request each "
        "(their last attempts used 10 input and 3 output tokens, reported for 1)")
    assert text("accept_missing", {"phase": "generation", "slots": ["a", "b", "c"], "unknown": 2, "failed": 1}) == (
        "continued past the base generation phase with 3 slots missing (2 unknown, 1 failed)")


def page_queries(client, url):
    """Queries of one request, counted as they run (the query log is reset when a request starts)."""
    sent = []
    with connection.execute_wrapper(lambda execute, sql, params, many, context: (sent.append(sql),
                                                                                 execute(sql, params, many, context))[1]):
        assert client.get(url).status_code == 200
    return len(sent)


def test_the_run_page_query_count_does_not_grow_with_the_run(client, run, cast):
    now = timezone.now()
    set_time(run, started_at=now - timedelta(seconds=60))
    client.force_login(cast["owner"])
    url = reverse("run_detail", args=[run.protocol.project.slug, run.pk])
    json_url = reverse("run_progress", args=[run.protocol.project.slug, run.pk])
    add_slots(run, 5, ended_at=[now - timedelta(seconds=5)])
    small, small_json = page_queries(client, url), page_queries(client, json_url)
    add_slots(run, 500, ended_at=[now - timedelta(seconds=50 - i / 10) for i in range(400)], start=100)
    control.run_set_concurrency(run=run, user=cast["owner"], provider="offline", cap=2, reason="r")
    assert small > 5 and small_json > 5  # counted, not an empty log
    assert page_queries(client, url) == small
    assert page_queries(client, json_url) == small_json


def test_slow_calls_widen_the_window(run):
    now = timezone.now()
    set_time(run, started_at=now - timedelta(seconds=3000))
    # One slot every 60 s: one or two in the last 2 minutes, 15 in the last 15 minutes.
    add_slots(run, 40, ended_at=[now - timedelta(seconds=60 * i + 30) for i in range(20)], latency_s=60)
    pace = progress.phase_pace(run, progress.run_progress(run)["phases"][1], now=now)
    assert pace["completions"] == 15 and pace["window_s"] == pytest.approx(900)
    assert pace["eta_s"] == pytest.approx(20 * 60, rel=0.01)


def test_a_phase_not_planned_yet_is_planning_and_one_the_run_went_past_empty_is_not_needed(run):
    # The run is in base generation with no slot yet: planning, not "all ended".
    report = progress.run_progress(run)
    generation = report["phases"][1]
    assert generation["total"] == 0 and not generation["not_needed"]
    assert progress.pace_text(progress.phase_pace(run, generation)) == "planning this phase…"
    # Memories (before generation) had no slot: the run went past it, so it was not needed.
    memories = report["phases"][0]
    assert memories["phase"] == Phase.MEMORIES and memories["not_needed"]
    assert not report["phases"][2]["not_needed"]  # decisions are still ahead


def test_a_finished_run_shows_its_rate_over_the_whole_run(client, run, cast):
    # 50 calls in the 100 s the run took, an hour ago: the last minute would say 0.00.
    finished = timezone.now() - timedelta(hours=1)
    set_time(run, started_at=finished - timedelta(seconds=100), finished_at=finished,
             status=Run.Status.FINISHED, phase=Phase.DONE)
    add_slots(run, 50, ended_at=[finished - timedelta(seconds=2 * i) for i in range(50)])
    shown = progress.run_progress(run)
    assert shown["calls_per_second"] == pytest.approx(0.5)
    assert shown["rate_basis"] == "the whole run, pauses included"
    client.force_login(cast["owner"])
    page = client.get(reverse("run_detail", args=[run.protocol.project.slug, run.pk])).content.decode()
    assert "0.50 <span class=\"muted\">(the whole run, pauses included)" in page
    # a running run keeps the recent window
    set_time(run, status=Run.Status.RUNNING, finished_at=None, phase=Phase.GENERATION)
    shown = progress.run_progress(run)
    assert shown["calls_per_second"] == 0 and shown["rate_basis"].startswith("the last minute")
