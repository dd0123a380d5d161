"""Provider endpoints come from the administrator's list: a protocol that names any other
address is neither saved by the editor nor sealed, so a worker never POSTs to an internal host.

The tests' own server (tests/llm_fake_server.py) stands for "an internal host": with the list a
production server has (no loopback entry), a protocol pointing at it is refused and the server
receives nothing.
"""
import pytest
from django.test import override_settings
from django.urls import reverse

from experiments.execution import sealing
from experiments.execution.policy import RunError, model_config
from experiments.models import Protocol
from tests.engine_helpers import QUESTION_ONLY, build_cohort, make_protocol, openai_model

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
# What a server allows out of the box (settings.DEFAULT_LLM_ENDPOINTS), written out so this file
# states the rule rather than reading it back.
PRODUCTION_LIST = [
    {"name": "openai", "provider": "openai", "base_url": "https://api.openai.com/v1"},
    {"name": "gemini", "provider": "gemini", "base_url": "https://generativelanguage.googleapis.com/v1beta"},
    {"name": "offline", "provider": "offline"},
]
INTERNAL = ["http://169.254.169.254/latest/meta-data", "http://10.0.0.5:6379/v1", "http://localhost:8080/v1"]


@pytest.fixture
def cohort(project):
    return build_cohort(project, sessions=1, targets=1)


@override_settings(LLM_ENDPOINTS=PRODUCTION_LIST)
def test_sealing_refuses_an_address_the_administrator_did_not_list_and_nothing_is_sent(project, cohort, server):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server),
                             judge=OFFLINE)
    problems = sealing.protocol_problems(protocol)
    assert any(p.startswith("generator: the base URL 'http://127.0.0.1:") for p in problems), problems
    (problem,) = [p for p in problems if p.startswith("generator:")]
    # The message names what is allowed, so the analyst knows what to pick.
    for allowed in ("openai (https://api.openai.com/v1, openai)",
                    "gemini (https://generativelanguage.googleapis.com/v1beta, gemini)", "offline (the offline stand-in"):
        assert allowed in problem
    with pytest.raises(RunError, match="not among the endpoints"):
        sealing.protocol_seal(protocol=protocol, user=None)
    protocol.refresh_from_db()
    assert not protocol.is_sealed() and server.requests == []


@override_settings(LLM_ENDPOINTS=PRODUCTION_LIST)
@pytest.mark.parametrize("base_url", INTERNAL)
def test_internal_addresses_are_refused_for_either_role(project, cohort, base_url):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE,
                             judge={"provider": "openai", "base_url": base_url, "model": "m"})
    assert [p for p in sealing.protocol_problems(protocol) if p.startswith("judge: the base URL")]


@override_settings(LLM_ENDPOINTS=PRODUCTION_LIST)
def test_the_listed_endpoints_and_the_stand_in_seal(project, cohort):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE, judge={
        "provider": "openai", "base_url": "https://api.openai.com/v1", "model": "gpt-x"})
    assert sealing.protocol_problems(protocol) == []
    protocol.judge = {"provider": "gemini", "base_url": "https://generativelanguage.googleapis.com/v1beta/",
                      "model": "gemini-x"}
    assert sealing.protocol_problems(protocol) == []  # a trailing slash is the same address
    # An endpoint is for its provider: Gemini's wire format is not sent to OpenAI's address.
    protocol.judge = {"provider": "gemini", "base_url": "https://api.openai.com/v1", "model": "gemini-x"}
    assert [p for p in sealing.protocol_problems(protocol) if "not among the endpoints" in p]


@override_settings(LLM_ENDPOINTS=[e for e in PRODUCTION_LIST if e["name"] != "offline"])
def test_a_list_without_the_stand_in_refuses_it(project, cohort):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE)
    assert any("the offline stand-in is not among the endpoints" in p for p in sealing.protocol_problems(protocol))


@override_settings(LLM_ENDPOINTS=[*PRODUCTION_LIST, {"name": "lab-servers", "url_prefix": "http://127.0.0.1:"}])
@pytest.mark.parametrize("base_url, admitted", [
    ("http://127.0.0.1:8080/v1", True),
    ("http://127.0.0.1:80@169.254.169.254/v1", False),  # user information: another host
    ("http://127.0.0.1:8080/v1/../../admin", False),
    ("http://127.0.0.1:8080/v1?next=http://10.0.0.1", False),
    ("http://127.0.0.1:8080/v1#frag", False),
    ("http://127.0.0.1:8080\\@10.0.0.1/v1", False),
    ("http://127.0.0.1:99999/v1", False),
    ("http://127.0.0.1.attacker.example:80/v1", False),
    ("http://127.0.0.10:8080/v1", False),
])
def test_a_url_prefix_admits_plain_urls_only(project, cohort, base_url, admitted):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE,
                             judge={"provider": "openai", "base_url": base_url, "model": "m"})
    assert (not [p for p in sealing.protocol_problems(protocol) if p.startswith("judge:")]) is admitted


def test_the_tests_fake_server_is_allowed_by_the_test_settings_only(project, cohort, server):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server))
    assert sealing.protocol_problems(protocol) == []


# --- the protocol editor ---------------------------------------------------------------------

def editor_data(cohort, **overrides):
    data = {"name": "p-endpoint", "cohort": cohort.pk, "conditions": [QUESTION_ONLY],
            "max_recoveries_per_slot": 2, "cooldown_s": 30, "phase_allowance": 256, "contrasts": "",
            "bootstrap_seed": 7, "bootstrap_draws": 500}
    for role in ("generator", "judge"):
        data.update({f"{role}-provider": "offline", f"{role}-base_url": "", f"{role}-model": "offline-stand-in",
                     f"{role}-max_output_tokens": 1600, f"{role}-token_param": "max_completion_tokens",
                     f"{role}-timeout_s": 180, f"{role}-concurrency": 4, f"{role}-api_key_env": ""})
    data.update(overrides)
    return data


@override_settings(LLM_ENDPOINTS=PRODUCTION_LIST)
@pytest.mark.parametrize("base_url", INTERNAL)
def test_the_editor_refuses_an_analyst_typed_internal_address(client, cast, cohort, base_url):
    client.force_login(cast["analyst"])
    response = client.post(reverse("protocol_create", args=["alpha"]), editor_data(cohort, **{
        "generator-provider": "openai", "generator-base_url": base_url, "generator-model": "m",
        "generator-concurrency": 4}))
    assert response.status_code == 200
    body = response.content.decode()
    assert "is not among the endpoints this server&#x27;s administrator allows" in body
    assert "openai (https://api.openai.com/v1, openai)" in body
    assert not Protocol.objects.filter(name="p-endpoint").exists()


@override_settings(LLM_ENDPOINTS=PRODUCTION_LIST)
def test_the_editor_offers_the_configured_endpoints_and_picks_one_by_name(client, cast, cohort):
    client.force_login(cast["analyst"])
    body = client.get(reverse("protocol_create", args=["alpha"])).content.decode()
    assert 'name="judge-endpoint"' in body
    for name in ("openai", "gemini", "offline"):
        assert f'<option value="{name}"' in body
    response = client.post(reverse("protocol_create", args=["alpha"]), editor_data(cohort, **{
        "judge-provider": "openai", "judge-endpoint": "openai", "judge-model": "gpt-x", "judge-concurrency": 4}))
    assert response.status_code == 302
    protocol = Protocol.objects.get(name="p-endpoint")
    assert protocol.judge["base_url"] == "https://api.openai.com/v1"
    # The edit page shows the endpoint it uses.
    body = client.get(reverse("protocol_edit", args=["alpha", protocol.pk])).content.decode()
    assert '<option value="openai" selected>' in body


@override_settings(LLM_ENDPOINTS=PRODUCTION_LIST)
@pytest.mark.parametrize("overrides, message", [
    ({"judge-provider": "gemini", "judge-endpoint": "openai"}, "the endpoint openai is for provider openai, not gemini"),
    ({"judge-provider": "openai", "judge-endpoint": "openai", "judge-base_url": "http://10.0.0.5/v1"},
     "the endpoint openai has its own URL (https://api.openai.com/v1): leave the base URL empty"),
])
def test_the_editor_explains_a_mismatched_endpoint(client, cast, cohort, overrides, message):
    client.force_login(cast["owner"])
    response = client.post(reverse("protocol_create", args=["alpha"]),
                           editor_data(cohort, **{"judge-model": "m", **overrides}))
    assert response.status_code == 200 and message in response.content.decode()
    assert not Protocol.objects.filter(name="p-endpoint").exists()


# --- the execution path ----------------------------------------------------------------------

@override_settings(LLM_ENDPOINTS=PRODUCTION_LIST)
def test_the_execution_check_refuses_what_sealing_would(server):
    from experiments.execution.endpoints import EndpointNotAllowed, require_allowed_endpoint

    with pytest.raises(EndpointNotAllowed, match="not among the endpoints"):
        require_allowed_endpoint(model_config(openai_model(server)))
    require_allowed_endpoint(model_config({"provider": "openai", "base_url": "https://api.openai.com/v1",
                                           "model": "m"}))
    require_allowed_endpoint(model_config(OFFLINE))
    assert issubclass(EndpointNotAllowed, RunError)  # the engine's callers already handle RunError


def test_a_long_hostile_url_is_quoted_short_and_escaped(project, cohort):
    hostile = "http://10.0.0.1/" + "\x1b[31m<script>" * 40
    with override_settings(LLM_ENDPOINTS=PRODUCTION_LIST):
        protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE,
                                 judge={"provider": "openai", "base_url": hostile, "model": "m"})
        (problem,) = [p for p in sealing.protocol_problems(protocol) if p.startswith("judge:")]
    assert "\x1b" not in problem and "\\x1b" in problem and len(problem) < 600


# --- what an endpoint answers in an error ------------------------------------------------------

HOSTILE_MESSAGE = "\x1b[2J\x1b[31mpwned\u202e <script>alert(1)</script> " + "A" * 5000


def test_a_provider_error_reaches_the_run_page_and_run_report_only_as_a_short_escaped_excerpt(project, cohort, cast,
                                                                                            server, client):
    import io

    import httpx
    from django.core.management import call_command

    from experiments.execution.driver import run_inline
    from tests.engine_helpers import Sleeps, make_run
    from tests.llm_fake_server import Reply, openai_error

    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server))
    server.script(Reply(400, openai_error(HOSTILE_MESSAGE, code="bad", error_type="invalid_request_error")))
    with httpx.Client(trust_env=False) as http_client:
        run = run_inline(run.pk, client=http_client, sleep=Sleeps())
    assert "pwned" in run.status_reason  # the provider's words are kept, as an excerpt
    client.force_login(cast["owner"])
    body = client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
    assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)" in body
    assert "A" * 400 not in body
    out = io.StringIO()
    call_command("run_report", run.pk, stdout=out)
    report = out.getvalue()
    assert "\x1b" not in report and "\u202e" not in report
    assert "\\x1b[2J\\x1b[31mpwned\\u202e <script>" in report
    assert "A" * 400 not in report


def test_the_excerpt_rule():
    from experiments.execution.endpoints import provider_excerpt

    assert provider_excerpt("  HTTP 400:\n\n bad\trequest ") == "HTTP 400: bad request"
    assert provider_excerpt("a\x00b\x07c\u200bd") == "a\\x00b\\x07c\\u200bd"
    assert provider_excerpt("é ü 中文") == "é ü 中文"  # ordinary text stays as it is
    cut = provider_excerpt("x" * 1000)
    assert len(cut) == 200 and cut.endswith("…")
    assert provider_excerpt("x" * 1000, limit=None) == "x" * 1000


def test_a_run_of_an_endpoint_withdrawn_after_the_seal_does_not_start(project, cohort, server):
    """Sealed while the fake server was allowed; the administrator then narrows the list."""
    from experiments.execution.control import run_start
    from experiments.execution.policy import RunError
    from experiments.models import Run
    from tests.engine_helpers import QUESTION_ONLY, make_protocol, openai_model
    from experiments.execution.sealing import protocol_seal
    protocol = protocol_seal(protocol=make_protocol(project, cohort, conditions=[QUESTION_ONLY],
                                                    generator=openai_model(server)), user=None)
    run = Run.objects.create(protocol=protocol)
    with override_settings(LLM_ENDPOINTS=PRODUCTION_LIST), pytest.raises(RunError, match="not"):
        run_start(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.CREATED and not server.requests


def test_an_endpoint_withdrawn_mid_run_stops_the_run_before_any_request(project, cohort, server):
    from experiments.execution.driver import run_inline
    from experiments.models import Run
    from tests.engine_helpers import QUESTION_ONLY, make_run, openai_model
    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server))
    with override_settings(LLM_ENDPOINTS=PRODUCTION_LIST):
        run = run_inline(run.pk)
    assert run.status == Run.Status.STOPPED and run.status_reason.startswith("Stopped before sending")
    assert not server.requests
