"""URLs of the rater's page and its JSON endpoints."""
from django.urls import path

from annotations.web.rating import calibration_page, views

urlpatterns = [
    path("p/<slug:slug>/ratings/<int:pk>/rate/", views.rate_page, name="rate_page"),
    path("p/<slug:slug>/ratings/<int:pk>/rate/item.json", views.rate_item_json, name="rate_item"),
    path("p/<slug:slug>/ratings/<int:pk>/rate/submit/", views.rate_submit, name="rate_submit"),
    path("p/<slug:slug>/ratings/<int:pk>/rate/undo/", views.rate_undo, name="rate_undo"),
    path("p/<slug:slug>/ratings/<int:pk>/calibrate/", calibration_page.calibrate_page, name="rate_calibrate"),
]
