"""Keys belong to the administrator's endpoint list.

Each entry of OWNWORDS_LLM_ENDPOINTS names the variables its key may come from (`key_env`); a
protocol names at most one of them. The attack found by the penetration test: an account that
is a rater elsewhere creates a project, owns it, writes a protocol whose key variable is
SECRET_KEY against an endpoint whose url_prefix covers a host it listens on (here the tests'
loopback server stands for that host), and the worker sends `Authorization: Bearer <SECRET_KEY>`.
Refused at the form, at sealing, at the start and, for a protocol stored before the rule, at the
point the client reads the environment: the listening server receives nothing.
"""
import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.urls import reverse

from experiments.core.llm import client as llm_client
from experiments.core.llm.wire import OutcomeKind, build_request
from experiments.execution import control, driver, sealing
from experiments.execution.endpoints import EndpointNotAllowed, require_allowed_endpoint
from experiments.execution.policy import RunError, model_config
from experiments.models import Membership, Project, Protocol, Run
from ownwords_site.env import ConfigError, llm_endpoints
from tests.engine_helpers import QUESTION_ONLY, build_cohort, make_protocol, openai_model

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
SERVER_SECRETS = ["SECRET_KEY", "DATABASE_URL"]
ALLOWED_TEST_KEY = "OWNWORDS_TEST_FAKE_LLM_KEY"


def _loopback_list(*names):
    """The tests' list with the loopback entry allowing exactly `names` (as an administrator might
    have written it before this rule, when any variable could be named)."""
    from django.conf import settings
    return [{**e, "key_env": list(names)} if e["name"] == "test-loopback" else e for e in settings.LLM_ENDPOINTS]


@pytest.fixture
def cohort(project):
    return build_cohort(project, sessions=1, targets=1)


@pytest.fixture
def attacker_project(client, cast):
    """The rater of project alpha makes a project of their own on /projects/new/ and owns it."""
    rater = cast["rater"]
    client.force_login(rater)
    response = client.post(reverse("project_create"), {"name": "Mallory's lab", "slug": "mallory"})
    assert response.status_code == 302
    project = Project.objects.get(slug="mallory")
    assert Membership.objects.get(project=project, user=rater).role == "owner"
    return project


def _editor_data(cohort, server, key_variable):
    data = {"name": "exfiltrate", "cohort": cohort.pk, "conditions": [QUESTION_ONLY],
            "max_recoveries_per_slot": 2, "cooldown_s": 30, "phase_allowance": 256, "bootstrap_seed": 7,
            "bootstrap_draws": 500}
    for role in ("generator", "judge"):
        data.update({f"{role}-provider": "offline", f"{role}-base_url": "", f"{role}-model": "offline-stand-in",
                     f"{role}-max_output_tokens": 1600, f"{role}-token_param": "max_completion_tokens",
                     f"{role}-timeout_s": 180, f"{role}-concurrency": 4, f"{role}-api_key_env": ""})
    data.update({"generator-provider": "openai", "generator-endpoint": "test-loopback",
                 "generator-base_url": server.openai_base_url, "generator-model": "m",
                 "generator-api_key_env": key_variable})
    return data


# --- the form, sealing and the commands --------------------------------------------------------

@pytest.mark.parametrize("secret", SERVER_SECRETS)
def test_an_owner_of_a_self_made_project_cannot_name_the_servers_secret_as_key(client, attacker_project, server,
                                                                               secret):
    cohort = build_cohort(attacker_project, sessions=1, targets=1, name="m")
    response = client.post(reverse("protocol_create", args=["mallory"]), _editor_data(cohort, server, secret))
    assert response.status_code == 200
    body = response.content.decode()
    assert "the endpoint test-loopback allows only these key variables: " in body
    assert f'value="{secret}"' not in body  # a refused value is never shown again
    assert not Protocol.objects.filter(name="exfiltrate").exists()
    assert server.requests == []


def test_the_form_takes_a_key_variable_the_endpoint_allows(client, cast, cohort, server):
    client.force_login(cast["owner"])
    response = client.post(reverse("protocol_create", args=["alpha"]), _editor_data(cohort, server, ALLOWED_TEST_KEY))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Protocol.objects.get(name="exfiltrate").generator["api_key_env"] == ALLOWED_TEST_KEY


@pytest.mark.parametrize("secret", [*SERVER_SECRETS, "HOME"])
def test_sealing_refuses_a_key_variable_the_endpoint_does_not_allow(project, cohort, server, secret):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY],
                             generator=openai_model(server, api_key_env=secret), judge=OFFLINE)
    (problem,) = sealing.protocol_problems(protocol)
    assert problem.startswith("generator: the key variable is not one the administrator allows")
    assert f"test-loopback: {ALLOWED_TEST_KEY}" in problem and secret not in problem
    with pytest.raises(RunError, match="key variable is not one"):
        sealing.protocol_seal(protocol=protocol, user=None)
    protocol.refresh_from_db()
    assert not protocol.is_sealed()


def test_the_offline_stand_in_takes_no_key_variable(project, cohort):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE,
                             judge={**OFFLINE, "api_key_env": "SECRET_KEY"})
    assert sealing.protocol_problems(protocol) == [
        "judge: the offline stand-in sends nothing and uses no key: leave the key variable empty"]


def test_protocol_template_refuses_an_unlisted_key_variable(project, cohort, server, tmp_path):
    settings_file = tmp_path / "gen.json"
    settings_file.write_text(
        f'{{"provider": "openai", "base_url": "{server.openai_base_url}", "model": "m", "api_key_env": "SECRET_KEY"}}')
    with pytest.raises(CommandError, match="generator: the key variable is not one the administrator allows"):
        call_command("protocol_template", "confirmation", project="alpha", cohort=cohort.name,
                     generator=str(settings_file))
    assert not Protocol.objects.exists()


# --- a protocol stored before the rule: nothing is read --------------------------------------

def test_a_stored_protocol_naming_the_secret_key_sends_nothing_and_says_why(project, cohort, server):
    # Sealed and started while the administrator's list allowed it (or before the rule existed).
    with override_settings(LLM_ENDPOINTS=_loopback_list("SECRET_KEY")):
        protocol = sealing.protocol_seal(protocol=make_protocol(
            project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server, api_key_env="SECRET_KEY"),
            judge=OFFLINE), user=None)
        run = Run.objects.create(protocol=protocol)
        control.run_start(run=run)
    # The seal is kept as it was: the key's name is part of it, as before.
    assert protocol.generator["api_key_env"] == "SECRET_KEY" and sealing.seal_mismatches(protocol) == []
    run = driver.run_inline(run.pk)
    assert run.status == Run.Status.STOPPED
    assert "key variable is not one the administrator allows" in run.status_reason
    assert server.requests == []
    # And a new run of it is refused before it starts.
    with pytest.raises(EndpointNotAllowed):
        control.run_start(run=Run.objects.create(protocol=protocol))


def test_the_client_reads_no_key_its_endpoint_does_not_allow(server, monkeypatch):
    """The last line: even called directly, with the journal's checks out of the way."""
    monkeypatch.setenv(ALLOWED_TEST_KEY, "sk-test-allowed-0123")
    config = model_config(openai_model(server, api_key_env="SECRET_KEY"))
    with httpx.Client(trust_env=False) as http:
        refused = llm_client.send(config, build_request(config, "s", "u"), client=http)
        assert refused.kind == OutcomeKind.FATAL and "no key was read and nothing was sent" in refused.error
        assert server.requests == []
        allowed = model_config(openai_model(server, api_key_env=ALLOWED_TEST_KEY))
        llm_client.send(allowed, build_request(allowed, "s", "u"), client=http)
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer sk-test-allowed-0123"


def test_the_execution_check_refuses_an_unlisted_key(server):
    with pytest.raises(EndpointNotAllowed, match="key variable is not one"):
        require_allowed_endpoint(model_config(openai_model(server, api_key_env="DATABASE_URL")))
    require_allowed_endpoint(model_config(openai_model(server, api_key_env=ALLOWED_TEST_KEY)))


# --- the administrator's list ----------------------------------------------------------------

def test_an_endpoint_entry_names_its_key_variables():
    (entry,) = llm_endpoints([{"name": "openai", "provider": "openai", "base_url": "https://api.openai.com/v1",
                               "key_env": "OPENAI_API_KEY"}])
    assert entry["key_env"] == ["OPENAI_API_KEY"]
    (entry,) = llm_endpoints([{"name": "lab", "url_prefix": "http://10.0.0.7:"}])
    assert "key_env" not in entry  # no key is ever read for it


@pytest.mark.parametrize("entry, message", [
    ({"name": "x", "base_url": "https://a.example/v1", "key_env": ["SECRET_KEY"]}, "the server's own secrets"),
    ({"name": "x", "base_url": "https://a.example/v1", "key_env": "DATABASE_URL"}, "the server's own secrets"),
    ({"name": "x", "base_url": "https://a.example/v1", "key_env": ["sk-live 123"]}, "environment variable name"),
    ({"name": "x", "base_url": "https://a.example/v1", "key_env": {"a": 1}}, "environment variable name"),
    ({"name": "x", "provider": "offline", "key_env": ["K"]}, "takes no key_env"),
])
def test_the_list_refuses_bad_key_variables_at_start_up(entry, message):
    with pytest.raises(ConfigError, match=message):
        llm_endpoints([entry])


def test_the_built_in_endpoints_name_their_usual_key_variables():
    from ownwords_site.settings import DEFAULT_LLM_ENDPOINTS
    keys = {e["name"]: e.get("key_env", []) for e in llm_endpoints(DEFAULT_LLM_ENDPOINTS)}
    assert keys == {"openai": ["OPENAI_API_KEY"], "gemini": ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                    "anthropic": ["ANTHROPIC_API_KEY"], "offline": []}
