"""The access matrix of every page (docs/design.md §2): anonymous, outsider, and each role."""
import pytest
from django.urls import reverse

from experiments.models import Cohort, Session
from experiments.data.sessions import cohort_draw

PARTICIPANT_TEXT = "I would say it depends on the day really"


@pytest.fixture
def world(imported, cast):
    cohort = cohort_draw(project=imported, name="c1", size=2, seed=1)
    return {"project": imported, "cohort": cohort, "users": cast}


def pages(world):
    slug = world["project"].slug
    return {
        "project_list": reverse("project_list"),
        "project_detail": reverse("project_detail", args=[slug]),
        "session_detail": reverse("session_detail", args=[slug, "sess-a"]),
        "session_import": reverse("session_import", args=[slug]),
        "cohort_detail": reverse("cohort_detail", args=[slug, world["cohort"].pk]),
    }


# Expected status per page and role; "text" marks pages that show participant text.
MATRIX = {
    "project_detail": {"owner": 200, "analyst": 200, "rater": 200, "viewer": 200, "outsider": 404},
    "session_detail": {"owner": 200, "analyst": 200, "rater": 403, "viewer": 403, "outsider": 404},
    "session_import": {"owner": 200, "analyst": 403, "rater": 403, "viewer": 403, "outsider": 404},
    "cohort_detail": {"owner": 200, "analyst": 200, "rater": 200, "viewer": 200, "outsider": 404},
}


@pytest.mark.parametrize("page", sorted(MATRIX) + ["project_list"])
def test_every_page_sends_anonymous_users_to_the_login(client, world, page):
    url = pages(world)[page]
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize("page", sorted(MATRIX))
@pytest.mark.parametrize("who", ["owner", "analyst", "rater", "viewer", "outsider"])
def test_the_access_matrix(client, world, page, who):
    client.force_login(world["users"][who])
    response = client.get(pages(world)[page])
    assert response.status_code == MATRIX[page][who]


@pytest.mark.parametrize("page", ["project_detail", "cohort_detail"])
@pytest.mark.parametrize("who", ["rater", "viewer"])
def test_viewers_and_raters_see_counts_but_never_participant_text(client, world, page, who):
    client.force_login(world["users"][who])
    response = client.get(pages(world)[page])
    body = response.content.decode()
    assert "Could you tell me more" not in body  # interviewer questions are transcript text too
    assert PARTICIPANT_TEXT not in body
    assert "sess-a" not in body  # no session list either
    assert "counts only" in body


def test_analysts_see_the_session_list_and_cohort_questions(client, world):
    client.force_login(world["users"]["analyst"])
    body = client.get(pages(world)["project_detail"]).content.decode()
    assert "sess-a" in body and "sess-c" in body
    body = client.get(pages(world)["cohort_detail"]).content.decode()
    assert "Could you tell me more" in body


def test_the_project_list_shows_only_my_projects(client, world):
    client.force_login(world["users"]["outsider"])
    body = client.get(pages(world)["project_list"]).content.decode()
    assert "Other" in body and "Alpha study" not in body


def test_a_cohort_of_another_project_is_not_found(client, world, cast):
    other_cohort_url = reverse("cohort_detail", args=["other", world["cohort"].pk])
    client.force_login(cast["outsider"])
    assert client.get(other_cohort_url).status_code == 404


@pytest.mark.parametrize(
    "url_name, data, allowed",
    [
        ("tasks_derive", {"min_pairs": 8, "min_targets": 3, "max_targets": 5}, {"owner"}),
        ("cohort_draw", {"name": "new", "size": 1, "seed": 3}, {"owner", "analyst"}),
    ],
)
@pytest.mark.parametrize("who", ["owner", "analyst", "rater", "viewer", "outsider"])
def test_actions_check_the_role_and_change_nothing_when_refused(client, world, url_name, data, allowed, who):
    client.force_login(world["users"][who])
    cohorts_before = Cohort.objects.count()
    task_sets_before = world["project"].task_sets.count()
    response = client.post(reverse(url_name, args=[world["project"].slug]), data)
    if who in allowed:
        assert response.status_code == 302
    else:
        assert response.status_code == (404 if who == "outsider" else 403)
        assert Cohort.objects.count() == cohorts_before
        assert world["project"].task_sets.count() == task_sets_before


def test_actions_refuse_get(client, world):
    client.force_login(world["users"]["owner"])
    assert client.get(reverse("cohort_draw", args=["alpha"])).status_code == 405


def test_the_session_page_marks_speakers_targets_reference_answers_and_the_cut(client, world, django_assert_max_num_queries):
    client.force_login(world["users"]["analyst"])
    with django_assert_max_num_queries(10):
        response = client.get(pages(world)["session_detail"])
    body = response.content.decode()
    session = Session.objects.get(external_id="sess-a")
    # 12 pairs: targets are pairs 6..10, questions at turns 12, 14, ..., 20
    for index in (12, 14, 16, 18, 20):
        assert f'class="turn interviewer target-q" id="turn-{index}"' in body
        assert f'class="turn participant reference" id="turn-{index + 1}"' in body
    assert body.count('class="turn interviewer"') == 7
    assert body.count('id="record-cut"') == 1
    assert body.index('id="record-cut"') < body.index('id="turn-12"')
    assert body.index('id="turn-11"') < body.index('id="record-cut"')
    assert "Composer" in body  # the screener
    assert session.turns.count() == body.count('<li class="turn ')


def test_the_project_page_says_which_task_rule_made_the_tasks(client, world):
    client.force_login(world["users"]["viewer"])
    body = client.get(pages(world)["project_detail"]).content.decode()
    assert "≥12 substantive pairs, ≥5 second-half targets, first 5 taken" in body
    assert "(the paper's values)" in body
    assert '<strong id="count-tasks">10</strong>' in body
    assert '<strong id="count-eligible">2</strong>' in body


def test_hostile_text_is_escaped(client, world, project):
    from experiments.core.interviews.records import ParsedTurn
    from experiments.data.sessions import sessions_import
    from tests.conftest import parsed_session

    evil = parsed_session("evil", [ParsedTurn("interviewer", "<script>alert(1)</script>?"), ParsedTurn("participant", "<img src=x onerror=alert(2)>")])
    sessions_import(project=project, parsed=[evil], source_format="jsonl", source_file="evil.jsonl")
    client.force_login(world["users"]["owner"])
    body = client.get(reverse("session_detail", args=["alpha", "evil"])).content.decode()
    assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)" in body
    assert "<img src=x" not in body
