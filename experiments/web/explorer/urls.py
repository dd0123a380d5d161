"""URLs of the explorer, the project search and the cross-run comparison."""
from django.urls import path

from experiments.web.explorer import views

urlpatterns = [
    path("p/<slug:slug>/runs/<int:pk>/explore/", views.run_explorer, name="run_explorer"),
    path("p/<slug:slug>/search/", views.project_search, name="project_search"),
    path("p/<slug:slug>/compare/", views.run_compare, name="run_compare"),
]
