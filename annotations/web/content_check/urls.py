"""URLs of content-check campaigns: an owner creates one over a finished run; its results and CSVs."""
from django.urls import path

from annotations.web.content_check import views

urlpatterns = [
    path("p/<slug:slug>/runs/<int:run_pk>/ratings/new-content-check/", views.content_check_create_view,
         name="content_check_create"),
    path("p/<slug:slug>/ratings/<int:pk>/content-check/", views.content_check_results_page,
         name="content_check_results"),
    path("p/<slug:slug>/ratings/<int:pk>/content-check/<slug:table>.csv", views.content_check_results_csv,
         name="content_check_results_csv"),
]
