"""Completion codes: what a rater of a crowd platform pastes back there once their queue is done.

The code of (campaign, rater) is derived, never stored: HMAC-SHA256 over the two ids with a key of its
own (derived from SECRET_KEY for this one purpose by `salted_hmac`, never the raw secret), cut to 10
characters (`annotations.core.invite_codes.completion_code`). A rater sees theirs only
when their queue is done (nothing open, at least one rating) and they are still an active rater;
owners download every rater's code to check against the platform's list.
"""
from __future__ import annotations

from django.db.models import Count, Q
from django.utils.crypto import salted_hmac

from annotations.core.invite_codes import completion_code
from annotations.models import Assignment, CampaignRater, RatingCampaign


CODE_KEY_SALT = "ownwords.annotations.completion-code"


def code_key() -> bytes:
    """The completion codes' key: SECRET_KEY's HMAC under a salt of this purpose alone."""
    return salted_hmac(CODE_KEY_SALT, "completion codes", algorithm="sha256").digest()


def _code(campaign_id: int, rater_id: int) -> str:
    return completion_code(code_key(), campaign_id, rater_id)


def _counts(campaign: RatingCampaign, user_ids=None) -> dict[int, dict]:
    rows = Assignment.objects.filter(campaign=campaign)
    if user_ids is not None:
        rows = rows.filter(rater_id__in=user_ids)
    return {r["rater"]: r for r in rows.order_by().values("rater").annotate(
        done=Count("pk", filter=Q(status=Assignment.Status.DONE)),
        open=Count("pk", filter=Q(status=Assignment.Status.OPEN)))}


def _finished(counts: dict | None) -> bool:
    return bool(counts) and counts["open"] == 0 and counts["done"] > 0


def rater_completion_code(campaign: RatingCampaign, user) -> str | None:
    """The rater's code once their queue is done, else None."""
    if not CampaignRater.objects.filter(campaign=campaign, user=user, active=True).exists():
        return None
    counts = _counts(campaign, [user.pk]).get(user.pk)
    return _code(campaign.pk, user.pk) if _finished(counts) else None


def completion_code_rows(campaign: RatingCampaign) -> list[dict]:
    """Every rater of the campaign (by username) with their code and whether it has been shown to them."""
    counts = _counts(campaign)
    rows = []
    for rater in CampaignRater.objects.filter(campaign=campaign).select_related("user").order_by("user__username"):
        c = counts.get(rater.user_id)
        rows.append({"rater": rater.user.get_username(), "code": _code(campaign.pk, rater.user_id),
                     "queue_done": rater.active and _finished(c), "active": rater.active,
                     "rated": c["done"] if c else 0, "open": c["open"] if c else 0})
    return rows
