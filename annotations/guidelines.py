"""A campaign's rating guidelines: owners publish versions, raters read the latest, ratings record it.

Publishing never edits a version: it adds the next one (the campaign row is locked, so two owners
publishing at once get versions n and n+1). `annotations.core.guidelines_markup` renders and
sanitises the Markdown; the text is checked there too.
"""
from __future__ import annotations

from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.safestring import mark_safe

from annotations.core.guidelines_markup import guidelines_problem, render_guidelines
from annotations.models import Guidelines, HumanGrade, RatingCampaign


class GuidelinesError(ValueError):
    """Input an owner (or a rater's page) can fix; nothing was written."""


def guidelines_current(campaign: RatingCampaign) -> Guidelines | None:
    return Guidelines.objects.filter(campaign=campaign).order_by("-version").first()


def guidelines_view(campaign: RatingCampaign) -> dict | None:
    """{version, html, published_at} of the latest version, for a rater's or an owner's page."""
    current = guidelines_current(campaign)
    if current is None:
        return None
    # Safe because nh3 has just kept only the allowed tags and attributes (guidelines_markup).
    html = mark_safe(render_guidelines(current.text))  # noqa: S308
    return {"version": current.version, "html": html, "published_at": current.published_at}


@transaction.atomic
def guidelines_publish(*, campaign: RatingCampaign, text: str, user=None) -> Guidelines:
    """Publish `text` as the campaign's next guidelines version (unchanged text: no new version)."""
    campaign = RatingCampaign.objects.select_for_update().get(pk=campaign.pk)
    if not campaign.is_open():
        raise GuidelinesError("this campaign is closed; its guidelines stay as they were")
    text = (text or "").replace("\r\n", "\n").strip()
    if problem := guidelines_problem(text):
        raise GuidelinesError(problem)
    current = guidelines_current(campaign)
    if current is not None and current.text == text:
        raise GuidelinesError(f"this is version {current.version} as it stands; change something to publish")
    return Guidelines.objects.create(campaign=campaign, version=(current.version if current else 0) + 1, text=text,
                                     published_at=timezone.now(), published_by=user)


def rating_guidelines_version(campaign: RatingCampaign, shown: int | None) -> int | None:
    """The version a rating records: the one the rater's page showed (checked to be this campaign's),
    or, when the page sent none, the latest (None when nothing is published)."""
    if shown is None:
        current = guidelines_current(campaign)
        return current.version if current else None
    if not Guidelines.objects.filter(campaign=campaign, version=shown).exists():
        raise GuidelinesError(f"version {shown} of the guidelines is not this campaign's; reload the page")
    return shown


def guidelines_history(campaign: RatingCampaign) -> list[dict]:
    """Every version, newest first, with how many ratings were made under it."""
    counts = dict(HumanGrade.objects.filter(campaign=campaign).values_list("guidelines_version")
                  .annotate(n=Count("pk")))
    return [{"version": g.version, "published_at": g.published_at, "published_by": g.published_by,
             "ratings": counts.get(g.version, 0), "text": g.text}
            for g in Guidelines.objects.filter(campaign=campaign).select_related("published_by").order_by("-version")]
