"""URLs of rating campaigns: owners' campaign pages, the rater's page, results, invites."""
from django.urls import include, path

urlpatterns = [
    path("", include("annotations.web.campaigns.urls")),
    path("", include("annotations.web.rating.urls")),
    path("", include("annotations.web.results.urls")),
    path("", include("annotations.web.pairwise.urls")),
    path("", include("annotations.web.content_check.urls")),
    path("", include("annotations.web.invites.urls")),
]
