"""The experiments app's URLs: each area's routes (names are global, no namespace)."""
from django.urls import include, path

urlpatterns = [
    path("", include("experiments.web.projects.urls")),
    path("", include("experiments.web.runs.urls")),
    path("", include("experiments.web.predictions.urls")),
    path("", include("experiments.web.analysis.urls")),
    path("", include("experiments.web.explorer.urls")),
    path("", include("experiments.web.surveys.urls")),
    path("", include("experiments.web.api.urls")),
]
