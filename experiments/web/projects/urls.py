"""URLs of projects, sessions, tasks and cohorts."""
from django.urls import path

from experiments.web.projects import views

urlpatterns = [
    path("", views.project_list, name="project_list"),
    path("p/<slug:slug>/", views.project_detail, name="project_detail"),
    path("p/<slug:slug>/import/", views.session_import, name="session_import"),
    path("p/<slug:slug>/imports/<slug:job_id>/", views.import_progress_view, name="import_progress"),
    path("p/<slug:slug>/tasks/derive/", views.tasks_derive_view, name="tasks_derive"),
    path("p/<slug:slug>/cohorts/draw/", views.cohort_draw_view, name="cohort_draw"),
    path("p/<slug:slug>/cohorts/<int:pk>/", views.cohort_detail, name="cohort_detail"),
    path("p/<slug:slug>/sessions/<path:session_id>/", views.session_detail, name="session_detail"),
]
