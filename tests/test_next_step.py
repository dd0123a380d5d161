"""The project page's first line says what to do next, following the project's state and the role."""
from django.urls import reverse

from experiments.models import Project


def next_line(client, user, slug="alpha"):
    client.force_login(user)
    body = client.get(reverse("project_detail", args=[slug])).content.decode()
    if 'id="next-step"' not in body:
        return None
    return body.split('id="next-step"', 1)[1].split("</p>", 1)[0]


def test_an_empty_project_asks_its_owner_to_import(client, cast):
    line = next_line(client, cast["owner"])
    assert "Import interview sessions" in line and reverse("session_import", args=["alpha"]) in line
    assert next_line(client, cast["viewer"]) is None  # nothing a viewer can do yet


def test_with_tasks_and_no_cohort_it_asks_to_draw_one(client, cast, imported):
    line = next_line(client, cast["analyst"])
    assert "Draw a cohort" in line and "#cohorts" in line


def test_a_finished_run_points_to_its_dashboard_and_raters_to_their_queue(client, cast, rated_run):
    line = next_line(client, cast["viewer"])
    assert f"dashboard of run {rated_run.pk}" in line and reverse("run_dashboard", args=["alpha", rated_run.pk]) in line
    assert "rate it" in next_line(client, cast["owner"])
    assert reverse("campaign_list", args=["alpha"]) in next_line(client, cast["rater"])
    assert Project.objects.get(slug="alpha").protocols.count() == 1


def test_sealing_a_paid_protocol_is_offered_only_to_whoever_may_spend(client, cast, imported, loopback_grants):
    from experiments.data.sessions import cohort_draw
    from tests.test_pages_runs import make_protocol
    cohort = cohort_draw(project=imported, name="c1", size=2, seed=1)
    paid = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    protocol = make_protocol(imported, cohort, "paid", generator=paid, concurrency={"openai": 2})
    assert "Seal protocol paid" in next_line(client, cast["owner"])
    assert "Protocol paid waits for an owner to seal it" in next_line(client, cast["analyst"])
    assert "Protocol paid waits for an owner to seal it" in next_line(client, cast["viewer"])
    Project.objects.filter(slug="alpha").update(analysts_may_spend=True)
    assert "Seal protocol paid" in next_line(client, cast["analyst"])
    assert reverse("protocol_detail", args=["alpha", protocol.pk]) in next_line(client, cast["analyst"])
