"""Pages of the LLM pairwise judge: the pairwise campaign's results page shows people's preferences
beside the judge's (when a pairwise-judge run over the campaign's run has finished), and the
pairwise-judge run has its own dashboard. Aggregate readers see numbers; raters get 403, outsiders
404. The judge here is the offline stand-in, driven through the engine, and the pages say so."""
import pytest

from annotations.pairwise import pairwise_campaign_create
from annotations.web.pairwise.llm_judge import llm_judge_beside_people
from experiments.execution import control
from experiments.execution.driver import run_inline
from experiments.models import Run
from tests.annotations_helpers import CONDITIONS, OFFLINE, RATERS
from tests.test_annotations_pairwise import rate_all


@pytest.fixture
def campaign(rated_run, cast):
    campaign = pairwise_campaign_create(run=rated_run, name="pairs", conditions=CONDITIONS, raters=RATERS,
                                        user=cast["owner"], seed=11, ratings_per_item=2)
    rate_all(campaign)
    return campaign


def judge_over(campaign, cast):
    pairs = [[p["x"], p["y"]] for p in campaign.pairs if p["items"]]
    protocol = control.regrade_create(source=campaign.run, user=cast["owner"], judge=dict(OFFLINE), pairs=pairs)
    run = Run.objects.create(protocol=protocol)
    control.run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED
    return run


def test_without_a_judge_run_the_page_says_how_to_make_one(client, campaign, cast):
    client.force_login(cast["viewer"])
    page = client.get(f"/p/{campaign.project.slug}/ratings/{campaign.pk}/pairwise/").content.decode()
    assert 'id="no-llm-judge"' in page and 'id="people-vs-llm-judge"' not in page


def test_the_results_page_shows_people_and_the_judge_side_by_side(client, campaign, cast):
    run = judge_over(campaign, cast)
    url = f"/p/{campaign.project.slug}/ratings/{campaign.pk}/pairwise/"
    client.force_login(cast["viewer"])
    response = client.get(url)
    page = response.content.decode()
    assert 'id="people-vs-llm-judge"' in page
    assert "Preferred by people" in page and "Preferred by the LLM judge" in page
    assert 'id="llm-judge-offline-label"' in page  # the stand-in, labelled
    # the numbers shown are the ones computed for the page, pair by pair (people and judge)
    shown = llm_judge_beside_people(campaign, response.context["data"]["win_rates"])
    assert shown["run"].pk == run.pk and shown["covered"]
    rated = [r for r in shown["rows"] if r["people"] is not None]
    assert rated
    for row in rated:
        assert row["judge"] is not None and row["agreement"]["compared"] == row["people"]["ratings"]
        for value in (row["people"]["x_wins"], row["judge"]["x_wins"], row["agreement"]["agreement"]):
            assert f'{value["estimate"]:.3f}' in page
    for role in ("rater",):
        client.force_login(cast[role])
        assert client.get(url).status_code == 403
    client.force_login(cast["outsider"])
    assert client.get(url).status_code == 404


def test_the_judge_run_has_its_own_dashboard(client, campaign, cast):
    run = judge_over(campaign, cast)
    base = f"/p/{campaign.project.slug}/runs/{run.pk}/"
    for role in ("owner", "analyst", "viewer"):
        client.force_login(cast[role])
        page = client.get(base + "pairwise-judge/").content.decode()
        assert 'id="pairwise-judge-table"' in page and 'id="offline-label"' in page
        for row in run.analysis["pairwise_judge"]["rows"]:
            assert row["x"] in page and f'{row["x_wins"]["estimate"]:.3f}' in page
        assert client.get(base + "analysis/").url == base + "pairwise-judge/"  # the contrast dashboard sends it here
        assert "Pairwise judge results" in client.get(base).content.decode()
    # the stand-in judges by overlap with the real answer, never by side: no verdict follows the side
    rows = run.analysis["pairwise_judge"]["rows"]
    assert sum(r["both_orders"] for r in rows) > 0 and all(r["a_both"] == r["b_both"] == 0 for r in rows)
    client.force_login(cast["rater"])
    assert client.get(base + "pairwise-judge/").status_code == 403
    client.force_login(cast["outsider"])
    assert client.get(base + "pairwise-judge/").status_code == 404


def test_the_project_pages_take_a_pairwise_judge_run_in_their_stride(client, campaign, cast):
    run = judge_over(campaign, cast)
    slug = campaign.project.slug
    client.force_login(cast["owner"])
    for url in (f"/p/{slug}/", f"/p/{slug}/tables/", f"/p/{slug}/report/", f"/p/{slug}/runs/{run.pk}/",
                f"/p/{slug}/runs/{campaign.run_id}/", f"/p/{slug}/protocols/{run.protocol_id}/"):
        assert client.get(url).status_code == 200, url
    # App. I.6's second judge is a re-grade's: a pairwise judge grades nothing
    from experiments.analysis.report_items_per_run import newest_regrade
    assert newest_regrade([campaign.run, run]) is None


def test_the_demo_shows_people_beside_the_offline_stand_in_judge(client, db):
    from io import StringIO

    from django.core.management import call_command

    from annotations.models import RatingCampaign
    from experiments.models import Membership, Protocol
    call_command("demo_setup", stdout=StringIO())
    call_command("demo_ratings", stdout=StringIO())
    out = StringIO()
    call_command("demo_pairwise_judge", stdout=out)
    run = Run.objects.get(protocol__kind=Protocol.Kind.PAIRWISE)
    assert run.status == Run.Status.FINISHED and run.analysis["pairwise_judge"]["stand_in"]
    assert f"run {run.pk}" in out.getvalue() and "offline stand-in" in out.getvalue()
    campaign = RatingCampaign.objects.get(name="demo-pairwise")
    assert run.protocol.regrade_of_id == campaign.run_id
    assert sorted(map(tuple, run.protocol.pairwise_pairs)) == sorted((p["x"], p["y"]) for p in campaign.pairs)
    client.force_login(Membership.objects.get(project__slug="demo", user__username="demo-viewer").user)
    page = client.get(f"/p/demo/ratings/{campaign.pk}/pairwise/").content.decode()
    assert 'id="people-vs-llm-judge"' in page and 'id="llm-judge-offline-label"' in page
    out = StringIO()
    call_command("demo_pairwise_judge", stdout=out)  # again: made already, nothing new
    assert "exists already" in out.getvalue() and Run.objects.filter(protocol__kind=Protocol.Kind.PAIRWISE).count() == 1
