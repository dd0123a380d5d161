"""Who may open a campaign's pages: the campaign lookups every annotations view starts with.

Built on `experiments.access.membership_for`: a project the user is not a member of does
not exist for them (404); a role that may not use a page gets 403. A rater reaches only
campaigns they rate; to anyone else such a campaign does not exist.
"""
from django.http import Http404

from annotations.models import CampaignRater, RatingCampaign
from experiments.access import membership_for
from experiments.models import Role

RATERS = frozenset({Role.RATER})


def campaign_for(request, slug: str, pk: int, *, roles):
    """(membership, campaign) for campaign `pk` of project `slug`, checked against `roles`."""
    membership = membership_for(request, slug, roles=roles)
    campaign = RatingCampaign.objects.select_related("run__protocol").filter(
        project=membership.project, pk=pk).first()
    if campaign is None:
        raise Http404("No such campaign")
    return membership, campaign


def rater_campaign_for(request, slug: str, pk: int):
    """(membership, campaign) for a rater of the campaign; a campaign they never rated is not found.

    A rater an owner removed still finds it, so their pages can say why they may not rate.
    """
    membership, campaign = campaign_for(request, slug, pk, roles=RATERS)
    if not CampaignRater.objects.filter(campaign=campaign, user=request.user).exists():
        raise Http404("No such campaign")
    return membership, campaign
