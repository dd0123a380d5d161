"""URLs of rater invites: the owners' invite pages, the public accept page, completion codes."""
from django.urls import path

from annotations.web.invites import accept, views

urlpatterns = [
    path("invite/<str:token>/", accept.invite_accept_view, name="invite_accept"),
    path("p/<slug:slug>/ratings/<int:pk>/invites/", views.invites_page, name="campaign_invites"),
    path("p/<slug:slug>/ratings/<int:pk>/invites/new/", views.invite_create_view, name="campaign_invite_create"),
    path("p/<slug:slug>/ratings/<int:pk>/invites/bulk/", views.invite_bulk_view, name="campaign_invite_bulk"),
    path("p/<slug:slug>/ratings/<int:pk>/invites/<int:invite_pk>/revoke/", views.invite_revoke_view,
         name="campaign_invite_revoke"),
    path("p/<slug:slug>/ratings/<int:pk>/invites/deal/", views.open_items_deal_view, name="campaign_deal_open_items"),
    path("p/<slug:slug>/ratings/<int:pk>/completion-codes.csv", views.completion_codes_csv,
         name="campaign_completion_codes"),
    path("p/<slug:slug>/ratings/<int:pk>/rate/code/", views.rate_completion_code, name="rate_completion_code"),
]
