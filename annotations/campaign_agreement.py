"""A campaign's results: its tables from the database, the numbers from `annotations.core`.

`campaign_table` gathers, per item: the person (task.session.person_id, the bootstrap's
cluster), the conditions that produced its text, the judge's grade, each rater's rating,
the gold grade and any adjudicated grade. `campaign_results` computes the payload with
the run protocol's bootstrap seed and draws (protocol.bootstrap, defaults DEFAULT_SEED and
DEFAULT_DRAWS as on the run dashboard) and stores it (CampaignResult) under the sha256 of every
input and the epochs read before them: every campaign kind's numbers are current while the
campaign's results epoch and its project's "tasks" epoch are those they were computed at (one row
read per view, whatever the number of ratings; the triggers of migration 0008 move the epoch with
every change the results read, `results_epoch_sql`), and recomputed only after a rating, gold grade,
adjudication or anything else they read changed. `results_for_page` computes small campaigns during
the request and hands large ones to the `analysis` queue (`annotations.jobs`), showing the last
numbers meanwhile.

Payload keys (all numbers, no text; raters appear only as labels R1, R2 … by user id):
``version``, ``seed``, ``draws``, ``level``, ``raters`` (labels), ``counts``, ``between``
({pairs, alpha, items}), ``vs_judge`` ({pooled, mean}), ``levels`` ({raters_mean, judge,
difference}), ``conditions`` (per condition: items, rated_items, between, vs_judge,
levels), ``per_rater``, ``contrasts`` (`annotations.core.human_contrasts`), ``planned_tasks``,
``inputs_sha256``, ``computed_at``, and for a campaign with hidden repeats ``retest``
({percent, pairs}: each rater's first showing against their hidden repeat of it). An agreement figure is ``AgreementResult.as_dict()``
(n_pairs, n_people, draws, seed, tails, confusion, exact, within_one, kappa, alpha, each
{estimate, lo, hi}) or None when there is nothing to compare yet.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.contrib.auth import get_user_model
from django.utils import timezone

from annotations.adjudication import ADJUDICATION_SPREAD
from annotations.core.rater_agreement import AGREEMENT_VERSION, Rating, RatingTable, agreement_payload, retest_agreement
from annotations.core.human_contrasts import human_contrasts
from annotations.models import (
    FIRST_SHOWING, Assignment, CampaignRater, CampaignResult, HumanGrade, RatingCampaign, RatingItem,
)
from annotations.results_epoch_sql import ResultsState, results_state
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.conditions import FINAL
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import CohortTask, Prediction

# Draws × graded ratings a page computes while the rater-facing request waits (about a second);
# above it the numbers are computed on the queue.
INLINE_BUDGET = 30_000_000


def bootstrap_settings(campaign: RatingCampaign) -> tuple[int, int]:
    """(seed, draws) of the campaign's run, as its dashboard uses them."""
    bootstrap = campaign.run.protocol.bootstrap or {}
    return int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))


def rater_ids(campaign: RatingCampaign) -> list[int]:
    """Every user who rates or rated the campaign (removed raters too), by user id."""
    ids = set(CampaignRater.objects.filter(campaign=campaign).values_list("user_id", flat=True))
    ids.update(Assignment.objects.filter(campaign=campaign).values_list("rater_id", flat=True))
    return sorted(ids)


def rater_labels(campaign: RatingCampaign) -> dict[int, str]:
    """user id → stable opaque label R1, R2 … in order of user id (pages and exports alike)."""
    return {user_id: f"R{n}" for n, user_id in enumerate(rater_ids(campaign), start=1)}


def rater_usernames(campaign: RatingCampaign) -> dict[str, str]:
    """label → username: for owners' pages only."""
    labels = rater_labels(campaign)
    names = dict(get_user_model().objects.filter(pk__in=labels).values_list("pk", "username"))
    return {label: names.get(user_id, "") for user_id, label in labels.items()}


def campaign_table(campaign: RatingCampaign) -> tuple[RatingTable, list[dict]]:
    """The campaign's RatingTable and, parallel to its items, {pk, task_id, answer_sha256}."""
    # Calibration items are out of every queue: they count only in the calibration round.
    items = list(RatingItem.objects.filter(campaign=campaign, calibration=False).order_by("number").values(
        "pk", "number", "task_id", "answer_sha256", "conditions", "judge_score", "gold_grade",
        "task__session__person_id", "adjudication__grade"))
    index = {item["pk"]: i for i, item in enumerate(items)}
    labels = rater_labels(campaign)
    column = {user_id: j for j, user_id in enumerate(labels)}
    ratings = tuple(
        Rating(item=index[item_id], rater=column[rater_id], grade=grade, flagged=flagged, seconds=seconds)
        for item_id, rater_id, grade, flagged, seconds in
        HumanGrade.objects.filter(assignment__campaign=campaign, assignment__showing=FIRST_SHOWING,
                                  assignment__item__calibration=False)
        .order_by("assignment__item__number", "assignment__rater_id")
        .values_list("assignment__item_id", "assignment__rater_id", "grade", "flagged", "seconds_spent"))
    table = RatingTable(
        numbers=tuple(i["number"] for i in items),
        person=tuple(i["task__session__person_id"] for i in items),
        conditions=tuple(tuple(i["conditions"]) for i in items),
        judge=tuple(i["judge_score"] for i in items),
        gold=tuple(i["gold_grade"] for i in items),
        adjudicated=tuple(i["adjudication__grade"] for i in items),
        raters=tuple(labels.values()),
        ratings=ratings,
    )
    keys = [{"pk": i["pk"], "task_id": i["task_id"], "answer_sha256": i["answer_sha256"]} for i in items]
    return table, keys


def retest_pairs(campaign: RatingCampaign) -> list[list[int]]:
    """[person, first grade, repeat grade] for every hidden repeat graded at both showings by its
    rater, in item-number and rater order (flag-only ratings have no grade and drop out)."""
    graded = (HumanGrade.objects.filter(assignment__campaign=campaign, grade__isnull=False)
              .values_list("assignment__item_id", "assignment__rater_id", "assignment__showing", "grade",
                           "assignment__item__number", "assignment__item__task__session__person_id"))
    first, repeat = {}, {}
    for item_id, rater_id, showing, grade, number, person in graded:
        (first if showing == FIRST_SHOWING else repeat)[(number, rater_id)] = (person, grade)
    return [[first[key][0], first[key][1], repeat[key][1]] for key in sorted(repeat) if key in first]


def task_items(campaign: RatingCampaign, keys: list[dict]) -> dict[str, dict[int, int]]:
    """condition → {task id → index of the item its final answer is}, for the campaign's conditions.

    A task whose answer is not an item (not sampled, or an empty answer or invalid selection,
    which nobody rates) is absent.
    """
    index = {(k["task_id"], k["answer_sha256"]): i for i, k in enumerate(keys)}
    out: dict[str, dict[int, int]] = {c: {} for c in campaign.conditions}
    for condition, task_id, sha in (
            Prediction.objects.filter(run=campaign.run, label=FINAL, condition__in=campaign.conditions,
                                      status=Prediction.Status.OK)
            .values_list("condition", "task_id", "answer_sha256")):
        if (task_id, sha) in index:
            out[condition][task_id] = index[(task_id, sha)]
    return out


def results_inputs(campaign: RatingCampaign) -> tuple[dict, str]:
    """Everything the payload is computed from, and its sha256 (the cache key)."""
    table, keys = campaign_table(campaign)
    seed, draws = bootstrap_settings(campaign)
    protocol = campaign.run.protocol
    inputs = {
        "version": AGREEMENT_VERSION,
        "campaign": campaign.pk,
        "conditions": list(campaign.conditions),
        "k": campaign.ratings_per_item,
        "spread": ADJUDICATION_SPREAD,
        "table": asdict(table),
        "task_items": {c: {str(t): i for t, i in sorted(m.items())}
                       for c, m in task_items(campaign, keys).items()},
        "contrasts": protocol.contrasts,
        "planned_tasks": CohortTask.objects.filter(cohort_id=protocol.cohort_id).count(),
        "bootstrap": {"seed": seed, "draws": draws},
    }
    if campaign.repeat_percent:
        # Only then: the inputs (and cached numbers) of a campaign without repeats stay as they were.
        inputs["retest"] = {"percent": campaign.repeat_percent, "pairs": retest_pairs(campaign)}
    sha = sha256_text(canonical_json(inputs))
    return {**inputs, "table": table}, sha


def compute_results(inputs: dict) -> dict:
    """The payload from `results_inputs` (no database access)."""
    table, seed, draws = inputs["table"], inputs["bootstrap"]["seed"], inputs["bootstrap"]["draws"]
    payload = agreement_payload(table, conditions=inputs["conditions"], k=inputs["k"], seed=seed, draws=draws,
                                dispute_spread=inputs["spread"])
    task_map = {c: {int(t): i for t, i in m.items()} for c, m in inputs["task_items"].items()}
    payload["contrasts"] = human_contrasts(inputs["contrasts"], table, task_map,
                                           planned_tasks=inputs["planned_tasks"], seed=seed, draws=draws)
    payload["planned_tasks"] = inputs["planned_tasks"]
    if "retest" in inputs:
        payload["retest"] = retest_agreement(inputs["retest"]["pairs"], percent=inputs["retest"]["percent"],
                                             seed=seed, draws=draws)
    return payload


@dataclass(frozen=True)
class ResultsKind:
    """What the one results cache needs of a campaign kind: the code's `version` of its numbers
    (numbers stored by another version are computed again), `inputs(campaign)` → (inputs, their
    sha256), `numbers(campaign, inputs)` → payload, `work(campaign, inputs)` (compared with
    INLINE_BUDGET) and `shows(payload)` (a stored payload of this kind, shown while new numbers are
    computed)."""
    version: str
    inputs: Callable[[RatingCampaign], tuple[dict, str]]
    numbers: Callable[[RatingCampaign, dict], dict]
    work: Callable[[RatingCampaign, dict], int]
    shows: Callable[[dict], bool] = lambda payload: True


def keep_results(campaign: RatingCampaign, payload: dict, sha: str, epochs: dict) -> dict:
    """Every campaign kind's cache: freshly computed numbers stored under the sha256 of their inputs
    and the epochs read before those inputs (`ResultsState.current`)."""
    payload.update(inputs_sha256=sha, computed_at=timezone.now().isoformat(timespec="seconds"))
    CampaignResult.objects.update_or_create(campaign=campaign, defaults={
        "inputs_sha256": sha, "payload": payload, "computed_at": timezone.now(), "epochs": epochs})
    return payload


def _inputs_after(campaign: RatingCampaign, kind: ResultsKind) -> tuple[RatingCampaign, dict, str]:
    """The campaign (its settings, run and protocol read again, after the epochs) and the kind's inputs."""
    campaign = RatingCampaign.objects.select_related("run__protocol").get(pk=campaign.pk)
    return campaign, *kind.inputs(campaign)


def kept_results(state: ResultsState, campaign: RatingCampaign, sha: str, epochs: dict) -> dict | None:
    """The stored numbers when they were computed from inputs of this sha256 (a change moved the epochs
    and changed nothing the numbers read: they are marked current at `epochs`), else None."""
    if state.inputs_sha256 != sha or state.payload is None:
        return None
    CampaignResult.objects.filter(campaign=campaign, inputs_sha256=sha).update(epochs=epochs)
    return state.payload


def results_of(campaign: RatingCampaign, kind: ResultsKind, *, use_cache: bool = True) -> dict:
    """The campaign's numbers: the stored ones while current, else computed now (and stored)."""
    state = results_state(campaign.pk)  # before any input is read
    epochs = state.current(kind.version)
    if use_cache and state.stored_epochs == epochs:
        return state.payload
    campaign, inputs, sha = _inputs_after(campaign, kind)
    kept = kept_results(state, campaign, sha, epochs) if use_cache else None
    return kept if kept is not None else keep_results(campaign, kind.numbers(campaign, inputs), sha, epochs)


def results_for_page_of(campaign: RatingCampaign, kind: ResultsKind, *, enqueue) -> tuple[dict | None, bool]:
    """Every campaign kind's (payload, current) for a page: the stored numbers while their epochs are
    the database's (one query, whatever the number of ratings); else, when the inputs read now have
    the stored numbers' sha256, those; else, when `work` is above INLINE_BUDGET and
    `enqueue(campaign_id, sha)` hands it to the queue, the last stored numbers (if `shows` them)
    while new ones are computed; else the numbers computed here, as for small campaigns (enqueue
    False: no queue answers)."""
    state = results_state(campaign.pk)  # before any input is read
    epochs = state.current(kind.version)
    if state.stored_epochs == epochs:
        return state.payload, True
    campaign, inputs, sha = _inputs_after(campaign, kind)
    kept = kept_results(state, campaign, sha, epochs)
    if kept is not None:
        return kept, True
    if kind.work(campaign, inputs) > INLINE_BUDGET and enqueue(campaign.pk, sha):
        return (state.payload if state.payload is not None and kind.shows(state.payload) else None), False
    return keep_results(campaign, kind.numbers(campaign, inputs), sha, epochs), True


def campaign_results(campaign: RatingCampaign, *, use_cache: bool = True) -> dict:
    """The campaign's result payload, computed now unless the stored one is current."""
    return results_of(campaign, GRADES, use_cache=use_cache)


def results_cost(inputs: dict) -> int:
    """Draws × graded ratings: what the bootstraps' time grows with."""
    graded = sum(1 for r in inputs["table"].ratings if r.grade is not None)
    return inputs["bootstrap"]["draws"] * max(graded, 1)


def results_for_page(campaign: RatingCampaign, *, enqueue) -> tuple[dict | None, bool]:
    """(payload, current) for a page: current numbers, or the last ones while new ones are computed.

    `enqueue(campaign_id, sha)` hands the computation to the queue and returns False when no
    queue answers; then the numbers are computed here, as for small campaigns.
    """
    return results_for_page_of(campaign, GRADES, enqueue=enqueue)


# Everything in the inputs that is the code's, not the database's: numbers stored by other code are
# computed again.
GRADES = ResultsKind(
    version=canonical_json({"kind": "grade", "version": AGREEMENT_VERSION, "spread": ADJUDICATION_SPREAD,
                            "bootstrap": [DEFAULT_SEED, DEFAULT_DRAWS]}),
    inputs=lambda campaign: results_inputs(campaign), numbers=lambda campaign, inputs: compute_results(inputs),
    work=lambda campaign, inputs: results_cost(inputs))
