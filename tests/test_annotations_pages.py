"""Campaign and rating pages: roles, the no-reload JSON flow, and blinding on everything a rater reaches."""
import pytest
from django.urls import reverse

from annotations.models import Adjudication, Assignment, HumanGrade, RatingCampaign, RatingEvent
from annotations.rating import rater_item, rating_record
from experiments.models import Grade
from tests.annotations_helpers import CONDITIONS


def login(client, user):
    client.force_login(user)
    return client


def rater_user(campaign, name="rater-a"):
    return campaign.raters.get(user__username=name).user


def post_json(client, url, data):
    return client.post(url, data, HTTP_ACCEPT="application/json")


# --- blinding -------------------------------------------------------------------------------

def forbidden_strings(campaign):
    """What a rater must never see: conditions, models, judge grades and rationales, other raters, gold."""
    run = campaign.run
    protocol = run.protocol
    words = set(CONDITIONS) | set(protocol.conditions)
    words |= {protocol.judge["model"], protocol.generator["model"], protocol.name}
    words |= {r for r in Grade.objects.filter(run=run).values_list("rationale", flat=True) if r}
    words |= {"rater-b", "rater-c", "judge_score", "gold", "stratum", "conditions", "rationale", "adjudicat"}
    words |= {f"\"number\": {i}" for i in range(1, 3)}
    return words


def assert_blind(text, campaign):
    lowered = text.lower()
    leaks = sorted(w for w in forbidden_strings(campaign) if w.lower() in lowered)
    assert not leaks, f"a rater's page shows {leaks}"


def test_every_page_and_json_a_rater_reaches_is_blind(client, campaign):
    from annotations.campaigns import gold_set
    gold_set(campaign=campaign, number=1, grade=3)
    a, b = rater_user(campaign, "rater-a"), rater_user(campaign, "rater-b")
    # rater-b rates everything first, so another rater's grades exist to leak
    while (item := rater_item(campaign, b)["item"]) is not None:
        rating_record(campaign=campaign, user=b, assignment_id=item["assignment"], grade=0, note="rater-b's note")
    login(client, a)
    slug, pk = campaign.project.slug, campaign.pk
    pages = [reverse("project_list"), reverse("project_detail", args=[slug]), reverse("campaign_list", args=[slug]),
             reverse("rate_page", args=[slug, pk]), reverse("rate_item", args=[slug, pk]),
             reverse("rate_completion_code", args=[slug, pk])]
    seen_json = []
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert_blind(response.content.decode(), campaign)
        assert "rater-b's note" not in response.content.decode()
    # submit, undo and re-submit through the JSON flow: every answer is blind too
    for grade in ("3", "2", "1"):
        item = client.get(reverse("rate_item", args=[slug, pk])).json()["item"]
        response = post_json(client, reverse("rate_submit", args=[slug, pk]),
                             {"assignment": item["assignment"], "grade": grade})
        seen_json.append(response)
    seen_json.append(post_json(client, reverse("rate_undo", args=[slug, pk]), {}))
    seen_json.append(post_json(client, reverse("rate_submit", args=[slug, pk]), {"assignment": "x", "grade": "9"}))
    for response in seen_json:
        assert_blind(response.content.decode(), campaign)
        body = response.json()
        assert set(body) <= {"item", "done", "assigned", "seconds_spent", "campaign_open", "can_undo", "ok", "error"}
        if body.get("item"):
            assert set(body["item"]) == {"assignment", "question", "reference", "answer"}
    # a rater's refusals on the pages of other roles
    for name, args in [("campaign_detail", [slug, pk]), ("campaign_adjudication", [slug, pk]),
                       ("campaign_results", [slug, pk]), ("run_detail", [slug, campaign.run_id]),
                       ("prediction_list", [slug, campaign.run_id]), ("run_dashboard", [slug, campaign.run_id])]:
        response = client.get(reverse(name, args=args))
        assert response.status_code in (302, 403), name
        if response.status_code == 302:
            assert response.url == reverse("rate_page", args=[slug, pk])


def test_the_rating_page_shows_the_rubric_and_the_first_item(client, campaign):
    user = rater_user(campaign)
    login(client, user)
    page = client.get(reverse("rate_page", args=[campaign.project.slug, campaign.pk])).content.decode()
    item = rater_item(campaign, user)["item"]
    assert "comparable specificity" in page and "off-topic" in page  # the §3.2 rubric
    for key in ("question", "reference", "answer"):
        assert str(item[key]).replace("'", "&#x27;") in page
    assert 'src="/static/js/rating.js"' in page


def test_submit_json_returns_the_next_item_and_stores_before(client, campaign):
    user = rater_user(campaign)
    login(client, user)
    slug, pk = campaign.project.slug, campaign.pk
    first = client.get(reverse("rate_item", args=[slug, pk])).json()
    response = post_json(client, reverse("rate_submit", args=[slug, pk]),
                         {"assignment": first["item"]["assignment"], "grade": "2", "note": "ok", "seconds": "4.2"})
    body = response.json()
    assert response.status_code == 200 and body["ok"] == "stored" and body["done"] == 1
    assert body["item"]["assignment"] != first["item"]["assignment"]
    stored = HumanGrade.objects.get(assignment_id=first["item"]["assignment"])
    assert (stored.grade, stored.note, stored.seconds_spent) == (2, "ok", 4.2)
    bad = post_json(client, reverse("rate_submit", args=[slug, pk]),
                    {"assignment": body["item"]["assignment"], "grade": "7"})
    assert bad.status_code == 400 and "0, 1, 2 or 3" in bad.json()["error"]
    assert bad.json()["item"]["assignment"] == body["item"]["assignment"]  # still on the same item
    # without JavaScript: a plain form post redirects back to the page
    plain = client.post(reverse("rate_submit", args=[slug, pk]),
                        {"assignment": body["item"]["assignment"], "grade": "1"})
    assert plain.status_code == 302 and HumanGrade.objects.count() == 2


def test_bad_submissions_answer_with_the_raters_message_and_store_nothing(client, campaign):
    login(client, rater_user(campaign))
    slug, pk = campaign.project.slug, campaign.pk
    item = client.get(reverse("rate_item", args=[slug, pk])).json()["item"]["assignment"]
    for fields, message in (
        ({}, "choose a grade from 0 to 3 (or flag the item with a reason)"),
        ({"grade": "2.5"}, "'2.5' is not a grade; grades are 0, 1, 2 or 3"),
        ({"flagged": "1", "flag_reason": " "}, "say why you flag this item"),
        ({"grade": "1", "note": "x" * 2001}, "notes are at most 2000 characters"),
    ):
        response = post_json(client, reverse("rate_submit", args=[slug, pk]), {"assignment": item, **fields})
        assert response.status_code == 400 and response.json()["error"] == message, fields
        assert response.json()["item"]["assignment"] == item
    assert not HumanGrade.objects.exists() and not RatingEvent.objects.exists()


def test_rater_pages_refuse_strangers(client, cast, campaign):
    slug, pk = campaign.project.slug, campaign.pk
    url = reverse("rate_page", args=[slug, pk])
    login(client, cast["outsider"])
    assert client.get(url).status_code == 404
    login(client, cast["rater"])  # a rater of the project, not of this campaign
    assert client.get(url).status_code == 404
    login(client, cast["owner"])
    assert client.get(url).status_code == 403
    assert client.get(reverse("rate_item", args=[slug, pk])).status_code == 403


def test_a_removed_rater_is_told_why(client, campaign):
    from annotations.campaigns import rater_add, rater_remove
    rater_add(campaign=campaign, username="rater-c")
    rater_remove(campaign=campaign, username="rater-b")
    login(client, rater_user(campaign, "rater-b"))
    page = client.get(reverse("rate_page", args=[campaign.project.slug, campaign.pk]))
    assert page.status_code == 200 and "no longer" in page.content.decode()
    response = post_json(client, reverse("rate_submit", args=[campaign.project.slug, campaign.pk]),
                         {"assignment": "1", "grade": "1"})
    assert response.status_code == 400 and "no longer" in response.json()["error"]


# --- owners' pages --------------------------------------------------------------------------

def test_an_owner_creates_a_campaign_in_the_app(client, cast, rated_run):
    login(client, cast["owner"])
    slug = rated_run.protocol.project.slug
    url = reverse("campaign_create", args=[slug, rated_run.pk])
    page = client.get(url)
    assert page.status_code == 200 and "rater-a" in page.content.decode()
    response = client.post(url, {"name": "web", "conditions": CONDITIONS[:2], "sample": "all", "seed": "4",
                                 "ratings_per_item": "2", "raters": ["rater-a", "rater-b", "rater-c"]})
    campaign = RatingCampaign.objects.get(name="web")
    assert response.status_code == 302 and response.url == reverse("campaign_detail", args=[slug, campaign.pk])
    assert campaign.conditions == CONDITIONS[:2]
    detail = client.get(response.url).content.decode()
    assert all(name in detail for name in ("rater-a", "rater-b", "rater-c"))
    again = client.post(url, {"name": "web", "conditions": CONDITIONS[:2], "sample": "all", "seed": "4",
                              "ratings_per_item": "2", "raters": ["rater-a", "rater-b"]})
    assert again.status_code == 200 and "already exists" in again.content.decode()
    assert RatingCampaign.objects.count() == 1


@pytest.mark.parametrize("who, status", [("analyst", 403), ("viewer", 403), ("rater", 403), ("outsider", 404)])
def test_only_owners_create_campaigns(client, cast, rated_run, who, status):
    login(client, cast[who])
    url = reverse("campaign_create", args=[rated_run.protocol.project.slug, rated_run.pk])
    assert client.get(url).status_code == status
    assert client.post(url, {"name": "x"}).status_code == status


@pytest.mark.parametrize("who", ["analyst", "viewer", "outsider"])
def test_owner_actions_are_refused_to_others(client, cast, campaign, who):
    login(client, cast[who])
    slug, pk = campaign.project.slug, campaign.pk
    expected = 404 if who == "outsider" else 403
    for name in ("campaign_close", "campaign_reassign", "campaign_rater_add", "campaign_gold", "campaign_invite_create",
                 "campaign_invite_bulk", "campaign_deal_open_items"):
        assert client.post(reverse(name, args=[slug, pk]), {"username": "rater-a"}).status_code == expected
    campaign.refresh_from_db()
    assert campaign.is_open()


def test_owner_actions_from_the_campaign_page(client, cast, campaign):
    login(client, cast["owner"])
    slug, pk = campaign.project.slug, campaign.pk
    client.post(reverse("campaign_rater_add", args=[slug, pk]), {"username": "rater-c"})
    response = client.post(reverse("campaign_reassign", args=[slug, pk]), {"username": "rater-a"}, follow=True)
    assert "open items of rater-a went to the other raters" in response.content.decode()
    assert not Assignment.objects.filter(campaign=campaign, rater__username="rater-a",
                                         status=Assignment.Status.OPEN).exists()
    response = client.post(reverse("campaign_gold", args=[slug, pk]), {"number": "1", "grade": "9"}, follow=True)
    assert "gold grade of 0 to 3" in response.content.decode()
    client.post(reverse("campaign_gold", args=[slug, pk]), {"number": "2", "grade": "1"})
    assert campaign.items.get(number=2).gold_grade == 1
    client.post(reverse("campaign_close", args=[slug, pk]))
    campaign.refresh_from_db()
    assert not campaign.is_open()
    response = client.post(reverse("campaign_close", args=[slug, pk]), follow=True)
    assert "closed" in response.content.decode()


def test_adjudication_queue_and_a_decision_that_keeps_the_ratings(client, cast, campaign):
    a, b = rater_user(campaign, "rater-a"), rater_user(campaign, "rater-b")
    shared = Assignment.objects.filter(campaign=campaign, rater=a).first().item
    for user, grade in ((a, 0), (b, 3)):
        assignment = Assignment.objects.get(item=shared, rater=user)
        rating_record(campaign=campaign, user=user, assignment_id=assignment.pk, grade=grade)
    close = Assignment.objects.filter(campaign=campaign, rater=a).exclude(item=shared).first().item
    for user, grade in ((a, 1), (b, 2)):
        rating_record(campaign=campaign, user=user, assignment_id=Assignment.objects.get(item=close, rater=user).pk,
                      grade=grade)
    login(client, cast["owner"])
    slug, pk = campaign.project.slug, campaign.pk
    page = client.get(reverse("campaign_adjudication", args=[slug, pk])).content.decode()
    assert f'id="item-{shared.number}"' in page and f'id="item-{close.number}"' not in page
    client.post(reverse("campaign_adjudication", args=[slug, pk]), {"number": shared.number, "grade": "2"})
    assert Adjudication.objects.get(item=shared).grade == 2
    assert sorted(HumanGrade.objects.filter(assignment__item=shared).values_list("grade", flat=True)) == [0, 3]
    response = client.post(reverse("campaign_adjudication", args=[slug, pk]),
                           {"number": close.number, "grade": "2"}, follow=True)
    assert "not disputed" in response.content.decode()
    assert not Adjudication.objects.filter(item=close).exists()
    login(client, cast["analyst"])
    assert client.get(reverse("campaign_adjudication", args=[slug, pk])).status_code == 403


def test_the_campaign_list_per_role(client, cast, campaign):
    slug = campaign.project.slug
    login(client, rater_user(campaign))
    page = client.get(reverse("campaign_list", args=[slug])).content.decode()
    assert campaign.name in page and "Start rating" in page
    login(client, cast["rater"])  # a rater without items here
    assert campaign.name not in client.get(reverse("campaign_list", args=[slug])).content.decode()
    login(client, cast["owner"])
    page = client.get(reverse("campaign_list", args=[slug])).content.decode()
    assert campaign.name in page and reverse("campaign_create", args=[slug, campaign.run_id]) in page


def test_owner_pages_of_an_offline_campaign_name_the_stand_in(client, cast, campaign):
    """The campaign page, its results (raters vs judge) and adjudication say when the judge or
    the answers were the offline stand-in's; the rater's page stays blind; a model run says nothing."""
    from experiments.models import Protocol
    login(client, cast["owner"])
    slug, pk = campaign.project.slug, campaign.pk
    pages = [reverse(name, args=[slug, pk]) for name in ("campaign_detail", "campaign_results", "campaign_adjudication")]
    for url in pages:
        body = client.get(url).content.decode()
        assert body.count('id="offline-notice"') == 1, url
        assert f"the predicted answers and the judge's grades\n  of run {campaign.run_id} come from the offline stand-in" in body
    login(client, rater_user(campaign))
    assert 'offline-notice' not in client.get(reverse("rate_page", args=[slug, pk])).content.decode()
    Protocol.objects.filter(pk=campaign.run.protocol_id).update(
        generator={**campaign.run.protocol.generator, "provider": "openai"})
    login(client, cast["owner"])
    for url in pages:
        body = client.get(url).content.decode()
        assert body.count('id="offline-notice"') == 1 and "the predicted answers" not in body, url
        assert "the judge's grades\n  of run" in body
    Protocol.objects.filter(pk=campaign.run.protocol_id).update(judge={**campaign.run.protocol.judge, "provider": "openai"})
    for url in pages:
        body = client.get(url).content.decode()
        assert 'id="offline-notice"' not in body and campaign.name in body, url
