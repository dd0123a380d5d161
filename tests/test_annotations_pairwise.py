"""Pairwise preference campaigns: pairs, assignment and sides, the rater's page, the numbers.

The numbers are checked on hand-computed cases and the Bradley–Terry fit against `choix`, an
independent implementation (test-only reference).
"""
import itertools
import math
from collections import Counter

import choix
import numpy as np
import pytest

from annotations.core.pairwise import (
    PairRating, balanced_sides, bradley_terry, judge_order_agreement, outcome, win_matrix, win_rates,
)
from annotations.models import Assignment, HumanGrade, RatingCampaign, RatingEvent, RatingItem
from annotations.pairwise import PairwiseError, pair_candidates, pairwise_campaign_create, pairwise_results
from annotations.rating import RatingError, rater_item, rating_record, rating_undo
from tests.annotations_helpers import CONDITIONS, RATERS


# ---------------------------------------------------------------------------------------------
# Pure parts
# ---------------------------------------------------------------------------------------------

def side_counts(pairs, sides):
    on_a, shown = Counter(), Counter()
    for (x, y), x_on_a in zip(pairs, sides):
        on_a[x if x_on_a else y] += 1
        shown[x] += 1
        shown[y] += 1
    return on_a, shown


@pytest.mark.parametrize("seed", range(12))
def test_sides_put_every_condition_on_a_half_the_time_within_one(seed):
    rng = np.random.default_rng(seed)
    all_pairs = list(itertools.combinations("abcde", 2))
    pairs = [all_pairs[i] for i in rng.integers(0, len(all_pairs), size=int(rng.integers(1, 40)))]
    sides = balanced_sides(pairs, seed)
    on_a, shown = side_counts(pairs, sides)
    assert all(abs(2 * on_a[c] - shown[c]) <= 1 for c in shown)
    assert balanced_sides(pairs, seed) == sides  # seeded


def test_sides_of_one_pair_alternate_and_are_drawn_from_the_seed():
    pairs = [("x", "y")] * 6
    assert sum(balanced_sides(pairs, 1)) == 3
    draws = {tuple(balanced_sides([("x", "y"), ("y", "z"), ("x", "z")] * 3, s)) for s in range(20)}
    assert len(draws) > 1


def test_outcome_maps_the_side_shown_to_the_condition():
    assert [outcome("a", True), outcome("a", False), outcome("b", True), outcome("b", False)] == ["x", "y", "y", "x"]
    assert outcome("tie", False) == "tie"
    with pytest.raises(ValueError):
        outcome("c", True)


def hand_ratings():
    # Two people. Pair (p, q): item 1 (person 1) rated x, x; item 2 (person 2) rated y, tie.
    # Pair (q, r): item 3 (person 1) rated x; judge grades as given.
    return [
        PairRating(1, 1, "p", "q", "x", judge_x=3, judge_y=1),
        PairRating(1, 1, "p", "q", "x", judge_x=3, judge_y=1),
        PairRating(2, 2, "p", "q", "y", judge_x=2, judge_y=2),
        PairRating(2, 2, "p", "q", "tie", judge_x=2, judge_y=2),
        PairRating(3, 1, "q", "r", "x", judge_x=0, judge_y=2),
    ]


def test_win_rates_on_a_hand_checked_case():
    rows = win_rates(hand_ratings(), seed=5, draws=400)
    pq, qr = rows
    assert (pq["x"], pq["y"], pq["items"], pq["ratings"], pq["people"]) == ("p", "q", 2, 4, 2)
    assert (pq["x_votes"], pq["y_votes"], pq["tie_votes"]) == (2, 1, 1)
    # per task: item 1 x-share 1, item 2 x-share 0 → 0.5; y: 0 and 0.5 → 0.25; ties likewise 0.25
    assert pq["x_wins"]["estimate"] == 0.5 and pq["y_wins"]["estimate"] == 0.25 and pq["ties"]["estimate"] == 0.25
    # resampling the two people: the x share is 1 (person 1 twice), 0.5 or 0 (person 2 twice)
    assert pq["x_wins"]["lo"] == 0.0 and pq["x_wins"]["hi"] == 1.0
    assert qr["x_wins"] == {"estimate": 1.0, "lo": 1.0, "hi": 1.0}


def test_judge_order_agreement_on_a_hand_checked_case():
    j = judge_order_agreement(hand_ratings(), seed=5, draws=400)
    # item 1: judge p (3) over q (1), both ratings p → 2 agree; item 2 judge ties (2 ratings, not scored);
    # item 3: judge r (2) over q (0), the person chose q → 0 agree.
    assert (j["scored"], j["agree"], j["human_ties"], j["judge_ties"], j["missing"]) == (3, 2, 0, 2, 0)
    assert j["share"]["estimate"] == pytest.approx(0.5)  # per task 1 and 0, task-weighted
    assert j["share_decided"] == pytest.approx(2 / 3)


def test_bradley_terry_two_conditions_by_hand():
    # x beats y 2 times, one tie, y beats x once: wins 2.5 against 1.5, so θx − θy = log(5/3).
    ratings = [PairRating(i, i, "x", "y", o) for i, o in enumerate(["x", "x", "tie", "y"])]
    bt = bradley_terry(ratings, ["x", "y"], seed=3, draws=200)
    theta = {c["condition"]: c["theta"] for c in bt["conditions"]}
    assert theta["x"] == pytest.approx(math.log(5 / 3) / 2, abs=1e-9)
    assert theta["y"] == pytest.approx(-math.log(5 / 3) / 2, abs=1e-9)
    assert bt["estimable"] and bt["people"] == 4
    assert bt["dropped_draws"] > 0  # a draw of only x's wins has no finite scale


def test_bradley_terry_matches_choix():
    rng = np.random.default_rng(8)
    conditions = ["c1", "c2", "c3", "c4"]
    ratings = []
    for n in range(80):
        x, y = rng.choice(4, size=2, replace=False)
        o = rng.choice(["x", "y", "tie"], p=[0.55 if x < y else 0.3, 0.3 if x < y else 0.55, 0.15])
        ratings.append(PairRating(n, n % 9, conditions[x], conditions[y], str(o)))
    bt = bradley_terry(ratings, conditions, seed=3, draws=300)
    ours = np.array([c["theta"] for c in bt["conditions"]])
    # choix takes whole wins: a tie as one win each way and a win twice is the same likelihood, doubled.
    data = []
    for r in ratings:
        i, j = conditions.index(r.x), conditions.index(r.y)
        data += {"x": [(i, j), (i, j)], "y": [(j, i), (j, i)], "tie": [(i, j), (j, i)]}[r.outcome]
    for fitted in (choix.ilsr_pairwise(4, data, alpha=0.0, tol=1e-12), choix.opt_pairwise(4, data, alpha=0.0)):
        np.testing.assert_allclose(ours, fitted - fitted.mean(), atol=1e-6)
    assert all(c["lo"] < c["theta"] < c["hi"] for c in bt["conditions"])
    assert win_matrix(ratings, conditions).sum() == len(ratings)


def test_bradley_terry_without_a_linked_comparison_is_not_estimable():
    ratings = [PairRating(1, 1, "x", "y", "x"), PairRating(2, 2, "x", "y", "x")]
    bt = bradley_terry(ratings, ["x", "y"], seed=3, draws=50)
    assert not bt["estimable"] and bt["conditions"][0]["theta"] is None and "no finite scale" in bt["reason"]


# ---------------------------------------------------------------------------------------------
# Campaign, queue, page
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def pairwise(rated_run, cast):
    return pairwise_campaign_create(run=rated_run, name="pairs", conditions=CONDITIONS, raters=RATERS,
                                    user=cast["owner"], seed=11, ratings_per_item=2)


def test_pairs_cover_every_condition_pair_and_count_identical_texts(pairwise, rated_run):
    assert pairwise.kind == "pairwise" and pairwise.repeat_percent == 0
    assert [[p["x"], p["y"]] for p in pairwise.pairs] == [list(p) for p in itertools.combinations(CONDITIONS, 2)]
    items = list(RatingItem.objects.filter(campaign=pairwise))
    assert len(items) == sum(p["items"] for p in pairwise.pairs) > 0
    tasks = rated_run.predictions.values("task_id").distinct().count()
    for p in pairwise.pairs:
        assert p["items"] + p["identical"] + p["missing"] == tasks
    for item in items:
        assert item.prediction.text != item.prediction_b.text
        assert item.conditions == [item.prediction.condition, item.prediction_b.condition]
    # every pair item goes to exactly k raters
    per_item = Counter(Assignment.objects.filter(campaign=pairwise).values_list("item_id", flat=True))
    assert set(per_item.values()) == {2} and len(per_item) == len(items)


def test_identical_answers_are_skipped_as_ties(rated_run):
    # the same condition's answers against themselves are identical on every task
    items, counts = pair_candidates(rated_run, [[CONDITIONS[0], CONDITIONS[0]]])
    assert items == [] and counts[0]["identical"] > 0


def test_each_raters_sides_are_balanced_per_condition(pairwise):
    for rater_id in set(Assignment.objects.filter(campaign=pairwise).values_list("rater_id", flat=True)):
        rows = Assignment.objects.filter(campaign=pairwise, rater_id=rater_id).select_related("item")
        pairs = [tuple(a.item.conditions) for a in rows]
        on_a, shown = side_counts(pairs, [a.x_on_a for a in rows])
        assert all(abs(2 * on_a[c] - shown[c]) <= 1 for c in shown)
        assert all(a.x_on_a is not None for a in rows)



def test_a_rater_dealt_pairs_later_gets_balanced_sides_too(rated_run, cast):
    from django.contrib.auth import get_user_model
    from annotations.campaigns import open_items_deal, rater_add
    campaign = pairwise_campaign_create(run=rated_run, name="pairs later", conditions=CONDITIONS, raters=RATERS[:2],
                                        user=cast["owner"], seed=11)
    rater_add(campaign=campaign, username=RATERS[2])
    dealt = open_items_deal(campaign=campaign)[RATERS[2]]
    newcomer = get_user_model().objects.get(username=RATERS[2])
    rows = list(Assignment.objects.filter(campaign=campaign, rater=newcomer).select_related("item"))
    assert len(rows) == dealt > 3 and all(a.x_on_a is not None for a in rows)
    on_a, shown = side_counts([tuple(a.item.conditions) for a in rows], [a.x_on_a for a in rows])
    assert all(abs(2 * on_a[c] - shown[c]) <= 1 for c in shown)

def test_a_grade_campaign_stays_a_grade_campaign(campaign):
    assert campaign.kind == "grade" and campaign.pairs == []
    assert not RatingItem.objects.filter(campaign=campaign, prediction_b__isnull=False).exists()
    assert not Assignment.objects.filter(campaign=campaign, x_on_a__isnull=False).exists()


def test_stratified_sample_and_refusals(rated_run, cast):
    total = sum(p["items"] for p in pair_candidates(rated_run, [list(p) for p in
                                                                itertools.combinations(CONDITIONS, 2)])[1])
    small = pairwise_campaign_create(run=rated_run, name="few", conditions=CONDITIONS, raters=RATERS[:2],
                                     sample=RatingCampaign.Sample.STRATIFIED, sample_size=3, seed=4)
    assert small.items.count() == 3 < total
    assert sum(p["sampled"] for p in small.pairs) == 3
    with pytest.raises(PairwiseError, match="at least two conditions"):
        pairwise_campaign_create(run=rated_run, name="one", conditions=CONDITIONS[:1], raters=RATERS)
    with pytest.raises(PairwiseError, match="not a rater"):
        pairwise_campaign_create(run=rated_run, name="x", conditions=CONDITIONS, raters=["owner-user", "rater-a"])


def reference_campaign_create(*, run, name, conditions, raters, seed, ratings_per_item=2, sample="all",
                              sample_size=None):
    """The campaign as `pairwise_campaign_create` wrote it before COPY: model instances through
    bulk_create (copied as it stood, its checks left out)."""
    from annotations import sampling
    from annotations.campaign_rules import checked_raters
    from annotations.models import CampaignRater
    from annotations.pairwise import PAIRWISE, _pairs, sampling_sides
    pairs = _pairs(run, conditions, None)
    users = checked_raters(run.protocol.project, raters, ratings_per_item, error=PairwiseError)
    items, counts = pair_candidates(run, pairs)
    if sample == RatingCampaign.Sample.STRATIFIED and sample_size < len(items):
        keep = sampling.stratified_sample([i["stratum"] for i in items], [i["task_id"] for i in items],
                                          sample_size, seed)
        items = [items[i] for i in keep]
    for count in counts:
        count["sampled"] = sum(1 for i in items if (i["x"], i["y"]) == (count["x"], count["y"]))
    used = {c for pair in pairs for c in pair}
    campaign = RatingCampaign.objects.create(
        project=run.protocol.project, run=run, name=name, conditions=[c for c in run.protocol.conditions if c in used],
        sample=sample, sample_size=sample_size, seed=seed, ratings_per_item=ratings_per_item, repeat_percent=0,
        kind=PAIRWISE, pairs=counts)
    CampaignRater.objects.bulk_create([CampaignRater(campaign=campaign, user=u) for u in users])
    rows = RatingItem.objects.bulk_create([
        RatingItem(campaign=campaign, task_id=i["task_id"], answer_sha256=i["answer_sha256"],
                   prediction_id=i["prediction_id"], prediction_b_id=i["prediction_b_id"], conditions=[i["x"], i["y"]],
                   stratum=i["stratum"], judge_score=i["judge_score"], judge_score_b=i["judge_score_b"], number=n)
        for n, i in enumerate(items, start=1)])
    queues = sampling.assign(len(rows), [u.pk for u in users], ratings_per_item, seed)
    assignments = []
    for n, (rater_id, queue) in enumerate(queues.items()):
        sides = sampling_sides([items[i] for i in queue], seed + n + 1)
        assignments += [Assignment(campaign=campaign, item=rows[i], rater_id=rater_id, position=position,
                                   x_on_a=x_on_a)
                        for position, (i, x_on_a) in enumerate(zip(queue, sides))]
    Assignment.objects.bulk_create(assignments, batch_size=5000)
    return campaign


def stored_rows(campaign):
    """Every column of the campaign's items (by number) and assignments (by rater and position),
    but the ids and the campaign; an assignment names its item by number."""
    items = {row.pop("number"): row for row in RatingItem.objects.filter(campaign=campaign).values()}
    numbers = {}
    for number, row in items.items():
        numbers[row.pop("id")] = number
        row.pop("campaign_id")
    assignments = {}
    for row in Assignment.objects.filter(campaign=campaign).values():
        row.pop("id"), row.pop("campaign_id")
        row["item"] = numbers[row.pop("item_id")]
        assignments[(row["rater_id"], row["position"])] = row
    return items, assignments


@pytest.mark.parametrize("sample, size, k, seed", [("all", None, 2, 11), ("stratified", 7, 3, 4),
                                                   ("all", None, 1, 5)])
def test_copy_writes_the_rows_bulk_create_wrote(rated_run, sample, size, k, seed):
    new = pairwise_campaign_create(run=rated_run, name="by copy", conditions=CONDITIONS, raters=RATERS, seed=seed,
                                   sample=sample, sample_size=size, ratings_per_item=k)
    old = reference_campaign_create(run=rated_run, name="by bulk_create", conditions=CONDITIONS, raters=RATERS,
                                    seed=seed, sample=sample, sample_size=size, ratings_per_item=k)
    got, expected = stored_rows(new), stored_rows(old)
    assert got == expected
    assert len(got[0]) == new.items.count() > 0 and len(got[1]) == k * len(got[0])
    assert new.pairs == old.pairs
    # the items' ids increase with their numbers, as bulk_create's did
    assert list(new.items.order_by("pk").values_list("number", flat=True)) == sorted(got[0])


def test_the_rater_sees_two_answers_and_picks_a_side(pairwise):
    user = pairwise.raters.get(user__username="rater-a").user
    view = rater_item(pairwise, user)
    item = view["item"]
    assert set(item) == {"assignment", "question", "reference", "answer_a", "answer_b"}
    assignment = Assignment.objects.select_related("item__prediction", "item__prediction_b").get(pk=item["assignment"])
    x, y = assignment.item.prediction.text, assignment.item.prediction_b.text
    assert (item["answer_a"], item["answer_b"]) == ((x, y) if assignment.x_on_a else (y, x))
    with pytest.raises(RatingError, match="not a grade"):
        rating_record(campaign=pairwise, user=user, assignment_id=item["assignment"], grade=2)
    with pytest.raises(RatingError, match="choose A, B or T"):
        rating_record(campaign=pairwise, user=user, assignment_id=item["assignment"], grade=None)
    stored = rating_record(campaign=pairwise, user=user, assignment_id=item["assignment"], grade=None, preference="a")
    assert stored.preference == "a" and stored.grade is None
    assert rater_item(pairwise, user)["item"]["assignment"] != item["assignment"]
    assert rating_undo(campaign=pairwise, user=user) == item["assignment"]
    assert list(RatingEvent.objects.filter(assignment_id=item["assignment"]).values_list("kind", "preference")) == [
        ("rate", "a"), ("undo", "a")]


def test_a_grade_item_refuses_a_side(campaign):
    user = campaign.raters.get(user__username="rater-a").user
    item = rater_item(campaign, user)["item"]
    assert "answer" in item and "answer_a" not in item
    with pytest.raises(RatingError, match="not a side"):
        rating_record(campaign=campaign, user=user, assignment_id=item["assignment"], grade=None, preference="a")


def rate_all(campaign, choices=("a", "b", "tie")):
    for n, cr in enumerate(campaign.raters.select_related("user")):
        while (item := rater_item(campaign, cr.user)["item"]) is not None:
            rating_record(campaign=campaign, user=cr.user, assignment_id=item["assignment"], grade=None,
                          preference=choices[(n + item["assignment"]) % len(choices)])


def test_results_match_the_ratings_and_are_cached(pairwise):
    rate_all(pairwise)
    data = pairwise_results(pairwise)
    assert data["ratings"] == HumanGrade.objects.filter(campaign=pairwise).count() == 2 * pairwise.items.count()
    # a pair whose answers were identical on every task (the offline stand-in's memory and OwnWords) has no row
    assert [(r["x"], r["y"]) for r in data["win_rates"]] == [(p["x"], p["y"]) for p in pairwise.pairs if p["items"]]
    for row in data["win_rates"]:
        total = row["x_wins"]["estimate"] + row["y_wins"]["estimate"] + row["ties"]["estimate"]
        assert total == pytest.approx(1.0)
        assert row["x_votes"] + row["y_votes"] + row["tie_votes"] == row["ratings"] == 2 * row["items"]
    # the sides map to conditions: recount X's wins from the stored rows
    x_votes = Counter()
    for g in HumanGrade.objects.filter(campaign=pairwise).select_related("assignment__item"):
        if outcome(g.preference, g.assignment.x_on_a) == "x":
            x_votes[tuple(g.assignment.item.conditions)] += 1
    assert {(r["x"], r["y"]): r["x_votes"] for r in data["win_rates"]} == {
        k: x_votes.get(k, 0) for k in ((r["x"], r["y"]) for r in data["win_rates"])}
    assert data["seed"] == 7 and data["draws"] == 300  # the run's bootstrap settings
    assert pairwise_results(pairwise)["computed_at"] == data["computed_at"]  # cached


# ---------------------------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------------------------

def test_keyboard_page_flow_server_side(client, pairwise):
    user = pairwise.raters.get(user__username="rater-a").user
    client.force_login(user)
    base = f"/p/{pairwise.project.slug}/ratings/{pairwise.pk}/rate/"
    page = client.get(base).content.decode()
    assert 'id="pref-a"' in page and 'id="pref-tie"' in page and 'id="rate-answer-a"' in page
    assert 'name="grade"' not in page
    first = client.get(base + "item.json").json()["item"]["assignment"]
    answer = client.post(base + "submit/", {"assignment": first, "preference": "b", "seconds": "3.5"},
                         HTTP_ACCEPT="application/json").json()
    assert answer["ok"] == "stored" and answer["done"] == 1 and answer["item"]["assignment"] != first
    refused = client.post(base + "submit/", {"assignment": answer["item"]["assignment"]},
                          HTTP_ACCEPT="application/json")
    assert refused.status_code == 400 and "choose A, B or T" in refused.json()["error"]
    undone = client.post(base + "undo/", {}, HTTP_ACCEPT="application/json").json()
    assert undone["ok"] == "undone" and undone["item"]["assignment"] == first
    # the plain form (no script) posts and comes back
    response = client.post(base + "submit/", {"assignment": first, "preference": "tie"})
    assert response.status_code == 302 and HumanGrade.objects.get(assignment_id=first).preference == "tie"


def test_results_pages_numbers_for_readers_403_for_raters(client, pairwise, cast):
    rate_all(pairwise)
    base = f"/p/{pairwise.project.slug}/ratings/{pairwise.pk}/"
    for role in ("owner", "analyst", "viewer"):
        client.force_login(cast[role])
        assert client.get(base + "results/").url == base + "pairwise/"
        page = client.get(base + "pairwise/").content.decode()
        assert "Bradley–Terry" in page and 'id="wins-table"' in page
        question = RatingItem.objects.filter(campaign=pairwise).first().task.question_turn.text
        assert question not in page
        csv = client.get(base + "pairwise/wins.csv").content.decode()
        assert csv.splitlines()[0].startswith('"condition_x","condition_y","items"')
        assert len(csv.splitlines()) == 1 + sum(1 for p in pairwise.pairs if p["items"])
        assert client.get(base + "pairwise/bradley-terry.csv").status_code == 200
        assert client.get(base + "pairwise/nothing.csv").status_code == 404
    client.force_login(cast["rater"])
    assert client.get(base + "pairwise/").status_code == 403
    assert client.get(base + "pairwise/wins.csv").status_code == 403
    client.force_login(cast["outsider"])
    assert client.get(base + "pairwise/").status_code == 404
    client.logout()
    assert "/accounts/login/" in client.get(base + "pairwise/").url


def test_owner_creates_a_pairwise_campaign_from_the_form(client, rated_run, cast):
    client.force_login(cast["owner"])
    url = f"/p/{rated_run.protocol.project.slug}/runs/{rated_run.pk}/ratings/new-pairwise/"
    assert client.get(url).status_code == 200
    response = client.post(url, {"name": "web pairs", "conditions": CONDITIONS[1:], "sample": "all", "seed": 2,
                                 "ratings_per_item": 1, "raters": RATERS[:1]})
    assert response.status_code == 302
    made = RatingCampaign.objects.get(name="web pairs")
    assert made.kind == "pairwise" and [[p["x"], p["y"]] for p in made.pairs] == [CONDITIONS[1:]]
    client.force_login(cast["analyst"])
    assert client.get(url).status_code == 403


def test_owner_export_of_a_pairwise_campaign_says_the_side_and_the_winner(client, pairwise, cast):
    rate_all(pairwise)
    from annotations.rating_exports import PAIRWISE_HEADER, export_rows
    rows = export_rows(pairwise)
    assert len(rows) == HumanGrade.objects.filter(campaign=pairwise).count()
    for row in rows:
        assert row["winner"] == outcome(row["preference"], row["x_on_a"]) and row["grade"] is None
    client.force_login(cast["owner"])
    csv = client.get(f"/p/{pairwise.project.slug}/ratings/{pairwise.pk}/export.csv").content.decode()
    assert csv.splitlines()[0] == ",".join(f'"{h}"' for h in PAIRWISE_HEADER)
    page = client.get(f"/p/{pairwise.project.slug}/ratings/{pairwise.pk}/")
    assert page.status_code == 200  # the owner's campaign page serves a pairwise campaign too


def test_a_large_campaign_is_computed_on_the_queue(pairwise, monkeypatch):
    from annotations.jobs import job_campaign_results
    from annotations.pairwise import pairwise_results_for_page
    user = pairwise.raters.get(user__username="rater-a").user
    rating_record(campaign=pairwise, user=user, assignment_id=rater_item(pairwise, user)["item"]["assignment"],
                  grade=None, preference="tie")
    monkeypatch.setattr("annotations.campaign_agreement.INLINE_BUDGET", 0)  # the one budget of every kind
    queued = []
    data, current = pairwise_results_for_page(pairwise, enqueue=lambda pk, sha: queued.append(pk) or True)
    assert (data, current, queued) == (None, False, [pairwise.pk])
    job_campaign_results(pairwise.pk)  # what the analysis worker runs
    data, current = pairwise_results_for_page(pairwise, enqueue=lambda pk, sha: pytest.fail("queued again"))
    assert current and data["ratings"] == 1 and data["win_rates"][0]["tie_votes"] == 1


def test_the_owners_campaign_page_shows_the_pairs_and_no_gold(client, pairwise, cast):
    from annotations.campaigns import CampaignError, gold_set
    client.force_login(cast["owner"])
    page = client.get(f"/p/{pairwise.project.slug}/ratings/{pairwise.pk}/").content.decode()
    first = pairwise.pairs[0]
    assert f"{first['identical']} identical texts skipped" in page and 'id="gold-form"' not in page
    with pytest.raises(CampaignError, match="no gold grades"):
        gold_set(campaign=pairwise, number=1, grade=2)


def test_a_grade_campaigns_page_keeps_gold_and_adjudication(client, campaign, cast):
    client.force_login(cast["owner"])
    page = client.get(f"/p/{campaign.project.slug}/ratings/{campaign.pk}/").content.decode()
    assert 'id="gold-form"' in page and "Adjudication (" in page and 'id="pairwise-pairs"' not in page


def test_pairs_moved_from_a_departing_rater_keep_their_sides_and_export(client, pairwise, cast):
    from annotations.campaigns import rater_remove
    leaving = pairwise.raters.get(user__username="rater-c").user
    sides = dict(Assignment.objects.filter(campaign=pairwise, rater=leaving, status=Assignment.Status.OPEN)
                 .values_list("item_id", "x_on_a"))
    assert sides and None not in sides.values()
    last = Assignment.objects.order_by("-pk").values_list("pk", flat=True).first()
    moved = rater_remove(campaign=pairwise, username="rater-c")
    assert moved == len(sides)
    taken = Assignment.objects.filter(campaign=pairwise, pk__gt=last)   # the rows the move made
    assert {a.item_id: a.x_on_a for a in taken} == sides          # no moved pair lost its side
    for cr in pairwise.raters.filter(active=True).select_related("user"):
        while (item := rater_item(pairwise, cr.user)["item"]) is not None:
            rating_record(campaign=pairwise, user=cr.user, assignment_id=item["assignment"], grade=None,
                          preference="a")
    client.force_login(cast["owner"])
    response = client.get(f"/p/{pairwise.project.slug}/ratings/{pairwise.pk}/export.csv")
    assert response.status_code == 200 and response.content.decode().count("\r\n") > len(sides)
