"""Pages of the LLM pairwise judge: the pairwise campaign's results page shows people's preferences
beside the judge's (when a pairwise-judge run over the campaign's run has finished), and the
pairwise-judge run has its own dashboard. Aggregate readers see numbers; raters get 403, outsiders
404. The judge here is the offline stand-in, driven through the engine, and the pages say so."""
from collections import Counter

import pytest

from annotations.models import CampaignResult
from annotations.pairwise import (
    pair_candidates, pair_ratings, pairwise_campaign_create, pairwise_results, results_inputs,
)
from experiments.analysis.pairwise_verdicts import judged_pairs
from experiments.core.pairwise_judge import HumanPreference, human_agreement, judge_rows
from experiments.execution import control
from experiments.execution.driver import run_inline
from experiments.core.slot_keys import PairwiseJudgeKey
from experiments.models import ModelCall, Protocol, Run
from tests.annotations_helpers import CONDITIONS, OFFLINE, RATERS
from tests.test_annotations_pairwise import rate_all


@pytest.fixture
def campaign(rated_run, cast):
    campaign = pairwise_campaign_create(run=rated_run, name="pairs", conditions=CONDITIONS, raters=RATERS,
                                        user=cast["owner"], seed=11, ratings_per_item=2)
    rate_all(campaign)
    return campaign


@pytest.fixture
def sampled(rated_run, cast):
    """A campaign of about half the candidate pairs: only some of the tasks the judge compares are items."""
    pairs = [[x, y] for i, x in enumerate(CONDITIONS) for y in CONDITIONS[i + 1:]]
    candidates, _ = pair_candidates(rated_run, pairs)
    campaign = pairwise_campaign_create(run=rated_run, name="sampled", conditions=CONDITIONS, raters=RATERS,
                                        user=cast["owner"], seed=5, ratings_per_item=2, sample="stratified",
                                        sample_size=len(candidates) // 2)
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
    shown = response.context["llm_judge"]
    assert shown["run"].pk == run.pk and shown["covered"] and shown["stand_in"]
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


def test_the_judge_s_numbers_are_over_the_campaign_s_items_oriented_as_people_s(sampled, cast):
    run = judge_over(sampled, cast)
    data = pairwise_results(sampled)
    seed, draws = data["seed"], data["draws"]
    items = Counter((x, y) for x, y in sampled.items.values_list("conditions", flat=True))
    everything = Counter((p.x, p.y) for p in judged_pairs(run))
    rows = {(r["x"], r["y"]): r for r in data["llm_judge"]["rows"] if r["judge"] is not None}
    # per pair, the judge's tasks are the campaign's items: fewer than the judge compared (a sample)
    assert {pair: row["judge"]["tasks"] for pair, row in rows.items()} == dict(items)
    assert sum(items.values()) < sum(everything.values())
    # a row is judge_rows on the judge run's own pairs (read its way) picked by the campaign's items
    wanted = {(task, x, y) for task, (x, y) in sampled.items.values_list("task_id", "conditions")}
    picked = [p for p in judged_pairs(run) if (p.task, p.x, p.y) in wanted]
    assert len(picked) == sum(items.values())
    expected = {(r["x"], r["y"]): r for r in judge_rows(picked, seed=seed, draws=draws)}
    assert {pair: row["judge"] for pair, row in rows.items()} == expected
    task = dict(sampled.items.values_list("number", "task_id"))
    ratings = [HumanPreference(task=task[r.item], person=r.person, x=r.x, y=r.y, outcome=r.outcome)
               for r in pair_ratings(sampled)]
    agreement = {(r["x"], r["y"]): r for r in human_agreement(ratings, picked, seed=seed, draws=draws)}
    assert {pair: row["agreement"] for pair, row in rows.items()} == agreement
    # X and Y are the people's, whichever way round the judge run lists the pair
    assert set(rows) == {(p["x"], p["y"]) for p in sampled.pairs if p["sampled"]}
    Protocol.objects.filter(pk=run.protocol_id).update(pairwise_pairs=[[y, x] for x, y in run.protocol.pairwise_pairs])
    flipped = pairwise_results(sampled)
    assert flipped["inputs_sha256"] != data["inputs_sha256"]  # the judge's pairs are among the inputs
    assert flipped["llm_judge"]["rows"] == data["llm_judge"]["rows"]


def test_the_judge_s_numbers_are_cached_with_the_rest_and_follow_a_new_judge_run(client, campaign, cast):
    url = f"/p/{campaign.project.slug}/ratings/{campaign.pk}/pairwise/"
    client.force_login(cast["viewer"])
    assert client.get(url).context["llm_judge"] is None
    first = judge_over(campaign, cast)
    assert client.get(url).context["llm_judge"]["run"].pk == first.pk  # a finished judge run: recomputed
    stored = CampaignResult.objects.get(campaign=campaign)
    assert stored.payload["llm_judge"]["run"] == first.pk
    # the next view reads the stored numbers: a mark put into them shows, nothing is recomputed
    judged = next(n for n, row in enumerate(stored.payload["llm_judge"]["rows"]) if row["judge"])
    stored.payload["llm_judge"]["rows"][judged]["judge"]["x_wins"]["estimate"] = 0.123456
    stored.save()
    assert "0.123" in client.get(url).content.decode()
    second = judge_over(campaign, cast)  # a newer judge run: new inputs, new numbers
    shown = client.get(url).context["llm_judge"]
    assert shown["run"].pk == second.pk and "0.123" not in client.get(url).content.decode()
    # a changed reply of the judge (another verdict) is new inputs too
    _, before = results_inputs(campaign)
    call = ModelCall.objects.filter(run=second, slot__key__startswith=PairwiseJudgeKey.prefix(), outcome="ok").first()
    other = '{"preferred": "A"}' if "tie" in call.text else '{"preferred": "tie"}'
    ModelCall.objects.filter(pk=call.pk).update(text=other)
    assert results_inputs(campaign)[1] != before


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
