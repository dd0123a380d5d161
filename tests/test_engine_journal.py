"""The request journal against a real local LLM server (paper App. B.2, B.3).

Every request goes through the engine (`slot_execute`, `run_inline`) over a socket to
tests/llm_fake_server.py, with tiny timeouts and no cooldown; `sleep` is injected so nothing
waits. Each test states exactly how many attempts a fault may cost, on what basis, and what the
journal (ModelCall) recorded — and counts the requests the server actually received.
"""
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.execution import control, journal as journal_rules, policy
from experiments.core.llm import wire
from experiments.execution.concurrency import NoLimiter
from experiments.execution.policy import RunError
from experiments.execution.journal import phase_settled, slot_execute
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.progress import run_progress
from experiments.execution.control import run_reissue_unknown, run_resume
from experiments.models import Amendment, Grade, ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import (
    FUSION,
    ONE_SHOT,
    QUESTION_ONLY,
    SELECTION,
    TIMEOUT_S,
    Roles,
    Sleeps,
    gemini_model,
    journal,
    make_run,
    openai_model,
    request_bytes,
)
from tests.llm_fake_server import (
    Reply,
    gemini_quota_exhausted,
    gemini_response,
    openai_completion,
    openai_error,
    openai_insufficient_quota,
    openai_rate_limited,
)

FIRST, RECOVERY, AMENDMENT = ModelCall.Basis.FIRST, ModelCall.Basis.RECOVERY, ModelCall.Basis.AMENDMENT
PER_DAY = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"


def model_for(server, provider, **changes):
    return (openai_model if provider == "openai" else gemini_model)(server, **changes)


def generation_slot(run) -> Slot:
    """Drive the run to its base generation and return its only slot."""
    step = run_drive(run.pk)
    assert step.phase == Phase.GENERATION and len(step.slot_ids) == 1, step
    return Slot.objects.get(pk=step.slot_ids[0])


def execute(slot, http, sleep=None) -> Sleeps:
    sleep = sleep if sleep is not None else Sleeps()
    slot_execute(slot.pk, limiter=NoLimiter(), client=http, worker="test", sleep=sleep)
    slot.refresh_from_db()
    return sleep


def prediction(slot) -> Prediction:
    return Prediction.objects.get(slot=slot)


def assert_identical_requests(server, run, slot, n):
    bodies = [r.body for r in server.requests]
    assert bodies == [request_bytes(run, slot)] * n


# --- transient faults: retried with the identical request, at most twice ----------------------


def test_output_free_429_is_retried_identically_twice_then_the_slot_fails(project, cohort1, server, http):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=openai_model(server))
    slot = generation_slot(run)
    server.script(*[Reply(429, openai_rate_limited()) for _ in range(5)])
    sleeps = execute(slot, http)

    calls = journal(slot)
    assert [c.basis for c in calls] == [FIRST, RECOVERY, RECOVERY]
    assert [c.attempt for c in calls] == [1, 2, 3]
    assert calls[0].justification == ""
    assert calls[1].justification.startswith("recovery 1 of 2 after output-free HTTP 429; identical request")
    assert calls[2].justification.startswith("recovery 2 of 2 after output-free HTTP 429")
    for call in calls:
        assert call.outcome == "transient" and call.http_status == 429 and call.text is None
        assert "Rate limit reached" in call.error and call.finished_at and call.elapsed_s is not None
    assert slot.status == Slot.Status.FAILED
    assert slot.status_note == "no retry: slot used its 2 recoveries"
    assert prediction(slot).status == Prediction.Status.MISSING
    assert_identical_requests(server, run, slot, 3)  # 3 sent, 2 scripted replies left unused
    assert sleeps.calls == [0.0, 0.0]  # the protocol's cooldown (0 s here), between attempts only


def test_the_servers_retry_delay_lengthens_the_cooldown_never_shortens_it(project, cohort1, server, http):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=openai_model(server),
                   retry_policy={"cooldown_s": 0.1})
    slot = generation_slot(run)
    server.script(Reply(429, openai_rate_limited(), {"retry-after-ms": "250"}))
    sleeps = execute(slot, http)
    assert sleeps.calls == [0.25]
    assert [c.basis for c in journal(slot)] == [FIRST, RECOVERY]
    assert "after 0.25 s (server retry delay, longer than the 0.1 s cooldown)" in journal(slot)[1].justification
    assert slot.status == Slot.Status.OK and prediction(slot).text == "A default answer."


def test_gemini_per_minute_resource_exhausted_recovers_on_the_second_attempt(project, cohort1, server, http):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=gemini_model(server))
    slot = generation_slot(run)
    server.script(Reply(429, gemini_quota_exhausted("GenerateRequestsPerMinutePerProjectPerModel", "0s")))
    execute(slot, http)
    first, second = journal(slot)
    assert (first.basis, first.outcome, first.http_status) == (FIRST, "transient", 429)
    assert (second.basis, second.outcome, second.http_status) == (RECOVERY, "ok", 200)
    assert second.model_version == "gemini-test-flash" and second.finish_reason == "STOP"
    assert slot.status == Slot.Status.OK and prediction(slot).status == Prediction.Status.OK
    assert_identical_requests(server, run, slot, 2)
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # per-minute: no circuit


def test_a_429_carrying_output_is_recorded_once_and_never_redrawn(project, cohort1, server, http):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=openai_model(server))
    slot = generation_slot(run)
    server.script(Reply(429, openai_completion("I would say partly."), {"retry-after": "0"}))
    sleeps = execute(slot, http)
    [call] = journal(slot)
    assert (call.basis, call.outcome, call.http_status) == (FIRST, "unusable", 429)
    assert call.text == "I would say partly." and call.finish_reason == "stop"
    assert "HTTP 429 carried output" in call.error
    assert (call.input_tokens, call.output_tokens, call.reasoning_tokens, call.total_tokens) == (11, 7, 3, 18)
    assert slot.status == Slot.Status.UNUSABLE and prediction(slot).status == Prediction.Status.MISSING
    assert len(server.requests) == 1 and sleeps.calls == []


@pytest.mark.parametrize("provider", ["openai", "gemini"])
@pytest.mark.parametrize("status", [502, 503, 504])
def test_output_free_gateway_errors_are_retried_with_the_identical_request(
        project, cohort1, server, http, provider, status):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=model_for(server, provider))
    slot = generation_slot(run)
    server.script(Reply(status, b"<html><body>Service unavailable</body></html>"))
    execute(slot, http)
    first, second = journal(slot)
    assert (first.basis, first.outcome, first.http_status, first.text) == (FIRST, "transient", status, None)
    assert second.basis == RECOVERY
    assert second.justification.startswith(f"recovery 1 of 2 after output-free HTTP {status}")
    assert (second.outcome, second.http_status, second.text) == ("ok", 200, "A default answer.")
    assert slot.status == Slot.Status.OK
    assert_identical_requests(server, run, slot, 2)


@pytest.mark.parametrize("fault", ["timeout", "dropped connection"])
def test_response_free_exceptions_are_retried_with_the_identical_request(project, cohort1, server, http, fault):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=openai_model(server))
    slot = generation_slot(run)
    if fault == "timeout":
        server.script(Reply(body=openai_completion("Too late."), delay_s=TIMEOUT_S + 1.0))
    else:
        server.script(Reply(drop=True))
    execute(slot, http)
    first, second = journal(slot)
    assert (first.basis, first.outcome, first.http_status, first.text) == (FIRST, "transient", None, None)
    assert first.error.startswith("no response: ")
    assert ("Timeout" in first.error) if fault == "timeout" else ("Disconnected" in first.error
                                                                  or "disconnected" in first.error)
    assert second.basis == RECOVERY and "after no response (no response:" in second.justification
    assert (second.outcome, second.text) == ("ok", "A default answer.")
    assert_identical_requests(server, run, slot, 2)


def test_the_phase_recovery_allowance_refuses_the_second_recovery_of_the_phase(project, cohort2, server, http):
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server),
                   retry_policy={"phase_allowance": 1})
    server.script(*[Reply(429, openai_rate_limited()) for _ in range(3)])
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    first_slot, second_slot = Slot.objects.filter(run=run, phase=Phase.GENERATION).order_by("pk")
    assert [c.basis for c in journal(first_slot)] == [FIRST, RECOVERY]  # the phase's one recovery
    assert [c.basis for c in journal(second_slot)] == [FIRST]
    for slot in (first_slot, second_slot):
        assert slot.status == Slot.Status.FAILED
        assert slot.status_note == "no retry: the phase's recovery allowance is used up"
        assert prediction(slot).status == Prediction.Status.MISSING
    assert len(server.requests) == 3  # nothing to judge
    assert run.status == Run.Status.FINISHED
    assert run.analysis["conditions"][QUESTION_ONLY]["missing"] == 2


def test_a_recovery_refused_at_reservation_by_the_phase_allowance_leaves_its_answer_missing(
        project, cohort2, server, http):
    """Two slots decide on a recovery while one is left; the one reserved second is refused."""
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server),
                   retry_policy={"phase_allowance": 1})
    step = run_drive(run.pk)
    first_slot, second_slot = Slot.objects.filter(pk__in=step.slot_ids).order_by("pk")
    server.script(Reply(429, openai_rate_limited()), Reply(429, openai_rate_limited()))
    # While the first slot waits out its cooldown, the second fails once and takes the recovery.
    execute(first_slot, http, Sleeps(then=lambda s: execute(second_slot, http)))
    assert [c.basis for c in journal(second_slot)] == [FIRST, RECOVERY]
    assert second_slot.status == Slot.Status.OK
    assert [c.basis for c in journal(first_slot)] == [FIRST]
    assert first_slot.status == Slot.Status.FAILED
    assert first_slot.status_note == "no retry: the phase's recovery allowance is used up"
    assert prediction(first_slot).status == Prediction.Status.MISSING  # not left pending
    assert first_slot.retry_at is None
    assert len(server.requests) == 3


# --- quota exhaustion: one attempt, the circuit opens, nothing more until resumed -------------


QUOTA_REPLIES = {
    "gemini per-day RESOURCE_EXHAUSTED": ("gemini", lambda: Reply(429, gemini_quota_exhausted(PER_DAY, "30s")), 429),
    "HTTP 402": ("openai", lambda: Reply(402, {"error": {"message": "Payment required: credits exhausted"}}), 402),
    "openai insufficient_quota": ("openai", lambda: Reply(429, openai_insufficient_quota(), {"retry-after": "1"}),
                                  429),
}


@pytest.mark.parametrize("fault", list(QUOTA_REPLIES))
def test_quota_exhaustion_opens_the_circuit_and_only_a_resume_sends_again(
        project, cohort2, cast, server, http, fault):
    provider, reply, status = QUOTA_REPLIES[fault]
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=model_for(server, provider))
    server.script(reply())
    sleeps = Sleeps()
    run = run_inline(run.pk, client=http, sleep=sleeps)

    held, other = Slot.objects.filter(run=run, phase=Phase.GENERATION).order_by("pk")
    [call] = journal(held)
    assert (call.basis, call.outcome, call.http_status) == (FIRST, "quota", status)
    assert held.status == Slot.Status.HELD and held.status_note.startswith("quota exhausted: ")
    assert (run.status, run.circuit_open) == (Run.Status.PAUSED, True)
    assert run.status_reason.startswith(f"Quota exhausted (slot {held.key})")
    assert other.status == Slot.Status.PENDING and not journal(other)
    assert sleeps.calls == []  # the server's retry delay is not a reason to wait and send
    assert len(server.requests) == 1

    # While the circuit is open nothing is sent, whoever asks.
    run_inline(run.pk, client=http, sleep=sleeps)
    execute(other, http)
    execute(held, http)
    assert run_drive(run.pk).slot_ids == ()
    assert len(server.requests) == 1
    progress = run_progress(run)["phases"][1]
    assert (progress["held"], progress["pending"], progress["attempts"]) == (1, 1, 1)

    amendment = run_resume(run=run, user=cast["owner"], reason="quota raised by the provider")
    assert amendment.kind == Amendment.Kind.RESUME
    assert amendment.payload == {"held_slots_released": [held.key], "was": "paused", "circuit_was_open": True,
                                 "allowance": 1, "stopped_because": run.status_reason}
    run = run_inline(run.pk, client=http, sleep=sleeps)

    assert run.status == Run.Status.FINISHED and not run.circuit_open
    first, again = journal(held)
    assert (again.attempt, again.basis, again.outcome) == (2, AMENDMENT, "ok")
    assert again.justification == "allowed by the owner's amendment"
    assert [c.basis for c in journal(other)] == [FIRST]
    generation_bodies = [r.body for r in server.requests[:3]]
    assert generation_bodies.count(request_bytes(run, held)) == 2  # exactly one more, identical
    assert generation_bodies.count(request_bytes(run, other)) == 1
    assert len(server.requests) == 3 + Slot.objects.filter(run=run, phase=Phase.JUDGING).count()


def test_a_recovery_due_when_the_circuit_opens_is_held_and_resumed_by_one_amendment_request(
        project, cohort2, cast, server, http):
    """App. B.2's continuation: slots with only output-free 429s get one identical request each."""
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server))
    step = run_drive(run.pk)
    waiting, exhausted = Slot.objects.filter(pk__in=step.slot_ids).order_by("pk")
    server.script(Reply(429, openai_rate_limited()), Reply(429, openai_insufficient_quota()))
    # During the first slot's cooldown the second one meets the exhausted quota.
    execute(waiting, http, Sleeps(then=lambda s: execute(exhausted, http)))
    assert exhausted.status == Slot.Status.HELD
    assert [c.basis for c in journal(waiting)] == [FIRST]  # its recovery was not sent
    assert waiting.status == Slot.Status.HELD and "held for the owner's amendment" in waiting.status_note
    assert len(server.requests) == 2

    amendment = run_resume(run=run, user=cast["owner"], reason="continuation")
    assert sorted(amendment.payload["held_slots_released"]) == sorted([waiting.key, exhausted.key])
    server.script(Reply(503, b""))  # the continuation's one request may fail: no recovery then
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    waiting.refresh_from_db()
    exhausted.refresh_from_db()
    assert [(c.basis, c.outcome) for c in journal(waiting)] == [(FIRST, "transient"), (AMENDMENT, "transient")]
    assert waiting.status == Slot.Status.FAILED
    assert waiting.status_note == "no retry: the amendment allowed exactly one identical request"
    assert [(c.basis, c.outcome) for c in journal(exhausted)] == [(FIRST, "quota"), (AMENDMENT, "ok")]
    assert [r.body for r in server.requests[:4]] == [request_bytes(run, waiting), request_bytes(run, exhausted),
                                                     request_bytes(run, waiting), request_bytes(run, exhausted)]
    # The slot the allowance left without an answer is the owner's decision at the phase's end.
    assert (run.status, run.phase) == (Run.Status.PAUSED, Phase.GENERATION)
    assert len(server.requests) == 4
    control.run_accept_missing(run=run, user=cast["owner"], reason="keep it missing, as the paper")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED


# --- non-transient errors stop the run --------------------------------------------------------


def test_rejected_credentials_stop_the_run_with_a_clear_reason(project, cohort2, cast, server, http):
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server))
    server.script(Reply(401, openai_error("Incorrect API key provided: sk-...abcd.", code="invalid_api_key",
                                          error_type="invalid_request_error")))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    held = Slot.objects.filter(run=run, phase=Phase.GENERATION).order_by("pk").first()
    [call] = journal(held)
    assert (call.basis, call.outcome, call.http_status) == (FIRST, "fatal", 401)
    assert run.status == Run.Status.STOPPED and not run.circuit_open
    assert run.status_reason == (f"Stopped by a non-transient error on slot {held.key}: "
                                 "HTTP 401: Incorrect API key provided: sk-...abcd.")
    assert held.status == Slot.Status.HELD
    run_inline(run.pk, client=http, sleep=Sleeps())
    assert len(server.requests) == 1  # stopped: nothing more is sent
    with pytest.raises(RunError):
        control.run_pause(run=run, user=cast["owner"], reason="too late")


# --- received content that is not a usable answer: recorded as it is, never redrawn -----------


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_malformed_json_body_is_recorded_unusable_after_one_attempt(project, cohort1, server, http, provider):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=model_for(server, provider))
    slot = generation_slot(run)
    server.script(Reply(body=b'{"choices": [{"message": '))
    execute(slot, http)
    [call] = journal(slot)
    assert (call.outcome, call.http_status, call.error) == ("unusable", 200, "malformed JSON body")
    assert call.raw_body == '{"choices": [{"message": ' and call.text is None
    assert slot.status == Slot.Status.UNUSABLE and prediction(slot).status == Prediction.Status.MISSING
    assert len(server.requests) == 1


def test_max_tokens_with_empty_text_is_recorded_and_missing_not_an_empty_answer(project, cohort1, server, http):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=gemini_model(server))
    slot = generation_slot(run)
    server.script(Reply(body=gemini_response([{"text": "thinking hard", "thought": True}],
                                             finish_reason="MAX_TOKENS", candidates_tokens=None,
                                             thoughts_tokens=1596)))
    execute(slot, http)
    [call] = journal(slot)
    assert (call.outcome, call.finish_reason, call.text) == ("unusable", "MAX_TOKENS", "")
    assert "not 'STOP' (incomplete)" in call.error
    assert (call.input_tokens, call.output_tokens, call.reasoning_tokens, call.total_tokens) == (12, None, 1596, 1608)
    assert (call.model_version, call.response_id) == ("gemini-test-flash", "resp-test-1")
    assert slot.status == Slot.Status.UNUSABLE
    assert prediction(slot).status == Prediction.Status.MISSING  # an incomplete answer is no operational zero
    assert len(server.requests) == 1


def test_thought_parts_never_reach_the_answer(project, cohort1, server, http):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=gemini_model(server))
    slot = generation_slot(run)
    parts = [{"text": "The participant is probably a gardener.", "thought": True}, {"text": "  I grow tomatoes. "}]
    server.script(Reply(body=gemini_response(parts, candidates_tokens=5, thoughts_tokens=42)))
    execute(slot, http)
    [call] = journal(slot)
    assert (call.outcome, call.text, call.finish_reason) == ("ok", "I grow tomatoes.", "STOP")
    assert (call.input_tokens, call.output_tokens, call.reasoning_tokens, call.total_tokens) == (12, 5, 42, 59)
    assert "gardener" in call.raw_body  # the receipt keeps the whole body
    assert prediction(slot).text == "I grow tomatoes." and prediction(slot).status == Prediction.Status.OK


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_an_unexpected_model_version_is_recorded_unusable_and_not_redrawn(project, cohort1, server, http, provider):
    if provider == "openai":
        generator = openai_model(server, expected_model_version="gpt-test-1")
        reply, returned = Reply(body=openai_completion("Hi there.", model="gpt-test-1-mini")), "gpt-test-1-mini"
    else:
        generator = gemini_model(server)
        reply, returned = Reply(body=gemini_response([{"text": "Hi there."}], model_version="gemini-test-lite")), \
            "gemini-test-lite"
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=generator)
    slot = generation_slot(run)
    server.script(reply)
    execute(slot, http)
    [call] = journal(slot)
    assert (call.outcome, call.model_version, call.text) == ("unusable", returned, "Hi there.")
    assert "unexpected model version" in call.error
    assert slot.status == Slot.Status.UNUSABLE and prediction(slot).status == Prediction.Status.MISSING
    assert len(server.requests) == 1


def test_a_selection_with_duplicate_keys_is_an_invalid_selection_and_an_operational_zero(
        project, cohort1, server, http):
    roles = Roles(server, answer=["Alpha answer.", "Beta answer.", "Gamma answer."],
                  selection=lambda request: '{"candidate_id": "c1", "candidate_id": "c2"}')
    run = make_run(project, cohort1, conditions=[SELECTION], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    decision = Slot.objects.get(run=run, phase=Phase.DECISIONS)
    [call] = journal(decision)
    assert (call.outcome, call.text) == ("ok", '{"candidate_id": "c1", "candidate_id": "c2"}')
    final = Prediction.objects.get(run=run, condition=SELECTION, label="final")
    assert final.status == Prediction.Status.INVALID_SELECTION and final.text is None
    assert roles.kinds == {"memory": 1, "answer": 3, "selection": 1, "judge": 3}  # the candidates only
    assert run.analysis["conditions"][SELECTION] == {"planned": 1, "graded": 1, "missing": 0, "mean": 0.0}


# --- dedupe: identical messages share a generation, identical answers a judge call -------------


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_identical_messages_share_a_generation_and_identical_answers_a_judge_call(
        project, cohort2, server, http, provider):
    # Within each task: b0, b1, b2 answer Alpha, Alpha, Beta; fusion answers Alpha again.
    roles = Roles(server, answer=["Alpha answer.", "Alpha answer.", "Beta answer."],
                  fusion=lambda request: "Alpha answer.", selection=lambda request: '{"candidate_id": "c2"}')
    run = make_run(project, cohort2, conditions=[ONE_SHOT, FUSION, SELECTION], generator=model_for(server, provider))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED

    # One memory; per task one shared slot per candidate (the one-shot is b0 of both pools);
    # two decisions; one judge call per distinct answer text (Alpha, Beta).
    assert roles.kinds == {"memory": 1, "answer": 2 * 3, "fusion": 2, "selection": 2, "judge": 2 * 2}
    assert len(server.requests) == 1 + 6 + 4 + 4
    for task_id in Prediction.objects.filter(run=run).values_list("task_id", flat=True).distinct():
        base = Prediction.objects.filter(run=run, task_id=task_id).exclude(label="final", condition__in=[FUSION,
                                                                                                       SELECTION])
        by_label = {}
        for p in base:
            by_label.setdefault(p.label if p.condition != ONE_SHOT else "b0", set()).add(p.slot_id)
        assert all(len(slot_ids) == 1 for slot_ids in by_label.values())  # shared, never duplicated
        assert Grade.objects.filter(run=run, task_id=task_id).count() == 2
        selection = Prediction.objects.get(run=run, task_id=task_id, condition=SELECTION, label="final")
        chosen = Prediction.objects.get(run=run, task_id=task_id, condition=SELECTION, label=selection.chosen_label)
        assert selection.text == chosen.text and selection.answer_sha256 == chosen.answer_sha256
    for slot in Slot.objects.filter(run=run):
        assert len(journal(slot)) == 1
    # The server received each slot's bytes exactly once per recorded attempt (b0, b1, b2 are
    # independent draws of one identical request: three slots, three attempts, same bytes).
    sent = Counter(r.body for r in server.requests)
    assert sent == Counter(request_bytes(run, s) for s in Slot.objects.filter(run=run) for _ in journal(s))
    # Selection inherits its candidate's grade (Alpha 3, Beta 1 from the role replies).
    grades = run.analysis["conditions"]
    assert grades[FUSION]["mean"] == 1.0 and grades[ONE_SHOT]["mean"] == 1.0


def test_an_empty_answer_is_an_operational_zero_without_a_judge_call(project, cohort1, server, http):
    roles = Roles(server, answer=lambda request: "   ")
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    [p] = Prediction.objects.filter(run=run)
    assert (p.status, p.text) == (Prediction.Status.EMPTY, "")
    [grade] = Grade.objects.filter(run=run)
    assert (grade.status, grade.score, grade.slot) == (Grade.Status.OPERATIONAL_ZERO, 0, None)
    assert roles.kinds == {"answer": 1} and len(server.requests) == 1
    assert not Slot.objects.filter(run=run, phase=Phase.JUDGING).exists()
    assert run.analysis["conditions"][QUESTION_ONLY]["mean"] == 0.0


# --- unknown reservations ---------------------------------------------------------------------


def _reserve_and_die(slot):
    """What a worker leaves behind when it dies mid-request: a reservation, no outcome."""
    reservation = journal_rules._reserve(slot.pk, basis=FIRST, justification="", worker="dead", lease_s=30)
    ModelCall.objects.filter(pk=reservation.call_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    return reservation


def test_an_expired_reservation_is_unknown_never_resent_and_reissued_once_by_amendment(
        project, cohort2, cast, server, http):
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server))
    step = run_drive(run.pk)
    lost, other = Slot.objects.filter(pk__in=step.slot_ids).order_by("pk")
    _reserve_and_die(lost)
    step = run_drive(run.pk)
    lost.refresh_from_db()
    assert lost.status == Slot.Status.UNKNOWN and prediction(lost).status == Prediction.Status.MISSING
    [call] = journal(lost)
    assert call.outcome == ModelCall.Outcome.UNKNOWN and "lease ran out" in call.error
    execute(lost, http)  # a late duplicate job for it sends nothing
    assert server.requests == []
    assert run_progress(run)["phases"][1]["unknown"] == 1

    amendment = run_reissue_unknown(run=run, user=cast["owner"], reason="the worker crashed")
    assert amendment.payload == {"slots": [lost.key], "phase": Phase.GENERATION, "allowance": 1, "requests": 1,
                                 "input_tokens": None, "output_tokens": None, "tokens_known_for": 0}
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    lost.refresh_from_db()
    assert [(c.basis, c.outcome) for c in journal(lost)] == [(FIRST, "unknown"), (AMENDMENT, "ok")]
    assert lost.status == Slot.Status.OK  # the old reservation did not make the new one unknown
    assert [r.body for r in server.requests[:2]] == [request_bytes(run, lost), request_bytes(run, other)]
    assert run.status == Run.Status.FINISHED


def test_an_outcome_arriving_after_its_lease_is_kept_but_the_slot_stays_unknown(project, cohort2, server, http):
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server))
    step = run_drive(run.pk)
    late_slot = Slot.objects.get(pk=step.slot_ids[0])
    reservation = _reserve_and_die(late_slot)
    run_drive(run.pk)
    outcome = wire.Outcome(wire.OutcomeKind.OK, http_status=200, text="Too late.", finish_reason="stop")
    decision = policy.Decision(retry=False, wait_s=0.0, justification="completed")
    assert journal_rules._record(reservation.call_id, outcome, decision) is False
    late_slot.refresh_from_db()
    [call] = journal(late_slot)
    assert (call.outcome, call.text, call.http_status) == ("ok", "Too late.", 200)
    assert call.error.startswith("arrived after the reservation's lease ran out; the slot stays unknown")
    assert late_slot.status == Slot.Status.UNKNOWN
    assert prediction(late_slot).status == Prediction.Status.MISSING


def test_a_phase_is_settled_only_when_no_slot_is_open(project, cohort2, server, http):
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server))
    step = run_drive(run.pk)
    first, second = Slot.objects.filter(pk__in=step.slot_ids).order_by("pk")
    assert step.recheck_in_s == pytest.approx(TIMEOUT_S + policy.LEASE_GRACE_S + 0.5, abs=0.2)
    execute(first, http)
    assert phase_settled(first.pk) is None
    execute(second, http)
    assert phase_settled(second.pk) == run.pk


def test_pending_slots_whose_jobs_were_lost_are_handed_out_again_only_when_asked(project, cohort2, server):
    run = make_run(project, cohort2, conditions=[QUESTION_ONLY], generator=openai_model(server))
    handed = run_drive(run.pk).slot_ids
    assert len(handed) == 2
    assert run_drive(run.pk).slot_ids == ()
    assert run_drive(run.pk, redispatch_after_s=60).slot_ids == ()
    assert run_drive(run.pk, redispatch_after_s=0).slot_ids == handed


def test_an_answer_with_a_nul_is_recorded_not_lost(project, cohort1, server, http):
    run = make_run(project, cohort1, conditions=[QUESTION_ONLY], generator=openai_model(server))
    slot = generation_slot(run)
    server.script(Reply(body=openai_completion("I would\u0000 say so.")))
    execute(slot, http)
    [call] = journal(slot)
    assert (call.basis, call.outcome) == (FIRST, "ok")
    assert call.text == "I would\ufffd say so." and "cannot be stored" in call.error
    assert slot.status == Slot.Status.OK
    assert prediction(slot).text == "I would\ufffd say so."
    assert len(server.requests) == 1
