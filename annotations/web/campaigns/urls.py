"""URLs of rating campaigns for owners (and the campaign list for every role)."""
from django.urls import path

from annotations.web.campaigns import calibration_admin, guidelines_page, views

urlpatterns = [
    path("p/<slug:slug>/ratings/", views.campaign_list, name="campaign_list"),
    path("p/<slug:slug>/runs/<int:run_pk>/ratings/new/", views.campaign_create_view, name="campaign_create"),
    path("p/<slug:slug>/ratings/<int:pk>/", views.campaign_detail, name="campaign_detail"),
    path("p/<slug:slug>/ratings/<int:pk>/raters/add/", views.campaign_rater_add, name="campaign_rater_add"),
    path("p/<slug:slug>/ratings/<int:pk>/raters/remove/", views.campaign_rater_remove, name="campaign_rater_remove"),
    path("p/<slug:slug>/ratings/<int:pk>/reassign/", views.campaign_reassign, name="campaign_reassign"),
    path("p/<slug:slug>/ratings/<int:pk>/gold/", views.campaign_gold, name="campaign_gold"),
    path("p/<slug:slug>/ratings/<int:pk>/close/", views.campaign_close_view, name="campaign_close"),
    path("p/<slug:slug>/ratings/<int:pk>/adjudication/", views.campaign_adjudication, name="campaign_adjudication"),
    path("p/<slug:slug>/ratings/<int:pk>/guidelines/", guidelines_page.campaign_guidelines, name="campaign_guidelines"),
    path("p/<slug:slug>/ratings/<int:pk>/calibration/", calibration_admin.campaign_calibration,
         name="campaign_calibration"),
]
