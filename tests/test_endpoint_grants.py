"""Spending on a paid endpoint needs the administrator's grant, on top of the
project role; the offline stand-in stays free for all; whether any account may create projects
is a setting. The pen test's account: a rater elsewhere makes a project, owns it, and could seal
and run against the organisation's paid endpoint. Now the page says why there is no button, a
post is refused (403, with the reason) and nothing is sealed.
"""
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.urls import reverse

from experiments.access import may_create_projects, may_spend
from experiments.models import EndpointGrant, Membership, Project, Protocol
from tests.engine_helpers import QUESTION_ONLY, build_cohort, make_protocol

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
PAID = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "gpt-test-1"}  # test-loopback


@pytest.fixture
def mallory(client, cast):
    """The rater of project alpha, owner of a project of their own."""
    client.force_login(cast["rater"])
    assert client.post(reverse("project_create"), {"name": "Mallory", "slug": "mallory"}).status_code == 302
    project = Project.objects.get(slug="mallory")
    cohort = build_cohort(project, sessions=1, targets=1, name="m")
    return {"user": cast["rater"], "project": project,
            "paid": make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=PAID, judge=OFFLINE,
                                  concurrency={"openai": 2, "offline": 2}, name="paid"),
            "free": make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE, name="free")}


def _seal(client, protocol):
    return client.post(reverse("protocol_seal", args=[protocol.project.slug, protocol.pk]), {"confirm": "yes"})


def test_an_owner_without_a_grant_cannot_seal_a_paid_protocol_and_is_told_why(client, mallory):
    paid = mallory["paid"]
    page = client.get(reverse("protocol_detail", args=["mallory", paid.pk])).content.decode()
    assert 'id="seal-form"' not in page
    assert "No Seal or Run button for you: the endpoint test-loopback is a paid service" in page
    response = _seal(client, paid)
    assert response.status_code == 403
    assert "needs a grant from the administrator" in response.content.decode()
    paid.refresh_from_db()
    assert not paid.is_sealed()


def test_the_offline_stand_in_needs_no_grant(client, mallory):
    assert _seal(client, mallory["free"]).status_code == 302
    mallory["free"].refresh_from_db()
    assert mallory["free"].is_sealed()


def test_a_grant_to_the_users_group_lets_them_spend_and_revoking_it_stops_them(client, mallory):
    group = Group.objects.create(name="lab-spenders")
    mallory["user"].groups.add(group)
    membership = Membership.objects.get(project=mallory["project"], user=mallory["user"])
    call_command("endpoint_grants", "grant", "test-loopback", group="lab-spenders", stdout=io.StringIO())
    assert may_spend(membership, mallory["paid"])
    call_command("endpoint_grants", "revoke", "test-loopback", group="lab-spenders", stdout=io.StringIO())
    assert not may_spend(membership, mallory["paid"])
    call_command("endpoint_grants", "grant", "test-loopback", user=mallory["user"].username, stdout=io.StringIO())
    assert _seal(client, mallory["paid"]).status_code == 302
    mallory["paid"].refresh_from_db()
    assert mallory["paid"].is_sealed()


def test_the_commands_refuse_a_spender_without_a_grant(mallory):
    with pytest.raises(CommandError, match="may not do this: the endpoint test-loopback is a paid service"):
        call_command("protocol_seal", str(mallory["paid"].pk), user=mallory["user"].username)
    assert not Protocol.objects.get(pk=mallory["paid"].pk).is_sealed()


def test_a_superuser_holds_every_grant(mallory):
    membership = Membership.objects.get(project=mallory["project"], user=mallory["user"])
    mallory["user"].is_superuser = True
    mallory["user"].save()
    assert may_spend(membership, mallory["paid"])


def test_the_grant_command_lists_and_explains(db, cast):
    out = io.StringIO()
    call_command("endpoint_grants", "list", stdout=out)
    assert "no grants" in out.getvalue()
    call_command("endpoint_grants", "grant", "openai", user="owner-user", note="budget 2026", stdout=out)
    call_command("endpoint_grants", "grant", "openai", user="owner-user", stdout=out)
    assert "granted: openai: user owner-user" in out.getvalue() and "already granted" in out.getvalue()
    out = io.StringIO()
    call_command("endpoint_grants", "list", stdout=out)
    assert out.getvalue().strip() == "openai: user owner-user  — budget 2026"
    for args, options, message in [
        (["grant", "nowhere"], {"user": "owner-user"}, "no endpoint named 'nowhere'"),
        (["grant", "offline"], {"user": "owner-user"}, "free for all, it takes no grant"),
        (["grant", "openai"], {"user": "nobody"}, "no user named 'nobody'"),
        (["grant", "openai"], {}, "give --user NAME or --group NAME"),
        (["revoke", "openai"], {"user": "viewer-user"}, "no such grant"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("endpoint_grants", *args, **options)
    assert EndpointGrant.objects.count() == 1


def test_the_admin_page_grants_with_who_granted(client, db, cast):
    root = get_user_model().objects.create_superuser(username="root", password="pw-for-tests-only")
    client.force_login(root)
    url = reverse("admin:experiments_endpointgrant_add")
    assert '<option value="openai">' in client.get(url).content.decode()
    both = client.post(url, {"endpoint": "openai", "user": cast["owner"].pk, "group": Group.objects.create(name="g").pk})
    assert both.status_code == 200 and "choose exactly one" in both.content.decode()
    assert client.post(url, {"endpoint": "openai", "user": cast["owner"].pk, "note": ""}).status_code == 302
    grant = EndpointGrant.objects.get()
    assert (grant.endpoint, grant.user, grant.granted_by) == ("openai", cast["owner"], root)


# --- who may create projects -------------------------------------------------------------------

def test_any_account_creates_projects_by_default(client, cast):
    client.force_login(cast["viewer"])
    assert 'id="project-create-link"' in client.get(reverse("project_list")).content.decode()


@override_settings(OWNWORDS_ANYONE_MAY_CREATE_PROJECTS=False)
def test_with_the_setting_off_only_staff_create_projects_and_others_are_told_why(client, cast):
    client.force_login(cast["rater"])
    listing = client.get(reverse("project_list")).content.decode()
    assert 'id="project-create-link"' not in listing and 'id="project-create-refused"' in listing
    response = client.post(reverse("project_create"), {"name": "Mallory", "slug": "mallory"})
    assert response.status_code == 403 and "ask the administrator" in response.content.decode()
    assert not Project.objects.filter(slug="mallory").exists()
    staff = cast["viewer"]
    staff.is_staff = True
    staff.save()
    assert may_create_projects(staff)
    client.force_login(staff)
    assert client.post(reverse("project_create"), {"name": "Staff's", "slug": "staffs"}).status_code == 302
