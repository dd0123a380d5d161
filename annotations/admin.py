"""Rating campaigns in the admin: visible, never edited there (ratings change only through the
rater's page and its event log, campaigns through the owners' pages)."""
from django.contrib import admin

from annotations import models
from experiments.admin import ReadOnlyAdmin


@admin.register(models.RatingCampaign)
class RatingCampaignAdmin(ReadOnlyAdmin):
    list_display = ["name", "project", "run", "ratings_per_item", "sample", "status", "created_at"]
    list_filter = ["status", "project"]
    list_select_related = ["project", "run"]


@admin.register(models.CampaignRater)
class CampaignRaterAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "user", "active", "added_at"]
    list_select_related = ["campaign", "user"]


@admin.register(models.RatingEvent)
class RatingEventAdmin(ReadOnlyAdmin):
    list_display = ["assignment", "kind", "grade", "flagged", "by", "at"]
    list_filter = ["kind"]


@admin.register(models.Adjudication)
class AdjudicationAdmin(ReadOnlyAdmin):
    list_display = ["item", "grade", "decided_by", "decided_at"]
