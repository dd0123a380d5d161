"""URLs of a run's dashboards and exports."""
from django.urls import path

from experiments.web.analysis import pairwise_judge_views, pools_views, report_views, tables_views, views

urlpatterns = [
    path("p/<slug:slug>/runs/<int:pk>/analysis/", views.run_dashboard, name="run_dashboard"),
    path("p/<slug:slug>/runs/<int:pk>/analysis/<slug:table>.csv", views.run_dashboard_csv,
         name="run_dashboard_csv"),
    path("p/<slug:slug>/runs/<int:pk>/pairwise-judge/", pairwise_judge_views.pairwise_judge_dashboard,
         name="pairwise_judge_dashboard"),
    path("p/<slug:slug>/runs/<int:pk>/pools/", pools_views.run_pools_page, name="run_pools"),
    path("p/<slug:slug>/runs/<int:pk>/export/scores.csv", views.run_scores_csv, name="run_scores_csv"),
    path("p/<slug:slug>/runs/<int:pk>/tables/", tables_views.run_tables, name="run_tables"),
    path("p/<slug:slug>/runs/<int:pk>/tables/share-groups.csv", tables_views.run_share_groups_csv,
         name="run_share_groups_csv"),
    path("p/<slug:slug>/tables/", tables_views.project_tables, name="project_tables"),
    path("p/<slug:slug>/report/", report_views.paper_report, name="paper_report"),
    path("p/<slug:slug>/report/rebuild/", report_views.paper_report_rebuild, name="paper_report_rebuild"),
    path("p/<slug:slug>/report.zip", report_views.paper_report_zip, name="paper_report_zip"),
]
