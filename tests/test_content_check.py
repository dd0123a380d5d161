"""Content-check campaigns ("same content?" for the wording controls' paraphrases): pairs, assignment,
the rater's view and answers, the numbers on hand cases, and bad input."""
import numpy as np
import pytest
from django.contrib.auth import get_user_model

from annotations.content_check import (
    NO_CONTROL, ContentCheckError, content_check_campaign_create, content_check_results, content_ratings,
)
from annotations.core.content_check import (
    MAJORITY, UNANIMOUS, ContentRating, agreement, kept_items, restricted_contrast, shares,
)
from annotations.core.rater_agreement import between_raters
from annotations.models import Assignment, CampaignRater, HumanGrade, RatingCampaign, RatingEvent
from annotations.rating import RatingError, rater_item, rating_record, rating_undo
from experiments.analysis.grades import grade_matrix
from experiments.core.stats.paired import paired_bootstrap
from experiments.models import Prediction
from tests.annotations_helpers import MEMORY, OWNWORDS, RATERS, add_raters, finished_run

REWORDED, PARAPHRASED = f"{MEMORY}+answer-paraphrased", f"{OWNWORDS}+paraphrased"


# ---------------------------------------------------------------------------------------------
# Pure parts
# ---------------------------------------------------------------------------------------------

def hand_ratings():
    # Control c: item 1 (task 10, person 1) yes, yes; item 2 (task 11, person 2) yes, no, partly.
    # Control d: item 3 (task 10, person 1) partly.
    return [ContentRating(1, 10, 1, "c", "R1", "yes"), ContentRating(1, 10, 1, "c", "R2", "yes"),
            ContentRating(2, 11, 2, "c", "R1", "yes"), ContentRating(2, 11, 2, "c", "R2", "no"),
            ContentRating(2, 11, 2, "c", "R3", "partly"), ContentRating(3, 10, 1, "d", "R2", "partly")]


def test_shares_on_a_hand_checked_case():
    c, d = shares(hand_ratings(), seed=5, draws=400)
    assert (c["condition"], c["items"], c["ratings"], c["people"]) == ("c", 2, 5, 2)
    assert (c["yes_votes"], c["partly_votes"], c["no_votes"]) == (3, 1, 1)
    # per item: yes 1 and 1/3 → 2/3; partly 0 and 1/3 → 1/6; no likewise 1/6
    assert c["yes"]["estimate"] == pytest.approx(2 / 3) and c["partly"]["estimate"] == pytest.approx(1 / 6)
    # resampling the two people: the yes share is 1 (person 1 twice), 2/3 or 1/3 (person 2 twice)
    assert c["yes"]["lo"] == pytest.approx(1 / 3) and c["yes"]["hi"] == 1.0
    assert d["partly"] == {"estimate": 1.0, "lo": 1.0, "hi": 1.0}
    # the same numbers as the project's bootstrap, column by column
    direct = paired_bootstrap([1, 2], [1.0, 1 / 3], seed=5, draws=400)
    assert (c["yes"]["lo"], c["yes"]["hi"]) == (direct.lo, direct.hi)


def test_the_two_rules_of_keeping_the_content():
    assert kept_items(hand_ratings(), MAJORITY) == {1: True, 2: False, 3: False}
    assert kept_items(hand_ratings(), UNANIMOUS) == {1: True, 2: False, 3: False}
    two_of_three = [ContentRating(4, 12, 3, "c", r, a) for r, a in (("R1", "yes"), ("R2", "no"), ("R3", "yes"))]
    assert kept_items(two_of_three, MAJORITY) == {4: True} and kept_items(two_of_three, UNANIMOUS) == {4: False}
    one_of_two = [ContentRating(5, 12, 3, "c", r, a) for r, a in (("R1", "yes"), ("R2", "partly"))]
    assert kept_items(one_of_two, MAJORITY) == {5: False}  # half is no majority
    with pytest.raises(ValueError):
        kept_items(hand_ratings(), "most")
    with pytest.raises(ValueError):
        shares([ContentRating(1, 1, 1, "c", "R1", "maybe")], seed=1, draws=10)


def test_agreement_is_rater_agreement_on_the_coded_answers():
    result = agreement(hand_ratings(), seed=3, draws=300)
    # items 1, 2, 3 × raters R1, R2, R3 coded no 0, partly 1, yes 2
    grades = np.array([[2, 2, np.nan], [2, 0, 1], [np.nan, 1, np.nan]])
    expected = between_raters(grades, np.array([1, 2, 1]), np.ones(3, dtype=bool),
                              {"seed": 3, "draws": 300, "level": 0.95})
    assert {k: result[k] for k in expected} == expected
    assert result["pairs"]["n_pairs"] == 4  # item 1: one pair; item 2: three
    assert result["pairs"]["exact"]["estimate"] == 0.25


def test_a_restricted_contrast_is_the_bootstrap_of_the_kept_tasks():
    grades = np.array([[3, 2, 1, 0, 3], [1, 2, np.nan, 0, 0]])
    tasks, person = np.array([10, 11, 12, 13, 14]), np.array([1, 1, 2, 3, 3])
    keep = np.array([True, False, True, True, True])
    got = restricted_contrast(grades, tasks, person, [1, -1], keep, seed=9, draws=500)
    # kept and graded under both: tasks 10, 13, 14 (12 has no second grade)
    direct = paired_bootstrap([1, 3, 3], np.array([2, 0, 3]) / 3, seed=9, draws=500)
    assert got == {"estimate": direct.estimate, "lo": direct.lo, "hi": direct.hi, "tasks": 3, "people": 2}
    assert restricted_contrast(grades, tasks, person, [1, -1], np.zeros(5, dtype=bool), seed=9, draws=500)["tasks"] == 0


# ---------------------------------------------------------------------------------------------
# With the database: a finished offline run with both kinds of controls
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def controls_run(cast, project):
    run = finished_run(project, people=3, conditions=[MEMORY, REWORDED, OWNWORDS, PARAPHRASED])
    add_raters(project)
    return run


def test_pairs_are_each_original_and_its_paraphrase_given_to_k_raters(controls_run, cast):
    campaign = content_check_campaign_create(run=controls_run, name="check", raters=RATERS, user=cast["owner"],
                                             seed=4, ratings_per_item=2)
    assert campaign.kind == "content-check" and campaign.conditions == [REWORDED, PARAPHRASED]
    tasks = Prediction.objects.filter(run=controls_run, condition=MEMORY, label="final").count()
    assert [(p["condition"], p["original"], p["items"]) for p in campaign.pairs] == [
        (REWORDED, MEMORY, tasks), (PARAPHRASED, OWNWORDS, tasks)]
    for item in campaign.items.select_related("prediction", "prediction_b"):
        if item.conditions == [REWORDED]:  # the draft b0 and its rewrite
            assert (item.prediction.condition, item.prediction.label) == (REWORDED, "b0")
            assert (item.prediction_b.condition, item.prediction_b.label) == (REWORDED, "final")
            assert item.judge_score is not None
        else:  # the verbatim excerpts and the paraphrased ones
            assert (item.prediction.condition, item.prediction_b.condition) == (OWNWORDS, PARAPHRASED)
            assert item.prediction.evidence and item.prediction_b.evidence
        raters = list(item.assignments.values_list("rater_id", flat=True))
        assert len(raters) == len(set(raters)) == 2
    loads = sorted(Assignment.objects.filter(campaign=campaign).values_list("rater_id", flat=True))
    counts = [loads.count(r) for r in set(loads)]
    assert max(counts) - min(counts) <= 1
    queues = list(Assignment.objects.filter(campaign=campaign).order_by("rater_id", "position")
                  .values_list("rater__username", "item__number"))
    again = content_check_campaign_create(run=controls_run, name="again", raters=RATERS, user=cast["owner"], seed=4,
                                          ratings_per_item=2)
    assert list(Assignment.objects.filter(campaign=again).order_by("rater_id", "position")
                .values_list("rater__username", "item__number")) == queues  # seeded


def test_a_stratified_sample_keeps_both_controls(controls_run, cast):
    campaign = content_check_campaign_create(run=controls_run, name="some", raters=RATERS[:2], user=cast["owner"],
                                             sample="stratified", sample_size=6, seed=2, ratings_per_item=1)
    assert campaign.items.count() == 6
    assert [p["sampled"] for p in campaign.pairs] == [3, 3]


def test_a_run_without_paraphrases_is_refused_with_a_message(rated_run, cast, client):
    with pytest.raises(ContentCheckError) as refused:
        content_check_campaign_create(run=rated_run, name="none", raters=RATERS[:2], user=cast["owner"])
    assert str(refused.value) == NO_CONTROL
    assert not RatingCampaign.objects.exists()
    # the page says so instead of offering a form
    client.force_login(cast["owner"])
    page = client.get(f"/p/{rated_run.protocol.project.slug}/runs/{rated_run.pk}/ratings/new-content-check/")
    assert page.status_code == 200 and 'id="content-check-unavailable"' in page.content.decode()
    assert "no paraphrase control to check" in page.content.decode()


def test_bad_input_is_refused_with_a_message_and_nothing_written(controls_run, cast):
    before = RatingCampaign.objects.count()
    for kwargs, message in [({"conditions": [MEMORY]}, "not a paraphrase control of this run"),
                            ({"conditions": []}, "choose at least one"),
                            ({"ratings_per_item": 4}, "at least 4 raters")]:
        with pytest.raises(ContentCheckError, match=message):
            content_check_campaign_create(run=controls_run, name="bad", raters=RATERS, user=cast["owner"], **kwargs)
    assert RatingCampaign.objects.count() == before


def test_a_rater_answers_yes_partly_or_no_and_undoes(controls_run, cast):
    campaign = content_check_campaign_create(run=controls_run, name="rate", raters=RATERS[:2], user=cast["owner"],
                                             seed=1, ratings_per_item=2)
    rater = get_user_model().objects.get(username="rater-a")
    view = rater_item(campaign, rater)
    item = view["item"]
    assert set(item) == {"assignment", "question", "original", "rewritten", "what"}
    assignment = Assignment.objects.select_related("item__prediction", "item__prediction_b").get(pk=item["assignment"])
    field = "evidence" if assignment.item.conditions == [PARAPHRASED] else "text"
    assert (item["original"], item["rewritten"]) == (getattr(assignment.item.prediction, field),
                                                     getattr(assignment.item.prediction_b, field))
    for refused in ({"grade": 2}, {"grade": None, "preference": "a"}, {"grade": None},
                    {"grade": None, "same_content": "maybe"}):
        with pytest.raises(RatingError):
            rating_record(campaign=campaign, user=rater, assignment_id=item["assignment"], **refused)
    assert not HumanGrade.objects.filter(campaign=campaign).exists()
    stored = rating_record(campaign=campaign, user=rater, assignment_id=item["assignment"], grade=None,
                           same_content="partly")
    assert stored.same_content == "partly"
    assert rater_item(campaign, rater)["item"]["assignment"] != item["assignment"]
    rating_undo(campaign=campaign, user=rater)
    assert rater_item(campaign, rater)["item"]["assignment"] == item["assignment"]
    assert list(RatingEvent.objects.filter(assignment_id=item["assignment"]).values_list("kind", "same_content")) == [
        ("rate", "partly"), ("undo", "partly")]


def test_the_results_on_a_hand_rated_campaign(controls_run, cast):
    campaign = content_check_campaign_create(run=controls_run, name="numbers", raters=RATERS[:2], user=cast["owner"],
                                             seed=6, ratings_per_item=2)
    users = {u.pk: u for u in get_user_model().objects.filter(username__in=RATERS[:2])}
    # Every evidence paraphrase judged kept by both raters but on its first task (no, yes: not kept);
    # every answer paraphrase "partly" by one rater, "yes" by the other (not a majority).
    first_task = min(campaign.items.values_list("task_id", flat=True))
    for a in Assignment.objects.filter(campaign=campaign).select_related("item").order_by("rater_id", "position"):
        first_rater = a.rater_id == min(users)
        if a.item.conditions == [PARAPHRASED]:
            answer = "no" if a.item.task_id == first_task and first_rater else "yes"
        else:
            answer = "partly" if first_rater else "yes"
        rating_record(campaign=campaign, user=users[a.rater_id], assignment_id=a.pk, grade=None, same_content=answer)
    data = content_check_results(campaign)
    rows = {r["condition"]: r for r in data["shares"]}
    n = campaign.items.filter(conditions=[PARAPHRASED]).count()
    assert rows[PARAPHRASED]["yes_votes"] == 2 * n - 1 and rows[PARAPHRASED]["no_votes"] == 1
    assert rows[PARAPHRASED]["yes"]["estimate"] == pytest.approx((n - 0.5) / n)
    assert rows[REWORDED]["partly"]["estimate"] == pytest.approx(0.5)
    by_name = {c["name"]: {v["subset"]: v for v in c["versions"]} for c in data["contrasts"]}
    evidence = by_name[f"{OWNWORDS} − {PARAPHRASED}"]
    assert evidence["all graded tasks"]["tasks"] == n
    assert evidence["kept (majority)"]["tasks"] == n - 1 and evidence["kept (unanimous)"]["tasks"] == n - 1
    # the restricted contrast is the run's bootstrap on the kept tasks, exactly
    matrix = grade_matrix(controls_run, (OWNWORDS, PARAPHRASED))
    keep = matrix.task_ids != first_task
    diff = (matrix.grades[0] - matrix.grades[1])[keep] / 3
    direct = paired_bootstrap(matrix.person[keep], diff, seed=7, draws=300)
    assert (evidence["kept (majority)"]["estimate"], evidence["kept (majority)"]["lo"],
            evidence["kept (majority)"]["hi"]) == (direct.estimate, direct.lo, direct.hi)
    answers = by_name[f"{MEMORY} − {REWORDED}"]
    assert answers["kept (majority)"]["tasks"] == 0 and answers["rated tasks"]["tasks"] == n
    assert data["agreement"]["pairs"]["n_pairs"] == 2 * n
    assert len(content_ratings(campaign)) == 4 * n
    assert content_check_results(campaign) == data  # stored under the inputs' sha256


def test_the_results_page_and_its_csv_for_readers_not_raters(controls_run, cast, client):
    campaign = content_check_campaign_create(run=controls_run, name="page", raters=RATERS[:2], user=cast["owner"],
                                             seed=6)
    slug = controls_run.protocol.project.slug
    client.force_login(cast["analyst"])
    page = client.get(f"/p/{slug}/ratings/{campaign.pk}/content-check/")
    assert page.status_code == 200 and 'id="contrasts-table"' in page.content.decode()
    assert client.get(f"/p/{slug}/ratings/{campaign.pk}/results/").url.endswith("/content-check/")
    csv = client.get(f"/p/{slug}/ratings/{campaign.pk}/content-check/contrasts.csv").content.decode()
    assert csv.splitlines()[0].startswith('"contrast","tasks_used"')
    client.force_login(get_user_model().objects.get(username="rater-a"))
    assert client.get(f"/p/{slug}/ratings/{campaign.pk}/content-check/").status_code == 403
    assert CampaignRater.objects.filter(campaign=campaign).count() == 2


def test_an_owner_creates_one_through_the_form_and_sees_its_page(controls_run, cast, client):
    slug = controls_run.protocol.project.slug
    client.force_login(cast["owner"])
    url = f"/p/{slug}/runs/{controls_run.pk}/ratings/new-content-check/"
    form = client.get(url).content.decode()
    assert REWORDED in form and PARAPHRASED in form and 'id="content-check-form"' in form
    response = client.post(url, {"name": "by form", "conditions": [PARAPHRASED], "sample": "all", "seed": 3,
                                 "ratings_per_item": 2, "raters": RATERS[:2]})
    campaign = RatingCampaign.objects.get(name="by form")
    assert response.status_code == 302 and campaign.kind == "content-check" and campaign.conditions == [PARAPHRASED]
    detail = client.get(f"/p/{slug}/ratings/{campaign.pk}/").content.decode()
    assert 'id="content-check-pairs"' in detail and "Adjudication" not in detail
    refused = client.post(url, {"name": "by form", "conditions": [PARAPHRASED], "sample": "all", "seed": 3,
                                "ratings_per_item": 2, "raters": RATERS[:2]})
    assert refused.status_code == 200 and "already exists" in refused.content.decode()


# ---------------------------------------------------------------------------------------------
# Review fixes: creation by COPY, contrasts up to sign, missing pairs per control
# ---------------------------------------------------------------------------------------------

def reference_content_check_create(*, run, name, raters, seed, ratings_per_item=2, sample="all", sample_size=None):
    """The campaign as `content_check_campaign_create` wrote it before COPY: model instances through
    bulk_create (copied as it stood, its checks left out)."""
    from annotations import sampling
    from annotations.campaign_rules import checked_raters
    from annotations.content_check import CONTENT_CHECK, control_conditions, pair_candidates
    from annotations.models import RatingItem
    conditions = control_conditions(run)
    users = checked_raters(run.protocol.project, raters, ratings_per_item, error=ContentCheckError)
    items, counts = pair_candidates(run, conditions)
    if sample == RatingCampaign.Sample.STRATIFIED and sample_size < len(items):
        keep = sampling.stratified_sample([i["stratum"] for i in items], [i["task_id"] for i in items],
                                          sample_size, seed)
        items = [items[i] for i in keep]
    for count in counts:
        count["sampled"] = sum(1 for i in items if i["condition"] == count["condition"])
    campaign = RatingCampaign.objects.create(
        project=run.protocol.project, run=run, name=name, conditions=conditions, sample=sample,
        sample_size=sample_size, seed=seed, ratings_per_item=ratings_per_item, repeat_percent=0, kind=CONTENT_CHECK,
        pairs=counts)
    CampaignRater.objects.bulk_create([CampaignRater(campaign=campaign, user=u) for u in users])
    rows = RatingItem.objects.bulk_create([
        RatingItem(campaign=campaign, task_id=i["task_id"], answer_sha256=i["answer_sha256"],
                   prediction_id=i["prediction_id"], prediction_b_id=i["prediction_b_id"], conditions=[i["condition"]],
                   stratum=i["stratum"], judge_score=i["judge_score"], judge_score_b=i["judge_score_b"], number=n)
        for n, i in enumerate(items, start=1)])
    queues = sampling.assign(len(rows), [u.pk for u in users], ratings_per_item, seed)
    Assignment.objects.bulk_create([
        Assignment(campaign=campaign, item=rows[i], rater_id=rater_id, position=position)
        for rater_id, queue in queues.items() for position, i in enumerate(queue)], batch_size=5000)
    return campaign


@pytest.mark.parametrize("sample, size, k, seed", [("all", None, 2, 4), ("stratified", 5, 3, 9)])
def test_copy_writes_the_rows_bulk_create_wrote(controls_run, cast, sample, size, k, seed):
    from tests.test_annotations_pairwise import stored_rows
    old = reference_content_check_create(run=controls_run, name="by bulk_create", raters=RATERS, seed=seed,
                                         ratings_per_item=k, sample=sample, sample_size=size)
    new = content_check_campaign_create(run=controls_run, name="by copy", raters=RATERS, seed=seed,
                                        ratings_per_item=k, sample=sample, sample_size=size)
    assert new.items.exists() and stored_rows(new) == stored_rows(old)
    numbers = list(new.items.order_by("pk").values_list("number", flat=True))
    assert numbers == sorted(numbers)  # the ids increase with the numbers, as bulk_create's did


def test_a_planned_control_minus_original_is_not_added_again_with_the_other_sign(controls_run):
    from annotations.content_check import _contrasts
    controls = [REWORDED, PARAPHRASED]
    planned = [{"name": "paraphrase minus verbatim", "terms": {PARAPHRASED: 1, OWNWORDS: -1}, "family": True}]
    controls_run.protocol.contrasts = planned  # not saved: the protocol is sealed
    contrasts = _contrasts(controls_run, controls)
    assert [c["name"] for c in contrasts] == ["paraphrase minus verbatim", f"{MEMORY} − {REWORDED}"]
    assert contrasts[0]["terms"] == {PARAPHRASED: 1, OWNWORDS: -1}  # the planned one, as planned
    # a contrast of other conditions than a control and its original stays
    controls_run.protocol.contrasts = planned + [{"name": "both", "terms": {PARAPHRASED: 1, OWNWORDS: -2}}]
    assert len(_contrasts(controls_run, controls)) == 3


def test_a_control_is_charged_only_with_its_own_and_its_original_s_missing_tasks(controls_run, cast):
    from annotations.content_check import pair_candidates
    tasks = sorted(Prediction.objects.filter(run=controls_run, condition=MEMORY, label="final")
                   .values_list("task_id", flat=True))
    # the answer paraphrase and its original gone from the first task (the evidence paraphrase answered it);
    # from the second task only the answer paraphrase is gone (its original answered it)
    for task, conditions in ((tasks[0], [MEMORY, REWORDED]), (tasks[1], [REWORDED])):
        for pk in Prediction.objects.filter(run=controls_run, task_id=task, condition__in=conditions).values_list(
                "pk", flat=True):
            Prediction.objects.filter(pk=pk).update(condition=f"elsewhere-{pk}")
    _, counts = pair_candidates(controls_run, [REWORDED, PARAPHRASED])
    assert [(c["condition"], c["items"], c["missing"]) for c in counts] == [
        (REWORDED, len(tasks) - 2, 1), (PARAPHRASED, len(tasks), 0)]
