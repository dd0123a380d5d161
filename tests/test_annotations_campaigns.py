"""Campaigns: items, assignment invariants, reassignment, gold, close, bad input."""
from collections import Counter, defaultdict

import pytest

from annotations import sampling
from annotations.campaigns import (
    CampaignError, assignments_reassign, campaign_close, campaign_create, campaign_progress, gold_set,
    rateable_items, rater_add, rater_remove,
)
from annotations.models import Assignment, RatingItem
from annotations.rating import rating_record
from experiments.core.conditions import FINAL
from experiments.models import Prediction, Run
from tests.annotations_helpers import CONDITIONS, RATERS


def live(campaign):
    return Assignment.objects.filter(campaign=campaign).exclude(status=Assignment.Status.REASSIGNED)


def assert_invariants(campaign):
    k = campaign.ratings_per_item
    per_item = defaultdict(list)
    for item_id, rater_id in live(campaign).values_list("item_id", "rater_id"):
        per_item[item_id].append(rater_id)
    assert set(per_item) == set(campaign.items.values_list("pk", flat=True))
    for raters in per_item.values():
        assert len(raters) == k and len(set(raters)) == k
    # no rater ever holds an item twice, reassigned rows included
    pairs = list(Assignment.objects.filter(campaign=campaign).values_list("item_id", "rater_id"))
    assert len(pairs) == len(set(pairs))
    positions = list(Assignment.objects.filter(campaign=campaign).values_list("rater_id", "position"))
    assert len(positions) == len(set(positions))


def test_items_are_the_distinct_answers_and_each_goes_to_exactly_k_raters(campaign, rated_run):
    finals = Prediction.objects.filter(run=rated_run, label=FINAL, condition__in=CONDITIONS,
                                       status=Prediction.Status.OK)
    distinct = set(finals.values_list("task_id", "answer_sha256"))
    assert campaign.items.count() == len(distinct) > 0
    assert set(campaign.items.values_list("task_id", "answer_sha256")) == distinct
    for item in campaign.items.all():
        producing = set(finals.filter(task=item.task, answer_sha256=item.answer_sha256)
                        .values_list("condition", flat=True))
        assert set(item.conditions) == producing
    assert_invariants(campaign)
    loads = Counter(live(campaign).values_list("rater_id", flat=True))
    assert max(loads.values()) - min(loads.values()) <= 1


def test_queues_are_seeded_reproducible_and_mix_conditions(rated_run, cast):
    a = campaign_create(run=rated_run, name="a", conditions=CONDITIONS, raters=RATERS, seed=5,
                        ratings_per_item=2)
    b = campaign_create(run=rated_run, name="b", conditions=CONDITIONS, raters=RATERS, seed=5,
                        ratings_per_item=2)
    c = campaign_create(run=rated_run, name="c", conditions=CONDITIONS, raters=RATERS, seed=6,
                        ratings_per_item=2)

    def queues(campaign):
        return [(a.rater.username, a.item.number) for a in
                Assignment.objects.filter(campaign=campaign).select_related("rater", "item")
                .order_by("rater__username", "position")]

    assert queues(a) == queues(b)
    assert queues(a) != queues(c)
    first = Assignment.objects.filter(campaign=a).select_related("item").order_by("rater_id", "position")
    firsts = [x.item.conditions[0] for x in first][:6]
    assert len(set(firsts)) > 1  # not one condition after another


def test_pure_assignment_invariants_over_many_seeds():
    for seed in range(30):
        for k in (1, 2, 3):
            queues = sampling.assign(57, ["r1", "r2", "r3", "r4"], k, seed)
            counts = Counter(i for q in queues.values() for i in q)
            assert set(counts) == set(range(57)) and set(counts.values()) == {k}
            assert all(len(q) == len(set(q)) for q in queues.values())
            sizes = [len(q) for q in queues.values()]
            assert max(sizes) - min(sizes) <= 1
    assert sampling.assign(20, ["x", "y"], 2, 1) == sampling.assign(20, ["x", "y"], 2, 1)


def test_stratified_sample_spreads_over_strata_and_tasks():
    strata = ["m|0"] * 50 + ["m|3"] * 30 + ["o|1"] * 19 + ["o|2"] * 1
    tasks = [i % 10 for i in range(100)]
    chosen = sampling.stratified_sample(strata, tasks, 20, seed=3)
    assert len(chosen) == 20 == len(set(chosen))
    got = Counter(strata[i] for i in chosen)
    # One each first (every stratum present), then 16 by 50:30:19:1 = 8, 4.8, 3.04, 0.16,
    # floors 8, 4, 3, 0 and the one left to the largest remainder (0.8): 9, 6, 4, 1.
    assert got == {"m|0": 9, "m|3": 6, "o|1": 4, "o|2": 1}
    m0 = [tasks[i] for i in chosen if strata[i] == "m|0"]
    assert len(set(m0)) == 9  # nine items of ten tasks: no task twice before every task once
    assert chosen == sampling.stratified_sample(strata, tasks, 20, seed=3)
    assert chosen != sampling.stratified_sample(strata, tasks, 20, seed=4)


def test_a_stratified_campaign_takes_the_asked_size(rated_run):
    total = len(rateable_items(rated_run, CONDITIONS))
    c = campaign_create(run=rated_run, name="s", conditions=CONDITIONS, raters=RATERS[:2], sample="stratified",
                        sample_size=total // 2, seed=2)
    assert c.items.count() == total // 2
    assert_invariants(c)


def test_reassignment_keeps_the_invariants_and_moves_only_open_items(rated_run, cast):
    c = campaign_create(run=rated_run, name="r", conditions=CONDITIONS, raters=RATERS, seed=9)
    leaver = Assignment.objects.filter(campaign=c, rater__username="rater-a").order_by("position")
    first = leaver.first()
    rating_record(campaign=c, user=first.rater, assignment_id=first.pk, grade=2)
    open_before = leaver.filter(status=Assignment.Status.OPEN).count()
    moved = rater_remove(campaign=c, username="rater-a")
    assert moved == open_before
    assert Assignment.objects.get(pk=first.pk).status == Assignment.Status.DONE  # a rating stays
    assert not Assignment.objects.filter(campaign=c, rater__username="rater-a",
                                         status=Assignment.Status.OPEN).exists()
    assert_invariants(c)


def test_reassignment_with_no_rater_left_changes_nothing(campaign):
    before = list(Assignment.objects.filter(campaign=campaign).values_list("pk", "rater_id", "status"))
    with pytest.raises(CampaignError, match="add a rater"):
        assignments_reassign(campaign=campaign, username="rater-a")  # rater-b holds every item already
    assert list(Assignment.objects.filter(campaign=campaign).values_list("pk", "rater_id", "status")) == before
    rater_add(campaign=campaign, username="rater-c")
    moved = assignments_reassign(campaign=campaign, username="rater-a")
    assert moved > 0
    assert_invariants(campaign)


@pytest.mark.parametrize("change, message", [
    ({"name": ""}, "needs a name"),
    ({"conditions": []}, "at least one condition"),
    ({"conditions": ["no-such"]}, "not a condition"),
    ({"raters": ["rater-a"]}, "at least 2 raters"),
    ({"raters": ["rater-a", "rater-a"]}, "listed twice"),
    ({"raters": ["rater-a", "owner-user"]}, "not a rater"),
    ({"raters": ["rater-a", "outsider"]}, "not a member"),
    ({"ratings_per_item": 0}, "between 1 and"),
    ({"sample": "stratified", "sample_size": 0}, "size of at least 1"),
])
def test_bad_campaign_input_is_refused_and_creates_nothing(rated_run, change, message):
    args = {"run": rated_run, "name": "bad", "conditions": CONDITIONS, "raters": RATERS[:2], **change}
    with pytest.raises(CampaignError, match=message):
        campaign_create(**args)
    assert not RatingItem.objects.exists() and not Assignment.objects.exists()


def test_an_unfinished_run_cannot_be_rated(rated_run):
    Run.objects.filter(pk=rated_run.pk).update(status=Run.Status.RUNNING)
    rated_run.refresh_from_db()
    with pytest.raises(CampaignError, match="finished run"):
        campaign_create(run=rated_run, name="x", conditions=CONDITIONS, raters=RATERS[:2])


def test_gold_close_and_progress(campaign):
    gold_set(campaign=campaign, number=1, grade=3)
    assert campaign.items.get(number=1).gold_grade == 3
    with pytest.raises(CampaignError, match="0, 1, 2 or 3"):
        gold_set(campaign=campaign, number=1, grade=4)
    with pytest.raises(CampaignError, match="no item"):
        gold_set(campaign=campaign, number=10_000, grade=1)
    rows = {r["username"]: r for r in campaign_progress(campaign)}
    assert set(rows) == {"rater-a", "rater-b"}
    assert rows["rater-a"]["assigned"] == campaign.items.count() and rows["rater-a"]["done"] == 0
    campaign_close(campaign=campaign)
    with pytest.raises(CampaignError, match="closed"):
        gold_set(campaign=campaign, number=1, grade=None)
