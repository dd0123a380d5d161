"""Raising a stopped run's HTTP ceiling, and lease expiry while a run may not send.

- A run a ceiling stopped goes on only by a recorded amendment that raises the ceiling: owners
  (whoever may spend) only, the old and new ceilings and the most it may cost recorded and shown,
  and the run resumes; a ceiling can only go up, and only one the protocol sets.
- A run that may not send (paused, stopped, circuit open) still has its dead workers' slots
  settled: a reservation past its lease becomes unknown, a slot whose worker died in its
  cooldown is held for the owner's amendment; the driver keeps looking while slots are in flight.
"""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.execution import control, progress
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.journal import slot_execute
from experiments.execution.concurrency import NoLimiter
from experiments.execution.policy import LEASE_GRACE_S, RunError
from experiments.models import Amendment, ModelCall, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, TIMEOUT_S, Roles, Sleeps, build_cohort, make_run, openai_model
from tests.llm_fake_server import Reply, openai_rate_limited

CEILING = {"phase_http_ceilings": {"generation": 3}}


def stopped_by_ceiling(project, server, http, **changes):
    Roles(server)
    run = make_run(project, build_cohort(project, sessions=5, name="ceiling"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), retry_policy=changes.pop("retry_policy", CEILING), **changes)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.STOPPED and "HTTP ceiling was reached" in run.status_reason
    return run


def test_raising_the_ceiling_is_a_recorded_amendment_with_its_cost_and_the_run_goes_on(project, server, http):
    run = stopped_by_ceiling(project, server, http)
    assert len(server.requests) == 3
    amendment = control.run_raise_ceiling(run=run, user=None, reason="two slots left", phase_ceiling=5)
    assert amendment.kind == Amendment.Kind.CEILING
    payload = amendment.payload
    assert payload["phase"] == Phase.GENERATION and payload["phase_http_ceiling"] == {"from": 3, "to": 5}
    assert payload["extra_requests"] == 2
    # The fake server reports 11 input and 7 output tokens per answer.
    assert (payload["input_tokens_estimate"], payload["output_tokens_estimate"]) == (22, 14)
    assert "HTTP ceiling was reached (3 of 3" in payload["stopped_because"]
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING  # the ceiling's stop is over: resumed, also recorded
    assert list(run.amendments.values_list("kind", flat=True)) == ["ceiling", "resume"]

    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    assert ModelCall.objects.filter(slot__run=run, slot__phase=Phase.GENERATION).count() == 5
    assert len(server.requests) == 10 == ModelCall.objects.filter(slot__run=run).count()


def test_a_ceiling_raised_too_little_stops_again_at_the_new_one(project, server, http):
    run = stopped_by_ceiling(project, server, http)
    control.run_raise_ceiling(run=run, user=None, reason="one more", phase_ceiling=4)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.STOPPED and "(4 of 4 attempts reserved)" in run.status_reason
    assert len(server.requests) == 4


@pytest.mark.parametrize("change, message", [
    ({"phase_ceiling": 3}, "the base generation phase's HTTP ceiling is 3; a new one must be a larger whole number"),
    ({"phase_ceiling": 2}, "a new one must be a larger whole number"),
    ({"run_ceiling": 10}, "the protocol sets no run's HTTP ceiling: there is nothing to raise"),
    ({}, "give a new ceiling"),
])
def test_a_ceiling_only_goes_up_and_only_one_the_protocol_sets(project, server, http, change, message):
    run = stopped_by_ceiling(project, server, http)
    with pytest.raises(RunError, match=message):
        control.run_raise_ceiling(run=run, user=None, reason="x", **change)
    run.refresh_from_db()
    assert run.status == Run.Status.STOPPED and not run.amendments.exists()


def test_a_running_run_is_paused_before_its_ceiling_is_raised(project, server):
    run = make_run(project, build_cohort(project, name="running"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), retry_policy=CEILING)
    run_drive(run.pk)  # into the generation phase
    with pytest.raises(RunError, match="pause it before raising a ceiling"):
        control.run_raise_ceiling(run=run, user=None, reason="x", phase_ceiling=9)
    control.run_pause(run=run, user=None, reason="look at the costs")
    control.run_raise_ceiling(run=run, user=None, reason="more room", phase_ceiling=9)
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED  # not stopped by a ceiling: the owner's pause stands


@pytest.mark.parametrize("who, status", [("analyst", 403), ("viewer", 403), ("outsider", 404)])
def test_only_those_who_may_spend_raise_a_ceiling_on_the_page(client, cast, project, server, http, monkeypatch,
                                                              who, status):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    run = stopped_by_ceiling(project, server, http)
    client.force_login(cast[who])
    response = client.post(reverse("run_ceiling", args=[project.slug, run.pk]),
                           {"phase_ceiling": 9, "reason": "more"})
    assert response.status_code == status
    run.refresh_from_db()
    assert run.status == Run.Status.STOPPED and not run.amendments.exists()


def test_the_owner_sees_the_ceiling_and_its_cost_and_raises_it_on_the_page(
        client, cast, project, server, http, monkeypatch, redis_for_pages, loopback_grants):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    run = stopped_by_ceiling(project, server, http)
    client.force_login(cast["owner"])
    page = client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
    assert 'id="ceiling-form"' in page and "this phase 3 of 3 attempts reserved" in page
    assert "raising it resumes the run" in page and "about 11 input and 7 output tokens each" in page
    body = client.post(reverse("run_ceiling", args=[project.slug, run.pk]), {"phase_ceiling": "", "reason": "x"},
                       follow=True).content.decode()
    assert "give a new ceiling for the phase, for the run, or both" in body and not run.amendments.exists()
    body = client.post(reverse("run_ceiling", args=[project.slug, run.pk]),
                       {"phase_ceiling": 5, "reason": "two slots left"}, follow=True).content.decode()
    assert "Ceiling raised: up to 2 more requests; the run resumes." in body
    assert "HTTP ceiling raised" in body and "two slots left" in body  # in the amendments table
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


@pytest.fixture
def redis_for_pages():
    """The page enqueues the resumed run: a reachable Redis (the tests' database), emptied after."""
    import django_rq
    import redis
    connection = django_rq.get_connection("default")
    try:
        connection.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("Redis is not reachable")
    yield
    connection.flushdb()


# --- lease expiry while the run may not send -------------------------------------------------


def test_a_stopped_run_still_counts_a_dead_workers_reservation_unknown(project, server):
    run = make_run(project, build_cohort(project, sessions=2, name="dead"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server))
    first, second = run_drive(run.pk).slot_ids
    # A worker reserved the first slot and died mid-request; then the owner paused the run.
    from experiments.execution.reservation import reserve
    from experiments.execution.policy import run_retry_policy
    reserve(first, basis=ModelCall.Basis.FIRST, justification="", worker="died", lease_s=TIMEOUT_S + LEASE_GRACE_S,
            policy=run_retry_policy(run))
    control.run_pause(run=run, user=None, reason="stop spending")
    step = run_drive(run.pk)
    assert step.slot_ids == () and step.recheck_in_s is not None  # it looks again after the lease
    assert Slot.objects.get(pk=first).status == Slot.Status.IN_FLIGHT

    ModelCall.objects.filter(slot_id=first).update(lease_until=timezone.now() - timedelta(seconds=1))
    step = run_drive(run.pk)
    assert Slot.objects.get(pk=first).status == Slot.Status.UNKNOWN
    assert ModelCall.objects.get(slot_id=first).outcome == "unknown"
    assert Slot.objects.get(pk=second).status == Slot.Status.PENDING  # nothing else changes
    assert step.recheck_in_s is None  # nothing in flight: no more looks
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED
    assert len(server.requests) == 0


def test_a_worker_dead_in_its_cooldown_while_the_run_is_stopped_leaves_its_slot_held(project, server, http):
    run = make_run(project, build_cohort(project, name="cool"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server))
    [slot_id] = run_drive(run.pk).slot_ids
    server.script(Reply(429, openai_rate_limited()))

    class Died(BaseException):
        pass

    def die(seconds):
        raise Died

    with pytest.raises(Died):
        slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="dies", sleep=Sleeps(then=die))
    control.run_pause(run=run, user=None, reason="stop spending")
    Slot.objects.filter(pk=slot_id).update(
        retry_at=timezone.now() - timedelta(seconds=TIMEOUT_S + LEASE_GRACE_S + 1))
    run_drive(run.pk)
    slot = Slot.objects.get(pk=slot_id)
    assert slot.status == Slot.Status.HELD and slot.retry_at is None
    assert "held for the owner's amendment" in slot.status_note
    # The owner's resume gives it its continuation allowance: one identical request.
    control.run_resume(run=run, user=None, reason="go on")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    calls = list(ModelCall.objects.filter(slot_id=slot_id).order_by("attempt"))
    assert [(c.basis, c.outcome) for c in calls] == [(ModelCall.Basis.FIRST, "transient"),
                                                     (ModelCall.Basis.AMENDMENT, "ok")]
    assert len(server.requests) == 3  # the first, its amended re-send, and the judge call


def test_the_shell_command_raises_the_ceiling_and_drives_the_run_inline(project, server, http):
    from django.core.management import call_command
    from django.core.management.base import CommandError
    run = stopped_by_ceiling(project, server, http)
    with pytest.raises(CommandError, match="a new one must be a larger whole number"):
        call_command("run_raise_ceiling", run.pk, phase_ceiling=2, reason="x", inline=True)
    said = call_command("run_raise_ceiling", run.pk, phase_ceiling=5, reason="two slots left", inline=True)
    assert said.startswith(f"run {run.pk}: ceiling raised (amendment ") and "up to 2 more requests" in said
    assert said.endswith("resumed inline and is finished")
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED
    assert list(run.amendments.values_list("kind", "reason")) == [("ceiling", "two slots left"),
                                                                ("resume", f"after raising the HTTP ceiling (amendment "
                                                                           f"{run.amendments.first().pk}): two slots left")]
