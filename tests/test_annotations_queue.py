"""A large campaign's results go through the real `analysis` queue (Redis, an rq worker), once per state."""
import pytest
from django.urls import reverse
from rq import SimpleWorker

from annotations import campaign_agreement, jobs
from annotations.models import CampaignResult
from annotations.rating import rater_item, rating_record
from tests.conftest import private_rq_queue


@pytest.fixture
def private_queue(monkeypatch):
    """A queue of this test's own, so no other test's jobs run here and ours run nowhere else."""
    with private_rq_queue("test-results") as queue:
        monkeypatch.setattr(jobs, "results_queue", lambda: queue)
        monkeypatch.setattr(campaign_agreement, "INLINE_BUDGET", 0)  # every campaign counts as large
        yield queue


def rate_some(campaign, n=4):
    for name in ("rater-a", "rater-b"):
        user = campaign.raters.get(user__username=name).user
        for grade in range(n):
            item = rater_item(campaign, user)["item"]
            rating_record(campaign=campaign, user=user, assignment_id=item["assignment"], grade=grade % 4)


def test_a_large_campaign_is_computed_on_the_queue_once_per_state(client, cast, campaign, private_queue):
    rate_some(campaign)
    client.force_login(cast["viewer"])
    url = reverse("campaign_results", args=[campaign.project.slug, campaign.pk])
    page = client.get(url).content.decode()
    assert 'id="results-computing"' in page and not CampaignResult.objects.exists()
    client.get(url)  # a reload while it waits queues nothing more
    assert private_queue.count == 1
    SimpleWorker([private_queue], connection=private_queue.connection).work(burst=True)
    stored = CampaignResult.objects.get(campaign=campaign)
    page = client.get(url).content.decode()
    assert 'id="results-computing"' not in page and 'id="results-stale"' not in page
    assert stored.inputs_sha256 in page or stored.inputs_sha256[:14] in page
    # a new rating: the last numbers stay on the page, marked stale, while new ones are queued
    rate_some(campaign, n=1)
    page = client.get(url).content.decode()
    assert 'id="results-stale"' in page and private_queue.count == 1
    SimpleWorker([private_queue], connection=private_queue.connection).work(burst=True)
    assert CampaignResult.objects.get(campaign=campaign).inputs_sha256 != stored.inputs_sha256
    assert 'id="results-stale"' not in client.get(url).content.decode()


def test_without_a_queue_the_page_computes_the_numbers_itself(client, cast, campaign, monkeypatch):
    monkeypatch.setattr(campaign_agreement, "INLINE_BUDGET", 0)
    monkeypatch.setattr(jobs, "results_enqueue", lambda campaign_id, sha: False)
    from annotations.web.results import views
    monkeypatch.setattr(views, "results_enqueue", lambda campaign_id, sha: False)
    rate_some(campaign)
    client.force_login(cast["owner"])
    page = client.get(reverse("campaign_results", args=[campaign.project.slug, campaign.pk])).content.decode()
    assert 'id="results-computing"' not in page and CampaignResult.objects.filter(campaign=campaign).exists()
