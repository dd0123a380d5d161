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


def test_smoke_task(client, rated_run, cast):
    client.force_login(cast["owner"])
    project = rated_run.protocol.project
    from experiments.models import CohortTask
    ct = CohortTask.objects.filter(cohort=rated_run.protocol.cohort).order_by("position")[3]
    r = client.get(reverse("prediction_detail", args=[project.slug, rated_run.pk, ct.task_id]) + "?sort=-task")
    assert r.status_code == 200, r.content[:3000]
    open("/tmp/exp/task.html", "wb").write(r.content)
