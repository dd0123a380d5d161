"""URLs of a campaign's agreement, contrasts under human grades and exports."""
from django.urls import path

from annotations.web.results import views

urlpatterns = [
    path("p/<slug:slug>/ratings/<int:pk>/results/", views.campaign_results, name="campaign_results"),
    path("p/<slug:slug>/ratings/<int:pk>/results/<slug:table>.csv", views.campaign_results_csv,
         name="campaign_results_csv"),
    path("p/<slug:slug>/ratings/<int:pk>/export.<str:fmt>", views.campaign_export, name="campaign_export"),
]
