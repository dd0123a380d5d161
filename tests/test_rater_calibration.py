"""Calibration round, qualification and hidden gold checks."""
import pytest
from django.urls import reverse

from annotations.calibration import (
    CalibrationError, calibration_answer, calibration_item_set, calibration_let_in, calibration_state, rater_quality,
)
from annotations.campaign_agreement import campaign_table
from annotations.campaigns import campaign_create, gold_set
from annotations.models import Assignment, CalibrationAnswer, HumanGrade
from annotations.rating import CALIBRATION_FIRST, RatingError, rater_item, rating_record
from tests.annotations_helpers import CONDITIONS, RATERS


@pytest.fixture
def calibrated(rated_run, cast):
    """A campaign with a 100% pass mark and two calibration items (gold 3 and 1)."""
    campaign = campaign_create(run=rated_run, name="cal", conditions=CONDITIONS, raters=RATERS[:2],
                               user=cast["owner"], seed=5, qualification_percent=100)
    for number, grade in ((1, 3), (2, 1)):
        gold_set(campaign=campaign, number=number, grade=grade)
        calibration_item_set(campaign=campaign, number=number, on=True, note=f"because {grade}")
    return campaign


def rater(campaign, name=RATERS[0]):
    return campaign.raters.get(user__username=name).user


def test_calibration_items_leave_every_queue_and_the_campaigns_numbers(calibrated):
    assert not Assignment.objects.filter(item__calibration=True).exclude(status=Assignment.Status.REASSIGNED).exists()
    table, _ = campaign_table(calibrated)
    assert 1 not in table.numbers and 2 not in table.numbers
    assert len(table.numbers) == calibrated.items.count() - 2


def test_a_rater_rates_nothing_before_passing_and_enters_after(calibrated):
    user = rater(calibrated)
    with pytest.raises(RatingError, match="calibration round"):
        rater_item(calibrated, user)
    any_open = Assignment.objects.filter(campaign=calibrated, rater=user, status=Assignment.Status.OPEN).first()
    with pytest.raises(RatingError, match="calibration round"):
        rating_record(campaign=calibrated, user=user, assignment_id=any_open.pk, grade=2)
    state = calibration_state(calibrated, user)
    assert state["item"]["number"] == 1 and state["item"]["of"] == 2
    first = calibration_answer(campaign=calibrated, user=user, number=1, grade=3)
    assert (first["exact"], first["gold"], first["note"], first["passed"]) == (True, 3, "because 3", None)
    with pytest.raises(CalibrationError, match="already graded"):
        calibration_answer(campaign=calibrated, user=user, number=1, grade=2)
    second = calibration_answer(campaign=calibrated, user=user, number=2, grade=1)
    assert second["passed"] is True and second["score"]["percent"] == 100.0
    assert rater_item(calibrated, user)["item"] is not None       # the queue is open now


def test_under_the_pass_mark_the_rater_waits_for_the_owner_who_may_let_them_retry(calibrated):
    user = rater(calibrated)
    calibration_answer(campaign=calibrated, user=user, number=1, grade=3)
    verdict = calibration_answer(campaign=calibrated, user=user, number=2, grade=3)   # gold is 1
    assert verdict["passed"] is False and verdict["score"]["exact"] == 1
    with pytest.raises(RatingError, match="calibration round"):
        rater_item(calibrated, user)
    quality = rater_quality(calibrated)[user.pk]
    assert quality["failed_calibration"] and quality["flagged"]
    calibration_let_in(campaign=calibrated, username=user.username, retry=True)
    state = calibration_state(calibrated, user)
    assert state["score"]["attempt"] == 2 and state["item"]["number"] == 1    # a fresh attempt
    calibration_answer(campaign=calibrated, user=user, number=1, grade=3)
    assert calibration_answer(campaign=calibrated, user=user, number=2, grade=1)["passed"] is True
    assert CalibrationAnswer.objects.filter(rater=user).count() == 4          # both attempts kept


def test_the_owner_may_let_a_rater_in_and_then_they_rate(calibrated):
    user = rater(calibrated)
    calibration_let_in(campaign=calibrated, username=user.username, retry=False)
    item = rater_item(calibrated, user)["item"]
    rating_record(campaign=calibrated, user=user, assignment_id=item["assignment"], grade=2)
    assert HumanGrade.objects.filter(assignment_id=item["assignment"]).exists()


def test_a_rated_item_cannot_become_a_calibration_item_and_an_item_needs_a_gold_grade(campaign):
    user = rater(campaign)
    item = rater_item(campaign, user)["item"]
    rating_record(campaign=campaign, user=user, assignment_id=item["assignment"], grade=2)
    number = Assignment.objects.get(pk=item["assignment"]).item.number
    gold_set(campaign=campaign, number=number, grade=2)
    with pytest.raises(CalibrationError, match="already rated"):
        calibration_item_set(campaign=campaign, number=number, on=True)
    other = campaign.items.exclude(number=number).first()
    with pytest.raises(CalibrationError, match="no gold grade"):
        calibration_item_set(campaign=campaign, number=other.number, on=True)
    with pytest.raises(CalibrationError, match="NUL"):
        calibration_item_set(campaign=campaign, number=number, on=False, note="x\x00")


def test_hidden_gold_checks_flag_a_rater_under_the_pass_mark(campaign):
    campaign.qualification_percent = 60
    campaign.save()
    a, b = rater(campaign, RATERS[0]), rater(campaign, RATERS[1])
    for user, grade in ((a, 3), (b, 0)):
        while (view := rater_item(campaign, user))["item"] is not None:
            rating_record(campaign=campaign, user=user, assignment_id=view["item"]["assignment"], grade=grade)
    for item in campaign.items.all():                       # every item gold at 3: a is right, b wrong
        gold_set(campaign=campaign, number=item.number, grade=3)
    quality = rater_quality(campaign)
    assert quality[a.pk]["gold_exact_percent"] == 100.0 and not quality[a.pk]["flagged"]
    assert quality[b.pk]["gold_exact_percent"] == 0.0 and quality[b.pk]["flagged"]
    assert quality[a.pk]["gold_checks"] == Assignment.objects.filter(campaign=campaign, rater=a).count()


def test_the_pages_send_the_rater_to_calibration_and_give_feedback(calibrated, client):
    user = rater(calibrated)
    client.force_login(user)
    slug = calibrated.project.slug
    response = client.get(reverse("rate_page", args=[slug, calibrated.pk]))
    assert response.status_code == 302 and response.url == reverse("rate_calibrate", args=[slug, calibrated.pk])
    page = client.get(response.url).content.decode()
    assert "Item 1 of 2" in page
    feedback = client.post(response.url, {"number": "1", "grade": "2"}).content.decode()
    assert 'id="feedback-gold">3<' in feedback and "because 3" in feedback
    bad = client.post(response.url, {"number": "1", "grade": "9"})
    assert bad.status_code == 400
    assert client.get(reverse("rate_item", args=[slug, calibrated.pk])).json()["error"] == CALIBRATION_FIRST


@pytest.mark.parametrize("who, status", [("owner", 200), ("analyst", 403), ("viewer", 403), ("outsider", 404)])
def test_only_owners_open_the_calibration_settings(calibrated, cast, client, who, status):
    client.force_login(cast[who])
    url = reverse("campaign_calibration", args=[calibrated.project.slug, calibrated.pk])
    assert client.get(url).status_code == status
    client.post(url, {"action": "pass_mark", "qualification_percent": "0"})
    calibrated.refresh_from_db()
    assert calibrated.qualification_percent == (0 if who == "owner" else 100)


def test_the_owner_page_sets_items_and_lets_raters_in(calibrated, cast, client):
    client.force_login(cast["owner"])
    url = reverse("campaign_calibration", args=[calibrated.project.slug, calibrated.pk])
    page = client.get(url).content.decode()
    assert "The calibration round is on" in page and "because 3" in page
    user = rater(calibrated)
    calibration_answer(campaign=calibrated, user=user, number=1, grade=0)
    calibration_answer(campaign=calibrated, user=user, number=2, grade=0)
    assert "Let in" in client.get(url).content.decode()
    client.post(url, {"action": "let_in", "username": user.username})
    assert rater_item(calibrated, user)["item"] is not None
    response = client.post(url, {"action": "calibration", "number": "99999", "on": "on"})
    assert response.status_code == 302


def test_switching_calibration_on_mid_campaign_keeps_raters_who_rated_in_their_queue(campaign):
    a, b = rater(campaign, RATERS[0]), rater(campaign, RATERS[1])
    item = rater_item(campaign, a)["item"]
    rating_record(campaign=campaign, user=a, assignment_id=item["assignment"], grade=2)   # a has rated, b not
    campaign.qualification_percent = 80
    campaign.save()
    number = campaign.items.exclude(assignments__rating__isnull=False).order_by("number").first().number
    gold_set(campaign=campaign, number=number, grade=1)
    calibration_item_set(campaign=campaign, number=number, on=True)
    assert rater_item(campaign, a)["item"] is not None          # a keeps rating
    with pytest.raises(RatingError, match="calibration round"):
        rater_item(campaign, b)                                  # b calibrates first
