"""Calibration and qualification of raters, and the hidden gold checks of the queue.

An owner turns gold items into calibration items (`calibration_item_set`): they leave the raters'
queues and form the calibration round. When a campaign has calibration items and a pass mark
(`qualification_percent`), a rater grades every calibration item first, seeing the gold grade and
the owner's reason after each; with at least the pass mark graded exactly as gold they enter the
real queue, otherwise they wait for the owner, who may let them try again or let them in.
Calibration items never count in the campaign's numbers. Gold items left in the queues are hidden
checks: a rater whose exact share on them falls under the pass mark is flagged for the owner.
"""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from annotations.models import (
    FIRST_SHOWING, Assignment, CalibrationAnswer, CampaignRater, HumanGrade, RatingCampaign, RatingEvent, RatingItem,
)
from annotations.rating_sql import campaign_shared
from experiments.core.interviews.records import unstorable_text_problem

MAX_GOLD_NOTE_CHARS = 2000


class CalibrationError(ValueError):
    """Input a rater or an owner can fix; nothing was written."""


def calibration_items(campaign: RatingCampaign):
    return RatingItem.objects.filter(campaign=campaign, calibration=True).order_by("number")


def calibration_required(campaign: RatingCampaign) -> bool:
    return campaign.qualification_percent > 0 and calibration_items(campaign).exists()


def rater_qualified(campaign: RatingCampaign, user) -> bool:
    """May `user` rate the real queue? Always, unless the campaign has a calibration round they have not passed."""
    if not calibration_required(campaign):
        return True
    return CampaignRater.objects.filter(campaign=campaign, user=user, qualified_at__isnull=False).exists()


def _score(campaign: RatingCampaign, rater: CampaignRater) -> dict:
    answers = {a.item_id: a.grade for a in CalibrationAnswer.objects.filter(
        campaign=campaign, rater_id=rater.user_id, attempt=rater.calibration_attempt)}
    items = list(calibration_items(campaign).values_list("pk", "gold_grade"))
    exact = sum(answers.get(pk) == gold for pk, gold in items)
    return {"items": len(items), "answered": sum(pk in answers for pk, _ in items), "exact": exact,
            "percent": round(100 * exact / len(items), 1) if items else None,
            "pass_mark": campaign.qualification_percent, "attempt": rater.calibration_attempt}


def calibration_state(campaign: RatingCampaign, user) -> dict:
    """What the rater's calibration page shows: the next item, or the verdict."""
    rater = CampaignRater.objects.filter(campaign=campaign, user=user, active=True).first()
    if rater is None:
        raise CalibrationError("you are not (or no longer) a rater of this campaign")
    score = _score(campaign, rater)
    state = {"score": score, "qualified": rater.qualified_at is not None, "item": None}
    if state["qualified"] or not calibration_required(campaign):
        return {**state, "qualified": True}
    answered = set(CalibrationAnswer.objects.filter(campaign=campaign, rater=user, attempt=rater.calibration_attempt)
                   .values_list("item_id", flat=True))
    nxt = (calibration_items(campaign).exclude(pk__in=answered)
           .select_related("task__question_turn", "task__answer_turn", "prediction").first())
    if nxt is not None:
        state["item"] = {"number": nxt.number, "question": nxt.task.question_turn.text,
                         "reference": nxt.task.answer_turn.text, "answer": nxt.prediction.text,
                         "position": score["answered"] + 1, "of": score["items"]}
    return state


@transaction.atomic
def calibration_answer(*, campaign: RatingCampaign, user, number: int, grade: int) -> dict:
    """Record the rater's grade of calibration item `number`; returns the feedback (gold grade and
    the owner's reason) and, after the last item, whether they passed."""
    campaign = campaign_shared(campaign)
    if not campaign.is_open():
        raise CalibrationError("this campaign is closed")
    rater = CampaignRater.objects.select_for_update().filter(campaign=campaign, user=user, active=True).first()
    if rater is None:
        raise CalibrationError("you are not (or no longer) a rater of this campaign")
    if rater.qualified_at is not None:
        raise CalibrationError("you have passed the calibration round; your queue is open")
    if type(grade) is not int or grade not in (0, 1, 2, 3):
        raise CalibrationError("grades are 0, 1, 2 or 3")
    item = calibration_items(campaign).filter(number=number).first()
    if item is None:
        raise CalibrationError(f"item {number} is not a calibration item of this campaign")
    _, created = CalibrationAnswer.objects.get_or_create(
        campaign=campaign, item=item, rater=user, attempt=rater.calibration_attempt,
        defaults={"grade": grade, "answered_at": timezone.now()})
    if not created:
        raise CalibrationError("you have already graded this calibration item in this attempt")
    score = _score(campaign, rater)
    passed = None
    if score["answered"] == score["items"]:
        passed = score["percent"] >= campaign.qualification_percent
        if passed:
            rater.qualified_at = timezone.now()
            rater.save(update_fields=["qualified_at"])
    return {"number": number, "grade": grade, "gold": item.gold_grade, "note": item.gold_note,
            "exact": grade == item.gold_grade, "score": score, "passed": passed}


@transaction.atomic
def calibration_item_set(*, campaign: RatingCampaign, number: int, on: bool, note: str = "", by=None) -> RatingItem:
    """Make gold item `number` a calibration item (out of every queue) or put it back (owners)."""
    campaign = RatingCampaign.objects.select_for_update().get(pk=campaign.pk)
    if not campaign.is_open():
        raise CalibrationError("this campaign is closed")
    note = (note or "").strip()
    if len(note) > MAX_GOLD_NOTE_CHARS:
        raise CalibrationError(f"the reason is at most {MAX_GOLD_NOTE_CHARS} characters")
    if problem := unstorable_text_problem(note):
        raise CalibrationError(f"the reason {problem}")
    item = RatingItem.objects.select_for_update().filter(campaign=campaign, number=number).first()
    if item is None:
        raise CalibrationError(f"this campaign has no item {number}")
    if on:
        if item.gold_grade is None:
            raise CalibrationError(f"item {number} has no gold grade; set one first")
        if HumanGrade.objects.filter(assignment__item=item).exists():
            raise CalibrationError(f"item {number} is already rated in a queue; choose an item nobody has rated")
        withdrawn = list(Assignment.objects.filter(item=item, status=Assignment.Status.OPEN))
        Assignment.objects.filter(pk__in=[a.pk for a in withdrawn]).update(status=Assignment.Status.REASSIGNED)
        RatingEvent.objects.bulk_create([RatingEvent(assignment=a, kind=RatingEvent.Kind.REASSIGN, at=timezone.now(),
                                                     by=by) for a in withdrawn])
    elif item.calibration and CalibrationAnswer.objects.filter(item=item).exists():
        raise CalibrationError(f"item {number} has calibration answers; it stays a calibration item")
    item.calibration, item.gold_note = on, note
    item.save(update_fields=["calibration", "gold_note"])
    if on:
        qualify_raters_already_rating(campaign)
    return item


def qualify_raters_already_rating(campaign: RatingCampaign) -> int:
    """When the round is switched on mid-campaign, the raters who have rated already keep their
    queue (their ratings were made before any qualification was asked); returns how many."""
    if not calibration_required(campaign):
        return 0
    rated = HumanGrade.objects.filter(campaign=campaign).values("rater_id")
    return CampaignRater.objects.filter(campaign=campaign, qualified_at__isnull=True, user_id__in=rated).update(
        qualified_at=timezone.now())


@transaction.atomic
def calibration_let_in(*, campaign: RatingCampaign, username: str, retry: bool) -> CampaignRater:
    """An owner's decision on a rater who did not pass: another attempt (`retry`) or straight in."""
    rater = (CampaignRater.objects.select_for_update().filter(campaign=campaign, user__username=username, active=True)
             .first())
    if rater is None:
        raise CalibrationError(f"{username} is not an active rater of this campaign")
    if rater.qualified_at is not None:
        raise CalibrationError(f"{username} is already in the queue")
    if retry:
        rater.calibration_attempt += 1
        rater.save(update_fields=["calibration_attempt"])
    else:
        rater.qualified_at = timezone.now()
        rater.save(update_fields=["qualified_at"])
    return rater


def rater_quality(campaign: RatingCampaign) -> dict[int, dict]:
    """user id → calibration verdict and hidden-gold accuracy, with `flagged` when either is under
    the pass mark (owners' page)."""
    gold = dict(RatingItem.objects.filter(campaign=campaign, calibration=False, gold_grade__isnull=False)
                .values_list("pk", "gold_grade"))
    checks: dict[int, list[bool]] = {}
    for user_id, item_id, grade in (HumanGrade.objects.filter(
            campaign=campaign, grade__isnull=False, assignment__item_id__in=gold,
            assignment__showing=FIRST_SHOWING).values_list("rater_id", "assignment__item_id", "grade")):
        checks.setdefault(user_id, []).append(grade == gold[item_id])
    required = calibration_required(campaign)
    out = {}
    for rater in CampaignRater.objects.filter(campaign=campaign):
        hits = checks.get(rater.user_id, [])
        share = round(100 * sum(hits) / len(hits), 1) if hits else None
        score = _score(campaign, rater) if required else None
        failed = (required and rater.qualified_at is None and score["answered"] == score["items"]
                  and score["items"] > 0)
        below = share is not None and campaign.qualification_percent > 0 and share < campaign.qualification_percent
        out[rater.user_id] = {"gold_checks": len(hits), "gold_exact_percent": share, "calibration": score,
                              "qualified": rater.qualified_at is not None or not required,
                              "failed_calibration": failed, "flagged": failed or below}
    return out
