"""URLs of survey studies and survey runs."""
from django.urls import path

from experiments.web.surveys import views

urlpatterns = [
    path("p/<slug:slug>/surveys/import/", views.survey_import_view, name="survey_import"),
    path("p/<slug:slug>/surveys/imports/<slug:job_id>/", views.survey_import_progress, name="survey_import_progress"),
    path("p/<slug:slug>/surveys/<int:pk>/", views.survey_study, name="survey_study"),
    path("p/<slug:slug>/surveys/<int:pk>/samples/", views.survey_sample_draw, name="survey_sample_draw"),
    path("p/<slug:slug>/runs/<int:pk>/survey/", views.survey_dashboard, name="survey_dashboard"),
    path("p/<slug:slug>/runs/<int:pk>/survey/<slug:table>.csv", views.survey_dashboard_csv,
         name="survey_dashboard_csv"),
    path("p/<slug:slug>/runs/<int:pk>/survey/respondents/", views.survey_respondents, name="survey_respondents"),
    path("p/<slug:slug>/runs/<int:pk>/survey/respondents/<int:respondent>/", views.survey_respondent,
         name="survey_respondent"),
]
