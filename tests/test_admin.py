"""The admin lists protocols, runs and campaigns (read-only) for a superuser."""
import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser("root", password="a-long-test-password")


def test_protocols_runs_and_campaigns_are_listed_and_read_only(client, superuser, campaign):
    client.force_login(superuser)
    for path in ("/admin/experiments/protocol/", "/admin/experiments/run/", "/admin/experiments/amendment/",
                 "/admin/annotations/ratingcampaign/", "/admin/annotations/ratingevent/",
                 "/admin/experiments/mem0extraction/", "/admin/experiments/surveystudy/",
                 "/admin/experiments/surveyexclusion/"):
        assert client.get(path).status_code == 200, path
    assert campaign.name in client.get("/admin/annotations/ratingcampaign/").content.decode()
    for model in ("run", "mem0extraction", "surveystudy", "surveyexclusion"):
        assert client.get(f"/admin/experiments/{model}/add/").status_code == 403, model
    run = campaign.run
    page = client.get(f"/admin/experiments/run/{run.pk}/change/")
    assert page.status_code == 200 and 'type="submit"' not in page.content.decode().split('id="content-main"')[1]


def test_the_admin_says_studies(client, superuser):
    client.force_login(superuser)
    body = client.get("/admin/").content.decode()
    assert "Studies" in body and "Studys" not in body


def test_a_failed_login_is_announced(client, db):
    body = client.post("/accounts/login/", {"username": "nobody", "password": "wrong-password-x"}).content.decode()
    assert 'id="login-error" role="alert"' in body
