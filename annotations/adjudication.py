"""Items whose raters differ by two or more grades, and the owner's decision on them.

The adjudicated grade is stored on its own (Adjudication) and never overwrites a rating.
"""
from __future__ import annotations

from collections import defaultdict

from django.db import transaction
from django.utils import timezone

from annotations.models import FIRST_SHOWING, Adjudication, HumanGrade, RatingCampaign, RatingItem

# Raters this far apart disagree about the substance, not a boundary.
ADJUDICATION_SPREAD = 2


class AdjudicationError(ValueError):
    """Input an owner can fix; nothing was written."""


def item_grades(campaign: RatingCampaign) -> dict[int, list[int]]:
    """item id → the graded ratings (flag-only ratings have no grade and are left out)."""
    grades = defaultdict(list)
    for item_id, grade in (HumanGrade.objects.filter(assignment__campaign=campaign, grade__isnull=False,
                                                     assignment__showing=FIRST_SHOWING)
                           .order_by("assignment__item_id", "assignment__rater__username")
                           .values_list("assignment__item_id", "grade")):
        grades[item_id].append(grade)
    return grades


def disputed_items(campaign: RatingCampaign) -> list[int]:
    """Ids of the items whose graded ratings differ by ADJUDICATION_SPREAD or more."""
    return [item_id for item_id, g in item_grades(campaign).items() if max(g) - min(g) >= ADJUDICATION_SPREAD]


def adjudication_queue(campaign: RatingCampaign) -> list[dict]:
    """Items with a spread of ADJUDICATION_SPREAD or more, with their texts, grades and any decision.

    For owners only: it shows who graded what.
    """
    disputed = disputed_items(campaign)
    items = (RatingItem.objects.filter(pk__in=disputed)
             .select_related("task__question_turn", "task__answer_turn", "prediction", "adjudication")
             .order_by("number"))
    ratings = defaultdict(list)
    for item_id, username, grade, note, flagged in (
            HumanGrade.objects.filter(assignment__item_id__in=disputed, assignment__showing=FIRST_SHOWING)
            .order_by("assignment__rater__username")
            .values_list("assignment__item_id", "assignment__rater__username", "grade", "note", "flagged")):
        ratings[item_id].append({"rater": username, "grade": grade, "note": note, "flagged": flagged})
    rows = []
    for item in items:
        decision = getattr(item, "adjudication", None)
        rows.append({
            "item": item, "number": item.number, "question": item.task.question_turn.text,
            "reference": item.task.answer_turn.text, "answer": item.prediction.text,
            "ratings": ratings[item.pk], "judge_score": item.judge_score, "decision": decision,
        })
    return rows


@transaction.atomic
def adjudicate(*, campaign: RatingCampaign, number: int, grade, note: str = "", user=None) -> Adjudication:
    """Record (or revise) the owner's grade for a disputed item."""
    try:
        value = int(grade)
    except (TypeError, ValueError):
        raise AdjudicationError("an adjudicated grade is 0, 1, 2 or 3") from None
    if value not in (0, 1, 2, 3):
        raise AdjudicationError("an adjudicated grade is 0, 1, 2 or 3")
    item = RatingItem.objects.filter(campaign=campaign, number=number).first()
    if item is None:
        raise AdjudicationError(f"this campaign has no item {number}")
    grades = list(HumanGrade.objects.filter(assignment__item=item, grade__isnull=False, assignment__showing=FIRST_SHOWING)
                  .values_list("grade", flat=True))
    if not grades or max(grades) - min(grades) < ADJUDICATION_SPREAD:
        raise AdjudicationError(f"item {number} is not disputed: its raters differ by less than {ADJUDICATION_SPREAD}")
    decision, _ = Adjudication.objects.update_or_create(
        item=item, defaults={"grade": value, "note": (note or "").strip(), "decided_at": timezone.now(),
                             "decided_by": user})
    return decision
