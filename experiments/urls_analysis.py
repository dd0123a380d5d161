from django.urls import path

from experiments import views_analysis

urlpatterns = [
    path("p/<slug:slug>/runs/<int:pk>/analysis/", views_analysis.run_dashboard, name="run_dashboard"),
    path("p/<slug:slug>/runs/<int:pk>/analysis/<slug:table>.csv", views_analysis.run_dashboard_csv,
         name="run_dashboard_csv"),
    path("p/<slug:slug>/runs/<int:pk>/export/scores.csv", views_analysis.run_scores_csv, name="run_scores_csv"),
]
