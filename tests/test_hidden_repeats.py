"""Hidden repeats: a share of each rater's items shown to them again, later, never adjacent, looking
like any other item; the retest figures, and nothing of the repeats in the between-rater numbers."""
from collections import defaultdict

import numpy as np
import pytest
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from annotations import sampling
from annotations.adjudication import disputed_items
from annotations.campaign_agreement import campaign_results
from annotations.campaigns import CampaignError, campaign_create, rater_remove
from annotations.models import FIRST_SHOWING, REPEAT_SHOWING, Assignment
from annotations.rating import rater_item, rating_record
from annotations.rating_exports import export_rows
from tests.annotations_helpers import CONDITIONS, RATERS


@pytest.mark.parametrize("n, percent", [(0, 10), (2, 50), (3, 10), (10, 10), (37, 25), (120, 10), (50, 50)])
@pytest.mark.parametrize("seed", [1, 2, 99])
def test_repeats_are_the_share_asked_later_and_never_adjacent(n, percent, seed):
    queue = list(range(100, 100 + n))
    shown = sampling.with_repeats(queue, percent, seed)
    firsts = [item for item, repeat in shown if not repeat]
    repeats = [item for item, repeat in shown if repeat]
    assert firsts == queue                                   # the rater's own order is kept
    expected = 0 if n < 3 else min(round(n * percent / 100), n - 2)
    assert len(repeats) == expected and len(set(repeats)) == len(repeats)
    for item in repeats:
        first, again = shown.index((item, False)), shown.index((item, True))
        assert again >= first + 2, (item, first, again)      # later, something in between
    assert sampling.with_repeats(queue, percent, seed) == shown  # seeded


def test_no_repeat_share_leaves_the_queue_as_it_was():
    queue = [5, 3, 9, 1]
    assert sampling.with_repeats(queue, 0, 4) == [(i, False) for i in queue]
    with pytest.raises(ValueError):
        sampling.with_repeats(queue, 101, 4)


@pytest.fixture
def repeated(rated_run, cast):
    return campaign_create(run=rated_run, name="retest", conditions=CONDITIONS, raters=RATERS[:2],
                           user=cast["owner"], seed=11, repeat_percent=30)


def rater_user(campaign, name):
    return campaign.raters.get(user__username=name).user


def test_each_item_still_has_k_first_showings_and_each_repeat_follows_its_own_rater(repeated):
    rows = list(Assignment.objects.filter(campaign=repeated).values_list("item_id", "rater_id", "position", "showing"))
    per_item = defaultdict(set)
    for item_id, rater_id, _, showing in rows:
        if showing == FIRST_SHOWING:
            per_item[item_id].add(rater_id)
    assert set(per_item) == set(repeated.items.values_list("pk", flat=True))
    assert all(len(r) == 2 for r in per_item.values())
    position = {(i, r, s): p for i, r, p, s in rows}
    repeats = [(i, r, p) for i, r, p, s in rows if s == REPEAT_SHOWING]
    assert repeats, "30% of each queue comes back"
    for item_id, rater_id, p in repeats:
        assert p >= position[(item_id, rater_id, FIRST_SHOWING)] + 2
    by_rater = defaultdict(int)
    for _, rater_id, _ in repeats:
        by_rater[rater_id] += 1
    firsts = defaultdict(int)
    for _, rater_id, _, s in rows:
        firsts[rater_id] += s == FIRST_SHOWING
    assert {r: by_rater[r] for r in firsts} == {r: round(n * 0.3) for r, n in firsts.items()}


def test_a_repeat_looks_exactly_like_its_first_showing_to_the_rater(repeated, client):
    user = rater_user(repeated, "rater-a")
    client.force_login(user)
    slug = repeated.project.slug
    seen, repeats_seen = {}, 0
    while (view := rater_item(repeated, user))["item"] is not None:
        item = view["item"]
        assignment = Assignment.objects.get(pk=item["assignment"])
        shown = {k: v for k, v in item.items() if k != "assignment"}
        assert set(item) == {"assignment", "question", "reference", "answer"}   # nothing says "repeat"
        # What the rater's browser gets: the same as at the first showing, but the id and progress.
        served = client.get(reverse("rate_item", args=[slug, repeated.pk])).json()
        assert served["item"]["assignment"] == assignment.pk
        served_item = {k: v for k, v in served["item"].items() if k != "assignment"}
        extra = set(served) - {"item", "campaign_open", "done", "assigned", "seconds_spent", "can_undo"}
        assert not extra, extra
        if assignment.showing == REPEAT_SHOWING:
            assert seen[assignment.item_id] == (shown, served_item)
            repeats_seen += 1
        else:
            seen[assignment.item_id] = (shown, served_item)
        rating_record(campaign=repeated, user=user, assignment_id=item["assignment"], grade=2)
    assert repeats_seen > 0


def rate_all(campaign, grades_by_rater):
    """Every open assignment, first showings and repeats, with grade_by_rater[name](assignment)."""
    for name, grade in grades_by_rater.items():
        user = rater_user(campaign, name)
        while (view := rater_item(campaign, user))["item"] is not None:
            assignment = Assignment.objects.select_related("item").get(pk=view["item"]["assignment"])
            rating_record(campaign=campaign, user=user, assignment_id=assignment.pk, grade=grade(assignment))


def without_retest(payload):
    return {k: v for k, v in payload.items() if k not in ("retest", "inputs_sha256", "computed_at")}


def test_repeats_never_enter_the_between_rater_or_judge_numbers_and_give_the_retest(repeated):
    def first_grade(a):
        return (a.item.number + a.rater_id) % 4

    def repeat_grade(a):  # the rater drifts by one on some repeats
        return first_grade(a) if a.showing == FIRST_SHOWING or a.item.number % 3 else (first_grade(a) + 1) % 4

    for name in RATERS[:2]:
        user = rater_user(repeated, name)
        # first showings only; the repeats stay open
        for a in Assignment.objects.select_related("item").filter(campaign=repeated, rater=user,
                                                                  showing=FIRST_SHOWING).order_by("position"):
            rating_record(campaign=repeated, user=user, assignment_id=a.pk, grade=first_grade(a))
    before = campaign_results(repeated)
    assert before["retest"]["pairs"] is None          # no repeat graded yet: nothing to compare
    rate_all(repeated, {name: repeat_grade for name in RATERS[:2]})
    after = campaign_results(repeated)
    assert without_retest(after) == without_retest(before)   # every between-rater and judge figure unchanged
    a, b = zip(*_aligned(repeated, first_grade, repeat_grade))
    retest = after["retest"]["pairs"]
    assert retest["n_pairs"] == len(a) == Assignment.objects.filter(campaign=repeated, showing=REPEAT_SHOWING).count()
    assert retest["exact"]["estimate"] == pytest.approx(np.mean(np.array(a) == np.array(b)))
    assert 0 < np.mean(np.array(a) == np.array(b)) < 1           # the drift is there to be measured
    assert retest["kappa"]["estimate"] == pytest.approx(
        cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3]))
    assert retest["kappa"]["lo"] <= retest["kappa"]["estimate"] <= retest["kappa"]["hi"]
    assert after["retest"]["percent"] == 30


def _aligned(campaign, first_grade, repeat_grade):
    """(first grade, repeat grade) per hidden repeat, by the assignments themselves."""
    rows = Assignment.objects.select_related("item").filter(campaign=campaign)
    first = {(a.item_id, a.rater_id): first_grade(a) for a in rows if a.showing == FIRST_SHOWING}
    return [(first[(a.item_id, a.rater_id)], repeat_grade(a)) for a in rows if a.showing == REPEAT_SHOWING]


def test_a_repeat_graded_far_from_its_first_showing_disputes_nothing(repeated):
    rate_all(repeated, {name: (lambda a: 3 if a.showing == REPEAT_SHOWING else 1) for name in RATERS[:2]})
    assert disputed_items(repeated) == []


def test_the_export_marks_the_showing_and_the_results_page_shows_the_retest(repeated, client, cast):
    rate_all(repeated, {name: (lambda a: 2) for name in RATERS[:2]})
    rows = export_rows(repeated)
    assert {r["showing"] for r in rows} == {1, 2}
    assert sum(r["showing"] == 2 for r in rows) == Assignment.objects.filter(campaign=repeated, showing=2).count()
    client.force_login(cast["owner"])
    page = client.get(reverse("campaign_results", args=[repeated.project.slug, repeated.pk])).content.decode()
    assert "same rater, hidden repeat (retest ceiling)" in page


def test_a_departing_raters_open_repeats_are_withdrawn_not_moved(rated_run, cast):
    campaign = campaign_create(run=rated_run, name="leave", conditions=CONDITIONS, raters=RATERS,
                               user=cast["owner"], seed=3, repeat_percent=40)
    leaving = rater_user(campaign, "rater-c")
    open_repeats = Assignment.objects.filter(campaign=campaign, rater=leaving, showing=REPEAT_SHOWING).count()
    assert open_repeats > 0
    others_before = set(Assignment.objects.filter(campaign=campaign, showing=REPEAT_SHOWING)
                        .exclude(rater=leaving).values_list("pk", flat=True))
    moved = rater_remove(campaign=campaign, username="rater-c")
    assert moved == Assignment.objects.filter(campaign=campaign, rater=leaving, showing=FIRST_SHOWING,
                                              status=Assignment.Status.REASSIGNED).count()
    # the repeats stay with their raters: none was created for another rater by the move
    assert set(Assignment.objects.filter(campaign=campaign, showing=REPEAT_SHOWING)
               .exclude(rater=leaving).values_list("pk", flat=True)) == others_before
    assert Assignment.objects.filter(campaign=campaign, rater=leaving, showing=REPEAT_SHOWING,
                                     status=Assignment.Status.REASSIGNED).count() == open_repeats
    for items in _first_showings(campaign).values():
        assert len(items) == len(set(items))
    assert not Assignment.objects.filter(campaign=campaign, rater=leaving, status=Assignment.Status.OPEN).exists()


def _first_showings(campaign):
    out = defaultdict(list)
    for item_id, rater_id in (Assignment.objects.filter(campaign=campaign, showing=FIRST_SHOWING)
                              .exclude(status=Assignment.Status.REASSIGNED).values_list("item_id", "rater_id")):
        out[rater_id].append(item_id)
    return out


def test_a_repeat_share_outside_0_to_50_is_refused_and_stores_nothing(rated_run, cast):
    with pytest.raises(CampaignError, match="between 0 and 50 percent"):
        campaign_create(run=rated_run, name="x", conditions=CONDITIONS, raters=RATERS[:2], repeat_percent=60)
    assert not Assignment.objects.exists()


def test_a_rater_who_joins_later_gets_the_campaigns_share_of_repeats_of_the_items_dealt_to_them(repeated):
    from annotations.campaigns import open_items_deal, rater_add
    newcomer = rater_user(repeated, RATERS[0]).__class__.objects.get(username=RATERS[2])
    rater_add(campaign=repeated, username=newcomer.username)
    dealt = open_items_deal(campaign=repeated)[newcomer.username]
    rows = list(Assignment.objects.filter(campaign=repeated, rater=newcomer).order_by("position")
                .values_list("item_id", "showing", "position"))
    firsts = [item for item, showing, _ in rows if showing == FIRST_SHOWING]
    repeats = [item for item, showing, _ in rows if showing == REPEAT_SHOWING]
    assert len(firsts) == dealt > 3 and len(set(firsts)) == dealt
    # 30 % of what was dealt, each shown later and never adjacent, positions one run 0..n-1
    assert len(repeats) == round(dealt * 30 / 100) > 0 and set(repeats) <= set(firsts)
    order = [item for item, _, _ in rows]
    for item in repeats:
        assert order.index(item) + 2 <= len(order) - 1 - order[::-1].index(item)
    assert [p for _, _, p in rows] == list(range(len(rows)))
    # the rater rates both showings of a repeat: the retest counts the pair
    item = repeats[0]
    for showing, grade in ((FIRST_SHOWING, 2), (REPEAT_SHOWING, 3)):
        a = Assignment.objects.get(campaign=repeated, rater=newcomer, item_id=item, showing=showing)
        rating_record(campaign=repeated, user=newcomer, assignment_id=a.pk, grade=grade)
    retest = campaign_results(repeated, use_cache=False)["retest"]["pairs"]
    assert retest["n_pairs"] == 1
