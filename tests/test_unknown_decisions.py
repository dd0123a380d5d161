"""Unknown slots are the owner's decision, and a resume after a quota stop grants a recorded
allowance (paper App. B.2).

Against the tests' local LLM server, with PostgreSQL: a slot whose worker died mid-request
(a reservation whose lease ran out) is unknown; at the end of its phase the run pauses and
nothing advances or is sent until the owner either continues with it missing (ACCEPT_MISSING)
or re-issues it once (REISSUE_UNKNOWN, shown with its cost). A resume after a quota stop
records its allowance and grants exactly that many identical requests; a slot that still ends
without an answer is the same decision again.
"""
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experiments.core.llm import wire
from experiments.execution import control, journal as journal_rules, policy, progress
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.policy import RunError
from experiments.models import Amendment, ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Sleeps, journal, make_run, openai_model, request_bytes
from tests.llm_fake_server import Reply, openai_insufficient_quota

FIRST, AMENDMENT = ModelCall.Basis.FIRST, ModelCall.Basis.AMENDMENT


def _reserve_and_die(slot):
    """What a worker leaves behind when it dies mid-request: a reservation, no outcome."""
    reservation = journal_rules._reserve(slot.pk, basis=FIRST, justification="", worker="dead", lease_s=30)
    ModelCall.objects.filter(pk=reservation.call_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    return reservation


def _paused_with_an_unknown_slot(project, cohort2, server, http):
    """A generation of two slots: one worker dies mid-request, the other slot is answered."""
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server))
    step = run_drive(run.pk)
    lost, other = Slot.objects.filter(pk__in=step.slot_ids).order_by("pk")
    _reserve_and_die(lost)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    lost.refresh_from_db()
    other.refresh_from_db()
    return run, lost, other


def test_a_phase_with_an_unknown_slot_pauses_at_its_end_and_nothing_advances_or_is_sent(
        project, cohort2, cast, server, http):
    run, lost, other = _paused_with_an_unknown_slot(project, cohort2, server, http)
    assert (lost.status, other.status) == (Slot.Status.UNKNOWN, Slot.Status.OK)
    assert (run.status, run.phase) == (Run.Status.PAUSED, Phase.GENERATION)
    assert run.status_reason == ("Paused at the end of base generation: 1 slots of the phase ended without an "
                                 "answer and wait for your decision: continue with them missing, or re-issue each once.")
    assert [r.body for r in server.requests] == [request_bytes(run, other)]  # the lost one was never sent again
    assert not Slot.objects.filter(run=run, phase=Phase.JUDGING).exists()  # no judging planned

    # Neither happens without the owner: driving again, or a plain resume, changes nothing.
    assert run_drive(run.pk) == run_drive(run.pk).__class__()
    with pytest.raises(RunError, match="wait for your decision: continue with them missing, or re-issue each once"):
        control.run_resume(run=run, user=cast["owner"], reason="just go on")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert (run.status, run.phase, len(server.requests)) == (Run.Status.PAUSED, Phase.GENERATION, 1)
    assert not Amendment.objects.filter(run=run).exists()

    shown = progress.run_next(run)
    assert shown["decision_due"] and not shown["can_resume"]
    assert shown["decision"]["slots"] == [{"key": lost.key, "status": "unknown"}]
    generation = progress.run_progress(run)["phases"][1]
    assert {k: generation[k] for k in ("answered", "in_flight", "unknown", "failed", "held", "missing")} == {
        "answered": 1, "in_flight": 0, "unknown": 1, "failed": 0, "held": 0, "missing": 1}


def test_continuing_with_them_missing_is_recorded_and_the_phase_advances_with_the_slot_missing(
        project, cohort2, cast, server, http):
    run, lost, other = _paused_with_an_unknown_slot(project, cohort2, server, http)
    amendment = control.run_accept_missing(run=run, user=cast["owner"], reason="as the paper: unknowns stay missing")
    assert amendment.kind == Amendment.Kind.ACCEPT_MISSING and amendment.created_by == cast["owner"]
    assert amendment.payload == {"phase": Phase.GENERATION, "slots": [lost.key], "unknown": 1, "failed": 0,
                                 "stopped_because": run.status_reason}
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    lost.refresh_from_db()
    assert lost.status == Slot.Status.UNKNOWN and f"amendment {amendment.pk}" in lost.status_note
    assert [c.basis for c in journal(lost)] == [FIRST]
    assert Prediction.objects.get(slot=lost).status == Prediction.Status.MISSING
    assert request_bytes(run, lost) not in [r.body for r in server.requests]
    assert Slot.objects.filter(run=run, phase=Phase.JUDGING).count() == 1  # only the answered one is judged
    with pytest.raises(RunError):
        control.run_accept_missing(run=run, user=cast["owner"], reason="again")


def test_reissuing_each_once_shows_its_cost_sends_one_identical_request_and_continues(
        project, cohort2, cast, server, http):
    run, lost, other = _paused_with_an_unknown_slot(project, cohort2, server, http)
    # The dead worker's receipt arrived late, with usage: the slot stays unknown, its tokens are known.
    [dead] = journal(lost)
    late = wire.Outcome(wire.OutcomeKind.OK, http_status=200, text="Too late.", finish_reason="stop",
                        usage=wire.Usage(input_tokens=40, output_tokens=7, total_tokens=47))
    completed = policy.Decision(retry=False, wait_s=0.0, justification="completed")
    assert journal_rules._record(dead.pk, late, completed) is False
    estimate = control.reissue_estimate(run)
    assert {k: estimate[k] for k in ("requests", "input_tokens", "output_tokens", "tokens_known_for")} == {
        "requests": 1, "input_tokens": 40, "output_tokens": 7, "tokens_known_for": 1}

    amendment = control.run_reissue_unknown(run=run, user=cast["owner"], reason="the worker was killed")
    assert amendment.payload == {"slots": [lost.key], "phase": Phase.GENERATION, "allowance": 1, "requests": 1,
                                 "input_tokens": 40, "output_tokens": 7, "tokens_known_for": 1}
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING  # paused for this decision: the decision continues it
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    lost.refresh_from_db()
    assert run.status == Run.Status.FINISHED
    assert [(c.basis, c.outcome) for c in journal(lost)] == [(FIRST, "ok"), (AMENDMENT, "ok")]
    generation_bodies = [r.body for r in server.requests[:2]]
    assert generation_bodies == [request_bytes(run, other), request_bytes(run, lost)]  # one more, identical


def test_a_reissued_slot_that_ends_unknown_again_is_a_new_decision(project, cohort2, cast, server, http):
    run, lost, other = _paused_with_an_unknown_slot(project, cohort2, server, http)
    control.run_reissue_unknown(run=run, user=cast["owner"], reason="once more")
    _reserve_and_die(lost)  # the amended request's worker dies too
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    lost.refresh_from_db()
    assert [c.basis for c in journal(lost)] == [FIRST, AMENDMENT] and lost.status == Slot.Status.UNKNOWN
    assert (run.status, run.phase) == (Run.Status.PAUSED, Phase.GENERATION)
    assert len(server.requests) == 1  # neither reservation was sent by a living worker, nor re-sent
    control.run_accept_missing(run=run, user=cast["owner"], reason="give up")
    assert run_inline(run.pk, client=http, sleep=Sleeps()).status == Run.Status.FINISHED


def test_unknown_slots_of_a_phase_already_planned_over_are_refused_with_a_reason(project, cohort2, cast, server,
                                                                                 http):
    """Older runs advanced over unknown slots: the later phase consumed their missing results."""
    run, lost, other = _paused_with_an_unknown_slot(project, cohort2, server, http)
    Run.objects.filter(pk=run.pk).update(phase=Phase.JUDGING, planned_phase=Phase.JUDGING, status=Run.Status.RUNNING)
    with pytest.raises(RunError, match="unknown slots of earlier phases were settled when their phase ended"):
        control.run_reissue_unknown(run=run, user=cast["owner"], reason="too late")
    assert Slot.objects.get(pk=lost.pk).amended_attempts == 0


def _quota_stopped(project, cohort2, server, http, **retry):
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server),
                   retry_policy=retry or None)
    server.script(Reply(429, openai_insufficient_quota()))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    held = Slot.objects.get(run=run, status=Slot.Status.HELD)
    assert (run.status, run.circuit_open) == (Run.Status.PAUSED, True)
    return run, held


def test_a_resume_records_its_allowance_and_grants_exactly_that_many_identical_requests(
        project, cohort1, cast, server, http):
    run, held = _quota_stopped(project, cohort1, server, http)
    amendment = control.run_resume(run=run, user=cast["owner"], reason="quota raised", allowance=3)
    assert amendment.payload["allowance"] == 3 and amendment.payload["held_slots_released"] == [held.key]
    assert amendment.payload["stopped_because"].startswith("Quota exhausted")
    held.refresh_from_db()
    assert held.amended_attempts == 3
    server.script(Reply(503, b""), Reply(503, b""), Reply(503, b""))  # every allowed request fails without output
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    held.refresh_from_db()
    assert [(c.basis, c.outcome) for c in journal(held)] == [(FIRST, "quota")] + [(AMENDMENT, "transient")] * 3
    assert [r.body for r in server.requests].count(request_bytes(run, held)) == 4  # 1 + exactly 3, identical
    # Still without an answer: listed, with a further re-issue choice; nothing advances on its own.
    assert (run.status, run.phase, held.status) == (Run.Status.PAUSED, Phase.GENERATION, Slot.Status.FAILED)
    assert progress.run_next(run)["decision"]["slots"] == [{"key": held.key, "status": "failed"}]
    control.run_reissue_unknown(run=run, user=cast["owner"], reason="one more")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    assert [c.basis for c in journal(held)] == [FIRST] + [AMENDMENT] * 4


def test_an_allowance_stops_at_the_first_answer_and_waits_the_cooldown_between_requests(
        project, cohort1, cast, server, http):
    run, held = _quota_stopped(project, cohort1, server, http, cooldown_s=30.0)
    control.run_resume(run=run, user=cast["owner"], reason="quota raised", allowance=2)
    server.script(Reply(503, b""))
    step = run_drive(run.pk)
    for slot_id in step.slot_ids:
        journal_rules.slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="t", sleep=Sleeps())
    held.refresh_from_db()
    assert held.status == Slot.Status.FAILED and [c.basis for c in journal(held)] == [FIRST, AMENDMENT]
    step = run_drive(run.pk)
    assert step.slot_ids == () and step.recheck_in_s <= 30.2  # the identical request waits its cooldown
    ModelCall.objects.filter(slot=held).update(finished_at=timezone.now() - timedelta(seconds=20))
    assert run_drive(run.pk).slot_ids == ()
    held.refresh_from_db()
    assert held.status == Slot.Status.FAILED  # the phase did not end meanwhile: the slot is still owed a request
    ModelCall.objects.filter(slot=held).update(finished_at=timezone.now() - timedelta(seconds=31))
    step = run_drive(run.pk)
    assert step.slot_ids == (held.pk,)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    held.refresh_from_db()
    assert [(c.basis, c.outcome) for c in journal(held)] == [(FIRST, "quota"), (AMENDMENT, "transient"),
                                                             (AMENDMENT, "ok")]
    assert run.status == Run.Status.FINISHED


def test_the_run_page_shows_the_counts_the_decision_with_its_cost_and_both_choices(
        project, cohort2, cast, server, http, monkeypatch, loopback_grants):
    run, lost, other = _paused_with_an_unknown_slot(project, cohort2, server, http)
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    browser = Client()
    browser.force_login(cast["owner"])
    url = reverse("run_detail", args=[project.slug, run.pk])
    body = browser.get(url).content.decode()
    assert 'id="accept-missing-form"' in body and "Re-issue 1 unknown slot<" in body
    assert "paid: 1 identical request, one each; tokens not known" in body
    assert lost.key in body and "resume-form" not in body  # a plain resume is not offered
    assert "Waiting for an owner's decision" in body
    browser.force_login(cast["viewer"])
    body = browser.get(url).content.decode()
    assert "Waiting for an owner's decision" in body and 'id="run-actions"' not in body  # the truth, no forms
    data = browser.get(reverse("run_progress", args=[project.slug, run.pk])).json()
    assert data["next"]["decision_due"] is True
    assert [p["unknown"] for p in data["phases"]][1] == 1
    browser.force_login(cast["owner"])
    browser.post(reverse("run_accept_missing", args=[project.slug, run.pk]), {"reason": "as the paper"})
    run.refresh_from_db()
    assert (run.status, run.phase) == (Run.Status.RUNNING, Phase.DECISIONS)
    assert Amendment.objects.get(run=run).kind == Amendment.Kind.ACCEPT_MISSING


def test_the_shell_shows_the_decision_and_its_cost_before_anything_is_sent(project, cohort2, cast, server, http,
                                                                          loopback_grants):
    from django.core.management import call_command
    run, lost, other = _paused_with_an_unknown_slot(project, cohort2, server, http)
    report = call_command("run_report", str(run.pk))
    assert "waiting for a decision: 1 slots of this phase ended without an answer — nothing advances" in report
    assert f"manage.py run_reissue {run.pk}" in report and f"manage.py run_accept_missing {run.pk}" in report
    dry = call_command("run_reissue", str(run.pk), reason="see the cost", user="owner-user")
    assert dry.startswith(f"run {run.pk} would re-issue 1 identical requests; tokens of their last attempts: not known")
    assert lost.key in dry and not Amendment.objects.exists()
    out = call_command("run_reissue", str(run.pk), reason="send it", user="owner-user", yes=True, inline=True)
    assert out.endswith("and is finished") and len(server.requests) > 1
    assert [c.basis for c in journal(lost)] == [FIRST, AMENDMENT]
