"""The admin lists protocols, runs and campaigns (read-only) for a superuser."""
import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser("root", password="a-long-test-password")


def test_protocols_runs_and_campaigns_are_listed_and_read_only(client, superuser, campaign):
    client.force_login(superuser)
    for path in ("/admin/experiments/protocol/", "/admin/experiments/run/", "/admin/experiments/amendment/",
                 "/admin/annotations/ratingcampaign/", "/admin/annotations/ratingevent/"):
        assert client.get(path).status_code == 200, path
    assert campaign.name in client.get("/admin/annotations/ratingcampaign/").content.decode()
    assert client.get("/admin/experiments/run/add/").status_code == 403
    run = campaign.run
    page = client.get(f"/admin/experiments/run/{run.pk}/change/")
    assert page.status_code == 200 and 'type="submit"' not in page.content.decode().split('id="content-main"')[1]
