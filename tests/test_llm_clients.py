"""The LLM clients against a real local HTTP server, through real httpx (paper App. B.2/B.3).

One test per fault: the Outcome's classification, text and usage, and what the retry rule then
decides. Nothing here sleeps for a cooldown: decide_retry only says how long to wait.
"""

import dataclasses
import json
import logging
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import httpx

from experiments.core.llm.transport import StdlibTransport
import pytest

from experiments.core.llm import offline as offline_backend
from experiments.core.llm.offline import OFFLINE_LABEL, OFFLINE_MODEL_VERSION
from experiments.core.llm.wire import ModelConfig, Outcome, OutcomeKind, Usage, build_request
from experiments.execution.policy import RetryPolicy, decide_retry
from experiments.core.llm.client import send
from tests.llm_fake_server import (
    Reply,
    gemini_error,
    gemini_quota_exhausted,
    gemini_response,
    openai_completion,
    openai_error,
    openai_insufficient_quota,
    openai_rate_limited,
    openai_request_too_large,
    running_fake_llm,
)

API_KEY = "sk-test-9f8e7d6c5b4a-never-show-me"
KEY_ENV = "OWNWORDS_TEST_FAKE_LLM_KEY"
POLICY = RetryPolicy()  # the paper's: 2 recoveries per slot, 30 s cooldown
# The attempt's total time for tests that are not about timeouts (those set their own): 0.3 s was
# outlasted by a plain 400 reply's body under a loaded machine ("response interrupted").
TIMEOUT_S = 5.0


@pytest.fixture
def fake_llm():
    with running_fake_llm() as server:
        yield server


@pytest.fixture(scope="module", params=["httpx-transport", "stdlib-transport"])
def http(request):
    """Every wire test runs over httpx's own transport and over the engine workers' one
    (`StdlibTransport`): the same outcomes, faults included, from both (conftest's `http`, twice)."""
    # One client for the module: each new httpx.Client builds an SSL context (~0.1 s).
    # trust_env=False: a proxy from the environment must not sit between us and 127.0.0.1.
    transport = StdlibTransport() if request.param == "stdlib-transport" else None
    with httpx.Client(trust_env=False, transport=transport) as http_client:
        yield http_client


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, API_KEY)


def openai_config(server, **changes) -> ModelConfig:
    settings = dict(
        provider="openai",
        base_url=server.openai_base_url,
        model="gpt-test-1",
        api_key_env=KEY_ENV,
        max_output_tokens=1600,
        reasoning="minimal",
        timeout_s=TIMEOUT_S,
    )
    return ModelConfig(**{**settings, **changes})


def gemini_config(server, **changes) -> ModelConfig:
    settings = dict(
        provider="gemini",
        base_url=server.gemini_base_url,
        model="gemini-test-flash",
        expected_model_version="gemini-test-flash",
        api_key_env=KEY_ENV,
        max_output_tokens=1600,
        reasoning="minimal",
        timeout_s=TIMEOUT_S,
    )
    return ModelConfig(**{**settings, **changes})


def attempt(config, http, system="You simulate a participant.", user="[QUESTION]\nWhy?"):
    return send(config, build_request(config, system, user), client=http)


def assert_no_retry(outcome):
    decision = decide_retry(POLICY, outcome, recoveries_so_far=0, phase_allowance_left=256)
    assert not decision.retry, decision
    return decision


# --- complete answers ------------------------------------------------------------------------


def test_openai_answer_is_ok_with_text_usage_and_identity(fake_llm, http):
    fake_llm.script(Reply(body=openai_completion("  I cycle to work.\n", reasoning_tokens=5)))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.OK
    assert outcome.http_status == 200
    assert outcome.text == "I cycle to work."
    assert outcome.finish_reason == "stop"
    assert outcome.model_version == "gpt-test-1"
    assert outcome.response_id == "chatcmpl-test-1"
    assert outcome.usage == Usage(input_tokens=11, output_tokens=7, reasoning_tokens=5,
                                  total_tokens=18)
    assert outcome.elapsed_s > 0
    assert_no_retry(outcome)


def test_openai_request_carries_the_configured_parameters_and_bearer_key(fake_llm, http):
    attempt(openai_config(fake_llm), http, system="SYS", user="USER")
    (request,) = fake_llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.json == {
        "model": "gpt-test-1",
        "messages": [{"role": "system", "content": "SYS"}, {"role": "user", "content": "USER"}],
        "max_completion_tokens": 1600,
        "reasoning_effort": "minimal",
    }  # temperature omitted: the service default (App. B.3)


def test_openai_older_servers_get_max_tokens_and_an_explicit_temperature(fake_llm, http):
    config = openai_config(fake_llm, token_param="max_tokens", temperature=0.0, reasoning=None)
    attempt(config, http)
    body = fake_llm.requests[0].json
    assert body["max_tokens"] == 1600 and body["temperature"] == 0.0
    assert "max_completion_tokens" not in body and "reasoning_effort" not in body


def test_unreported_usage_is_unknown_not_zero(fake_llm, http):
    body = openai_completion("Fine.")
    del body["usage"]
    fake_llm.script(Reply(body=body))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.OK
    assert outcome.usage == Usage(None, None, None, None)


def test_gemini_answer_and_request_use_the_native_format(fake_llm, http):
    outcome = attempt(gemini_config(fake_llm), http, system="SYS", user="USER")
    assert outcome.kind == OutcomeKind.OK
    assert outcome.text == "A default answer."
    (request,) = fake_llm.requests
    assert request.path == "/v1beta/models/gemini-test-flash:generateContent"
    assert request.headers["x-goog-api-key"] == API_KEY
    assert "authorization" not in request.headers
    assert API_KEY not in request.path
    assert request.json == {
        "systemInstruction": {"parts": [{"text": "SYS"}]},
        "contents": [{"role": "user", "parts": [{"text": "USER"}]}],
        "generationConfig": {
            "maxOutputTokens": 1600,
            "thinkingConfig": {"thinkingLevel": "minimal"},
        },
    }


def test_gemini_text_joins_non_thought_parts_stripped_and_counts_thoughts(fake_llm, http):
    parts = [
        {"text": "Let me think about the participant...", "thought": True},
        {"text": "\n  I mostly cycle, "},
        {"text": "unless it rains.  \n"},
        {"thoughtSignature": "opaque"},
    ]
    fake_llm.script(Reply(body=gemini_response(parts, candidates_tokens=9, thoughts_tokens=42)))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.OK
    assert outcome.text == "I mostly cycle, unless it rains."
    assert outcome.finish_reason == "STOP"
    assert outcome.response_id == "resp-test-1"
    assert outcome.usage == Usage(input_tokens=12, output_tokens=9, reasoning_tokens=42,
                                  total_tokens=63)


def test_a_complete_empty_answer_is_ok_with_empty_text(fake_llm, http):
    # App. B.3: a complete expected-model empty answer is an operational zero, not a failure.
    fake_llm.script(Reply(body=gemini_response([{"text": "  "}])))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.OK and outcome.text == ""


# --- received content that is not a usable answer: recorded, never redrawn --------------------


def test_gemini_max_tokens_with_empty_text_is_recorded_as_unusable(fake_llm, http):
    parts = [{"text": "thinking hard", "thought": True}]
    fake_llm.script(Reply(body=gemini_response(parts, finish_reason="MAX_TOKENS",
                                               candidates_tokens=None, thoughts_tokens=1596)))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.UNUSABLE
    assert outcome.text == ""
    assert outcome.finish_reason == "MAX_TOKENS"
    assert "incomplete" in outcome.error
    assert outcome.usage.output_tokens is None and outcome.usage.reasoning_tokens == 1596
    assert "MAX_TOKENS" in outcome.raw_body
    assert_no_retry(outcome)


def test_openai_length_finish_is_unusable_but_keeps_its_text(fake_llm, http):
    fake_llm.script(Reply(body=openai_completion("I usually", finish_reason="length")))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.UNUSABLE
    assert outcome.text == "I usually" and outcome.finish_reason == "length"
    assert_no_retry(outcome)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_wrong_model_version_is_unusable(fake_llm, http, provider):
    if provider == "openai":
        config = openai_config(fake_llm, expected_model_version="gpt-test-1")
        fake_llm.script(Reply(body=openai_completion("Hi.", model="gpt-test-1-mini")))
    else:
        config = gemini_config(fake_llm)
        fake_llm.script(Reply(body=gemini_response(model_version="gemini-test-flash-lite")))
    outcome = attempt(config, http)
    assert outcome.kind == OutcomeKind.UNUSABLE
    assert "unexpected model version" in outcome.error
    assert outcome.text  # what was received is still recorded
    assert_no_retry(outcome)


def test_gemini_needs_exactly_one_candidate(fake_llm, http):
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": "gemini-test-flash"}
    fake_llm.script(Reply(body=gemini_response(candidates=2)), Reply(body=blocked))
    two = attempt(gemini_config(fake_llm), http)
    none = attempt(gemini_config(fake_llm), http)
    assert two.kind == none.kind == OutcomeKind.UNUSABLE
    assert "got 2" in two.error and two.text is None
    assert "SAFETY" in none.error
    assert_no_retry(none)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_malformed_json_body_is_unusable_and_kept_raw(fake_llm, http, provider):
    fake_llm.script(Reply(body=b'{"choices": [{"message": '))
    config = openai_config(fake_llm) if provider == "openai" else gemini_config(fake_llm)
    outcome = attempt(config, http)
    assert outcome.kind == OutcomeKind.UNUSABLE
    assert outcome.error == "malformed JSON body"
    assert outcome.raw_body == '{"choices": [{"message": '
    assert_no_retry(outcome)


def test_json_of_the_wrong_shape_is_unusable(fake_llm, http):
    fake_llm.script(Reply(body={"choices": [{"message": "not an object"}]}))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.UNUSABLE
    assert "unexpected response shape" in outcome.error


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_429_that_carries_output_is_received_content_not_a_retry(fake_llm, http, provider):
    if provider == "openai":
        config, body = openai_config(fake_llm), openai_completion("Real answer.")
    else:
        config, body = gemini_config(fake_llm), gemini_response([{"text": "Real answer."}])
    fake_llm.script(Reply(429, body, {"retry-after": "1"}))
    outcome = attempt(config, http)
    assert outcome.kind == OutcomeKind.UNUSABLE
    assert outcome.http_status == 429
    assert outcome.text == "Real answer."
    assert "carried output" in outcome.error
    assert_no_retry(outcome)


# --- output-free transient failures: retried with the identical request ------------------------


def test_output_free_429_is_transient_and_the_retry_sends_identical_bytes(fake_llm, http):
    config = openai_config(fake_llm)
    prepared = build_request(config, "SYS", "USER")
    fake_llm.script(Reply(429, openai_rate_limited(), {"retry-after": "2"}))
    first = send(config, prepared, client=http)
    assert first.kind == OutcomeKind.TRANSIENT
    assert first.http_status == 429 and first.text is None
    assert first.retry_after_s == 2.0
    assert "Rate limit reached" in first.error
    decision = decide_retry(POLICY, first, recoveries_so_far=0, phase_allowance_left=256)
    assert decision.retry and decision.wait_s == 30.0  # a shorter server delay never shortens the cooldown
    assert "recovery 1 of 2" in decision.justification
    assert "the server asked for 2 s" in decision.justification

    second = send(config, prepared, client=http)
    assert second.kind == OutcomeKind.OK
    first_request, second_request = fake_llm.requests
    assert first_request.body == second_request.body == prepared.body_bytes


def test_retry_after_ms_is_read_in_milliseconds(fake_llm, http):
    fake_llm.script(Reply(429, openai_rate_limited(), {"retry-after-ms": "1500"}))
    assert attempt(openai_config(fake_llm), http).retry_after_s == 1.5


def test_retry_after_may_be_an_http_date(fake_llm, http):
    when = datetime.now(timezone.utc) + timedelta(seconds=90)
    fake_llm.script(Reply(503, b"", {"retry-after": format_datetime(when, usegmt=True)}))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.TRANSIENT
    assert 85 <= outcome.retry_after_s <= 90


@pytest.mark.parametrize("status", [502, 503, 504])
def test_output_free_gateway_errors_are_transient_with_the_default_cooldown(
    fake_llm, http, status
):
    fake_llm.script(Reply(status, b"<html><body>Bad gateway</body></html>"))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.TRANSIENT and outcome.http_status == status
    decision = decide_retry(POLICY, outcome, recoveries_so_far=1, phase_allowance_left=3)
    assert decision.retry and decision.wait_s == 30.0
    assert "recovery 2 of 2" in decision.justification and "cooldown" in decision.justification


def test_a_slow_server_times_out_as_a_response_free_transient(fake_llm, http):
    fake_llm.script(Reply(body=openai_completion("late"), delay_s=1.0))
    outcome = attempt(openai_config(fake_llm, timeout_s=0.2), http)
    assert outcome.kind == OutcomeKind.TRANSIENT
    assert outcome.http_status is None and outcome.text is None
    assert "Timeout" in outcome.error
    assert 0.2 <= outcome.elapsed_s < 0.9
    decision = decide_retry(POLICY, outcome, recoveries_so_far=0, phase_allowance_left=1)
    assert decision.retry and "no response" in decision.justification


def test_a_connection_dropped_without_response_is_transient(fake_llm, http):
    fake_llm.script(Reply(drop=True))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.TRANSIENT and outcome.http_status is None
    assert "no response" in outcome.error
    assert len(fake_llm.requests) == 1


def test_a_body_cut_off_after_the_status_line_is_received_not_response_free(fake_llm, http):
    # The service answered (a status line arrived), so the paper's response-free retry does not
    # apply: the attempt is recorded as it is.
    fake_llm.script(Reply(200, openai_completion("A long answer that breaks off."), cut_body=True))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.UNUSABLE and outcome.http_status == 200
    assert "response interrupted" in outcome.error
    assert_no_retry(outcome)


def test_a_body_trickling_past_the_timeout_is_cut_at_the_total_deadline(fake_llm, http):
    # Each byte arrives well within the read timeout, so only a total deadline stops it:
    # the journal's lease for the attempt (timeout + grace) must outlast the attempt.
    fake_llm.script(Reply(200, openai_completion("A slow answer."), trickle_s=0.05))
    config = openai_config(fake_llm, timeout_s=0.5)
    outcome = attempt(config, http)
    assert outcome.kind == OutcomeKind.UNUSABLE and outcome.http_status == 200
    assert "response interrupted" in outcome.error and "in total" in outcome.error
    assert outcome.elapsed_s < config.timeout_s + 0.3
    assert_no_retry(outcome)


def test_nothing_listening_is_a_transient_connect_error(http):
    with running_fake_llm() as server:
        config = openai_config(server)
    outcome = attempt(config, http)  # the server has stopped: connection refused
    assert outcome.kind == OutcomeKind.TRANSIENT and "ConnectError" in outcome.error


def test_gemini_per_minute_resource_exhausted_is_transient_with_its_retry_delay(fake_llm, http):
    body = gemini_quota_exhausted("GenerateRequestsPerMinutePerProjectPerModel", "12.5s")
    fake_llm.script(Reply(429, body))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.TRANSIENT
    assert outcome.retry_after_s == 12.5
    assert decide_retry(POLICY, outcome, 0, 10).wait_s == 30.0  # the cooldown at least
    assert decide_retry(RetryPolicy(cooldown_s=5), outcome, 0, 10).wait_s == 12.5  # lengthened


def test_a_slot_stops_after_two_recoveries_three_attempts_in_all(fake_llm, http):
    # A roomy timeout: nothing here is slow, and on a loaded machine 0.3 s once cut a 429's body,
    # which is then (rightly) received content, never retried.
    config = openai_config(fake_llm, timeout_s=5.0)
    prepared = build_request(config, "SYS", "USER")
    fake_llm.script(*[Reply(429, openai_rate_limited()) for _ in range(5)])
    attempts, recoveries, decision = 0, 0, None
    while True:  # the journal's loop, in miniature (no sleeping: a 0 s cooldown)
        outcome = send(config, prepared, client=http)
        attempts += 1
        decision = decide_retry(RetryPolicy(cooldown_s=0), outcome, recoveries, 256 - recoveries)
        if not decision.retry:
            break
        recoveries += 1
    assert attempts == 3 and len(fake_llm.requests) == 3
    assert {request.body for request in fake_llm.requests} == {prepared.body_bytes}
    assert "used its 2 recoveries" in decision.justification


# --- quota: the circuit opens -----------------------------------------------------------------


def test_gemini_per_day_resource_exhausted_is_quota(fake_llm, http):
    body = gemini_quota_exhausted("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "30s")
    fake_llm.script(Reply(429, body))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.QUOTA
    assert outcome.retry_after_s == 30.0  # recorded, but never a reason to retry
    assert "circuit" in assert_no_retry(outcome).justification


def test_gemini_per_day_limit_named_in_error_info_is_quota(fake_llm, http):
    error_info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "RATE_LIMIT_EXCEEDED",
        "metadata": {"quota_limit": "Gemini25ProRequestsPerDay"},
    }
    body = gemini_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", [error_info])
    fake_llm.script(Reply(429, body))
    assert attempt(gemini_config(fake_llm), http).kind == OutcomeKind.QUOTA


def test_http_402_is_quota(fake_llm, http):
    fake_llm.script(Reply(402, {"error": {"message": "Payment required: credits exhausted"}}))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.QUOTA and outcome.http_status == 402
    assert_no_retry(outcome)


def test_openai_insufficient_quota_is_quota_not_a_rate_limit(fake_llm, http):
    fake_llm.script(Reply(429, openai_insufficient_quota(), {"retry-after": "1"}))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.QUOTA
    assert_no_retry(outcome)


def test_a_configured_pattern_marks_quota_for_other_providers(fake_llm, http):
    fake_llm.script(Reply(429, {"detail": "Monthly token budget exhausted for this key"}))
    config = openai_config(fake_llm, quota_pattern=r"budget exhausted")
    assert attempt(config, http).kind == OutcomeKind.QUOTA
    fake_llm.script(Reply(429, {"detail": "Monthly token budget exhausted for this key"}))
    assert attempt(openai_config(fake_llm), http).kind == OutcomeKind.TRANSIENT


# --- fatal: the phase stops -------------------------------------------------------------------


def test_request_too_large_429_is_fatal_not_retryable(fake_llm, http):
    fake_llm.script(Reply(429, openai_request_too_large()))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.FATAL and outcome.http_status == 429
    assert outcome.error.startswith("HTTP 429: Request too large")
    assert_no_retry(outcome)


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_credentials_are_fatal_and_the_echoed_key_is_redacted(fake_llm, http, status):
    # OpenAI-style services quote the key they rejected; it must not reach our records.
    message = f"Incorrect API key provided: {API_KEY}."
    fake_llm.script(Reply(status, openai_error(message, code="invalid_api_key",
                                               error_type="invalid_request_error")))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.FATAL and outcome.http_status == status
    assert API_KEY not in outcome.error and API_KEY not in outcome.raw_body
    assert "[redacted]" in outcome.error
    assert_no_retry(outcome)


@pytest.mark.parametrize("status", [400, 404, 500])
def test_other_http_errors_are_fatal(fake_llm, http, status):
    fake_llm.script(Reply(status, gemini_error(status, "INVALID_ARGUMENT", "bad request")))
    outcome = attempt(gemini_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.FATAL and outcome.error == f"HTTP {status}: bad request"


def test_an_unusable_base_url_is_fatal(http):
    outcome = attempt(ModelConfig("openai", "ftp://127.0.0.1:1/v1", "m"), http)
    assert outcome.kind == OutcomeKind.FATAL and "UnsupportedProtocol" in outcome.error


def test_a_missing_key_variable_is_fatal_and_sends_nothing(fake_llm, http, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.FATAL and KEY_ENV in outcome.error
    assert fake_llm.requests == []


def test_a_local_server_needs_no_key(fake_llm, http):
    outcome = attempt(openai_config(fake_llm, api_key_env=None), http)
    assert outcome.kind == OutcomeKind.OK
    assert "authorization" not in fake_llm.requests[0].headers


# --- the retry rule itself --------------------------------------------------------------------


def test_decide_retry_respects_the_phase_allowance_and_the_policy_statuses():
    busy = Outcome(OutcomeKind.TRANSIENT, http_status=503)
    assert not decide_retry(POLICY, busy, 0, phase_allowance_left=0).retry
    narrow = RetryPolicy(retry_statuses=(429,))
    assert not decide_retry(narrow, busy, 0, 10).retry
    assert decide_retry(RetryPolicy(cooldown_s=0.5), busy, 0, 10).wait_s == 0.5
    for kind in (OutcomeKind.OK, OutcomeKind.UNUSABLE, OutcomeKind.QUOTA, OutcomeKind.FATAL):
        assert not decide_retry(POLICY, Outcome(kind, http_status=429), 0, 10).retry


# --- requests and secrets ---------------------------------------------------------------------


def test_build_request_is_deterministic_and_hash_sensitive():
    config = ModelConfig("openai", "http://127.0.0.1:1/v1", "m", temperature=0.7)
    first = build_request(config, "S", "Ünïcode user")
    again = build_request(config, "S", "Ünïcode user")
    other = build_request(config, "S", "Ünïcode user!")
    assert first.body_bytes == again.body_bytes and first.request_sha256 == again.request_sha256
    assert other.request_sha256 != first.request_sha256
    assert first.body_bytes.decode() == json.dumps(
        first.json_body, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert len(first.request_sha256) == 64


def test_the_key_never_appears_in_reprs_errors_or_logs(fake_llm, http, caplog):
    caplog.set_level(logging.DEBUG)  # httpx's own loggers included
    config = openai_config(fake_llm)
    prepared = build_request(config, "S", "U")
    fake_llm.script(Reply(401, openai_error(f"bad key {API_KEY}", code="invalid_api_key",
                                            error_type="invalid_request_error")),
                    Reply(drop=True))
    outcomes = [send(config, prepared, client=http) for _ in range(3)]
    shown = " ".join([repr(config), repr(prepared), str(prepared.headers),
                      prepared.body_bytes.decode(), caplog.text]
                     + [repr(o) + o.error + o.raw_body for o in outcomes])
    assert API_KEY not in shown
    assert "LLM attempt openai gpt-test-1" in caplog.text


def test_invalid_configs_fail_early():
    with pytest.raises(ValueError):
        ModelConfig("mistral", "http://x", "m")  # not a provider (anthropic became one)
    with pytest.raises(ValueError):
        ModelConfig("openai", "http://x", "m", token_param="max_output_tokens")
    with pytest.raises(Exception):
        ModelConfig("openai", "http://x", "m", quota_pattern="(unclosed")


def test_the_fake_server_answers_after_its_configured_delay(fake_llm, http):
    fake_llm.default_delay_s = 0.2
    outcome = attempt(openai_config(fake_llm, timeout_s=1.0), http)
    assert outcome.kind == OutcomeKind.OK and outcome.elapsed_s >= 0.2


# --- the offline stand-in ---------------------------------------------------------------------

OFFLINE = ModelConfig("offline", "", "offline-stand-in")
ANSWER_PROMPT = """[SCREENER Q&A]
Q: How do you get around town?
A: Mostly by bike.

[EARLIER IN THE INTERVIEW, verbatim]
- I work as a nurse at the hospital in Leeds.
- Interviewer: what do you eat?
- My favourite meal is ramen. I cook ramen on Sundays with my kids.
- I hate driving in traffic.

[QUESTION]
What do you cook on Sundays?

Answer as this participant would. Write ONLY their reply."""

JUDGE_PROMPT = """[QUESTION]
{question}

[ACTUAL ANSWER]
{reference}

[PREDICTED ANSWER]
{prediction}

Step 1: List the core content of the ACTUAL answer.
Return only a JSON object of the form {{"score": <0-3>, "rationale": "..."}}."""


def offline(user, system="You are simulating a participant.", client=None):
    return send(OFFLINE, build_request(OFFLINE, system, user), client=client)


def grade(reference, prediction):
    outcome = offline(JUDGE_PROMPT.format(question="What do you cook?", reference=reference,
                                          prediction=prediction), system="You are grading.")
    return json.loads(outcome.text)


def test_offline_answer_quotes_the_best_matching_evidence_without_any_network(fake_llm, http):
    outcome = offline(ANSWER_PROMPT, client=http)
    assert outcome.kind == OutcomeKind.OK
    assert outcome.model_version == OFFLINE_MODEL_VERSION == "offline-stand-in-1"
    assert outcome.http_status is None and fake_llm.requests == []
    assert outcome.text == "I cook ramen on Sundays with my kids."
    assert OFFLINE_LABEL in outcome.raw_body
    again = offline(ANSWER_PROMPT)
    assert dataclasses.replace(again, elapsed_s=0) == dataclasses.replace(outcome, elapsed_s=0)


def test_offline_answers_are_deterministic_and_capped_at_sixty_words():
    evidence = "\n".join(f"- I cook dish number {i} with rice and beans on Sundays at home."
                         for i in range(20))
    user = f"[EVIDENCE]\n{evidence}\n\n[QUESTION]\nWhat do you cook on Sundays?"
    texts = {offline(user).text for _ in range(3)}
    assert len(texts) == 1
    (text,) = texts
    assert 0 < len(text.split()) <= offline_backend.ANSWER_WORD_CAP


def test_offline_without_headings_uses_the_whole_message():
    user = "I live in Leeds. I cook ramen on Sundays. I like trains.\nWhat do you cook on Sundays?"
    assert offline(user).text == "I cook ramen on Sundays."


def test_offline_grades_run_from_zero_to_three_and_name_the_shared_words():
    reference = "I cook ramen on Sundays with my kids at home."
    assert grade(reference, reference)["score"] == 3
    assert grade(reference, "Ramen, usually on Sundays.")["score"] == 3
    loose = grade(reference, "I make ramen sometimes, after football practice and homework.")
    assert loose["score"] == 1
    nothing = grade(reference, "I prefer cycling to the office.")
    assert nothing["score"] == 0
    assert nothing["rationale"].endswith("shared words: none (overlap 0.00)")
    partial = grade(reference, "Ramen with the kids, on busy weekdays after school runs.")
    assert partial["score"] in (1, 2)
    assert partial["rationale"].startswith(f"{OFFLINE_LABEL}: shared words: kids, ramen")
    empty = grade(reference, "")
    assert set(empty) == {"score", "rationale"} and empty["score"] == 0


def test_offline_selection_returns_a_candidate_id():
    candidates = json.dumps([
        {"answer": "I drive to work.", "candidate_id": "c1"},
        {"answer": "Ramen, I cook ramen on Sundays.", "candidate_id": "c2"},
        {"answer": "No idea.", "candidate_id": "c3"},
    ], sort_keys=True)
    decision = (f"{ANSWER_PROMPT}\n\n[DECISION TASK]\nSelect the single candidate below. Return "
                f'exactly one JSON object with the key candidate_id.\n\n[ANONYMOUS CANDIDATES]\n'
                f"{candidates}")
    assert json.loads(offline(decision).text) == {"candidate_id": "c2"}
    fusion = decision.replace("with the key candidate_id", "with the reply")
    assert "ramen" in offline(fusion).text.lower()


def test_offline_follows_the_project_prompt_files():
    prompts = pytest.importorskip("experiments.core.prompts")
    try:
        judge, _ = prompts.render_prompt("judge_user", question="What do you cook?",
                                         reference="Ramen on Sundays.", prediction="Ramen.")
        answer_user, _ = prompts.render_prompt(
            "answer_raw_user", screener="Q: Bike? A: Yes.", question="What do you cook?",
            evidence="- I cook ramen on Sundays.\n- I work in Leeds.")
        judge_system = prompts.load_prompt("judge_system")
    except Exception as error:  # the prompt files are owned elsewhere and may be moving
        pytest.skip(f"prompt files not usable: {error}")
    graded = json.loads(offline(judge, system=judge_system).text)
    assert graded["score"] == 3 and "ramen" in graded["rationale"]
    assert offline(answer_user).text == "I cook ramen on Sundays."


def test_nul_and_lone_surrogates_in_an_answer_are_kept_as_replacement_characters(fake_llm, http):
    # Valid JSON escapes that PostgreSQL's text refuses: without the replacement the receipt
    # raises and a paid answer is lost.
    fake_llm.script(Reply(body=openai_completion("I cycle\u0000 to work \ud800daily.")))
    outcome = attempt(openai_config(fake_llm), http)
    assert outcome.kind == OutcomeKind.OK
    assert outcome.text == "I cycle\ufffd to work \ufffddaily."
    assert "2 character(s) that cannot be stored" in outcome.error
    assert "\u0000" not in outcome.raw_body and "\ud800" not in outcome.raw_body
    outcome.raw_body.encode("utf-8")  # storable: no lone surrogate left anywhere


def test_a_clean_answer_has_no_replacement_note(fake_llm, http):
    fake_llm.script(Reply(body=openai_completion("Plain \U0001F600 text.")))  # a valid pair stays
    outcome = attempt(openai_config(fake_llm), http)
    assert (outcome.text, outcome.error) == ("Plain \U0001F600 text.", "")
