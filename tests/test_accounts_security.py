"""Accounts on a shared server: login rate limiting per user name and address
(django-axes), Django's password validators, and the RQ dashboard for superusers only."""
import pytest
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.urls import reverse

PASSWORD = "a-long-enough-secret-31"


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user(username="alice", password=PASSWORD)


def login(client, password, *, address="10.1.1.1", username="alice", **headers):
    return client.post(reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR=address, **headers)


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


# --- login rate limiting ---------------------------------------------------------------------

@override_settings(AXES_FAILURE_LIMIT=3)
def test_after_the_limit_even_the_right_password_is_refused_with_a_clear_message(client, alice):
    for _ in range(2):
        response = login(client, "wrong")
        assert response.status_code == 200 and "didn't match" in response.content.decode()
    response = login(client, "wrong")  # the third failure locks
    assert response.status_code == 429
    response = login(client, PASSWORD)
    body = response.content.decode()
    assert response.status_code == 429 and not logged_in(client)
    assert "Too many failed logins" in body and "after 3 failed attempts" in body and "15 minutes" in body
    assert 'name="password"' in body  # still the login page, not a bare error


@override_settings(AXES_FAILURE_LIMIT=3)
def test_the_lock_is_per_user_name_and_address(client, alice, django_user_model):
    django_user_model.objects.create_user(username="bob", password=PASSWORD)
    for _ in range(3):
        login(client, "wrong")
    # The same user from another address, and another user from the same address, still log in.
    assert login(client, PASSWORD, address="10.2.2.2").status_code == 302 and logged_in(client)
    client.logout()
    assert login(client, PASSWORD, username="bob").status_code == 302 and logged_in(client)


@override_settings(AXES_FAILURE_LIMIT=3)
def test_a_successful_login_resets_the_count(client, alice):
    login(client, "wrong")
    login(client, "wrong")
    assert login(client, PASSWORD).status_code == 302
    client.logout()
    login(client, "wrong")
    login(client, "wrong")
    assert login(client, PASSWORD).status_code == 302


@override_settings(AXES_FAILURE_LIMIT=2)
def test_a_client_cannot_dodge_the_limit_with_a_forwarded_for_header(client, alice):
    for spoofed in ("1.1.1.1", "2.2.2.2"):
        login(client, "wrong", HTTP_X_FORWARDED_FOR=spoofed)
    assert login(client, PASSWORD, HTTP_X_FORWARDED_FOR="3.3.3.3").status_code == 429


@override_settings(AXES_FAILURE_LIMIT=2, TRUSTED_PROXY_COUNT=1)
def test_behind_a_trusted_proxy_the_address_it_saw_counts(client, alice):
    # Our proxy appends the address it saw; whatever the client wrote before it is ignored.
    for spoofed in ("1.1.1.1", "2.2.2.2"):
        login(client, "wrong", address="10.0.0.2", HTTP_X_FORWARDED_FOR=f"{spoofed}, 203.0.113.9")
    assert login(client, PASSWORD, address="10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 429
    assert login(client, PASSWORD, address="10.0.0.2", HTTP_X_FORWARDED_FOR="198.51.100.7").status_code == 302


def test_a_login_outside_a_web_request_is_not_rate_limited(alice):
    # manage.py shell, bin/demo's checks: no request, no address, nothing an attacker reaches.
    assert authenticate(username="alice", password=PASSWORD) == alice


# --- passwords -------------------------------------------------------------------------------

@pytest.mark.parametrize("password, message", [
    ("short-1", "too short"),
    ("password123", "too common"),
    ("3141592653589", "entirely numeric"),
    ("alice1", "too similar to the username"),
])
def test_weak_passwords_are_refused(alice, password, message):
    with pytest.raises(ValidationError, match=message):
        validate_password(password, user=alice)
    validate_password(PASSWORD, user=alice)


# --- the RQ dashboard ------------------------------------------------------------------------

@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user(username="staff", password=PASSWORD, is_staff=True)


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password=PASSWORD)


DASHBOARD_PAGES = ["/django-rq/", "/django-rq/queues/0/", "/django-rq/queues/0/finished/",
                   "/django-rq/workers/0/", "/django-rq/stats.json"]


@pytest.mark.parametrize("url", DASHBOARD_PAGES)
def test_staff_who_are_not_superusers_do_not_see_the_job_dashboard(client, staff, url):
    client.force_login(staff)
    assert client.get(url).status_code == 403


def test_the_admin_copy_of_the_dashboard_is_not_there(client, staff, superuser):
    client.force_login(staff)
    assert client.get("/admin/django_rq/dashboard/").status_code == 404
    client.force_login(superuser)
    assert client.get("/admin/django_rq/dashboard/").status_code == 404


def test_anonymous_visitors_are_sent_to_the_login_page(client, db):
    response = client.get("/django-rq/queues/0/")
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


@pytest.mark.parametrize("url", ["/django-rq/", "/django-rq/queues/0/"])
def test_superusers_see_the_dashboard(client, superuser, url):
    client.force_login(superuser)
    assert client.get(url).status_code == 200
