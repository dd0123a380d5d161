"""Project creation, member management and the audit log: the role matrix, the
last-owner rule, clear refusals that change nothing, and the log's entries."""
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from experiments.models import AuditEntry, Membership, Project, Role

WHO = ["owner", "analyst", "rater", "viewer", "outsider"]
OWNER_ONLY = {"owner": 200, "analyst": 403, "rater": 403, "viewer": 403, "outsider": 404}


def messages_of(response):
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_any_signed_in_user_creates_a_project_and_owns_it(client, db):
    user = get_user_model().objects.create_user("newcomer", password="pw-for-tests-only")
    client.force_login(user)
    assert client.get(reverse("project_create")).status_code == 200
    response = client.post(reverse("project_create"), {"name": "Fresh study", "slug": "fresh"})
    assert response.status_code == 302 and response.url == reverse("project_detail", args=["fresh"])
    membership = Membership.objects.get(project__slug="fresh")
    assert (membership.user, membership.role) == (user, Role.OWNER)
    page = client.get(reverse("project_detail", args=["fresh"])).content.decode()
    assert "Import interview sessions" in page  # the next step of an empty project


@pytest.mark.parametrize("data, error", [
    ({"name": "Again", "slug": "alpha"}, "exists already"),
    ({"name": "Bad", "slug": "no spaces"}, "Enter a valid"),
    ({"name": "", "slug": "empty-name"}, "This field is required"),
])  # (a NUL never reaches the form: the input gate answers 400, tests/test_input_matrix.py)
def test_a_bad_project_form_says_why_and_creates_nothing(client, cast, data, error):
    client.force_login(cast["viewer"])
    before = Project.objects.count()
    response = client.post(reverse("project_create"), data)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert Project.objects.count() == before


def test_anonymous_users_cannot_create_projects(client, db):
    response = client.post(reverse("project_create"), {"name": "X", "slug": "x"})
    assert response.status_code == 302 and response.url.startswith(reverse("login"))
    assert not Project.objects.filter(slug="x").exists()


def member_urls(project, member_pk):
    slug = project.slug
    return {
        "members": ("get", reverse("project_members", args=[slug]), {}),
        "audit": ("get", reverse("audit_log", args=[slug]), {}),
        "add": ("post", reverse("member_add", args=[slug]), {"username": "newcomer", "role": "viewer"}),
        "role": ("post", reverse("member_role", args=[slug, member_pk]), {"role": "analyst"}),
        "remove": ("post", reverse("member_remove", args=[slug, member_pk]), {"confirm": "yes"}),
        "spending": ("post", reverse("project_spending", args=[slug]), {"analysts_may_spend": "on"}),
    }


@pytest.mark.parametrize("action", ["members", "audit", "add", "role", "remove", "spending"])
@pytest.mark.parametrize("who", WHO)
def test_only_owners_manage_members_settings_and_read_the_log(client, project, cast, action, who):
    get_user_model().objects.create_user("newcomer", password="pw-for-tests-only")
    viewer = Membership.objects.get(project=project, user=cast["viewer"])
    before = sorted(Membership.objects.values_list("project_id", "user_id", "role"))
    client.force_login(cast[who])
    method, url, data = member_urls(project, viewer.pk)[action]
    response = getattr(client, method)(url, data)
    expected = OWNER_ONLY[who]
    if expected == 200 and method == "post":
        expected = 302
    assert response.status_code == expected
    if who != "owner":
        assert sorted(Membership.objects.values_list("project_id", "user_id", "role")) == before
        project.refresh_from_db()
        assert project.analysts_may_spend is False


@pytest.mark.parametrize("action", ["role", "remove"])
def test_a_member_id_of_another_project_is_not_found(client, project, cast, action):
    other_membership = Membership.objects.get(user=cast["outsider"])  # owner of project "other"
    client.force_login(cast["owner"])
    method, url, data = member_urls(project, other_membership.pk)[action]
    assert client.post(url, data).status_code == 404
    other_membership.refresh_from_db()
    assert other_membership.role == Role.OWNER


def test_an_owner_adds_changes_and_removes_members(client, project, cast):
    newcomer = get_user_model().objects.create_user("newcomer", password="pw-for-tests-only")
    client.force_login(cast["owner"])
    urls = member_urls(project, 0)
    response = client.post(urls["add"][1], {"username": "newcomer", "role": "rater"}, follow=True)
    assert "newcomer is now rater." in messages_of(response)
    added = Membership.objects.get(project=project, user=newcomer)
    assert added.role == Role.RATER
    client.post(reverse("member_role", args=[project.slug, added.pk]), {"role": "viewer"})
    added.refresh_from_db()
    assert added.role == Role.VIEWER
    client.post(reverse("member_remove", args=[project.slug, added.pk]), {"confirm": "yes"})
    assert not Membership.objects.filter(project=project, user=newcomer).exists()
    # The removed user no longer finds the project.
    client.force_login(newcomer)
    assert client.get(reverse("project_detail", args=[project.slug])).status_code == 404


@pytest.mark.parametrize("data, error", [
    ({"username": "nobody-by-this-name", "role": "viewer"}, "there is no account called 'nobody-by-this-name'"),
    ({"username": "viewer-user", "role": "viewer"}, "viewer-user is a member already"),
    ({"username": "outsider", "role": "boss"}, "Select a valid choice"),
    ({"username": "", "role": "viewer"}, "This field is required"),
])  # (a NUL never reaches the form: the input gate answers 400, tests/test_input_matrix.py)
def test_adding_a_member_badly_says_why_and_changes_nothing(client, project, cast, data, error):
    client.force_login(cast["owner"])
    before = sorted(Membership.objects.values_list("project_id", "user_id", "role"))
    response = client.post(reverse("member_add", args=[project.slug]), data, follow=True)
    assert any(m.startswith("Nobody was added") and error in m for m in messages_of(response)), messages_of(response)
    assert sorted(Membership.objects.values_list("project_id", "user_id", "role")) == before


def test_the_last_owner_can_neither_leave_nor_be_demoted(client, project, cast):
    owner = Membership.objects.get(project=project, user=cast["owner"])
    client.force_login(cast["owner"])
    response = client.post(reverse("member_role", args=[project.slug, owner.pk]), {"role": "viewer"}, follow=True)
    assert any("only owner" in m for m in messages_of(response))
    response = client.post(reverse("member_remove", args=[project.slug, owner.pk]), {"confirm": "yes"}, follow=True)
    assert any("only owner" in m for m in messages_of(response))
    owner.refresh_from_db()
    assert owner.role == Role.OWNER
    # With a second owner, the first may step down, and then loses the owners' pages.
    analyst = Membership.objects.get(project=project, user=cast["analyst"])
    client.post(reverse("member_role", args=[project.slug, analyst.pk]), {"role": "owner"})
    response = client.post(reverse("member_role", args=[project.slug, owner.pk]), {"role": "analyst"})
    assert response.status_code == 302 and response.url == reverse("project_detail", args=[project.slug])
    assert client.get(reverse("project_members", args=[project.slug])).status_code == 403
    # Now the former analyst is the only owner.
    client.force_login(cast["analyst"])
    response = client.post(reverse("member_remove", args=[project.slug, analyst.pk]), {"confirm": "yes"}, follow=True)
    assert any("only owner" in m for m in messages_of(response))
    assert Membership.objects.filter(project=project, role=Role.OWNER).count() == 1


def test_owners_set_whether_analysts_may_spend(client, project, cast):
    client.force_login(cast["owner"])
    page = client.get(reverse("project_members", args=[project.slug])).content.decode()
    assert 'name="analysts_may_spend"' in page
    client.post(reverse("project_spending", args=[project.slug]), {"analysts_may_spend": "on"})
    project.refresh_from_db()
    assert project.analysts_may_spend is True
    client.post(reverse("project_spending", args=[project.slug]), {})
    project.refresh_from_db()
    assert project.analysts_may_spend is False


# --- the audit log ------------------------------------------------------------------------------

def test_opening_a_transcript_is_logged_for_whoever_may_read_it(client, imported, cast):
    for who in ("owner", "analyst"):
        client.force_login(cast[who])
        assert client.get(reverse("session_detail", args=[imported.slug, "sess-a"])).status_code == 200
    for who in ("viewer", "rater", "outsider"):  # refused: nothing was opened, nothing logged
        client.force_login(cast[who])
        assert client.get(reverse("session_detail", args=[imported.slug, "sess-a"])).status_code in (403, 404)
    entries = list(AuditEntry.objects.order_by("pk").values_list("username", "kind", "target", "project__slug"))
    assert entries == [("owner-user", "session", "session sess-a", "alpha"),
                       ("analyst-user", "session", "session sess-a", "alpha")]


def test_task_pages_and_exports_are_logged(client, rated_run, cast, campaign):
    project = rated_run.protocol.project
    task = rated_run.protocol.cohort.cohort_tasks.order_by("position").first().task
    client.force_login(cast["analyst"])
    assert client.get(reverse("prediction_detail", args=[project.slug, rated_run.pk, task.pk])).status_code == 200
    assert client.get(reverse("prediction_list", args=[project.slug, rated_run.pk])).status_code == 200
    cohort = rated_run.protocol.cohort
    assert client.get(reverse("cohort_detail", args=[project.slug, cohort.pk])).status_code == 200
    client.force_login(cast["viewer"])
    # A viewer's cohort page shows counts only: nothing to log.
    assert client.get(reverse("cohort_detail", args=[project.slug, cohort.pk])).status_code == 200
    assert client.get(reverse("run_scores_csv", args=[project.slug, rated_run.pk])).status_code == 200
    client.force_login(cast["owner"])
    assert client.get(reverse("campaign_export", args=[project.slug, campaign.pk, "jsonl"])).status_code == 200
    assert client.get(reverse("campaign_export", args=[project.slug, campaign.pk, "xml"])).status_code == 404
    entries = list(AuditEntry.objects.order_by("pk").values_list("username", "kind", "target"))
    assert entries == [
        ("analyst-user", "task", f"task {task.pk} (session {task.session.external_id}) in run {rated_run.pk}"),
        ("analyst-user", "task", f"task list of run {rated_run.pk}, page 1"),
        ("analyst-user", "task", f"task list of cohort {cohort.name}"),
        ("viewer-user", "export", f"run {rated_run.pk}: task-level scores (CSV)"),
        ("owner-user", "export", f"campaign {campaign.pk}: every rating (JSONL)"),
    ]
    assert AuditEntry.objects.get(kind="export", username="owner-user").path.endswith("export.jsonl")


def test_owners_read_the_log_filtered_and_paginated(client, imported, cast):
    client.force_login(cast["analyst"])
    for _ in range(60):
        client.get(reverse("session_detail", args=[imported.slug, "sess-b"]))
    client.force_login(cast["owner"])
    client.get(reverse("session_detail", args=[imported.slug, "sess-a"]))
    url = reverse("audit_log", args=[imported.slug])
    first = client.get(url).content.decode()
    assert first.count("session sess-") == 50 and "page 1 of 2" in first
    assert "session sess-a" in first  # newest first
    mine = client.get(url, {"user": "owner-user"}).content.decode()
    assert mine.count("session sess-") == 1
    second = client.get(url, {"user": "analyst-user", "kind": "session", "page": 2}).content.decode()
    assert second.count("session sess-b") == 10
    assert "?user=analyst-user&amp;kind=session&amp;page=1" in second  # the pager keeps the filters
    assert client.get(url, {"kind": "export"}).content.decode().count("session sess-") == 0
    # Another project's log is not this owner's business: not found.
    other = Project.objects.get(slug="other")
    assert client.get(reverse("audit_log", args=[other.slug])).status_code == 404


def test_a_role_that_does_not_exist_changes_nothing(client, project, cast):
    viewer = Membership.objects.get(project=project, user=cast["viewer"])
    client.force_login(cast["owner"])
    response = client.post(reverse("member_role", args=[project.slug, viewer.pk]), {"role": "superuser"}, follow=True)
    assert any(m.startswith("The role was not changed: role: Select a valid choice") for m in messages_of(response))
    viewer.refresh_from_db()
    assert viewer.role == Role.VIEWER


def test_the_explorer_search_and_a_raters_item_are_logged(client, rated_run, cast, campaign):
    from django.contrib.auth import get_user_model
    project = rated_run.protocol.project
    client.force_login(cast["analyst"])
    assert client.get(reverse("run_explorer", args=[project.slug, rated_run.pk]) + "?page=1").status_code == 200
    assert client.get(reverse("project_search", args=[project.slug]) + "?q=work").status_code == 200
    assert client.get(reverse("project_search", args=[project.slug])).status_code == 200  # no words: nothing shown
    client.force_login(cast["viewer"])  # refused: nothing shown, nothing logged
    assert client.get(reverse("run_explorer", args=[project.slug, rated_run.pk])).status_code == 403
    rater = get_user_model().objects.get(username="rater-a")
    client.force_login(rater)
    page = client.get(reverse("rate_page", args=[project.slug, campaign.pk]))
    assert page.status_code == 200
    shown = page.context["view"]["item"]["assignment"]
    entries = list(AuditEntry.objects.order_by("pk").values_list("username", "kind", "target"))
    assert entries == [
        ("analyst-user", "task", f"explorer of run {rated_run.pk}, page 1"),
        ("analyst-user", "task", "search for 'work'"),
        ("rater-a", "task", f"rating item (assignment {shown}) of campaign {campaign.pk}"),
    ]


def test_a_new_project_says_it_has_no_sessions_yet_not_that_the_owner_sees_counts_only(client, cast):
    client.force_login(cast["owner"])
    response = client.post(reverse("project_create"), {"name": "Fresh", "slug": "fresh"})
    assert response.status_code == 302
    body = client.get(reverse("project_detail", args=["fresh"])).content.decode()
    assert 'id="no-sessions"' in body and "import sessions" in body
    assert "counts only" not in body


# --- member changes: confirmed, and in the log ----------------------------------------------------

def test_removing_a_member_asks_first_and_a_post_without_the_confirmation_changes_nothing(client, project, cast):
    viewer = Membership.objects.get(project=project, user=cast["viewer"])
    client.force_login(cast["owner"])
    members_page = client.get(reverse("project_members", args=[project.slug])).content.decode()
    confirm_url = reverse("member_remove", args=[project.slug, viewer.pk])
    assert f'href="{confirm_url}"' in members_page  # a link to the question, not a button that removes
    page = client.get(confirm_url)
    assert page.status_code == 200
    body = page.content.decode()
    assert "Remove viewer-user from" in body and 'name="confirm" value="yes"' in body
    for data in ({}, {"confirm": "no"}, {"confirm": ""}):
        response = client.post(confirm_url, data)
        assert response.status_code == 302 and response.url == confirm_url
        assert Membership.objects.filter(pk=viewer.pk).exists()
    assert not AuditEntry.objects.filter(kind="member").exists()
    response = client.post(confirm_url, {"confirm": "yes"}, follow=True)
    assert "viewer-user is no longer a member." in messages_of(response)
    assert not Membership.objects.filter(pk=viewer.pk).exists()


def test_the_confirmation_page_of_the_only_owner_says_it_cannot_be_done(client, project, cast):
    owner = Membership.objects.get(project=project, user=cast["owner"])
    client.force_login(cast["owner"])
    body = client.get(reverse("member_remove", args=[project.slug, owner.pk])).content.decode()
    assert "only owner" in body and 'name="confirm"' not in body


@pytest.mark.parametrize("who", ["analyst", "rater", "viewer", "outsider"])
def test_only_owners_see_the_removal_question(client, project, cast, who):
    viewer = Membership.objects.get(project=project, user=cast["viewer"])
    client.force_login(cast[who])
    assert client.get(reverse("member_remove", args=[project.slug, viewer.pk])).status_code == OWNER_ONLY[who]


def test_every_member_change_is_logged_with_who_what_and_where(client, project, cast):
    newcomer = get_user_model().objects.create_user("newcomer", password="pw-for-tests-only")
    client.force_login(cast["owner"])
    client.post(reverse("member_add", args=[project.slug]), {"username": "newcomer", "role": "rater"})
    added = Membership.objects.get(project=project, user=newcomer)
    role_url = reverse("member_role", args=[project.slug, added.pk])
    client.post(role_url, {"role": "analyst"})
    client.post(role_url, {"role": "analyst"})  # no change: nothing to log
    client.post(reverse("member_remove", args=[project.slug, added.pk]), {"confirm": "yes"})
    # Refused changes change nothing and log nothing.
    owner = Membership.objects.get(project=project, user=cast["owner"])
    client.post(reverse("member_role", args=[project.slug, owner.pk]), {"role": "viewer"})
    client.post(reverse("member_add", args=[project.slug]), {"username": "nobody-by-this-name", "role": "viewer"})
    client.force_login(cast["analyst"])
    client.post(reverse("member_add", args=[project.slug]), {"username": "newcomer", "role": "owner"})
    entries = list(AuditEntry.objects.filter(project=project).order_by("pk")
                   .values_list("username", "user", "kind", "target", "path"))
    assert entries == [
        ("owner-user", cast["owner"].pk, "member", "added newcomer as rater", reverse("member_add", args=[project.slug])),
        ("owner-user", cast["owner"].pk, "member", "changed newcomer's role from rater to analyst", role_url),
        ("owner-user", cast["owner"].pk, "member", "removed newcomer (was analyst)",
         reverse("member_remove", args=[project.slug, added.pk])),
    ]
    assert all(e.at is not None for e in AuditEntry.objects.all())
    # The owners' log page shows them, and filters to them.
    client.force_login(cast["owner"])
    body = client.get(reverse("audit_log", args=[project.slug]), {"kind": "member"}).content.decode()
    assert body.count("Changed the members") >= 3 + 1  # three rows and the filter's option
    assert "changed newcomer&#x27;s role from rater to analyst" in body and "removed newcomer (was analyst)" in body


def test_creating_a_project_is_the_first_entry_of_its_log(client, db):
    user = get_user_model().objects.create_user("founder", password="pw-for-tests-only")
    client.force_login(user)
    client.post(reverse("project_create"), {"name": "Fresh study", "slug": "fresh"})
    assert list(AuditEntry.objects.values_list("project__slug", "username", "kind", "target")) == [
        ("fresh", "founder", "member", "created the project, with founder as its owner")]
