"""The rater's side: the next item, storing a rating, undo. The ONE place that chooses what a rater sees.

Blinding: a rater sees what the judge saw — question, reference answer,
predicted answer, rubric — and their own progress. Never the condition, the model, the
judge's grade or rationale, another rater's grade, gold status, or which items share a
text. `rater_item` builds that view from an explicit list of fields; nothing else of the
item reaches a rater's page or JSON.
A pair item (a pairwise campaign) shows the two answers as A and B, never which condition,
grade or side mapping is behind them (`annotations.pairwise.pair_view`). A content-check item
shows the question, an original and its paraphrase, never the condition or a grade
(`annotations.content_check.content_view`).
"""
from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Count, Max, Sum
from django.utils import timezone

from annotations.models import UNDO_WINDOW_S, Assignment, CampaignRater, HumanGrade, RatingCampaign, RatingEvent
from annotations.calibration import rater_qualified
from annotations.guidelines import GuidelinesError, rating_guidelines_version
from annotations.content_check import content_view, is_content_check
from annotations.pairwise import is_pairwise, pair_view
from annotations.rating_sql import campaign_shared
from experiments.core.interviews.records import unstorable_text_problem

# A reported time per item above this is a tab left open, not rating time.
MAX_SECONDS_PER_ITEM = 3600
MAX_NOTE_CHARS = 2000
GRADES = (0, 1, 2, 3)
PREFERENCES = ("a", "b", "tie")
SAME_CONTENT = ("yes", "partly", "no")
CALIBRATION_FIRST = "this campaign starts with a calibration round; pass it to open your queue"


class RatingError(ValueError):
    """A submission that cannot be stored; the message is for the rater. Nothing was written."""


def _active_rater(campaign: RatingCampaign, user, *, lock: bool = False) -> None:
    """Refuse a user who is not an active rater of `campaign`; `lock`: and lock their row."""
    raters = CampaignRater.objects.filter(campaign=campaign, user=user, active=True)
    if not (raters.select_for_update() if lock else raters).exists():
        raise RatingError("you are not (or no longer) a rater of this campaign")
    if not rater_qualified(campaign, user):
        raise RatingError(CALIBRATION_FIRST)


def rater_progress(campaign: RatingCampaign, user) -> dict:
    """done / assigned, time spent and whether an undo is possible: the rater's own numbers only.

    Two index reads whatever the queue's length: status counts from the queue index, time and
    the last rating from the ratings' (campaign, rater, created_at) index.
    """
    counts = dict(Assignment.objects.filter(campaign=campaign, rater=user).order_by()
                  .values_list("status").annotate(n=Count("pk")))
    own = HumanGrade.objects.filter(campaign=campaign, rater=user).aggregate(
        seconds=Sum("seconds_spent"), latest=Max("created_at"))
    return {
        "done": counts.get(Assignment.Status.DONE, 0),
        "assigned": counts.get(Assignment.Status.DONE, 0) + counts.get(Assignment.Status.OPEN, 0),
        "seconds_spent": round(own["seconds"] or 0.0, 1),
        "can_undo": own["latest"] is not None and _within_window(own["latest"]),
    }


def _within_window(created_at) -> bool:
    return timezone.now() - created_at <= timedelta(seconds=UNDO_WINDOW_S)


def _item_view(campaign: RatingCampaign, assignment: Assignment) -> dict:
    if is_content_check(campaign):  # an original and its paraphrase
        return content_view(assignment)
    if assignment.item.prediction_b_id is not None:  # a pair item: two answers as A and B
        return pair_view(assignment)
    task = assignment.item.task
    return {
        "assignment": assignment.pk,
        "question": task.question_turn.text,
        "reference": task.answer_turn.text,
        "answer": assignment.item.prediction.text,
    }


def rater_item(campaign: RatingCampaign, user) -> dict:
    """The rater's next open item (or none) and their progress, as shown to them.

    A constant number of queries whatever the campaign's size: the queue index finds the
    first open position, one join brings the texts.
    """
    _active_rater(campaign, user)
    assignment = (
        Assignment.objects.filter(campaign=campaign, rater=user, status=Assignment.Status.OPEN)
        .select_related("item__task__question_turn", "item__task__answer_turn", "item__prediction",
                        "item__prediction_b")
        .only("pk", "served_at", "x_on_a", "item__conditions", "item__prediction__text", "item__prediction_b__text",
              "item__prediction__evidence", "item__prediction_b__evidence",
              "item__task__question_turn__text", "item__task__answer_turn__text")
        .order_by("position")
        .first()
    )
    view = {"item": None, "campaign_open": campaign.is_open(), **rater_progress(campaign, user)}
    if assignment is not None:
        if assignment.served_at is None:
            # First showing starts the clock the server keeps beside the browser's.
            assignment.served_at = timezone.now()
            Assignment.objects.filter(pk=assignment.pk, served_at__isnull=True).update(served_at=assignment.served_at)
        view["item"] = _item_view(campaign, assignment)
    return view


def note_problem(value: str, *, what: str = "note") -> str | None:
    """Why a rater's free text cannot be stored: too long, or a NUL / lone surrogate; else None."""
    if len(value) > MAX_NOTE_CHARS:
        return f"{what}s are at most {MAX_NOTE_CHARS} characters"
    if problem := unstorable_text_problem(value):
        return f"the {what} {problem}"
    return None


def rating_problem(*, grade: int | None, flagged: bool, flag_reason: str, note: str = "", preference: str = "",
                   pairwise: bool = False, same_content: str = "", content_check: bool = False) -> str | None:
    """Why a rating with these values cannot be stored (the message for the rater), or None.

    The one statement of the rule, used by the rating form and by `rating_record` (which a
    command or a test may call without the form, so the texts are checked here too).
    """
    if problem := note_problem(note) or note_problem(flag_reason, what="flag reason"):
        return problem
    if flagged and not flag_reason:
        return "say why you flag this item"
    if content_check:  # an original and its paraphrase: yes, partly or no, never a grade or a side
        if grade is not None or preference:
            return "this item asks whether two texts say the same: choose Y (yes), P (partly) or N (no)"
        if not same_content:
            return None if flagged else "choose Y (yes), P (partly) or N (no), or flag the item with a reason"
        return None if same_content in SAME_CONTENT else (
            f"{same_content!r} is not a choice; choose Y (yes), P (partly) or N (no)")
    if same_content:
        return "this item takes a grade or a side, not a same-content answer"
    if pairwise:  # a pair item: a side or a tie, never a grade
        if grade is not None:
            return "this item compares two answers: choose A, B or a tie, not a grade"
        if not preference:
            return None if flagged else "choose A, B or T (a tie), or flag the item with a reason"
        return None if preference in PREFERENCES else f"{preference!r} is not a choice; choose A, B or T (a tie)"
    if preference:
        return "this item takes a grade from 0 to 3, not a side"
    if grade is None:
        return None if flagged else "choose a grade from 0 to 3 (or flag the item with a reason)"
    if type(grade) is not int or grade not in GRADES:
        return f"{grade!r} is not a grade; grades are 0, 1, 2 or 3"
    return None


def _seconds(reported: float | None, served_at, now) -> float | None:
    if reported is not None and 0 <= reported <= MAX_SECONDS_PER_ITEM:
        return round(reported, 2)
    if served_at is not None:
        return round(min((now - served_at).total_seconds(), MAX_SECONDS_PER_ITEM), 2)
    return None


@transaction.atomic
def rating_record(*, campaign: RatingCampaign, user, assignment_id: int, grade: int | None, note: str = "",
                  flagged: bool = False, flag_reason: str = "", seconds: float | None = None,
                  guidelines_version: int | None = None, preference: str = "", same_content: str = "") -> HumanGrade:
    """Store (or, within the undo window, change) the rater's rating of one assignment.

    Typed values, as `annotations.web.rating.forms.RatingForm` reads them from a request. The
    assignment row is locked (after the campaign row is read FOR SHARE, in the order the owner's
    services lock), so two tabs submitting at once are serialised: the second is an update of
    the first, never a second rating. Raters of one campaign lock different rows: none waits
    for another.
    """
    campaign = campaign_shared(campaign)
    if not campaign.is_open():
        raise RatingError("this campaign is closed; ratings are no longer taken")
    _active_rater(campaign, user)
    if problem := rating_problem(grade=grade, flagged=flagged, flag_reason=flag_reason, note=note,
                                 preference=preference, pairwise=is_pairwise(campaign), same_content=same_content,
                                 content_check=is_content_check(campaign)):
        raise RatingError(problem)
    try:
        guidelines_version = rating_guidelines_version(campaign, guidelines_version)
    except GuidelinesError as e:
        raise RatingError(str(e)) from None
    assignment = (Assignment.objects.select_for_update()
                  .filter(pk=assignment_id, campaign=campaign, rater=user).first())
    if assignment is None or assignment.status == Assignment.Status.REASSIGNED:
        raise RatingError("this item is not in your queue")
    now = timezone.now()
    fields = {"grade": grade, "note": note, "flagged": flagged, "flag_reason": flag_reason if flagged else "",
              "guidelines_version": guidelines_version, "preference": preference, "same_content": same_content}
    existing = HumanGrade.objects.filter(assignment=assignment).first()
    if existing is not None:
        if not _within_window(existing.created_at):
            raise RatingError("you rated this item more than "
                              f"{UNDO_WINDOW_S // 60} minutes ago; that rating is final")
        for name, v in fields.items():
            setattr(existing, name, v)
        existing.updated_at = now
        existing.save()
        kind, stored = RatingEvent.Kind.UPDATE, existing
    else:
        stored = HumanGrade.objects.create(
            assignment=assignment, campaign=campaign, rater=user, seconds_spent=_seconds(seconds, assignment.served_at, now),
            created_at=now, updated_at=now, **fields)
        Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.DONE)
        kind = RatingEvent.Kind.RATE
    RatingEvent.objects.create(assignment=assignment, kind=kind, grade=grade, flagged=flagged, at=now, by=user,
                               preference=preference, same_content=same_content)
    return stored


def _undoable(campaign, user) -> HumanGrade | None:
    """The rater's most recent rating, if still inside the undo window."""
    latest = HumanGrade.objects.filter(campaign=campaign, rater=user).order_by("-created_at", "-pk").first()
    if latest is None or not _within_window(latest.created_at):
        return None
    return latest


@transaction.atomic
def rating_undo(*, campaign: RatingCampaign, user) -> int:
    """Withdraw the rater's last rating; its item comes back to the head of their queue.

    Returns the assignment id. The event log keeps what was withdrawn. "Last" is the rater's
    own: their CampaignRater row is locked, so two undos at once withdraw their last two ratings
    (as they would one after the other); other raters lock other rows.
    """
    campaign = campaign_shared(campaign)
    if not campaign.is_open():
        raise RatingError("this campaign is closed; ratings can no longer be undone")
    _active_rater(campaign, user, lock=True)
    latest = _undoable(campaign, user)
    if latest is None:
        raise RatingError(f"nothing to undo: only your last rating, within {UNDO_WINDOW_S // 60} minutes, can be undone")
    assignment = Assignment.objects.select_for_update().get(pk=latest.assignment_id)
    latest.refresh_from_db()  # as a re-submission of this item, serialised by that lock, left it
    RatingEvent.objects.create(assignment=assignment, kind=RatingEvent.Kind.UNDO, grade=latest.grade,
                               flagged=latest.flagged, at=timezone.now(), by=user, preference=latest.preference,
                               same_content=latest.same_content)
    latest.delete()
    assignment.status = Assignment.Status.OPEN
    assignment.save(update_fields=["status"])
    return assignment.pk
