"""Rater invites and completion codes: hashed single-use links, expiry, revocation, refusals that
change nothing, bulk CSV all-or-nothing, dealing open items to new raters, the completion code,
throttling like the login, and who may open which invite page."""
import csv
import hashlib
import hmac
import io
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from annotations.campaigns import campaign_create, open_items_deal, rater_add
from annotations.completion_codes import completion_code_rows, rater_completion_code
from annotations.core.invite_codes import completion_code, email_rows, token_sha256
from annotations.invites import InviteError, invite_accept, invite_create, invite_revoke
from annotations.models import Assignment, CampaignRater, RaterInvite
from annotations.rating import rater_item, rating_record
from experiments.models import AuditEntry, Membership, Role
from tests.annotations_helpers import CONDITIONS, add_raters, finished_run

STRONG = "violet-harbour-1987-kettle"
User = get_user_model()


def accept_url(token):
    return reverse("invite_accept", args=[token])


def new_account(client, token, username, password=STRONG, again=None, **extra):
    return client.post(accept_url(token), {"mode": "new", "new-username": username, "new-password1": password,
                                           "new-password2": password if again is None else again}, **extra)


def sign_in(client, token, username, password, **extra):
    return client.post(accept_url(token), {"mode": "login", "login-username": username, "login-password": password},
                       **extra)


def member_entries(project):
    return list(AuditEntry.objects.filter(project=project, kind=AuditEntry.Kind.MEMBER).values_list("target", flat=True))


# --- pure parts, on hand-made cases ------------------------------------------------------------

def test_token_hash_and_completion_code_on_known_values():
    assert token_sha256("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    # HMAC-SHA256(b"key", b"12:34"), computed once by hand with the standard library
    expected = hmac.new(b"key", b"12:34", hashlib.sha256).hexdigest()[:10].upper()
    assert completion_code(b"key", 12, 34) == expected and len(expected) == 10
    assert completion_code(b"key", 12, 35) != expected and completion_code(b"other", 12, 34) != expected


def test_email_rows_name_each_bad_row():
    ok = lambda s: "@" in s and " " not in s  # noqa: E731 - the test's own idea of an address
    assert email_rows("Email\na@x.org\n\nb@y.org\n", ok) == (["a@x.org", "b@y.org"], [])
    assert email_rows("a@x.org\n", ok) == (["a@x.org"], [])  # no header
    emails, problems = email_rows("email\na@x.org\nnot an address\nb@y.org,extra\nA@x.org\n", ok)
    assert problems == ["row 3: 'not an address' is not an e-mail address",
                        "row 4: one column (an e-mail address) expected, found 2",
                        "row 5: A@x.org is listed already (row 2)"]
    assert email_rows("email\n", ok)[1] == ["the file holds no e-mail address"]


# --- the link ---------------------------------------------------------------------------------

def test_only_the_tokens_hash_is_stored_and_the_link_is_shown_once(client, cast, campaign):
    client.force_login(cast["owner"])
    slug, pk = campaign.project.slug, campaign.pk
    response = client.post(reverse("campaign_invite_create", args=[slug, pk]), {"days": "7"})
    assert response.status_code == 200
    link = response.context["new_link"]
    token = link.rstrip("/").rsplit("/", 1)[1]
    assert len(token) == 43
    invite = RaterInvite.objects.get()
    assert invite.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
    stored = " ".join(str(v) for v in RaterInvite.objects.values().get().values())
    assert token not in stored
    assert abs((invite.expires_at - invite.created_at) - timedelta(days=7)) < timedelta(seconds=5)
    assert token not in client.get(reverse("campaign_invites", args=[slug, pk])).content.decode()
    assert any("made rater invite" in t for t in member_entries(campaign.project))
    # the owner's choice of days is bounded: 0 and 91 are refused, nothing made
    for days in ("0", "91", "1" * 30):
        client.post(reverse("campaign_invite_create", args=[slug, pk]), {"days": days})
    assert RaterInvite.objects.count() == 1


def test_a_new_account_joins_once_and_the_link_is_then_spent(client, cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    page = client.get(accept_url(made.token)).content.decode()
    assert campaign.project.name in page and campaign.name in page
    for secret in ("rater-a", "rater-b", "owner-user", f"runs/{campaign.run_id}", CONDITIONS[0], "bees-protocol"):
        assert secret not in page  # the public page reveals the two names only
    weak = new_account(client, made.token, "newbie", password="password")
    assert weak.status_code == 400 and not User.objects.filter(username="newbie").exists()
    differ = new_account(client, made.token, "newbie", again=STRONG + "x")
    assert differ.status_code == 400 and "differ" in differ.content.decode()
    response = new_account(client, made.token, "newbie")
    assert response.status_code == 302 and response.url == reverse("rate_page", args=[campaign.project.slug, campaign.pk])
    user = User.objects.get(username="newbie")
    assert Membership.objects.get(project=campaign.project, user=user).role == Role.RATER
    assert CampaignRater.objects.get(campaign=campaign, user=user).active
    invite = RaterInvite.objects.get()
    assert invite.used_by == user and invite.used_at is not None
    entries = member_entries(campaign.project)
    assert "added newbie as rater" in entries and any("accepted rater invite" in t for t in entries)
    # spent: a second person gets a clear message and nothing changes
    other = Client()
    again = new_account(other, made.token, "second")
    assert again.status_code == 410 and "used already" in again.content.decode()
    assert not User.objects.filter(username="second").exists()
    assert Client().get(accept_url("x" * 43)).status_code == 404


def test_an_expired_link_lets_nobody_in(client, cast, campaign):
    made = invite_create(campaign=campaign, days=1, by=cast["owner"])
    RaterInvite.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = new_account(client, made.token, "late")
    assert response.status_code == 410 and "expired" in response.content.decode()
    assert not User.objects.filter(username="late").exists()
    with pytest.raises(InviteError, match="expired"):
        invite_accept(token=made.token, user=cast["viewer"])


def test_revoking_is_one_audited_post_and_closes_the_link(client, cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    slug, pk = campaign.project.slug, campaign.pk
    url = reverse("campaign_invite_revoke", args=[slug, pk, made.invite.pk])
    client.force_login(cast["analyst"])
    assert client.post(url).status_code == 403
    client.force_login(cast["owner"])
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 302
    invite = RaterInvite.objects.get()
    assert invite.revoked_by == cast["owner"] and invite.used_at is None
    assert any(f"revoked rater invite {invite.pk}" in t for t in member_entries(campaign.project))
    page = Client().get(accept_url(made.token))
    assert page.status_code == 410 and "withdrawn" in page.content.decode()
    with pytest.raises(InviteError, match="revoked already"):
        invite_revoke(campaign=campaign, invite_pk=invite.pk, by=cast["owner"])


def test_an_existing_analyst_is_refused_and_nothing_changes(client, cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    before = member_entries(campaign.project)
    response = sign_in(client, made.token, "analyst-user", "pw-for-tests-only")
    assert response.status_code == 409
    assert "analyst" in response.content.decode() and "nothing was changed" in response.content.decode()
    assert Membership.objects.get(project=campaign.project, user=cast["analyst"]).role == Role.ANALYST
    assert not CampaignRater.objects.filter(campaign=campaign, user=cast["analyst"]).exists()
    assert RaterInvite.objects.get().used_at is None and member_entries(campaign.project) == before
    # the same link still works for a member of another project, who joins as a rater here
    assert sign_in(Client(), made.token, "outsider", "pw-for-tests-only").status_code == 302
    assert Membership.objects.get(project=campaign.project, user=cast["outsider"]).role == Role.RATER


def test_a_new_rater_is_dealt_a_share_and_sees_only_their_items(client, cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    assert new_account(client, made.token, "crowd-1").status_code == 302
    newbie = User.objects.get(username="crowd-1")
    items = campaign.items.count()
    assert client.get(reverse("rate_item", args=[campaign.project.slug, campaign.pk])).json()["item"] is None
    assert 'id="rate-no-items"' in client.get(reverse("rate_page", args=[campaign.project.slug, campaign.pk])).content.decode()
    owner = Client()
    owner.force_login(cast["owner"])
    page = owner.get(reverse("campaign_invites", args=[campaign.project.slug, campaign.pk])).content.decode()
    assert "crowd-1" in page and "Deal open items to new raters" in page
    assert owner.post(reverse("campaign_deal_open_items", args=[campaign.project.slug, campaign.pk])).status_code == 302
    # k = 2 with raters a and b: 2 × items open; a third of them (rounded down) go to the new rater
    current = Assignment.objects.filter(campaign=campaign).exclude(status=Assignment.Status.REASSIGNED)
    assert current.filter(rater=newbie).count() == 2 * items // 3
    for item in campaign.items.all():
        holders = list(current.filter(item=item).values_list("rater_id", flat=True))
        assert len(holders) == 2 and len(set(holders)) == 2
    assert any("dealt open items" in t for t in member_entries(campaign.project))
    with pytest.raises(Exception, match="no new rater"):
        open_items_deal(campaign=campaign)
    mine = set(current.filter(rater=newbie).values_list("pk", flat=True))
    seen = set()
    while (item := client.get(reverse("rate_item", args=[campaign.project.slug, campaign.pk])).json()["item"]):
        seen.add(item["assignment"])
        response = client.post(reverse("rate_submit", args=[campaign.project.slug, campaign.pk]),
                               {"assignment": item["assignment"], "grade": "2"}, HTTP_ACCEPT="application/json")
        assert response.status_code == 200
    assert seen == mine
    # another rater's assignment is refused to them
    theirs = current.filter(rater__username="rater-a", status=Assignment.Status.OPEN).first()
    refused = client.post(reverse("rate_submit", args=[campaign.project.slug, campaign.pk]),
                          {"assignment": theirs.pk, "grade": "1"}, HTTP_ACCEPT="application/json")
    assert refused.status_code == 400


# --- bulk -------------------------------------------------------------------------------------

def upload(client, campaign, text, days="7"):
    return client.post(reverse("campaign_invite_bulk", args=[campaign.project.slug, campaign.pk]),
                       {"days": days, "addresses": SimpleUploadedFile("list.csv", text.encode(), "text/csv")})


def test_a_bulk_file_with_a_bad_row_makes_nothing(client, cast, campaign):
    client.force_login(cast["owner"])
    response = upload(client, campaign, "email\nann@example.org\nnot-an-address\nbo@example.org,x\n")
    assert response.status_code == 400
    page = response.content.decode()
    assert "row 3: &#x27;not-an-address&#x27; is not an e-mail address" in page and "row 4: one column" in page
    assert RaterInvite.objects.count() == 0 and len(mail.outbox) == 0
    assert upload(client, campaign, "a\x00b@example.org\n").status_code == 400
    assert RaterInvite.objects.count() == 0


def test_a_bulk_file_gives_back_one_working_link_per_address(client, cast, campaign):
    client.force_login(cast["owner"])
    response = upload(client, campaign, "ann@example.org\nbo@example.org\n", days="3")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["email", "link", "expires_at"] and [r[0] for r in rows[1:]] == ["ann@example.org", "bo@example.org"]
    assert len(mail.outbox) == 0  # no EMAIL_HOST: the owner sends the links
    for email, link, expires in rows[1:]:
        token = link.rstrip("/").rsplit("/", 1)[1]
        invite = RaterInvite.objects.get(token_sha256=token_sha256(token))
        assert invite.email == email and invite.expires_at.isoformat() == expires
        assert Client().get(link.split("testserver", 1)[1]).status_code == 200


@override_settings(EMAIL_HOST="smtp.example.org", EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend")
def test_with_a_mail_server_each_address_gets_its_link(client, cast, campaign):
    client.force_login(cast["owner"])
    rows = list(csv.reader(io.StringIO(upload(client, campaign, "ann@example.org\nbo@example.org\n").content.decode())))
    assert [m.to for m in mail.outbox] == [["ann@example.org"], ["bo@example.org"]]
    assert rows[1][1] in mail.outbox[0].body and rows[2][1] in mail.outbox[1].body


# --- completion codes -------------------------------------------------------------------------

def test_the_completion_code_shows_when_the_queue_is_done_and_matches_the_owners_list(client, cast, campaign):
    rater = User.objects.get(username="rater-a")
    client.force_login(rater)
    url = reverse("rate_completion_code", args=[campaign.project.slug, campaign.pk])
    from annotations.completion_codes import code_key
    # a key of its own, derived from SECRET_KEY for this purpose: never the raw secret
    assert code_key() != settings.SECRET_KEY.encode() and len(code_key()) == 32
    expected = hmac.new(code_key(), f"{campaign.pk}:{rater.pk}".encode(), hashlib.sha256).hexdigest()[:10].upper()
    assert expected != hmac.new(settings.SECRET_KEY.encode(), f"{campaign.pk}:{rater.pk}".encode(),
                                hashlib.sha256).hexdigest()[:10].upper()
    first = rater_item(campaign, rater)["item"]
    rating_record(campaign=campaign, user=rater, assignment_id=first["assignment"], grade=1)
    pending = client.get(url).content.decode()
    assert expected not in pending and "once every item" in pending
    assert rater_completion_code(campaign, rater) is None
    while (item := rater_item(campaign, rater)["item"]) is not None:
        rating_record(campaign=campaign, user=rater, assignment_id=item["assignment"], grade=2)
    assert expected in client.get(url).content.decode()
    assert 'id="rate-completion-code"' in client.get(reverse("rate_page", args=[campaign.project.slug, campaign.pk])
                                                      ).content.decode()
    owner = Client()
    owner.force_login(cast["owner"])
    response = owner.get(reverse("campaign_completion_codes", args=[campaign.project.slug, campaign.pk]))
    rows = {r["rater"]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}
    assert rows["rater-a"]["completion_code"] == expected and rows["rater-a"]["queue_done"] == "yes"
    assert rows["rater-b"]["queue_done"] == "no"
    assert AuditEntry.objects.filter(kind=AuditEntry.Kind.EXPORT, target__startswith="completion codes").exists()
    assert [r["code"] for r in completion_code_rows(campaign) if r["rater"] == "rater-a"] == [expected]


# --- throttling and access --------------------------------------------------------------------

def test_repeated_bad_passwords_on_the_accept_form_lock_it_like_the_login(client, cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    statuses = [sign_in(client, made.token, "outsider", f"wrong-{i}").status_code
                for i in range(settings.AXES_FAILURE_LIMIT)]
    assert statuses[:-1] == [400] * (settings.AXES_FAILURE_LIMIT - 1) and statuses[-1] == 429
    locked = sign_in(client, made.token, "outsider", "pw-for-tests-only")
    assert locked.status_code == 429 and "Too many failed attempts" in locked.content.decode()
    assert not Membership.objects.filter(project=campaign.project, user=cast["outsider"]).exists()
    assert RaterInvite.objects.get().used_at is None
    # the lock is the login's: the login page refuses this name from this address too
    assert client.post(reverse("login"), {"username": "outsider", "password": "pw-for-tests-only"}).status_code == 429
    # another address is not locked
    assert sign_in(Client(), made.token, "outsider", "pw-for-tests-only", REMOTE_ADDR="10.9.8.7").status_code == 302


def test_asking_which_usernames_are_taken_is_throttled_per_link(client, cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    # each "taken" answer counts: the link holder cannot list the accounts of the server
    names = list(User.objects.order_by("pk").values_list("username", flat=True)[:settings.AXES_FAILURE_LIMIT])
    assert len(names) == settings.AXES_FAILURE_LIMIT
    taken = [new_account(client, made.token, name) for name in names]
    assert [r.status_code for r in taken[:-1]] == [400] * (settings.AXES_FAILURE_LIMIT - 1)
    assert "taken" in taken[0].content.decode() and taken[-1].status_code == 429
    # locked now, even for a free name; nothing was made and the link is still open
    assert new_account(client, made.token, "free-name").status_code == 429
    assert not User.objects.filter(username="free-name").exists() and RaterInvite.objects.get().used_at is None
    # a free name from another address still joins
    assert new_account(Client(), made.token, "free-name", REMOTE_ADDR="10.9.8.6").status_code == 302


def test_an_integrity_error_other_than_the_name_is_not_reported_as_a_taken_name(cast, campaign, monkeypatch):
    made = invite_create(campaign=campaign, by=cast["owner"])

    def clash(**kwargs):
        raise IntegrityError("another constraint")

    monkeypatch.setattr("annotations.invites.rater_add", clash)
    with pytest.raises(IntegrityError):
        invite_accept(token=made.token, new_username="clash-user", new_password=STRONG)
    assert not User.objects.filter(username="clash-user").exists() and RaterInvite.objects.get().used_at is None


def test_forms_need_the_csrf_token(cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    strict = Client(enforce_csrf_checks=True)
    assert new_account(strict, made.token, "no-csrf").status_code == 403
    strict.force_login(cast["owner"])
    assert strict.post(reverse("campaign_invite_create", args=[campaign.project.slug, campaign.pk]),
                       {"days": "7"}).status_code == 403
    assert RaterInvite.objects.count() == 1 and not User.objects.filter(username="no-csrf").exists()


OWNER_PAGES = [("campaign_invites", "get"), ("campaign_invite_create", "post"), ("campaign_invite_bulk", "post"),
               ("campaign_deal_open_items", "post"), ("campaign_completion_codes", "get")]


@pytest.mark.parametrize("who, status", [("owner", None), ("analyst", 403), ("viewer", 403), ("rater", 403),
                                         ("outsider", 404), ("anonymous", 302)])
def test_invite_pages_per_role(client, cast, campaign, who, status):
    made = invite_create(campaign=campaign, by=cast["owner"])
    if who != "anonymous":
        client.force_login(cast[who])
    slug, pk = campaign.project.slug, campaign.pk
    for name, method in OWNER_PAGES + [("campaign_invite_revoke", "post")]:
        args = [slug, pk, made.invite.pk] if name == "campaign_invite_revoke" else [slug, pk]
        response = getattr(client, method)(reverse(name, args=args))
        if status is None:
            assert response.status_code in (200, 302, 400), name
        else:
            assert response.status_code == status, name
    if status is not None:
        assert RaterInvite.objects.get().revoked_at is None and RaterInvite.objects.count() == 1
    # the rater's code page: raters of the campaign only
    code = client.get(reverse("rate_completion_code", args=[slug, pk]))
    assert code.status_code == {"owner": 403, "rater": 404, "anonymous": 302}.get(who, 404 if who == "outsider" else 403)


def test_the_campaign_page_has_the_invites_section_and_one_click_removal(client, cast, campaign):
    client.force_login(cast["owner"])
    slug, pk = campaign.project.slug, campaign.pk
    page = client.get(reverse("campaign_detail", args=[slug, pk])).content.decode()
    assert 'id="invites"' in page and reverse("campaign_invite_create", args=[slug, pk]) in page
    rater_add(campaign=campaign, username="rater-c")  # someone to take rater-b's open items
    assert client.post(reverse("campaign_rater_remove", args=[slug, pk]), {"username": "rater-b"}).status_code == 302
    assert not CampaignRater.objects.get(campaign=campaign, user__username="rater-b").active
    entry = AuditEntry.objects.get(project=campaign.project, target__startswith="removed rater-b as a rater")
    assert f"({campaign.items.count()} open items moved)" in entry.target
    assert entry.username == "owner-user" and entry.path.endswith("/raters/remove/")


# --- two people, one link, the same moment ----------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_two_concurrent_accepts_attach_one_account(project):
    run = finished_run(project, people=2)
    add_raters(project, ["conc-a", "conc-b"])
    c = campaign_create(run=run, name="concurrent invites", conditions=CONDITIONS, raters=["conc-a", "conc-b"], seed=3)
    made = invite_create(campaign=c)
    start = threading.Barrier(2)
    results = {}

    def accept(name):
        try:
            start.wait(10)
            invite_accept(token=made.token, new_username=name, new_password=STRONG)
            results[name] = "in"
        except InviteError as e:
            results[name] = str(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=accept, args=(name,)) for name in ("racer-1", "racer-2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results.values())[1] == "in" and "used already" in sorted(results.values())[0]
    winner = next(name for name, r in results.items() if r == "in")
    assert list(User.objects.filter(username__startswith="racer-").values_list("username", flat=True)) == [winner]
    assert list(CampaignRater.objects.filter(campaign=c, user__username__startswith="racer-")
                .values_list("user__username", flat=True)) == [winner]
    assert RaterInvite.objects.get().used_by.username == winner


@override_settings(EMAIL_HOST="smtp.example.org")
def test_a_mail_server_that_fails_still_gives_the_owner_the_links(client, cast, campaign, monkeypatch):
    import smtplib
    from annotations.web.invites import views

    def refuse(*args, **kwargs):
        raise smtplib.SMTPException("relay refused")
    monkeypatch.setattr(views, "invite_links_mail", refuse)
    client.force_login(cast["owner"])
    response = upload(client, campaign, "ann@example.org\n")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert response.status_code == 200 and len(rows) == 2 and RaterInvite.objects.count() == 1
    page = client.get(reverse("campaign_invites", args=[campaign.project.slug, campaign.pk])).content.decode()
    assert "could not be sent by e-mail" in page
    # the account made from this address's link carries the address
    token = rows[1][1].rstrip("/").rsplit("/", 1)[1]
    assert new_account(Client(), token, "ann").status_code == 302
    assert User.objects.get(username="ann").email == "ann@example.org"


def test_an_existing_rater_of_the_project_joins_without_a_membership_change(client, cast, campaign):
    made = invite_create(campaign=campaign, by=cast["owner"])
    assert sign_in(client, made.token, "rater-c", "pw-for-tests-only").status_code == 302
    assert CampaignRater.objects.get(campaign=campaign, user__username="rater-c").active
    entries = member_entries(campaign.project)
    assert not any(t.startswith("added rater-c") for t in entries)
    assert any(t.startswith("rater-c accepted rater invite") for t in entries)
    # already rating: a second invite is refused and stays unused
    second = invite_create(campaign=campaign, by=cast["owner"])
    refused = sign_in(Client(), second.token, "rater-c", "pw-for-tests-only")
    assert refused.status_code == 409 and "already rates" in refused.content.decode()
    assert RaterInvite.objects.get(pk=second.invite.pk).used_at is None


def test_dealing_moves_only_unseen_first_showings_and_keeps_each_repeat_with_its_rater(cast, rated_run):
    c = campaign_create(run=rated_run, name="with repeats", conditions=CONDITIONS, raters=["rater-a", "rater-b"],
                        seed=4, repeat_percent=50)
    a = User.objects.get(username="rater-a")
    rater_item(c, a)  # a has seen their first item: it stays theirs
    seen = Assignment.objects.get(campaign=c, rater=a, served_at__isnull=False)
    invite_accept(token=invite_create(campaign=c).token, new_username="crowd-2", new_password=STRONG)
    before = {x.pk: x for x in Assignment.objects.filter(campaign=c)}
    open_total = sum(1 for x in before.values() if x.status == Assignment.Status.OPEN)
    dealt = open_items_deal(campaign=c)
    moved = [x for x in Assignment.objects.filter(campaign=c, status=Assignment.Status.REASSIGNED)]
    assert 0 < dealt["crowd-2"] <= open_total // 3 and len(moved) == dealt["crowd-2"]
    repeats = {(x.rater_id, x.item_id) for x in before.values() if x.showing == 2}
    for row in moved:
        assert row.showing == 1 and row.served_at is None and (row.rater_id, row.item_id) not in repeats
    assert Assignment.objects.get(pk=seen.pk).status == Assignment.Status.OPEN
    current = Assignment.objects.filter(campaign=c, showing=1).exclude(status=Assignment.Status.REASSIGNED)
    for item in c.items.all():
        holders = list(current.filter(item=item).values_list("rater_id", flat=True))
        assert len(holders) == 2 and len(set(holders)) == 2


def test_the_owners_csvs_neutralise_formulas_in_addresses_and_usernames(client, cast, campaign):
    client.force_login(cast["owner"])
    base = f"/p/{campaign.project.slug}/ratings/{campaign.pk}/invites/"
    upload = SimpleUploadedFile("emails.csv", b"email\n=cmd|'/Ccalc'!A0@x.com\n")
    response = client.post(base + "bulk/", {"addresses": upload, "days": "7"})
    text = response.content.decode()
    assert response.status_code == 200 and "'=cmd" in text and '"=cmd' not in text
    User.objects.filter(username="rater-a").update(username="+1+1")
    codes = client.get(f"/p/{campaign.project.slug}/ratings/{campaign.pk}/completion-codes.csv").content.decode()
    assert "'+1+1" in codes and '"+1+1' not in codes


def test_a_name_taken_after_the_forms_check_counts_like_the_forms_taken_answer(client, cast, campaign, monkeypatch):
    made = invite_create(campaign=campaign, by=cast["owner"])
    # Every name passes the form's check, as when another request creates it in between: the insert refuses.
    monkeypatch.setattr("annotations.web.invites.forms.AcceptNewForm.clean_username",
                        lambda form: form.cleaned_data["username"])
    names = list(User.objects.order_by("pk").values_list("username", flat=True)[:settings.AXES_FAILURE_LIMIT])
    raced = [new_account(client, made.token, name) for name in names]
    assert [r.status_code for r in raced[:-1]] == [409] * (settings.AXES_FAILURE_LIMIT - 1)
    assert "is taken" in raced[0].content.decode() and raced[-1].status_code == 429
    assert new_account(client, made.token, "free-name").status_code == 429
    assert not User.objects.filter(username="free-name").exists() and RaterInvite.objects.get().used_at is None
