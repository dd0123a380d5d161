"""Pairwise preference campaigns: create one over a finished run, show a rater a pair, its results.

A pair item is (task, condition X's final answer, condition Y's final answer) for each chosen
condition pair [X, Y] (every pair of the chosen conditions by default, in the protocol's order).
A task where both answers have the same text is a tie by construction and is not rated (the
campaign's `pairs` says how many per pair); one where either condition gave no answer (empty
answer, invalid selection) is not rated either. On request a seeded sample stratified by pair ×
the judge's order of the two grades (`sampling.stratified_sample`). Each item goes to k raters
(`sampling.assign`); within each rater's queue the sides are drawn by
`annotations.core.pairwise.balanced_sides`, so every condition is on side A half the time (±1).
No hidden repeats in a pairwise campaign.

Raters see the question, the person's real answer and the two answers as A and B: never the
conditions, the grades or which side is which condition (`pair_view`, called by
`annotations.rating.rater_item`). Results: `pairwise_results`, cached like a grade campaign's
(`CampaignResult`: current while the campaign's results epoch has not moved, and under the sha256 of its
inputs). They hold the LLM pairwise judge's numbers
over the campaign's items too, when a pairwise-judge run over the campaign's run has finished
(`judge_run`): its pk and a digest of its verdicts are among the inputs.
"""
from __future__ import annotations

from itertools import combinations

from django.contrib.postgres.aggregates import StringAgg
from django.db import transaction
from django.db.models import TextField, Value
from django.db.models.functions import MD5, Cast, Concat

from annotations import sampling
from annotations.campaign_agreement import ResultsKind, bootstrap_settings, results_for_page_of, results_of
from annotations.campaign_rows import insert_with_defaults, items_insert
from annotations.campaign_rules import check_ratings_per_item, checked_name, checked_raters, sampled_items
from annotations.core.pairwise import PairRating, balanced_sides, outcome, pairwise_payload
from annotations.models import (
    FIRST_SHOWING, Assignment, CampaignRater, HumanGrade, RatingCampaign, RatingItem,
)
from experiments.analysis.pairwise_verdicts import order_keys, stand_in, verdicts
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.conditions import FINAL
from experiments.core.pairwise_judge import HumanPreference, JudgedPair, JudgeNumbers
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import Grade, ModelCall, Prediction, Protocol, Run
from experiments.models.runs import Phase

PAIRWISE = "pairwise"
PAIRWISE_VERSION = 2  # 2: the LLM pairwise judge's numbers in the payload
class PairwiseError(ValueError):
    """Input an owner can fix; the message says how."""


def is_pairwise(campaign: RatingCampaign) -> bool:
    return campaign.kind == PAIRWISE


def _judge_order(x: int | None, y: int | None) -> str:
    if x is None or y is None:
        return "missing"
    return "X higher" if x > y else "Y higher" if y > x else "tie"


def pair_candidates(run: Run, pairs: list[list[str]]) -> tuple[list[dict], list[dict]]:
    """(items, per-pair counts) of `pairs` in `run`: one item per task where both conditions
    answered with different texts; counts {x, y, items, identical, missing} per pair."""
    wanted = sorted({c for pair in pairs for c in pair})
    answers: dict[tuple[str, int], tuple[int, str]] = {}
    tasks: set[int] = set()
    for pk, task_id, sha, condition in (
            Prediction.objects.filter(run=run, label=FINAL, condition__in=wanted, status=Prediction.Status.OK)
            .exclude(answer_sha256="").order_by("task_id", "pk")
            .values_list("pk", "task_id", "answer_sha256", "condition")):
        answers.setdefault((condition, task_id), (pk, sha))
        tasks.add(task_id)
    tasks.update(Prediction.objects.filter(run=run, label=FINAL, condition__in=wanted)
                 .values_list("task_id", flat=True).distinct())
    judge = {(t, sha): score for t, sha, score in
             Grade.objects.filter(run=run).values_list("task_id", "answer_sha256", "score")}
    items, counts = [], []
    for x, y in pairs:
        count = {"x": x, "y": y, "items": 0, "identical": 0, "missing": 0}
        for task_id in sorted(tasks):
            a, b = answers.get((x, task_id)), answers.get((y, task_id))
            if a is None or b is None:
                count["missing"] += 1
            elif a[1] == b[1]:
                count["identical"] += 1
            else:
                count["items"] += 1
                jx, jy = judge.get((task_id, a[1])), judge.get((task_id, b[1]))
                items.append({"task_id": task_id, "x": x, "y": y, "prediction_id": a[0], "answer_sha256": a[1],
                              "prediction_b_id": b[0], "judge_score": jx, "judge_score_b": jy,
                              "stratum": f"{x} vs {y} | judge {_judge_order(jx, jy)}"})
        counts.append(count)
    return items, counts


def _pairs(run: Run, conditions: list[str], pairs: list[list[str]] | None) -> list[list[str]]:
    order = list(run.protocol.conditions)
    unknown = [c for c in conditions if c not in order]
    if unknown:
        raise PairwiseError(f"not a condition of this run: {', '.join(unknown)}")
    if pairs is None:
        chosen = [c for c in order if c in set(conditions)]
        if len(chosen) < 2:
            raise PairwiseError("choose at least two conditions to compare")
        return [[x, y] for x, y in combinations(chosen, 2)]
    out = []
    for pair in pairs:
        if len(pair) != 2 or pair[0] == pair[1] or any(c not in order for c in pair):
            raise PairwiseError(f"{' vs '.join(pair)} is not a pair of two conditions of this run")
        x, y = sorted(pair, key=order.index)
        if [x, y] in out:
            raise PairwiseError(f"the pair {x} vs {y} is listed twice")
        out.append([x, y])
    if not out:
        raise PairwiseError("choose at least one pair of conditions")
    return out


@transaction.atomic
def pairwise_campaign_create(*, run: Run, name: str, conditions: list[str], raters: list[str], user=None,
                             pairs: list[list[str]] | None = None, sample: str = RatingCampaign.Sample.ALL,
                             sample_size: int | None = None, seed: int = 1,
                             ratings_per_item: int = 2) -> RatingCampaign:
    """A pairwise campaign over a finished run: its pair items and every rater's queue with sides."""
    project = run.protocol.project
    name = checked_name(run, name, error=PairwiseError)
    pairs = _pairs(run, conditions if pairs is None else [c for p in pairs for c in p], pairs)
    check_ratings_per_item(ratings_per_item, error=PairwiseError)
    users = checked_raters(project, raters, ratings_per_item, error=PairwiseError)
    items, counts = pair_candidates(run, pairs)
    if not items:
        raise PairwiseError("these pairs have no task where both answers differ: nothing to compare")
    items, sample_size = sampled_items(items, [i["stratum"] for i in items], sample, sample_size, seed,
                                       error=PairwiseError)
    for count in counts:
        count["sampled"] = sum(1 for i in items if (i["x"], i["y"]) == (count["x"], count["y"]))
    used = {c for pair in pairs for c in pair}
    campaign = RatingCampaign.objects.create(
        project=project, run=run, name=name, conditions=[c for c in run.protocol.conditions if c in used],
        sample=sample, sample_size=sample_size, seed=seed, ratings_per_item=ratings_per_item, repeat_percent=0,
        kind=PAIRWISE, pairs=counts, created_by=user)
    CampaignRater.objects.bulk_create([CampaignRater(campaign=campaign, user=u) for u in users])
    item_ids = items_insert(campaign, items, [[i["x"], i["y"]] for i in items])
    queues = sampling.assign(len(items), [u.pk for u in users], ratings_per_item, seed)
    assignments = []
    for n, (rater_id, queue) in enumerate(queues.items()):
        sides = sampling_sides([items[i] for i in queue], seed + n + 1)
        assignments += [(campaign.pk, item_ids[i], rater_id, position, x_on_a)
                        for position, (i, x_on_a) in enumerate(zip(queue, sides))]
    insert_with_defaults(Assignment, ("campaign_id", "item_id", "rater_id", "position", "x_on_a"), assignments)
    return campaign


def sampling_sides(queue_items: list[dict], seed: int) -> list[bool]:
    """x_on_a for each item of one rater's queue (balanced per condition, seeded)."""
    return balanced_sides([(i["x"], i["y"]) for i in queue_items], seed)


def pair_view(assignment: Assignment) -> dict:
    """What a rater sees of a pair item: the texts only, X's answer on the side the assignment says."""
    item = assignment.item
    task = item.task
    x, y = item.prediction.text, item.prediction_b.text
    a, b = (x, y) if assignment.x_on_a else (y, x)
    return {"assignment": assignment.pk, "question": task.question_turn.text, "reference": task.answer_turn.text,
            "answer_a": a, "answer_b": b}


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------

def pair_ratings(campaign: RatingCampaign) -> list[PairRating]:
    """Every first-showing rating with a side or a tie (flag-only ratings drop out), by item and rater."""
    rows = (HumanGrade.objects.filter(assignment__campaign=campaign, assignment__showing=FIRST_SHOWING)
            .exclude(preference="")
            .order_by("assignment__item__number", "assignment__rater_id")
            .values_list("assignment__item__number", "assignment__item__task__session__person_id",
                         "assignment__item__conditions", "preference", "assignment__x_on_a",
                         "assignment__item__judge_score", "assignment__item__judge_score_b"))
    return [PairRating(item=number, person=person, x=conditions[0], y=conditions[1],
                       outcome=outcome(preference, x_on_a), judge_x=jx, judge_y=jy)
            for number, person, conditions, preference, x_on_a, jx, jy in rows]


def judge_run(campaign: RatingCampaign) -> Run | None:
    """The latest finished pairwise-judge run over the campaign's run, or None."""
    return (Run.objects.filter(protocol__regrade_of=campaign.run_id, protocol__kind=Protocol.Kind.PAIRWISE,
                               status=Run.Status.FINISHED).select_related("protocol").order_by("-pk").first())


def verdicts_digest(run: Run) -> str | None:
    """md5 of every completed reply (slot, attempt, text) of the run's judging phase, computed by
    PostgreSQL: the settled replies its verdicts are parsed from (`pairwise_verdicts.verdicts`) are
    among them, so any change of a verdict changes it, and no reply travels to Python on a page view.
    Ordered by the call's id and naming the slot by its id (a slot's key never changes): no join."""
    line = Concat(Cast("slot_id", TextField()), Value("\t"), Cast("attempt", TextField()), Value("\t"), "text",
                  output_field=TextField())
    return (ModelCall.objects.filter(run=run, phase=Phase.JUDGING, outcome=ModelCall.Outcome.OK)
            .aggregate(digest=MD5(StringAgg(line, "\n", order_by="id")))["digest"])


def judged_items(campaign: RatingCampaign, run: Run, got: dict[str, str | None]) -> list[JudgedPair]:
    """The judge's verdicts (`got`: slot key → verdict) on the campaign's items, by number: one
    JudgedPair per item of a pair the judge run compares (in either order), oriented as the people's
    X and Y. The slot keys name the two answers' sha256 in the order shown, so the campaign's own
    items pick the judge's verdicts on exactly the pairs people rated."""
    compared = {frozenset(pair) for pair in run.protocol.pairwise_pairs or []}
    rows = (RatingItem.objects.filter(campaign=campaign).order_by("number")
            .values_list("task_id", "conditions", "answer_sha256", "prediction_b__answer_sha256",
                         "task__session__person_id"))
    out = []
    for task_id, (x, y), sha_x, sha_y, person in rows:
        if frozenset((x, y)) in compared:
            x_key, y_key = order_keys(task_id, {"sha": sha_x}, {"sha": sha_y})
            out.append(JudgedPair(task=task_id, person=person, x=x, y=y, x_as_a=got.get(x_key),
                                  y_as_a=got.get(y_key)))
    return out


def judge_numbers(campaign: RatingCampaign, judge: dict, ratings: list[PairRating], *, draws: int) -> JudgeNumbers:
    """The judge's verdicts on the campaign's items beside the people's ratings, to resample
    (`core.pairwise_judge.JudgeNumbers`): on the people's own pass over the draws in the results."""
    run = judge["run_object"]
    judged = judged_items(campaign, run, verdicts(run))
    task = {number: task_id for number, task_id in campaign.items.values_list("number", "task_id")}
    people = [HumanPreference(task=task[r.item], person=r.person, x=r.x, y=r.y, outcome=r.outcome) for r in ratings]
    return JudgeNumbers(judged, people, draws=draws)


def judge_payload(campaign: RatingCampaign, judge: dict, ratings: list[PairRating], *, seed: int,
                  draws: int, numbers: JudgeNumbers | None = None) -> dict:
    """The judge's part of the results: per pair of the campaign its win rates, position bias and
    consistency over the campaign's items (`core.pairwise_judge.judge_rows`) and the agreement of
    people with it (`human_agreement`), with the campaign's seed and draws, on one pass over the draws
    (`numbers` already resampled on the people's pass; without, on a pass of their own)."""
    run = judge["run_object"]
    if numbers is None:
        numbers = judge_numbers(campaign, judge, ratings, draws=draws)
        numbers.resample(seed)
    rows, agreement = numbers.results()
    rows, agreement = ({(r["x"], r["y"]): r for r in part} for part in (rows, agreement))
    return {"run": run.pk, "stand_in": stand_in(run), "covered": bool(rows),
            "rows": [{"x": p["x"], "y": p["y"], "judge": rows.get((p["x"], p["y"])),
                      "agreement": agreement.get((p["x"], p["y"]))} for p in campaign.pairs]}


def results_inputs(campaign: RatingCampaign) -> tuple[dict, str]:
    """Everything a pairwise campaign's numbers come from, and its sha256 (the cache key)."""
    seed, draws = bootstrap_settings(campaign)
    ratings = pair_ratings(campaign)
    run = judge_run(campaign)
    judge = run and {"run": run.pk, "pairs": run.protocol.pairwise_pairs, "replies_md5": verdicts_digest(run)}
    inputs = {"version": PAIRWISE_VERSION, "campaign": campaign.pk, "conditions": list(campaign.conditions),
              "pairs": campaign.pairs, "bootstrap": {"seed": seed, "draws": draws},
              "ratings": [[r.item, r.person, r.x, r.y, r.outcome, r.judge_x, r.judge_y] for r in ratings],
              "llm_judge": judge}
    # Not hashed: the ratings as rows, the judge run itself (its pk and its replies' digest are).
    extra = {"rows": ratings, "llm_judge": judge and {**judge, "run_object": run}}
    return {**inputs, **extra}, sha256_text(canonical_json(inputs))


def pairwise_numbers(campaign: RatingCampaign, inputs: dict) -> dict:
    seed, draws = inputs["bootstrap"]["seed"], inputs["bootstrap"]["draws"]
    judge = inputs["llm_judge"]
    # The judge's numbers on the people's pass over the draws: a pair's people are drawn once for both.
    numbers = judge and judge_numbers(campaign, judge, inputs["rows"], draws=draws)
    payload = pairwise_payload(inputs["rows"], inputs["conditions"], seed=seed, draws=draws,
                               also=numbers.consumers if numbers else ())
    payload.update(pairs=inputs["pairs"], llm_judge=judge and judge_payload(
        campaign, judge, inputs["rows"], seed=seed, draws=draws, numbers=numbers))
    return payload


def pairwise_work(campaign: RatingCampaign, inputs: dict) -> int:
    """Draws × (ratings + the items the judge's numbers cover)."""
    judged = sum(p.get("sampled", p["items"]) for p in campaign.pairs) if inputs["llm_judge"] else 0
    return inputs["bootstrap"]["draws"] * max(len(inputs["rows"]) + judged, 1)


PAIRWISE_RESULTS = ResultsKind(
    version=canonical_json({"kind": PAIRWISE, "version": PAIRWISE_VERSION, "bootstrap": [DEFAULT_SEED, DEFAULT_DRAWS]}),
    inputs=lambda campaign: results_inputs(campaign), numbers=lambda campaign, inputs: pairwise_numbers(campaign, inputs),
    work=lambda campaign, inputs: pairwise_work(campaign, inputs), shows=lambda payload: "win_rates" in payload)


def pairwise_results(campaign: RatingCampaign, *, use_cache: bool = True) -> dict:
    """The campaign's numbers (`annotations.core.pairwise.pairwise_payload`), with its pairs'
    counts of identical and missing answers and the LLM judge's numbers (`judge_payload`, None
    without a finished pairwise-judge run); stored under the sha256 of the inputs and the epochs
    read before them (`campaign_agreement.results_of`)."""
    return results_of(campaign, PAIRWISE_RESULTS, use_cache=use_cache)


def pairwise_results_for_page(campaign: RatingCampaign, *, enqueue) -> tuple[dict | None, bool]:
    """(payload, current), as `campaign_agreement.results_for_page`: a large campaign's numbers
    (draws × (ratings + the items the judge's numbers cover) above INLINE_BUDGET) go to the
    `analysis` queue, the last ones shown meanwhile."""
    return results_for_page_of(campaign, PAIRWISE_RESULTS, enqueue=enqueue)
