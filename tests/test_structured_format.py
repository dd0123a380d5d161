"""Structured output on local servers: the JSON object form beside the JSON
schema, sealed only when chosen; and a server error on a run's first judge call names the likely
cause in the run's stop message. Against the tests' local HTTP server, scripted to answer as
llama.cpp's server does (HTTP 500 for a json_schema response_format, JSON mode accepted).
"""
import json

import pytest

from experiments.core.llm import wire
from experiments.execution import sealing
from experiments.execution.driver import run_inline
from experiments.models import Grade, Run
from experiments.web.runs.model_form import ModelConfigForm
from tests.engine_helpers import QUESTION_ONLY, Roles, Sleeps, build_cohort, make_protocol, make_run, openai_model
from tests.llm_fake_server import Reply

OPENAI = {"provider": "openai", "base_url": "https://api.example.test/v1", "model": "judge-1"}
OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
# llama.cpp's server on a response_format it cannot turn into a grammar
LLAMA_CPP_500 = {"error": {"code": 500, "message": "JSON schema conversion failed: unsupported", "type": "server_error"}}


@pytest.fixture
def cohort(project):
    return build_cohort(project, sessions=1, targets=2)


def llama_cpp_like(server, *, first_ok: int = 0):
    """The server answers a json_schema response_format with HTTP 500, JSON mode as usual;
    `first_ok`: that many judge calls are answered before the 500s start."""
    original = server._next_reply
    judged = []

    def next_reply(request):
        reply = original(request)
        asked = (request.json.get("response_format") or {}).get("type")
        if asked == "json_schema":
            judged.append(request)
            if len(judged) > first_ok:
                return Reply(500, LLAMA_CPP_500)
        return reply

    server._next_reply = next_reply


def test_the_json_object_form_sends_json_mode_and_the_default_sends_the_schema_as_before():
    schema = wire.build_request(wire.ModelConfig(**OPENAI, structured_output=True), "sys", "user")
    explicit = wire.build_request(wire.ModelConfig(**OPENAI, structured_output=True, structured_format="json_schema"),
                                  "sys", "user")
    json_mode = wire.build_request(wire.ModelConfig(**OPENAI, structured_output=True, structured_format="json_object"),
                                   "sys", "user")
    assert explicit.body_bytes == schema.body_bytes  # the default changes no byte
    assert schema.json_body["response_format"]["type"] == "json_schema"
    assert json_mode.json_body["response_format"] == {"type": "json_object"}
    assert {k: v for k, v in json_mode.json_body.items() if k != "response_format"} == {
        k: v for k, v in schema.json_body.items() if k != "response_format"}


@pytest.mark.parametrize("changes, problem", [
    ({**OPENAI, "structured_format": "json_object"}, "needs structured_output"),
    ({"provider": "gemini", "base_url": "https://g.test/v1beta", "model": "g", "structured_output": True,
      "structured_format": "json_object"}, "provider 'openai'"),
    ({**OPENAI, "structured_output": True, "structured_format": "grammar"}, "structured_format must be one of"),
])
def test_the_json_object_form_is_refused_where_it_cannot_apply(changes, problem):
    with pytest.raises(ValueError, match=problem):
        wire.ModelConfig(**changes)


def test_the_form_is_stored_and_sealed_only_when_json_object_is_chosen(project, cohort):
    data = {"judge-provider": "openai", "judge-base_url": "http://127.0.0.1:8080/v1", "judge-model": "m",
            "judge-max_output_tokens": "100", "judge-token_param": "max_completion_tokens", "judge-timeout_s": "5",
            "judge-concurrency": "2", "judge-structured_output": "on"}
    schema = ModelConfigForm({**data, "judge-structured_format": "json_schema"}, prefix="judge")
    unsaid = ModelConfigForm(data, prefix="judge")
    json_mode = ModelConfigForm({**data, "judge-structured_format": "json_object"}, prefix="judge")
    assert schema.is_valid() and unsaid.is_valid() and json_mode.is_valid()
    assert schema.config() == unsaid.config() and "structured_format" not in schema.config()
    assert json_mode.config() == {**schema.config(), "structured_format": "json_object"}
    seals = [sealing.protocol_seal(protocol=make_protocol(project, cohort, conditions=[QUESTION_ONLY],
                                                          generator=OFFLINE, judge=judge, name=name), user=None)
             for name, judge in (("schema", {**OPENAI, "structured_output": True}),
                                 ("json", {**OPENAI, "structured_output": True, "structured_format": "json_object"}))]
    assert "structured_format" not in sealing.protocol_settings(seals[0])["judge"]
    assert seals[0].seal["settings_sha256"] != seals[1].seal["settings_sha256"]


def test_a_500_on_the_first_judge_call_names_the_json_schema_and_json_mode_grades(project, cohort, server, http):
    Roles(server, judge=lambda request: '{"score": 2, "rationale": "close"}')
    llama_cpp_like(server)
    model = openai_model(server)
    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=model,
                   judge={**model, "structured_output": True}, name="schema")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.STOPPED
    assert "HTTP 500" in run.status_reason
    assert "Likely cause: structured output was asked for as a JSON schema" in run.status_reason
    assert "json_object" in run.status_reason

    again = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=model,
                     judge={**model, "structured_output": True, "structured_format": "json_object"}, name="json")
    again = run_inline(again.pk, client=http, sleep=Sleeps())
    assert again.status == Run.Status.FINISHED
    judged = [r.json for r in server.requests if "[PREDICTED ANSWER]" in r.body.decode()]
    assert judged[-1]["response_format"] == {"type": "json_object"}
    assert {(g.status, g.score) for g in Grade.objects.filter(run=again)} == {("ok", 2)}


def test_a_500_after_the_phase_was_answered_names_no_cause(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="later")
    Roles(server, judge=lambda request: json.dumps({"score": 1, "rationale": "r"}))
    llama_cpp_like(server, first_ok=1)  # the first judge call is answered, a later one fails
    model = openai_model(server)
    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=model,
                   judge={**model, "structured_output": True}, name="later")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.STOPPED and "HTTP 500" in run.status_reason
    assert "Likely cause" not in run.status_reason
