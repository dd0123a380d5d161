"""A judge's structured output: the provider's JSON-schema switch on the wire, the reply
read by the ordinary judge parser, parse failures recorded and never redrawn, the option sealed —
and protocols without it sealed exactly as before."""
import hashlib
import json

import pytest

from experiments.core.canonical import canonical_json
from experiments.core.llm import wire
from experiments.core.parsers import JUDGE_SCHEMA, parse_judge
from experiments.execution import sealing
from experiments.execution.driver import run_inline
from experiments.execution.policy import RunError
from experiments.models import Grade, ModelCall, Slot
from experiments.models.runs import Phase
from experiments.web.runs.forms import ModelConfigForm
from tests.engine_helpers import (
    QUESTION_ONLY, Roles, Sleeps, build_cohort, gemini_model, make_protocol, make_run, openai_model,
)

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
OPENAI = {"provider": "openai", "base_url": "https://api.example.test/v1", "model": "judge-1"}
GEMINI = {"provider": "gemini", "base_url": "https://gemini.example.test/v1beta", "model": "gemini-judge"}
# The seal of the protocol of `test_a_protocol_without_the_option_seals_as_before`, computed with
# the code before structured output and re-grades existed (commit a5222ec).
OLD_SETTINGS_SHA256 = "4421907ef219a62f8470a96ecbc60b87b19ab35cd74cdcca432a145bd039ef7e"
OLD_TASK_LIST_SHA256 = "f827119a58f75697a1f1cde15cca0fe504e7e22402edc624576d267c45945330"


@pytest.fixture
def cohort(project):
    return build_cohort(project, sessions=1, targets=2)


# --- the wire -------------------------------------------------------------------------------------

def test_openai_compatible_judges_ask_for_the_json_schema():
    plain = wire.build_request(wire.ModelConfig(**OPENAI), "sys", "user")
    structured = wire.build_request(wire.ModelConfig(**OPENAI, structured_output=True), "sys", "user")
    assert structured.json_body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "judge_grade", "strict": True, "schema": {
            "type": "object",
            "properties": {"score": {"type": "integer", "enum": [0, 1, 2, 3]}, "rationale": {"type": "string"}},
            "required": ["score", "rationale"], "additionalProperties": False}},
    }
    assert "response_format" not in plain.json_body
    assert {k: v for k, v in structured.json_body.items() if k != "response_format"} == plain.json_body
    # Unset, the option changes no byte: requests of existing protocols keep their hashes.
    assert plain.body_bytes == wire.build_request(wire.ModelConfig(**OPENAI, structured_output=False), "sys",
                                                  "user").body_bytes
    assert json.loads(structured.body_bytes) == structured.json_body


def test_gemini_judges_ask_for_json_with_a_response_schema():
    plain = wire.build_request(wire.ModelConfig(**GEMINI, reasoning="high"), "sys", "user")
    structured = wire.build_request(wire.ModelConfig(**GEMINI, reasoning="high", structured_output=True),
                                    "sys", "user")
    config = structured.json_body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"] == {
        "type": "OBJECT",
        "properties": {"score": {"type": "INTEGER", "minimum": 0, "maximum": 3}, "rationale": {"type": "STRING"}},
        "required": ["score", "rationale"], "propertyOrdering": ["score", "rationale"],
    }
    assert config["thinkingConfig"] == {"thinkingLevel": "high"} and config["maxOutputTokens"] == 1600
    assert "responseMimeType" not in plain.json_body["generationConfig"]
    assert structured.url == plain.url


@pytest.mark.parametrize("changes, problem", [
    ({**OFFLINE, "structured_output": True}, "structured output is not supported by provider 'offline'"),
    ({**OPENAI, "structured_output": "yes"}, "structured_output must be true or false"),
])
def test_a_provider_without_the_switch_is_refused(changes, problem):
    with pytest.raises(ValueError, match=problem):
        wire.ModelConfig(**changes)


# --- the reply ------------------------------------------------------------------------------------

def test_the_judge_parser_reads_the_structured_reply():
    assert JUDGE_SCHEMA["required"] == ["score", "rationale"]
    result = parse_judge('{"score": 2, "rationale": "Same stance, other details."}')
    assert (result.score, result.rationale, result.error) == (2, "Same stance, other details.", None)
    assert parse_judge('{"score": 4, "rationale": "x"}').error == "out-of-range"
    assert parse_judge('{"score": 2, "rationale": ').error == "malformed-json"


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_structured_judge_is_sent_the_schema_and_its_grades_are_read(project, cohort, server, http, provider):
    roles = Roles(server, judge=lambda request: '{"score":2,"rationale":"close"}')
    model = (openai_model if provider == "openai" else gemini_model)(server)
    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=model,
                   judge={**model, "structured_output": True})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    judged = [r for r in server.requests if "[PREDICTED ANSWER]" in r.body.decode()]
    answered = [r for r in server.requests if "[PREDICTED ANSWER]" not in r.body.decode()]
    assert len(judged) == roles.kinds["judge"] >= 1 and answered
    for request in judged:
        if provider == "openai":
            assert request.json["response_format"]["json_schema"]["schema"] == JUDGE_SCHEMA
        else:
            assert request.json["generationConfig"]["responseMimeType"] == "application/json"
    for request in answered:  # the generator asks for prose, as always
        assert "response_format" not in request.json and "responseMimeType" not in json.dumps(request.json)
    assert {(g.status, g.score, g.rationale) for g in Grade.objects.filter(run=run)} == {("ok", 2, "close")}


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_malformed_structured_reply_is_a_recorded_parse_failure_never_redrawn(
        project, cohort, server, http, provider):
    Roles(server, judge=lambda request: '{"score": 2, "rationale": "cut off')
    model = (openai_model if provider == "openai" else gemini_model)(server)
    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=model,
                   judge={**model, "structured_output": True})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    slots = Slot.objects.filter(run=run, phase=Phase.JUDGING)
    assert slots.exists()
    for slot in slots:
        [call] = ModelCall.objects.filter(slot=slot)  # one attempt: received content is never redrawn
        assert (call.outcome, call.text) == ("ok", '{"score": 2, "rationale": "cut off')
        assert slot.status == Slot.Status.OK
    grades = Grade.objects.filter(run=run)
    assert {(g.status, g.score, g.parse_error) for g in grades} == {("missing", None, "malformed-json")}
    assert run.analysis["conditions"][QUESTION_ONLY]["missing"] == 2


# --- the seal -------------------------------------------------------------------------------------

def test_the_option_is_sealed_with_the_judge(project, cohort):
    plain = sealing.protocol_seal(protocol=make_protocol(project, cohort, conditions=[QUESTION_ONLY],
                                                         generator=OFFLINE, judge=OPENAI, name="plain"), user=None)
    structured = sealing.protocol_seal(protocol=make_protocol(
        project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE, judge={**OPENAI, "structured_output": True},
        name="structured"), user=None)
    assert sealing.protocol_settings(structured)["judge"]["structured_output"] is True
    assert "structured_output" not in sealing.protocol_settings(plain)["judge"]
    assert structured.seal["settings_sha256"] != plain.seal["settings_sha256"]
    assert structured.seal["task_list_sha256"] == plain.seal["task_list_sha256"]


@pytest.mark.parametrize("changes, problem", [
    ({"judge": {**OFFLINE, "structured_output": True}},
     "judge: model settings: structured output is not supported by provider 'offline'"),
    ({"generator": {**OPENAI, "structured_output": True}}, "generator: structured output is for the judge only"),
])
def test_sealing_refuses_structured_output_where_it_cannot_apply(project, cohort, changes, problem):
    protocol = make_protocol(project, cohort, **{"conditions": [QUESTION_ONLY], "generator": OFFLINE,
                                                 "judge": OPENAI, **changes})
    assert any(problem in p for p in sealing.protocol_problems(protocol))
    with pytest.raises(RunError, match="structured output"):
        sealing.protocol_seal(protocol=protocol, user=None)


def test_a_protocol_without_the_option_seals_as_before(project, cohort):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE, judge=OPENAI,
                             concurrency={"offline": 2, "openai": 3}, bootstrap={"seed": 5, "draws": 300},
                             contrasts=[{"name": "q", "terms": {QUESTION_ONLY: 1}}])
    protocol = sealing.protocol_seal(protocol=protocol, user=None)
    assert set(protocol.seal) == {"prompts", "task_list_sha256", "settings_sha256", "code_version"}
    assert protocol.seal["settings_sha256"] == OLD_SETTINGS_SHA256
    assert protocol.seal["task_list_sha256"] == OLD_TASK_LIST_SHA256
    settings = sealing.protocol_settings(protocol)
    assert set(settings) == {"cohort", "conditions", "generator", "judge", "concurrency", "retry_policy",
                             "contrasts", "bootstrap"}
    assert protocol.seal["settings_sha256"] == hashlib.sha256(canonical_json(settings).encode()).hexdigest()


def test_the_editor_stores_the_option_only_when_ticked():
    data = {"judge-provider": "openai", "judge-base_url": "http://127.0.0.1:8080/v1", "judge-model": "m",
            "judge-max_output_tokens": "100", "judge-token_param": "max_completion_tokens", "judge-timeout_s": "5",
            "judge-concurrency": "2"}
    unticked = ModelConfigForm(data, prefix="judge")
    ticked = ModelConfigForm({**data, "judge-structured_output": "on"}, prefix="judge")
    assert unticked.is_valid() and ticked.is_valid()
    assert "structured_output" not in unticked.config()
    assert ticked.config() == {**unticked.config(), "structured_output": True}
