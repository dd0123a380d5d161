"""URLs of protocols and runs."""
from django.urls import path

from experiments.web.runs import amend, paper, regrade_page, views

urlpatterns = [
    path("p/<slug:slug>/protocols/new/", views.protocol_create, name="protocol_create"),
    path("p/<slug:slug>/protocols/paper/", paper.protocol_from_template_view, name="protocol_from_template"),
    path("p/<slug:slug>/protocols/<int:pk>/", views.protocol_detail, name="protocol_detail"),
    path("p/<slug:slug>/protocols/<int:pk>/edit/", views.protocol_edit, name="protocol_edit"),
    path("p/<slug:slug>/protocols/<int:pk>/seal/", views.protocol_seal_view, name="protocol_seal"),
    path("p/<slug:slug>/protocols/<int:pk>/run/", views.run_create, name="run_create"),
    path("p/<slug:slug>/runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("p/<slug:slug>/runs/<int:pk>/progress.json", views.run_progress_json, name="run_progress"),
    path("p/<slug:slug>/runs/<int:pk>/pause/", amend.run_pause_view, name="run_pause"),
    path("p/<slug:slug>/runs/<int:pk>/resume/", amend.run_resume_view, name="run_resume"),
    path("p/<slug:slug>/runs/<int:pk>/reissue/", amend.run_reissue_view, name="run_reissue"),
    path("p/<slug:slug>/runs/<int:pk>/accept-missing/", amend.run_accept_missing_view, name="run_accept_missing"),
    path("p/<slug:slug>/runs/<int:pk>/ceiling/", amend.run_ceiling_view, name="run_ceiling"),
    path("p/<slug:slug>/runs/<int:pk>/concurrency/", amend.run_concurrency_view, name="run_concurrency"),
    path("p/<slug:slug>/runs/<int:pk>/regrade/", regrade_page.run_regrade, name="run_regrade"),
]
