"""URLs of a run's predictions."""
from django.urls import path

from experiments.web.predictions import views

urlpatterns = [
    path("p/<slug:slug>/runs/<int:pk>/predictions/", views.prediction_list, name="prediction_list"),
    path("p/<slug:slug>/runs/<int:pk>/predictions/<int:task_pk>/", views.prediction_detail,
         name="prediction_detail"),
]
