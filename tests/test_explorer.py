"""smoke"""
import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_smoke(client, rated_run, cast):
    client.force_login(cast["owner"])
    project = rated_run.protocol.project
    r = client.get(reverse("run_explorer", args=[project.slug, rated_run.pk]))
    assert r.status_code == 200, r.content[:3000]
    open("/tmp/exp/explorer.html", "wb").write(r.content)
    r = client.get(reverse("project_search", args=[project.slug]) + "?q=bees")
    assert r.status_code == 200
    open("/tmp/exp/search.html", "wb").write(r.content)
    r = client.get(reverse("run_compare", args=[project.slug]) + f"?run={rated_run.pk}&run={rated_run.pk}")
    assert r.status_code == 200
