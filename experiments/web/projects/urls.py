"""URLs of projects, sessions, tasks and cohorts."""
from django.urls import path

from experiments.web.projects import cohort_map_page, fixed_inputs_page, members_page, views

urlpatterns = [
    path("", views.project_list, name="project_list"),
    path("projects/new/", members_page.project_create_view, name="project_create"),
    path("p/<slug:slug>/", views.project_detail, name="project_detail"),
    path("p/<slug:slug>/members/", members_page.project_members, name="project_members"),
    path("p/<slug:slug>/members/add/", members_page.member_add_view, name="member_add"),
    path("p/<slug:slug>/members/<int:member_pk>/role/", members_page.member_role_view, name="member_role"),
    path("p/<slug:slug>/members/<int:member_pk>/remove/", members_page.member_remove_view, name="member_remove"),
    path("p/<slug:slug>/settings/spending/", members_page.project_spending_view, name="project_spending"),
    path("p/<slug:slug>/audit/", members_page.audit_log, name="audit_log"),
    path("p/<slug:slug>/import/", views.session_import, name="session_import"),
    path("p/<slug:slug>/imports/<slug:job_id>/", views.import_progress_view, name="import_progress"),
    path("p/<slug:slug>/tasks/derive/", views.tasks_derive_view, name="tasks_derive"),
    path("p/<slug:slug>/cohorts/draw/", views.cohort_draw_view, name="cohort_draw"),
    path("p/<slug:slug>/cohorts/task-list/", fixed_inputs_page.task_list_import_view, name="cohort_task_list"),
    path("p/<slug:slug>/cohorts/map/", cohort_map_page.cohort_map_view, name="cohort_map"),
    path("p/<slug:slug>/cohorts/<int:pk>/", views.cohort_detail, name="cohort_detail"),
    path("p/<slug:slug>/sessions/<path:session_id>/", views.session_detail, name="session_detail"),
]
