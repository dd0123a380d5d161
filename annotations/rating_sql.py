"""The SQL of ratings (`annotations.rating`): the campaign row read FOR SHARE, which Django lacks."""
from __future__ import annotations

from django.db import connection

from annotations.models import RatingCampaign


def campaign_shared(campaign: RatingCampaign) -> RatingCampaign:
    """The campaign row, read FOR SHARE: raters hold it together, so they do not wait on each
    other, while an owner's change of the campaign (close, remove or reassign a rater, gold), which
    takes it FOR UPDATE (`annotations.campaigns`), waits for the ratings in flight and they for it:
    no rating is stored after a close or into a queue being reassigned. Django has no FOR SHARE."""
    if not connection.features.has_select_for_update:
        return RatingCampaign.objects.get(pk=campaign.pk)
    table, key = connection.ops.quote_name(RatingCampaign._meta.db_table), RatingCampaign._meta.pk.column
    # Index: the primary key (one row).
    return RatingCampaign.objects.raw(f"SELECT * FROM {table} WHERE {key} = %s FOR SHARE", [campaign.pk])[0]
