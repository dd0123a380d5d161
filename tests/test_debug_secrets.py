"""Keys and passwords never reach Django's error pages, DEBUG on or off.

With DEBUG=1 (the demo's default) Django's filter is off: a 500 on the protocol form showed a
pasted key in the debug page's POST table, and the login page a password. Each view where a
key or a password can be posted is made to fail after it read the form, and its debug page
must not hold the secret (the POST table shows stars; the frames' locals hide it too).
"""
import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import reverse

from experiments.data.sessions import cohort_draw
from experiments.web.runs import regrade_page, views
from tests.test_pages_runs import OFFLINE, make_protocol, protocol_form_data, started_run

# Built from parts, so that the debug page's source excerpts of this file never hold it whole.
MARK = "PAST" + "ED"
SECRET = f"sk-proj-{MARK}0123456789abcdefABCDEF0123"
# A value that passes for a variable's name: it is refused later, by the endpoint's list.
NAME_LIKE_SECRET = f"hunter2_{MARK}_PASSPHRASE"


def boom(*args, **kwargs):
    raise RuntimeError("a failure after the form was read")


@pytest.fixture
def debug_client():
    with override_settings(DEBUG=True):
        yield Client(raise_request_exception=False)


def debug_page(response) -> str:
    assert response.status_code == 500
    body = response.content.decode()
    assert "a failure after the form was read" in body  # the technical page, with its tables
    return body


@pytest.fixture
def cohort(imported, cast):
    return cohort_draw(project=imported, name="c1", size=2, seed=1)


@pytest.mark.parametrize("secret", [SECRET, NAME_LIKE_SECRET])
def test_the_protocol_forms_debug_page_hides_the_key(debug_client, cast, cohort, monkeypatch, secret):
    monkeypatch.setattr(views, "render", boom)
    debug_client.force_login(cast["owner"])
    data = protocol_form_data(cohort, **{"generator-api_key_env": secret, "judge-api_key_env": secret})
    body = debug_page(debug_client.post(reverse("protocol_create", args=["alpha"]), data))
    assert MARK not in body
    assert "generator-api_key_env" in body and "********************" in body
    draft = make_protocol(cohort.project, cohort, "draft")
    body = debug_page(debug_client.post(reverse("protocol_edit", args=["alpha", draft.pk]), data))
    assert MARK not in body


def test_a_failure_inside_the_key_check_hides_the_key_in_the_frames(debug_client, cast, cohort, monkeypatch):
    from experiments.execution import endpoints
    monkeypatch.setattr(endpoints, "key_refusal_text", boom)
    debug_client.force_login(cast["owner"])
    data = protocol_form_data(cohort, **{"judge-provider": "openai", "judge-base_url": "http://127.0.0.1:9/v1",
                                         "judge-model": "m", "judge-api_key_env": NAME_LIKE_SECRET})
    body = debug_page(debug_client.post(reverse("protocol_create", args=["alpha"]), data))
    assert "_check_key_variable" in body and MARK not in body


def test_the_regrade_forms_debug_page_hides_the_key(debug_client, cast, cohort, monkeypatch):
    run = started_run(make_protocol(cohort.project, cohort, "sealed", sealed=True, user=cast["owner"]))
    monkeypatch.setattr(regrade_page, "render", boom)
    debug_client.force_login(cast["owner"])
    data = {"regrade-judge_choice": "other", **{f"judge-{k}": v for k, v in OFFLINE.items()},
            "judge-api_key_env": SECRET, "judge-max_output_tokens": 100, "judge-timeout_s": 10,
            "judge-token_param": "max_completion_tokens", "judge-concurrency": 2}
    body = debug_page(debug_client.post(reverse("run_regrade", args=["alpha", run.pk]), data))
    assert MARK not in body and "judge-api_key_env" in body


def test_the_login_pages_debug_page_hides_the_password(debug_client, db, monkeypatch):
    from django.contrib.auth.views import LoginView
    get_user_model().objects.create_user(username="someone", password="pw-for-tests-only")
    monkeypatch.setattr(LoginView, "get_context_data", boom)
    body = debug_page(debug_client.post(reverse("login"), {"username": "someone", "password": SECRET}))
    assert MARK not in body


@pytest.fixture
def admin_client(debug_client, db):
    admin = get_user_model().objects.create_superuser(username="root", password="pw-for-tests-only")
    debug_client.force_login(admin)
    return debug_client


def test_the_admins_user_forms_debug_pages_hide_the_passwords(admin_client, monkeypatch):
    from django.contrib.admin import options
    from django.contrib.auth import admin as auth_admin
    monkeypatch.setattr(options.ModelAdmin, "render_change_form", boom)
    body = debug_page(admin_client.post(reverse("admin:auth_user_add"), {
        "username": "new-user", "password1": SECRET, "password2": SECRET + "x", "usable_password": "true"}))
    assert MARK not in body
    other = get_user_model().objects.create_user(username="other", password="pw-for-tests-only")
    monkeypatch.setattr(auth_admin, "TemplateResponse", boom)
    body = debug_page(admin_client.post(reverse("admin:auth_user_password_change", args=[other.pk]), {
        "password1": SECRET, "password2": SECRET + "x"}))
    assert MARK not in body
    monkeypatch.setattr("django.contrib.auth.views.PasswordChangeView.get_context_data", boom)
    body = debug_page(admin_client.post(reverse("admin:password_change"), {
        "old_password": SECRET, "new_password1": SECRET, "new_password2": SECRET + "x"}))
    assert MARK not in body
