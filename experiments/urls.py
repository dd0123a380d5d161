from django.urls import path

from experiments import views, views_runs

urlpatterns = [
    path("", views.project_list, name="project_list"),
    path("p/<slug:slug>/", views.project_detail, name="project_detail"),
    path("p/<slug:slug>/import/", views.session_import, name="session_import"),
    path("p/<slug:slug>/tasks/derive/", views.tasks_derive_view, name="tasks_derive"),
    path("p/<slug:slug>/cohorts/draw/", views.cohort_draw_view, name="cohort_draw"),
    path("p/<slug:slug>/cohorts/<int:pk>/", views.cohort_detail, name="cohort_detail"),
    path("p/<slug:slug>/sessions/<path:session_id>/", views.session_detail, name="session_detail"),
    # protocols and runs (experiments/views_runs.py)
    path("p/<slug:slug>/protocols/new/", views_runs.protocol_create, name="protocol_create"),
    path("p/<slug:slug>/protocols/<int:pk>/", views_runs.protocol_detail, name="protocol_detail"),
    path("p/<slug:slug>/protocols/<int:pk>/edit/", views_runs.protocol_edit, name="protocol_edit"),
    path("p/<slug:slug>/protocols/<int:pk>/seal/", views_runs.protocol_seal_view, name="protocol_seal"),
    path("p/<slug:slug>/protocols/<int:pk>/run/", views_runs.run_create, name="run_create"),
    path("p/<slug:slug>/runs/<int:pk>/", views_runs.run_detail, name="run_detail"),
    path("p/<slug:slug>/runs/<int:pk>/progress.json", views_runs.run_progress_json, name="run_progress"),
    path("p/<slug:slug>/runs/<int:pk>/pause/", views_runs.run_pause_view, name="run_pause"),
    path("p/<slug:slug>/runs/<int:pk>/resume/", views_runs.run_resume_view, name="run_resume"),
    path("p/<slug:slug>/runs/<int:pk>/reissue/", views_runs.run_reissue_view, name="run_reissue"),
    path("p/<slug:slug>/runs/<int:pk>/concurrency/", views_runs.run_concurrency_view, name="run_concurrency"),
    path("p/<slug:slug>/runs/<int:pk>/predictions/", views_runs.prediction_list, name="prediction_list"),
    path("p/<slug:slug>/runs/<int:pk>/predictions/<int:task_pk>/", views_runs.prediction_detail,
         name="prediction_detail"),
]
