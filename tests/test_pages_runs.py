"""Protocol, run and prediction pages (docs/design.md §2): the access matrix of every page and
action, the editor's validation, what each role sees, and that keys and text never leak."""
import html

import pytest
from django.urls import reverse

from experiments.execution import control, driver, policy, progress
from experiments.core.llm.wire import api_key_env_problem
from experiments.core.contrasts import format_contrast, parse_contrast_line
from experiments.core.llm.offline import OFFLINE_LABEL
from experiments.web.predictions import views as prediction_views
from experiments.models import Amendment, Protocol, Run, Slot
from experiments.execution.sealing import protocol_seal
from experiments.data.sessions import cohort_draw
from tests.test_browser_session import browser  # noqa: F401 (the Chromium fixture)
from tests.conftest import UNRUNNABLE

PARTICIPANT_TEXT = "I would say it depends on the day really"
QUESTION_TEXT = "Could you tell me more"
OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
SELECTION = "memory(concrete,100w)+selection(3)"
CONTRAST = {"name": "ownwords - memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": True,
            "criterion": "interval_above_zero"}
ROLES = ["owner", "analyst", "rater", "viewer", "outsider"]


def make_protocol(project, cohort, name, *, sealed=False, user=None, **fields):
    values = dict(conditions=[MEMORY, OWNWORDS], generator=OFFLINE, judge=OFFLINE, concurrency={"offline": 4},
                  contrasts=[CONTRAST], bootstrap={"seed": 7, "draws": 500})
    values.update(fields)
    protocol = Protocol.objects.create(project=project, name=name, cohort=cohort, **values)
    return protocol_seal(protocol=protocol, user=user) if sealed else protocol


def started_run(protocol):
    """A run that is running but not driven: nothing has been sent."""
    run = Run.objects.create(protocol=protocol)
    control.run_start(run=run)
    return run


def finished_run(protocol):
    run = Run.objects.create(protocol=protocol)
    control.run_start(run=run)
    return driver.run_inline(run.pk)


@pytest.fixture
def world(imported, cast):
    cohort = cohort_draw(project=imported, name="c1", size=2, seed=1)
    draft = make_protocol(imported, cohort, "draft")
    sealed = make_protocol(imported, cohort, "sealed", sealed=True, user=cast["owner"])
    run = started_run(sealed)
    task = cohort.cohort_tasks.order_by("position").first().task
    return {"project": imported, "cohort": cohort, "draft": draft, "sealed": sealed, "run": run, "task": task,
            "users": cast}


@pytest.fixture
def finished(world):
    return finished_run(world["sealed"])


def page_urls(world, run=None):
    slug, run = world["project"].slug, run or world["run"]
    return {
        "protocol_create": reverse("protocol_create", args=[slug]),
        "protocol_detail": reverse("protocol_detail", args=[slug, world["draft"].pk]),
        "protocol_detail_sealed": reverse("protocol_detail", args=[slug, world["sealed"].pk]),
        "protocol_edit": reverse("protocol_edit", args=[slug, world["draft"].pk]),
        "run_detail": reverse("run_detail", args=[slug, run.pk]),
        "run_progress": reverse("run_progress", args=[slug, run.pk]),
        "prediction_list": reverse("prediction_list", args=[slug, run.pk]),
        "prediction_detail": reverse("prediction_detail", args=[slug, run.pk, world["task"].pk]),
    }


EDITORS = {"owner": 200, "analyst": 200, "rater": 403, "viewer": 403, "outsider": 404}
READERS = {"owner": 200, "analyst": 200, "rater": 403, "viewer": 200, "outsider": 404}
PAGE_MATRIX = {
    "protocol_create": EDITORS,
    "protocol_detail": READERS,
    "protocol_detail_sealed": READERS,
    "protocol_edit": EDITORS,
    "run_detail": READERS,
    "run_progress": READERS,
    "prediction_list": EDITORS,  # participant text: owners and analysts
    "prediction_detail": EDITORS,
}


# --- the access matrix ----------------------------------------------------------------------

@pytest.mark.parametrize("page", sorted(PAGE_MATRIX))
def test_every_page_sends_anonymous_users_to_the_login(client, world, page):
    response = client.get(page_urls(world)[page])
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize("page", sorted(PAGE_MATRIX))
@pytest.mark.parametrize("who", ROLES)
def test_the_access_matrix_of_pages(client, world, page, who):
    client.force_login(world["users"][who])
    assert client.get(page_urls(world)[page]).status_code == PAGE_MATRIX[page][who]


def test_a_run_or_protocol_of_another_project_is_not_found(client, world):
    client.force_login(world["users"]["outsider"])  # owner of "other"
    assert client.get(reverse("run_detail", args=["other", world["run"].pk])).status_code == 404
    assert client.get(reverse("protocol_detail", args=["other", world["sealed"].pk])).status_code == 404
    assert client.post(reverse("run_pause", args=["other", world["run"].pk]), {"reason": "x"}).status_code == 404


def test_a_task_outside_the_runs_cohort_is_not_found(client, world):
    small = cohort_draw(project=world["project"], name="one session", size=1, seed=2)
    run = started_run(make_protocol(world["project"], small, "small", sealed=True))
    inside = small.cohort_tasks.first().task
    outside = world["cohort"].tasks.exclude(session=inside.session).first()
    client.force_login(world["users"]["owner"])
    assert client.get(reverse("prediction_detail", args=["alpha", run.pk, inside.pk])).status_code == 200
    assert client.get(reverse("prediction_detail", args=["alpha", run.pk, outside.pk])).status_code == 404


def _snapshot(world):
    """Everything an action could change."""
    run = Run.objects.get(pk=world["run"].pk)
    draft = Protocol.objects.get(pk=world["draft"].pk)
    return {
        "protocols": list(Protocol.objects.order_by("pk").values_list("pk", "name", "sealed_at", "contrasts")),
        "runs": list(Run.objects.order_by("pk").values_list("pk", "status")),
        "amendments": Amendment.objects.count(),
        "run": (run.status, run.circuit_open),
        "slots": list(Slot.objects.filter(run=run).order_by("pk").values_list("status", "amended_attempts")),
        "draft": (draft.name, draft.conditions, draft.sealed_at),
    }


def _pause(world):
    control.run_pause(run=world["run"], user=world["users"]["owner"], reason="set up")


def _make_an_unknown_slot(world):
    """A slot whose worker died mid-request, in the current phase."""
    step = driver.run_drive(world["run"].pk)
    Slot.objects.filter(pk=step.slot_ids[0]).update(status=Slot.Status.UNKNOWN)


FREE_SPENDERS = {"owner": 302, "analyst": 302}
ACTIONS = {
    # name: (url name, object, POST data, roles allowed, setup)
    "protocol_create": ("protocol_create", None, lambda w: protocol_form_data(w["cohort"], name="fresh"), EDITORS, None),
    "protocol_edit": ("protocol_edit", "draft", lambda w: protocol_form_data(w["cohort"], name="renamed"), EDITORS, None),
    "protocol_seal": ("protocol_seal", "draft", lambda w: {"confirm": "yes"}, EDITORS, None),
    "run_create": ("run_create", "sealed", lambda w: {}, EDITORS, None),
    # The world's protocols are offline (free): whoever may start them may pause, resume and re-issue
    # (access.may_spend; the paid matrix is in tests/test_spend_permissions.py).
    "run_pause": ("run_pause", "run", lambda w: {"reason": "checking costs"}, FREE_SPENDERS, None),
    "run_resume": ("run_resume", "run", lambda w: {"reason": "costs fine"}, FREE_SPENDERS, _pause),
    "run_reissue": ("run_reissue", "run", lambda w: {"reason": "worker died"}, FREE_SPENDERS, _make_an_unknown_slot),
    "run_concurrency": ("run_concurrency", "run", lambda w: {"provider": "offline", "cap": 2, "reason": "rate limits"},
                        {"owner": 302}, None),
}


def _action_url(world, action):
    url_name, obj, *_ = ACTIONS[action]
    args = [world["project"].slug] + ([world[obj].pk] if obj else [])
    return reverse(url_name, args=args)


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("who", ROLES)
def test_actions_check_the_role_and_change_nothing_when_refused(client, world, monkeypatch, action, who):
    _, _, data, allowed, setup = ACTIONS[action]
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    if setup:
        setup(world)
    client.force_login(world["users"][who])
    before = _snapshot(world)
    response = client.post(_action_url(world, action), data(world))
    if allowed.get(who) in (200, 302):
        assert response.status_code == 302
        assert _snapshot(world) != before
    else:
        assert response.status_code == (404 if who == "outsider" else 403)
        assert _snapshot(world) == before


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_actions_send_anonymous_users_to_the_login_and_change_nothing(client, world, action):
    before = _snapshot(world)
    response = client.post(_action_url(world, action), ACTIONS[action][2](world))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))
    assert _snapshot(world) == before


@pytest.mark.parametrize("action", ["protocol_seal", "run_create", "run_pause", "run_resume", "run_reissue"])
def test_actions_refuse_get(client, world, action):
    client.force_login(world["users"]["owner"])
    assert client.get(_action_url(world, action)).status_code == 405


# --- the protocol editor --------------------------------------------------------------------

def contrast_rows(*rows):
    """The protocol form's contrast rows (a formset): each row a dict of name, first, second, family, criterion."""
    data = {"contrast-TOTAL_FORMS": str(len(rows)), "contrast-INITIAL_FORMS": "0"}
    for i, row in enumerate(rows):
        data.update({f"contrast-{i}-{key}": value for key, value in row.items() if value not in (False, None)})
    return data


def protocol_form_data(cohort, *, contrasts=None, **overrides):
    data = {
        "name": "p-new", "cohort": cohort.pk, "conditions": [MEMORY, OWNWORDS],
        "max_recoveries_per_slot": 2, "cooldown_s": 30, "phase_allowance": 256,
        "bootstrap_seed": 7, "bootstrap_draws": 500,
        **contrast_rows(*(contrasts if contrasts is not None else [
            {"first": OWNWORDS, "second": MEMORY, "family": "on", "criterion": "on"}, {}, {}])),
    }
    for role in ("generator", "judge"):
        data.update({f"{role}-provider": "offline", f"{role}-base_url": "", f"{role}-model": "offline-stand-in",
                     f"{role}-max_output_tokens": 1600, f"{role}-token_param": "max_completion_tokens",
                     f"{role}-timeout_s": 180, f"{role}-concurrency": 4, f"{role}-api_key_env": ""})
    data.update(overrides)
    return data


def test_an_analyst_creates_a_protocol_with_its_contrasts_parsed(client, world):
    client.force_login(world["users"]["analyst"])
    data = protocol_form_data(world["cohort"], **{
        "judge-provider": "openai", "judge-base_url": "http://127.0.0.1:8080/v1", "judge-model": "smol",
        # A variable the loopback endpoint allows (test_settings: test-loopback's key_env).
        "judge-api_key_env": "OWNWORDS_TEST_FAKE_LLM_KEY", "judge-temperature": "", "judge-concurrency": 8,
        "judge-reasoning": "low",
    })
    response = client.post(reverse("protocol_create", args=["alpha"]), data)
    protocol = Protocol.objects.get(name="p-new")
    assert response.status_code == 302 and response.url == reverse("protocol_detail", args=["alpha", protocol.pk])
    assert protocol.conditions == [MEMORY, OWNWORDS]
    assert protocol.contrasts == [{"name": f"{OWNWORDS} - {MEMORY}", "terms": {OWNWORDS: 1, MEMORY: -1},
                                   "family": True, "criterion": "interval_above_zero"}]
    assert protocol.judge["api_key_env"] == "OWNWORDS_TEST_FAKE_LLM_KEY"
    assert protocol.judge["temperature"] is None  # the service default: not sent
    assert protocol.judge["reasoning"] == "low"
    assert protocol.concurrency == {"offline": 4, "openai": 8}
    assert protocol.retry_policy == {"max_recoveries_per_slot": 2, "cooldown_s": 30.0, "phase_allowance": 256}
    assert protocol.bootstrap == {"seed": 7, "draws": 500}
    assert protocol.created_by == world["users"]["analyst"] and not protocol.is_sealed()


def test_the_edit_form_shows_what_is_stored_and_saving_it_unchanged_changes_nothing(client, world):
    client.force_login(world["users"]["owner"])
    draft = world["draft"]
    response = client.get(reverse("protocol_edit", args=["alpha", draft.pk]))
    row = response.context["editor"].contrast_rows.forms[0]
    assert {key: row[key].value() for key in ("name", "first", "second", "family", "criterion")} == {
        "name": "ownwords - memory", "first": OWNWORDS, "second": MEMORY, "family": True, "criterion": True}
    body = response.content.decode()
    assert 'value="ownwords - memory"' in body
    assert f'<option value="{OWNWORDS}" selected>' in body and f'<option value="{MEMORY}" selected>' in body
    data = protocol_form_data(world["cohort"], name="draft", contrasts=[
        {"name": "ownwords - memory", "first": OWNWORDS, "second": MEMORY, "family": "on", "criterion": "on"}])
    client.post(reverse("protocol_edit", args=["alpha", draft.pk]), data)
    draft.refresh_from_db()
    assert draft.contrasts == [CONTRAST]


@pytest.mark.parametrize("overrides, message", [
    ({"conditions": [UNRUNNABLE]}, f"{UNRUNNABLE} is not runnable yet"),
    ({"conditions": []}, "choose at least one condition"),
    ({"contrasts": [{"first": "whole-record", "second": MEMORY}]},
     "uses whole-record, which is not among the protocol&#x27;s conditions"),
    ({"contrasts": [{"first": MEMORY, "second": MEMORY}]}, "choose two different conditions"),
    ({"contrasts": [{"first": MEMORY, "second": ""}]}, "choose both conditions of this contrast"),
    ({"contrasts": [{"name": "named but empty"}]}, "choose the two conditions of this contrast"),
    ({"contrasts": [{"first": "no-such-condition", "second": MEMORY}]}, "Select a valid choice"),
    ({"contrasts": [{"name": "same", "first": OWNWORDS, "second": MEMORY},
                    {"name": "same", "first": MEMORY, "second": OWNWORDS}]}, "the name &#x27;same&#x27; is used twice"),
    ({"generator-provider": "openai"}, "a base URL is needed for this provider"),
    ({"generator-provider": "openai", "generator-base_url": "not a url"}, "not an http(s) URL"),
    ({"judge-provider": "gemini", "judge-base_url": "https://x.example/v1beta", "judge-token_param": "max_tokens",
      "judge-concurrency": 1, "generator-provider": "gemini", "generator-base_url": "https://x.example/v1beta"},
     "the in-flight cap is per provider"),
    ({"generator-quota_pattern": "(unclosed"}, "not a regular expression"),
    ({"name": "sealed"}, "another protocol of this project has this name"),
])
def test_the_editor_refuses_bad_input_with_a_clear_message(client, world, overrides, message, unrunnable_condition):
    client.force_login(world["users"]["owner"])
    before = Protocol.objects.count()
    response = client.post(reverse("protocol_create", args=["alpha"]), protocol_form_data(world["cohort"], **overrides))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert Protocol.objects.count() == before


def test_non_runnable_conditions_are_shown_disabled_with_their_note(client, world, unrunnable_condition):
    client.force_login(world["users"]["owner"])
    body = client.get(reverse("protocol_create", args=["alpha"])).content.decode()
    assert f'value="{html.escape(unrunnable_condition)}" disabled' in body
    assert "NOT YET RUNNABLE: a stub registered by the tests" in body
    assert 'value="memgpt-style(B=|memory|)" disabled' not in body
    assert f'value="{OWNWORDS}">' in body


@pytest.mark.parametrize("pasted", ["sk-proj-AbCdEf0123456789abcdef", "AIzaSyA1b2C3d4E5f6G7h8", "Zx9" * 15])
def test_a_key_pasted_into_the_key_variable_field_is_refused_and_never_shown_again(client, world, pasted):
    client.force_login(world["users"]["owner"])
    before = Protocol.objects.count()
    response = client.post(reverse("protocol_create", args=["alpha"]),
                           protocol_form_data(world["cohort"], **{"generator-api_key_env": pasted}))
    body = response.content.decode()
    assert "looks like an API key itself" in body
    assert pasted not in body
    assert Protocol.objects.count() == before


def test_the_key_variable_rule():
    assert api_key_env_problem("OPENAI_API_KEY") is None
    assert api_key_env_problem("") is None
    assert api_key_env_problem("my_rather_long_lowercase_variable_name") is None
    assert "API key itself" in api_key_env_problem("sk-abc")
    assert "not an environment variable name" in api_key_env_problem("OPENAI KEY").lower()


@pytest.mark.parametrize("line, expected", [
    (f"{OWNWORDS} - {MEMORY}", {"name": f"{OWNWORDS} - {MEMORY}", "terms": {OWNWORDS: 1, MEMORY: -1},
                                "family": False, "criterion": None}),
    (f"main: -0.5*{OWNWORDS} + 0.5*{MEMORY} [interval above zero] [family]",
     {"name": "main", "terms": {OWNWORDS: -0.5, MEMORY: 0.5}, "family": True, "criterion": "interval_above_zero"}),
    ("a - b + c - d [FAMILY]", {"name": "a - b + c - d", "terms": {"a": 1, "b": -1, "c": 1, "d": -1},
                                "family": True, "criterion": None}),
])
def test_contrast_lines_parse_and_format_back(line, expected):
    assert parse_contrast_line(line) == expected
    assert parse_contrast_line(format_contrast(expected)) == expected


@pytest.mark.parametrize("line", ["a - a", "name: ", ": a - b", "a - b [typo]"])
def test_malformed_contrast_lines_are_refused(line):
    with pytest.raises(ValueError):
        parse_contrast_line(line)


def test_a_sealed_protocols_edit_post_is_refused_and_changes_nothing(client, world):
    client.force_login(world["users"]["owner"])
    sealed = world["sealed"]
    before = Protocol.objects.filter(pk=sealed.pk).values().get()
    url = reverse("protocol_edit", args=["alpha", sealed.pk])
    response = client.post(url, protocol_form_data(world["cohort"], name="renamed", conditions=[OWNWORDS],
                                                   contrasts=""), follow=True)
    assert "sealed and read-only; nothing was changed" in response.content.decode()
    assert Protocol.objects.filter(pk=sealed.pk).values().get() == before
    assert client.get(url).status_code == 302  # no edit form for a sealed protocol either


def test_sealing_from_the_page_shows_the_seal(client, world):
    client.force_login(world["users"]["analyst"])
    draft = world["draft"]
    response = client.post(reverse("protocol_seal", args=["alpha", draft.pk]), {"confirm": "yes"}, follow=True)
    draft.refresh_from_db()
    body = response.content.decode()
    assert draft.is_sealed() and draft.sealed_by == world["users"]["analyst"]
    for name, digest in draft.seal["prompts"].items():
        assert f"<code>{name}</code></td><td><code>{digest}</code>" in body
    for field in ("task_list_sha256", "settings_sha256", "code_version"):
        assert draft.seal[field] in body
    assert 'action="/p/alpha/protocols/%d/seal/"' % draft.pk not in body  # sealed: no seal button


def test_sealing_asks_for_a_ticked_confirmation_and_without_it_changes_nothing(client, world):
    client.force_login(world["users"]["owner"])
    draft = world["draft"]
    page = client.get(reverse("protocol_detail", args=["alpha", draft.pk])).content.decode()
    assert 'id="seal-confirm"' in page and 'name="confirm" value="yes"' in page
    for data in ({}, {"confirm": "on"}, {"confirm": ""}):
        response = client.post(reverse("protocol_seal", args=["alpha", draft.pk]), data, follow=True)
        draft.refresh_from_db()
        assert not draft.is_sealed()
        assert "Not sealed: tick the box" in response.content.decode()


def test_an_unsealable_protocol_lists_its_problems_and_seal_refuses(client, world, unrunnable_condition):
    bad = make_protocol(world["project"], world["cohort"], "bad", conditions=[unrunnable_condition], contrasts=[])
    client.force_login(world["users"]["owner"])
    body = client.get(reverse("protocol_detail", args=["alpha", bad.pk])).content.decode()
    assert f"{html.escape(unrunnable_condition)} is not runnable yet" in body
    body = client.post(reverse("protocol_seal", args=["alpha", bad.pk]), {"confirm": "yes"},
                       follow=True).content.decode()
    assert f"Not sealed: {html.escape(unrunnable_condition)} is not runnable yet" in body
    bad.refresh_from_db()
    assert not bad.is_sealed()


# --- starting and amending runs ---------------------------------------------------------------

def test_without_a_queue_the_run_button_starts_nothing_and_says_why(client, world, monkeypatch):
    monkeypatch.setattr(progress, "queue_reachable", lambda: False)
    client.force_login(world["users"]["owner"])
    body = client.get(reverse("protocol_detail", args=["alpha", world["sealed"].pk])).content.decode()
    assert "No queue is reachable" in body and ">Run</button>" not in body
    runs_before = Run.objects.count()
    response = client.post(reverse("run_create", args=["alpha", world["sealed"].pk]), follow=True)
    assert "No queue is reachable" in response.content.decode()
    assert "never run inside a web request" in response.content.decode()
    assert Run.objects.count() == runs_before


def test_the_run_button_starts_a_run_through_the_queue(client, world, django_capture_on_commit_callbacks):
    if not progress.queue_reachable():
        pytest.skip("needs the Redis server of the test settings")
    client.force_login(world["users"]["analyst"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("run_create", args=["alpha", world["sealed"].pk]))
    run = Run.objects.latest("pk")
    assert response.url == reverse("run_detail", args=["alpha", run.pk])
    assert run.status == Run.Status.RUNNING and not run.inline and run.created_by == world["users"]["analyst"]
    assert len(callbacks) == 1  # the driver job, enqueued when the transaction commits
    assert not Slot.objects.filter(run=run).exists()  # nothing ran inside the request


def test_a_run_does_not_start_when_the_seal_no_longer_matches(client, world, monkeypatch):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    Protocol.objects.filter(pk=world["sealed"].pk).update(seal={**world["sealed"].seal, "settings_sha256": "0" * 64})
    client.force_login(world["users"]["owner"])
    runs_before = Run.objects.count()
    body = client.post(reverse("run_create", args=["alpha", world["sealed"].pk]), follow=True).content.decode()
    assert "The run did not start: the seal no longer matches: the settings changed" in body
    assert Run.objects.count() == runs_before


def test_pause_and_resume_need_a_reason_and_are_amendments(client, world, monkeypatch):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    client.force_login(world["users"]["owner"])
    run = world["run"]
    body = client.post(reverse("run_pause", args=["alpha", run.pk]), {"reason": "  "}, follow=True).content.decode()
    assert "give a reason" in body
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and not run.amendments.exists()

    client.post(reverse("run_pause", args=["alpha", run.pk]), {"reason": "checking costs"})
    client.post(reverse("run_resume", args=["alpha", run.pk]), {"reason": "costs fine"})
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert list(run.amendments.values_list("kind", "reason", "created_by")) == [
        ("pause", "checking costs", world["users"]["owner"].pk),
        ("resume", "costs fine", world["users"]["owner"].pk),
    ]
    body = client.get(reverse("run_detail", args=["alpha", run.pk])).content.decode()
    assert "checking costs" in body and "Re-issue unknown slots" not in body


def test_resume_without_a_queue_changes_nothing(client, world, monkeypatch):
    _pause(world)
    monkeypatch.setattr(progress, "queue_reachable", lambda: False)
    client.force_login(world["users"]["owner"])
    body = client.post(reverse("run_resume", args=["alpha", world["run"].pk]), {"reason": "go"},
                       follow=True).content.decode()
    assert "No queue is reachable" in body and "run_resume" in body
    world["run"].refresh_from_db()
    assert world["run"].status == Run.Status.PAUSED and world["run"].amendments.count() == 1


def test_the_reissue_button_appears_only_with_unknown_slots_and_releases_exactly_those(client, world, monkeypatch):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    client.force_login(world["users"]["owner"])
    url = reverse("run_detail", args=["alpha", world["run"].pk])
    assert 'id="reissue-form"' not in client.get(url).content.decode()
    _make_an_unknown_slot(world)
    assert "Re-issue 1 unknown slot<" in client.get(url).content.decode()
    client.post(reverse("run_reissue", args=["alpha", world["run"].pk]), {"reason": "the worker was killed"})
    amendment = Amendment.objects.get(kind=Amendment.Kind.REISSUE_UNKNOWN)
    slot = Slot.objects.get(key=amendment.payload["slots"][0])
    assert len(amendment.payload["slots"]) == 1
    assert (slot.status, slot.amended_attempts) == (Slot.Status.PENDING, 1)


def test_unknown_slots_of_an_earlier_phase_are_counted_and_said_to_be_beyond_reissue(client, world):
    _make_an_unknown_slot(world)
    Run.objects.filter(pk=world["run"].pk).update(phase="generation", planned_phase="generation")
    client.force_login(world["users"]["owner"])
    body = client.get(reverse("run_detail", args=["alpha", world["run"].pk])).content.decode()
    assert 'id="reissue-form"' not in body
    assert "1 unknown slot of earlier phases cannot be re-issued" in body


def test_a_concurrency_change_is_recorded_and_takes_effect(client, world):
    client.force_login(world["users"]["owner"])
    run = world["run"]
    client.post(reverse("run_concurrency", args=["alpha", run.pk]), {"provider": "offline", "cap": 2, "reason": "429s"})
    assert policy.effective_concurrency(run, "offline") == 2
    response = client.post(reverse("run_concurrency", args=["alpha", run.pk]),
                           {"provider": "openai", "cap": 2, "reason": "not in this protocol"}, follow=True)
    assert "Nothing changed" in response.content.decode()
    assert run.amendments.count() == 1


def test_a_concurrency_change_reaches_a_worker_s_cached_cap_within_its_lifetime(world, monkeypatch):
    """A slot asks for a database step for its cap only when the cache has none (`policy.cached_cap`):
    an amendment is read at the next such step, at most CAP_CACHE_S after the last."""
    run, clock = world["run"], [1000.0]
    monkeypatch.setattr(policy.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(policy, "_CAP_CACHE", {})
    assert policy.cached_cap(run.pk, "offline") is None
    first = policy.current_cap(run, "offline")
    assert policy.cached_cap(run.pk, "offline") == first
    control.run_set_concurrency(run=run, user=world["users"]["owner"], provider="offline", cap=first + 3, reason="more")
    clock[0] += policy.CAP_CACHE_S
    assert policy.cached_cap(run.pk, "offline") == first  # still within its lifetime
    clock[0] += 0.001
    assert policy.cached_cap(run.pk, "offline") is None
    assert policy.current_cap(run, "offline") == first + 3 == policy.cached_cap(run.pk, "offline")


# --- what the run page shows ------------------------------------------------------------------

def test_the_finished_run_page_shows_progress_amendments_seal_and_analysis(client, world, finished):
    client.force_login(world["users"]["viewer"])
    body = client.get(reverse("run_detail", args=["alpha", finished.pk])).content.decode()
    assert "<strong>Finished</strong>" in body
    assert 'id="condition-means"' in body and f"<code>{MEMORY}</code>" in body
    assert 'id="contrasts"' in body and "<code>ownwords - memory</code>" in body
    assert finished.protocol.seal["settings_sha256"] in body
    assert 'data-finished="true"' in body
    assert "js/run_progress.js" in body
    for phase in ("Memories", "Base generation", "Decisions", "Judging"):
        assert f"<td>{phase}" in body


@pytest.mark.parametrize("who", ["viewer", "owner"])
def test_the_run_page_never_shows_participant_text(client, world, finished, who):
    client.force_login(world["users"][who])
    for url in (reverse("run_detail", args=["alpha", finished.pk]), reverse("run_progress", args=["alpha", finished.pk])):
        body = client.get(url).content.decode()
        assert PARTICIPANT_TEXT not in body and QUESTION_TEXT not in body and "Composer" not in body


def test_viewers_get_no_amendment_forms_and_no_link_to_predictions(client, world):
    client.force_login(world["users"]["viewer"])
    body = client.get(reverse("run_detail", args=["alpha", world["run"].pk])).content.decode()
    links = [reverse(name, args=["alpha", world["run"].pk]) for name in ("run_explorer", "prediction_list")]
    assert not any(link in body for link in links) and 'id="run-actions"' not in body
    client.force_login(world["users"]["analyst"])
    body = client.get(reverse("run_detail", args=["alpha", world["run"].pk])).content.decode()
    # An analyst may pause the offline run they may start (access.may_spend); concurrency is the owner's.
    assert all(link in body for link in links) and 'id="run-actions"' in body
    assert reverse("run_pause", args=["alpha", world["run"].pk]) in body
    assert reverse("run_concurrency", args=["alpha", world["run"].pk]) not in body


def test_the_progress_endpoint_reports_counts_and_the_block(client, world, finished):
    client.force_login(world["users"]["viewer"])
    data = client.get(reverse("run_progress", args=["alpha", finished.pk])).json()
    assert data["finished"] is True and data["status"] == "finished"
    generation = next(p for p in data["phases"] if p["phase"] == "generation")
    assert generation["total"] == generation["done"] == generation["ok"] > 0
    assert data["in_flight"][0]["service"] == "offline" and data["in_flight"][0]["in_flight"] == 0
    assert 'id="run-phases"' in data["html"]


def test_the_in_flight_count_comes_from_the_shared_redis_limiter(client, world):
    if not progress.queue_reachable():
        pytest.skip("needs the Redis server of the test settings")
    from experiments.execution.concurrency import InflightLimiter

    client.force_login(world["users"]["viewer"])
    url = reverse("run_progress", args=["alpha", world["run"].pk])
    name = policy.limiter_name(policy.role_config(world["run"], Slot.Role.GENERATOR))
    with InflightLimiter(progress._redis()).hold(name, 4, lease_s=30):
        assert client.get(url).json()["in_flight"] == [
            {"service": "offline", "provider": "offline", "in_flight": 1, "cap": 4}]
    assert client.get(url).json()["in_flight"][0]["in_flight"] == 0


def test_without_redis_the_in_flight_count_is_zero_and_workers_are_not_claimed(client, world, monkeypatch):
    monkeypatch.setattr(progress, "queue_reachable", lambda: False)
    client.force_login(world["users"]["owner"])
    data = client.get(reverse("run_progress", args=["alpha", world["run"].pk])).json()
    assert data["in_flight"][0]["in_flight"] == 0 and "Workers listening" not in data["html"]


def test_a_running_run_page_refreshes_itself(client, world):
    client.force_login(world["users"]["owner"])
    body = client.get(reverse("run_detail", args=["alpha", world["run"].pk])).content.decode()
    assert 'data-finished="false"' in body
    assert f'data-url="{reverse("run_progress", args=["alpha", world["run"].pk])}"' in body


# --- the prediction browser -------------------------------------------------------------------

def test_the_prediction_page_shows_every_condition_side_by_side_with_its_provenance(client, world, finished):
    client.force_login(world["users"]["analyst"])
    task = world["task"]
    body = client.get(reverse("prediction_detail", args=["alpha", finished.pk, task.pk])).content.decode()
    assert task.question_turn.text in body and task.answer_turn.text in body
    for key in finished.protocol.conditions:
        assert f"<h2><code>{key}</code>" in body  # one section of cards per condition
    prediction = finished.predictions.get(task=task, condition=OWNWORDS)
    grade = finished.grades.get(task=task, answer_sha256=prediction.answer_sha256)
    assert prediction.text in body and f"{prediction.evidence_chars} characters" in body
    assert grade.rationale in body and f"{grade.score} / 3" in body
    assert "offline-stand-in-1" in body  # the returned model version
    for name, digest in prediction.slot.prompt_refs:
        assert f'<code>{name}</code> <code title="{digest}">' in body
    assert "<summary>system and user message</summary>" in body and prediction.slot.request_sha256 in body
    memory = finished.memories.get(session=task.session)  # B = |memory| and the memory condition's evidence
    assert "memory (concrete, 100 words)" in body
    for name, digest in memory.slot.prompt_refs:
        assert f'<code>{name}</code> <code title="{digest}">' in body


def test_the_offline_stand_in_is_labelled_wherever_its_output_shows(client, world, finished):
    client.force_login(world["users"]["owner"])
    detail = client.get(reverse("prediction_detail", args=["alpha", finished.pk, world["task"].pk])).content.decode()
    assert "not model results" in detail
    # the label once per page (its notice), not in every cell
    assert detail.count("offline-label") == 1 and OFFLINE_LABEL in detail
    for url in (reverse("prediction_list", args=["alpha", finished.pk]), reverse("run_detail", args=["alpha", finished.pk])):
        body = client.get(url).content.decode()
        assert OFFLINE_LABEL in body and "not model results" in body


def test_selection_shows_its_candidates_and_which_one_it_copied(client, world):
    protocol = make_protocol(world["project"], world["cohort"], "sel", conditions=[MEMORY, SELECTION],
                             contrasts=[], sealed=True, user=world["users"]["owner"])
    run = finished_run(protocol)
    client.force_login(world["users"]["owner"])
    body = client.get(reverse("prediction_detail", args=["alpha", run.pk, world["task"].pk])).content.decode()
    chosen = run.predictions.get(task=world["task"], condition=SELECTION, label="final").chosen_label
    assert f"copies candidate {chosen}" in body
    for label in ("b0", "b1", "b2"):
        assert f'data-label="{label}"' in body  # a card per candidate


def test_the_prediction_list_pages_through_tasks_with_grades(client, world, finished, monkeypatch):
    monkeypatch.setattr(prediction_views, "TASKS_PER_PAGE", 4)
    client.force_login(world["users"]["analyst"])
    body = client.get(reverse("prediction_list", args=["alpha", finished.pk])).content.decode()
    assert body.count(f'href="/p/alpha/runs/{finished.pk}/predictions/') == 4
    assert "page 1 of 3" in body
    last = client.get(reverse("prediction_list", args=["alpha", finished.pk]) + "?page=3").content.decode()
    assert last.count(f'href="/p/alpha/runs/{finished.pk}/predictions/') == 2


# --- secrets ----------------------------------------------------------------------------------

def test_the_key_variables_value_never_appears_on_any_page(client, world, monkeypatch):
    secret = "sk-test-NEVER-SHOW-THIS-0123456789"
    monkeypatch.setenv("OWNWORDS_PAGE_TEST_KEY", secret)
    # A key travels only to an endpoint that allows its variable (test-loopback does; nothing listens
    # on port 9 and nothing is sent: the run is started, not driven).
    with_key = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                "api_key_env": "OWNWORDS_PAGE_TEST_KEY"}
    caps = {"concurrency": {"openai": 4}}
    protocol = make_protocol(world["project"], world["cohort"], "keyed", generator=with_key, judge=with_key,
                             sealed=True, user=world["users"]["owner"], **caps)
    draft = make_protocol(world["project"], world["cohort"], "keyed-draft", generator=with_key, judge=with_key,
                          **caps)
    run = started_run(protocol)
    urls = {**page_urls(world, run=run),
            "protocol_sealed": reverse("protocol_detail", args=["alpha", protocol.pk]),
            "protocol_draft": reverse("protocol_detail", args=["alpha", draft.pk]),
            "protocol_draft_edit": reverse("protocol_edit", args=["alpha", draft.pk]),
            "project": reverse("project_detail", args=["alpha"])}
    client.force_login(world["users"]["owner"])
    for name, url in urls.items():
        response = client.get(url)
        assert response.status_code == 200, name
        assert secret not in response.content.decode(), name
    for name in ("protocol_sealed", "protocol_draft_edit", "run_detail"):
        assert "OWNWORDS_PAGE_TEST_KEY" in client.get(urls[name]).content.decode(), name


# --- the project page -------------------------------------------------------------------------

def test_the_project_page_lists_protocols_and_runs_but_not_for_raters(client, world):
    client.force_login(world["users"]["viewer"])
    body = client.get(reverse("project_detail", args=["alpha"])).content.decode()
    assert "Protocols and runs" in body and f"run {world['run'].pk}</a> (running)" in body
    assert "New protocol" not in body
    client.force_login(world["users"]["analyst"])
    assert "New protocol" in client.get(reverse("project_detail", args=["alpha"])).content.decode()
    client.force_login(world["users"]["rater"])
    body = client.get(reverse("project_detail", args=["alpha"])).content.decode()
    assert "Protocols and runs" not in body and "draft" not in body


# --- the page refreshes itself (Chromium) ----------------------------------------------------

@pytest.fixture
def running_and_finished(transactional_db, imported, cast):
    """Set up before Playwright's event loop starts (see tests/test_browser_session.py)."""
    cohort = cohort_draw(project=imported, name="c1", size=2, seed=1)
    protocol = make_protocol(imported, cohort, "sealed", sealed=True)
    return {"running": started_run(protocol), "finished": finished_run(protocol)}


def _log_in(page, live_server):
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", "owner-user")
    page.fill("#id_password", "pw-for-tests-only")
    page.click("button[type=submit]")


@pytest.mark.slow
def test_run_progress_js_refreshes_the_block_and_reloads_once_finished(running_and_finished, live_server, browser):
    import json

    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _log_in(page, live_server)
    answers = []

    def progress(route):
        # Stand in for the endpoint: first still running, then finished.
        answers.append(route.request.url)
        finished = len(answers) >= 2
        route.fulfill(status=200, content_type="application/json",
                      body=json.dumps({"html": f'<p id="tick-{len(answers)}">tick</p>', "finished": finished}))

    page.route("**/progress.json", progress)
    page.goto(live_server.url + reverse("run_detail", args=["alpha", running_and_finished["running"].pk]))
    page.wait_for_selector("#tick-1", timeout=5000)  # the block was replaced by the endpoint's HTML
    with page.expect_navigation(timeout=5000):  # finished: the page reloads to show the analysis
        pass
    page.unroute("**/progress.json")
    assert len(answers) == 2 and errors == []
    page.wait_for_selector("#run-phases")  # the real block again, from the reloaded page

    # A finished run's page does not poll at all.
    requests = []
    page.on("request", lambda request: requests.append(request.url) if "progress.json" in request.url else None)
    page.goto(live_server.url + reverse("run_detail", args=["alpha", running_and_finished["finished"].pk]))
    page.wait_for_timeout(2500)
    assert requests == [] and page.locator("#condition-means").is_visible()
