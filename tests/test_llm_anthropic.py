"""Anthropic's Messages API client against the tests' local server speaking its wire format.

The same receipt fields as the other providers (response id, model version, stop reason, usage),
its overload and rate-limit answers classified by the same retry rule, its retry-after honoured
as a lower bound only, its key read from the environment and sent as x-api-key, never kept.
One run goes through the whole engine with it (the paper's history benchmark used Claude).
"""
import logging

import httpx
import pytest

from experiments.core.llm.client import send
from experiments.core.llm.wire import ANTHROPIC_VERSION, ModelConfig, OutcomeKind, Usage, build_request
from experiments.execution.driver import run_inline
from experiments.execution.policy import RetryPolicy, decide_retry
from experiments.models import ModelCall, Run, Slot
from tests.engine_helpers import (
    ANTHROPIC_KEY_ENV, QUESTION_ONLY, Roles, Sleeps, anthropic_model, build_cohort, make_run,
)
from tests.llm_fake_server import (
    Reply, anthropic_credit_exhausted, anthropic_error, anthropic_message, anthropic_overloaded,
    anthropic_rate_limited,
)

API_KEY = "sk-ant-test-0a1b2c3d4e5f-never-show-me"
POLICY = RetryPolicy()  # the paper's: 2 recoveries per slot, 30 s cooldown


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(ANTHROPIC_KEY_ENV, API_KEY)


def config(server, **changes) -> ModelConfig:
    return ModelConfig(**{**anthropic_model(server), "timeout_s": 0.5, **changes})


def attempt(cfg, http, system="You simulate a participant.", user="[QUESTION]\nWhy?"):
    return send(cfg, build_request(cfg, system, user), client=http)


def test_an_answer_has_the_receipt_fields_and_the_request_the_native_format(server, http):
    server.script(Reply(body=anthropic_message("  I cycle to work.\n", input_tokens=20, output_tokens=9,
                                               cache_read_input_tokens=100, thinking="hidden reasoning")))
    outcome = attempt(config(server, temperature=0.2), http, system="SYS", user="USER")
    assert outcome.kind == OutcomeKind.OK and outcome.http_status == 200
    assert outcome.text == "I cycle to work."  # the thinking block is never the answer
    assert (outcome.response_id, outcome.model_version, outcome.finish_reason) == (
        "msg_test_1", "claude-test-1", "end_turn")
    # Cached prompt tokens are input too; thinking is inside output_tokens, not reported apart.
    assert outcome.usage == Usage(input_tokens=120, output_tokens=9, reasoning_tokens=None, total_tokens=129)
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == API_KEY and "authorization" not in request.headers
    assert request.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert request.json == {"model": "claude-test-1", "max_tokens": 1600, "system": "SYS", "temperature": 0.2,
                            "messages": [{"role": "user", "content": "USER"}]}
    assert not decide_retry(POLICY, outcome, 0, 256).retry


def test_a_thinking_budget_is_sent_as_extended_thinking_and_checked_early(server, http):
    attempt(config(server, reasoning="2048", max_output_tokens=4000), http)
    assert server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    for bad in ({"reasoning": "high"}, {"reasoning": "512"}, {"reasoning": "4096", "max_output_tokens": 4096},
                {"reasoning": "2048", "max_output_tokens": 4000, "temperature": 0.0}):
        with pytest.raises(ValueError):
            config(server, **bad)


def test_a_turn_cut_by_max_tokens_is_unusable_and_keeps_its_text(server, http):
    server.script(Reply(body=anthropic_message("Half an ans", stop_reason="max_tokens")))
    outcome = attempt(config(server), http)
    assert outcome.kind == OutcomeKind.UNUSABLE and outcome.text == "Half an ans"
    assert "max_tokens" in outcome.error
    assert not decide_retry(POLICY, outcome, 0, 256).retry  # received content is never redrawn


def test_an_unexpected_model_version_is_unusable(server, http):
    server.script(Reply(body=anthropic_message("Fine.", model="claude-test-2")))
    outcome = attempt(config(server), http)
    assert outcome.kind == OutcomeKind.UNUSABLE and "claude-test-2" in outcome.error


@pytest.mark.parametrize("status, body", [(529, anthropic_overloaded()), (429, anthropic_rate_limited())],
                         ids=["overloaded-529", "rate-limit-429"])
def test_overloaded_and_rate_limited_are_transient_and_the_retry_is_identical(server, http, status, body):
    cfg = config(server)
    prepared = build_request(cfg, "SYS", "USER")
    server.script(Reply(status, body, {"retry-after": "3"}))
    first = send(cfg, prepared, client=http)
    assert first.kind == OutcomeKind.TRANSIENT and first.http_status == status and first.text is None
    assert first.retry_after_s == 3.0
    decision = decide_retry(POLICY, first, recoveries_so_far=0, phase_allowance_left=256)
    # The server's shorter delay never shortens the protocol's cooldown.
    assert decision.retry and decision.wait_s == 30.0 and "the server asked for 3 s" in decision.justification
    assert send(cfg, prepared, client=http).kind == OutcomeKind.OK
    assert server.requests[0].body == server.requests[1].body == prepared.body_bytes


def test_a_longer_retry_after_lengthens_the_cooldown(server, http):
    server.script(Reply(529, anthropic_overloaded(), {"retry-after": "75"}))
    decision = decide_retry(POLICY, attempt(config(server), http), 0, 256)
    assert decision.retry and decision.wait_s == 75.0 and "server retry delay" in decision.justification


def test_a_spent_credit_balance_is_quota_and_other_errors_are_fatal(server, http):
    server.script(Reply(400, anthropic_credit_exhausted()),
                  Reply(402, anthropic_error("billing_error", "Payment required")),
                  Reply(400, anthropic_error("invalid_request_error", "messages: field required")),
                  Reply(413, anthropic_error("request_too_large", "Request exceeds the maximum allowed size")),
                  Reply(500, anthropic_error("api_error", "Internal server error")))
    kinds = [attempt(config(server), http).kind for _ in range(5)]
    assert kinds == [OutcomeKind.QUOTA, OutcomeKind.QUOTA, OutcomeKind.FATAL, OutcomeKind.FATAL, OutcomeKind.FATAL]


def test_the_key_comes_from_the_environment_and_is_never_kept(server, http, monkeypatch, caplog):
    cfg = config(server)
    server.script(Reply(401, anthropic_error("authentication_error", f"invalid x-api-key {API_KEY}")))
    with caplog.at_level(logging.DEBUG):
        outcome = attempt(cfg, http)
    assert outcome.kind == OutcomeKind.FATAL
    assert API_KEY not in repr(cfg) + repr(build_request(cfg, "s", "u")) + outcome.error + outcome.raw_body
    assert API_KEY not in caplog.text
    monkeypatch.delenv(ANTHROPIC_KEY_ENV)
    missing = attempt(cfg, http)
    assert missing.kind == OutcomeKind.FATAL and ANTHROPIC_KEY_ENV in missing.error
    assert len(server.requests) == 1  # nothing sent without the key


def test_the_local_server_refuses_requests_without_the_required_headers(server):
    with httpx.Client(trust_env=False) as raw:
        no_key = raw.post(f"{server.anthropic_base_url}/messages", json={}, headers={"anthropic-version": "x"})
        no_version = raw.post(f"{server.anthropic_base_url}/messages", json={}, headers={"x-api-key": "k"})
    assert no_key.status_code == 401 and no_key.json()["error"]["type"] == "authentication_error"
    assert no_version.status_code == 400 and "anthropic-version" in no_version.json()["error"]["message"]


def test_a_run_through_the_engine_with_an_overload_on_the_way(project, server, http):
    Roles(server)
    server.script(Reply(529, anthropic_overloaded(), {"retry-after": "1"}))
    run = make_run(project, build_cohort(project, sessions=1, targets=2, name="claude"), conditions=[QUESTION_ONLY],
                   generator=anthropic_model(server))
    sleeps = Sleeps()
    run = run_inline(run.pk, client=http, sleep=sleeps)
    assert run.status == Run.Status.FINISHED
    assert set(Slot.objects.filter(run=run).values_list("status", flat=True)) == {Slot.Status.OK}
    calls = ModelCall.objects.filter(slot__run=run).order_by("pk")
    first, recovery = calls[0], calls[1]
    assert (first.outcome, first.http_status, recovery.basis, recovery.outcome) == (
        "transient", 529, ModelCall.Basis.RECOVERY, "ok")
    assert recovery.response_id == "msg_test_1" and recovery.model_version == "claude-test-1"
    assert recovery.finish_reason == "end_turn" and recovery.total_tokens == 21
    assert server.requests[0].body == server.requests[1].body  # the identical request
    assert 1.0 in sleeps.calls  # the cooldown (0 s in these tests' protocol) lengthened by retry-after
