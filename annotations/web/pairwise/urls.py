"""URLs of pairwise preference campaigns: an owner creates one over a finished run; its results and CSVs."""
from django.urls import path

from annotations.web.pairwise import views

urlpatterns = [
    path("p/<slug:slug>/runs/<int:run_pk>/ratings/new-pairwise/", views.pairwise_create_view,
         name="pairwise_create"),
    path("p/<slug:slug>/ratings/<int:pk>/pairwise/", views.pairwise_results_page, name="pairwise_results"),
    path("p/<slug:slug>/ratings/<int:pk>/pairwise/<slug:table>.csv", views.pairwise_results_csv,
         name="pairwise_results_csv"),
]
