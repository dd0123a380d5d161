"""The API's rating campaigns (added to `experiments.web.api`'s API where it is mounted): a project's
campaigns and a campaign's cached results (agreement, contrasts under human grades).

Owners, analysts and viewers, as on the results page: numbers only, raters as R1, R2 … (no
usernames, no notes); raters 403, non-members 404. Like the page, stale results are recomputed (or
handed to the queue, and the last ones sent meanwhile with "current": false).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from django.http import Http404
from ninja import Query, Router, Schema

from annotations import campaign_agreement
from annotations.campaign_access import campaign_for
from annotations.jobs import results_enqueue
from annotations.models import RatingCampaign
from annotations.content_check import is_content_check
from annotations.pairwise import is_pairwise
from experiments.access import AGGREGATE_READERS, membership_for
from experiments.web.api.paging import PageParams, page_response, page_schema, queryset_page

router = Router(tags=["rating campaigns"])


class CampaignOut(Schema):
    id: int
    name: str
    run_id: int
    status: str
    conditions: list[str]
    created_at: datetime


class CampaignResultsOut(Schema):
    campaign: int
    current: bool
    results: Optional[dict[str, Any]] = None


@router.get("/projects/{slug}/campaigns", response=page_schema(CampaignOut, "CampaignPage"), url_name="api_campaigns")
def campaigns(request, slug: str, page: Query[PageParams]):
    """The project's rating campaigns, by id."""
    membership = membership_for(request, slug, roles=AGGREGATE_READERS)
    return page_response(queryset_page(RatingCampaign.objects.filter(project=membership.project).values(
        "id", "name", "run_id", "status", "conditions", "created_at"), page))


@router.get("/projects/{slug}/campaigns/{int:campaign_id}/results", response=CampaignResultsOut,
            url_name="api_campaign_results")
def campaign_results(request, slug: str, campaign_id: int):
    """The campaign's results payload (null while the first computation runs in the queue)."""
    _, campaign = campaign_for(request, slug, campaign_id, roles=AGGREGATE_READERS)
    if is_pairwise(campaign):
        raise Http404("A pairwise campaign has preferences, not grades: see its pairwise results page")
    if is_content_check(campaign):
        raise Http404("A content-check campaign has same-content answers, not grades: see its results page")
    data, current = campaign_agreement.results_for_page(campaign, enqueue=results_enqueue)
    return {"campaign": campaign.pk, "current": current, "results": data}
