"""URLs of a campaign's agreement, contrasts under human grades and exports."""
from django.urls import path
from django.views.generic import View

# Filled in by the results area; the names exist so the campaign pages can link to them.
urlpatterns = [
    path("p/<slug:slug>/ratings/<int:pk>/results/", View.as_view(), name="campaign_results"),
    path("p/<slug:slug>/ratings/<int:pk>/export.<str:fmt>", View.as_view(), name="campaign_export"),
]
