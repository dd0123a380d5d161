"""Content-check campaigns ("same content?"): create one over a finished run's wording controls, show
a rater an original and its paraphrase, its results (`annotations.core.content_check`).

A control condition is an answer paraphrase (`<base>+answer-paraphrased`, the `answer-controls`
template) or an evidence paraphrase (`<verbatim>+paraphrased`, `paraphrase-controls`). An item is one
task of one control condition:

* answer paraphrase: the condition's draft ``b0`` (the base condition's answer, the same call) and its
  final answer (the draft in other words);
* evidence paraphrase: the verbatim condition's excerpts (its final prediction's evidence) and the
  paraphrased condition's (the fitted paraphrase its answering call saw); needs the verbatim
  condition in the run.

Pairs where either text is missing or empty are not rated (counted in the campaign's `pairs`); on
request a seeded sample stratified by control condition and spread over tasks
(`sampling.stratified_sample`). Each item goes to k raters (`sampling.assign`). No sides, no hidden
repeats. Raters see the question and the two texts as "original" and "rewritten" (`content_view`,
called by `annotations.rating`): never the condition, the run's grades or which control it is.

Results (`content_check_results`, cached like the other kinds: `campaign_agreement.results_of`): per
control condition the shares yes / partly / no; agreement between raters; and the contrasts that
involve a checked control condition (the run's planned contrasts with a control term; for answer
paraphrases each planned contrast under the paraphrase grades and base − paraphrase), each on all
graded tasks, on the rated tasks, and on the tasks whose every control term's paraphrase raters judged
to keep the content under each rule of `RULES`, with the run's seed and draws.
"""
from __future__ import annotations

import numpy as np
from django.db import transaction

from annotations import sampling
from annotations.campaign_agreement import (
    ResultsKind, bootstrap_settings, rater_labels, results_for_page_of, results_of,
)
from annotations.campaign_rows import insert_with_defaults, items_insert
from annotations.campaign_rules import check_ratings_per_item, checked_name, checked_raters, sampled_items
from annotations.core.content_check import (
    RULES, ContentRating, agreement, kept_items, restricted_contrast, shares,
)
from annotations.models import (
    FIRST_SHOWING, Assignment, CampaignRater, HumanGrade, RatingCampaign,
)
from experiments.analysis.grades import grade_matrix
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.conditions import ANSWER_PARAPHRASE, CONDITIONS, FINAL, PARAPHRASE
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import Grade, Prediction, Run

CONTENT_CHECK = "content-check"
CONTENT_CHECK_VERSION = 1
SUFFIX = {ANSWER_PARAPHRASE: "+answer-paraphrased", PARAPHRASE: "+paraphrased"}
NO_CONTROL = ("this run has no paraphrase control to check: it needs an answer-paraphrased condition "
              "(<base>+answer-paraphrased, template answer-controls) or a paraphrased one "
              "(<verbatim>+paraphrased, template paraphrase-controls)")


class ContentCheckError(ValueError):
    """Input an owner can fix; the message says how."""


def is_content_check(campaign: RatingCampaign) -> bool:
    return campaign.kind == CONTENT_CHECK


def control_conditions(run: Run) -> list[str]:
    """The run's paraphrase controls, in protocol order."""
    return [key for key in run.protocol.conditions
            if key in CONDITIONS and CONDITIONS[key].workflow in SUFFIX]


def original_condition(control: str) -> str:
    """The condition whose text a control paraphrases: its base or verbatim condition."""
    return control[:-len(SUFFIX[CONDITIONS[control].workflow])]


def _texts(run: Run, condition: str, label: str, field: str) -> dict[int, tuple[int, str, str]]:
    """task → (prediction id, text of `field`, answer sha256) of one condition's `label` predictions."""
    rows = (Prediction.objects.filter(run=run, condition=condition, label=label).order_by("task_id", "pk")
            .values_list("task_id", "pk", field, "answer_sha256", "status"))
    usable = (Prediction.Status.OK,) if field == "text" else None
    return {task: (pk, text, sha) for task, pk, text, sha, status in rows
            if (text or "").strip() and (usable is None or status in usable)}


def pair_candidates(run: Run, controls: list[str]) -> tuple[list[dict], list[dict]]:
    """(items, per-control counts {condition, original, items, missing}) of `controls` in `run`: a
    control's missing pairs are those of the tasks where it or its original has a final prediction."""
    present = set(run.protocol.conditions)
    tasks: dict[str, set[int]] = {}  # condition → the tasks it has a final prediction of
    for condition, task_id in (Prediction.objects.filter(
            run=run, label=FINAL, condition__in={*controls, *map(original_condition, controls)})
            .values_list("condition", "task_id").distinct()):
        tasks.setdefault(condition, set()).add(task_id)
    judge = {(t, sha): score for t, sha, score in
             Grade.objects.filter(run=run).values_list("task_id", "answer_sha256", "score")}
    items, counts = [], []
    for control in controls:
        original = original_condition(control)
        if CONDITIONS[control].workflow == ANSWER_PARAPHRASE:
            before, after = _texts(run, control, "b0", "text"), _texts(run, control, FINAL, "text")
        elif original in present:
            before, after = _texts(run, original, FINAL, "evidence"), _texts(run, control, FINAL, "evidence")
        else:
            raise ContentCheckError(f"{control} paraphrases the evidence of {original}, which this run did not "
                                    "run: there are no verbatim excerpts to compare with")
        count = {"condition": control, "original": original, "items": 0, "missing": 0}
        # A control's pairs are over its own tasks and its original's: another control's are not its to miss.
        for task_id in sorted(tasks.get(control, set()) | tasks.get(original, set())):
            a, b = before.get(task_id), after.get(task_id)
            if a is None or b is None:
                count["missing"] += 1
                continue
            count["items"] += 1
            answers = CONDITIONS[control].workflow == ANSWER_PARAPHRASE
            items.append({"task_id": task_id, "condition": control, "prediction_id": a[0], "prediction_b_id": b[0],
                          "answer_sha256": b[2] or sha256_text(b[1]),
                          "judge_score": judge.get((task_id, a[2])) if answers else None,
                          "judge_score_b": judge.get((task_id, b[2])) if answers else None,
                          "stratum": control})
        counts.append(count)
    return items, counts


@transaction.atomic
def content_check_campaign_create(*, run: Run, name: str, raters: list[str], conditions: list[str] | None = None,
                                  user=None, sample: str = RatingCampaign.Sample.ALL, sample_size: int | None = None,
                                  seed: int = 1, ratings_per_item: int = 2) -> RatingCampaign:
    """A content-check campaign over a finished run's paraphrase controls (all, or `conditions`)."""
    project = run.protocol.project
    name = checked_name(run, name, error=ContentCheckError)
    available = control_conditions(run)
    if not available:
        raise ContentCheckError(NO_CONTROL)
    if conditions is None:
        conditions = available
    if not conditions:
        raise ContentCheckError("choose at least one paraphrase control to check")
    unknown = [c for c in conditions if c not in available]
    if unknown:
        raise ContentCheckError(f"not a paraphrase control of this run: {', '.join(unknown)}")
    conditions = [c for c in available if c in set(conditions)]
    check_ratings_per_item(ratings_per_item, error=ContentCheckError)
    users = checked_raters(project, raters, ratings_per_item, error=ContentCheckError)
    items, counts = pair_candidates(run, conditions)
    if not items:
        raise ContentCheckError("no task has both an original and its paraphrase under these controls: "
                                "nothing to check")
    items, sample_size = sampled_items(items, [i["stratum"] for i in items], sample, sample_size, seed,
                                       error=ContentCheckError)
    for count in counts:
        count["sampled"] = sum(1 for i in items if i["condition"] == count["condition"])
    campaign = RatingCampaign.objects.create(
        project=project, run=run, name=name, conditions=conditions, sample=sample, sample_size=sample_size,
        seed=seed, ratings_per_item=ratings_per_item, repeat_percent=0, kind=CONTENT_CHECK, pairs=counts,
        created_by=user)
    CampaignRater.objects.bulk_create([CampaignRater(campaign=campaign, user=u) for u in users])
    item_ids = items_insert(campaign, items, [[i["condition"]] for i in items])
    queues = sampling.assign(len(items), [u.pk for u in users], ratings_per_item, seed)
    insert_with_defaults(Assignment, ("campaign_id", "item_id", "rater_id", "position"),
                         [(campaign.pk, item_ids[i], rater_id, position)
                          for rater_id, queue in queues.items() for position, i in enumerate(queue)])
    return campaign


def content_view(assignment: Assignment) -> dict:
    """What a rater sees of a content-check item: the question and the two texts, nothing else.
    Which control it is decides only which texts (answers, or the evidence) and the instruction's noun."""
    item = assignment.item
    evidence = CONDITIONS[item.conditions[0]].workflow == PARAPHRASE
    field = "evidence" if evidence else "text"
    return {"assignment": assignment.pk, "question": item.task.question_turn.text,
            "original": getattr(item.prediction, field), "rewritten": getattr(item.prediction_b, field),
            "what": "interview excerpts" if evidence else "an answer"}


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------

def content_ratings(campaign: RatingCampaign) -> list[ContentRating]:
    """Every first-showing rating with an answer (flag-only ratings drop out), by item and rater."""
    labels = rater_labels(campaign)
    rows = (HumanGrade.objects.filter(assignment__campaign=campaign, assignment__showing=FIRST_SHOWING)
            .exclude(same_content="").order_by("assignment__item__number", "assignment__rater_id")
            .values_list("assignment__item__number", "assignment__item__task_id",
                         "assignment__item__task__session__person_id", "assignment__item__conditions",
                         "assignment__rater_id", "same_content"))
    return [ContentRating(item=number, task=task, person=person, condition=conditions[0], rater=labels[rater],
                          answer=answer) for number, task, person, conditions, rater, answer in rows]


def _up_to_sign(terms: dict) -> str:
    """The terms as a key equal for a contrast and its negation (the first condition's weight made positive)."""
    first = next((v for _, v in sorted(terms.items()) if v), 1)
    return canonical_json({k: v if first > 0 else -v for k, v in terms.items()})


def _contrasts(run: Run, controls: list[str]) -> list[dict]:
    """The contrasts the check restricts: {name, terms} (see the module docstring), each once: a
    contrast and its negation are one (the first listed kept, planned ones first)."""
    mapped = {original_condition(c): c for c in controls if CONDITIONS[c].workflow == ANSWER_PARAPHRASE}
    out: list[dict] = []
    for contrast in run.protocol.contrasts or []:
        terms = dict(contrast["terms"])
        if set(terms) & set(controls):
            out.append({"name": contrast["name"], "terms": terms})
        if terms and set(terms) <= set(mapped):
            out.append({"name": f"{contrast['name']} (paraphrase grades)",
                        "terms": {mapped[k]: v for k, v in terms.items()}})
    for control in controls:
        out.append({"name": f"{original_condition(control)} − {control}",
                    "terms": {original_condition(control): 1, control: -1}})
    seen, unique = set(), []
    for c in out:
        key = _up_to_sign(c["terms"])
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def results_inputs(campaign: RatingCampaign) -> tuple[dict, str]:
    """Everything a content-check campaign's numbers come from, and its sha256 (the cache key)."""
    seed, draws = bootstrap_settings(campaign)
    ratings = content_ratings(campaign)
    contrasts = _contrasts(campaign.run, list(campaign.conditions))
    keys = tuple(dict.fromkeys(k for c in contrasts for k in c["terms"]))
    matrix = grade_matrix(campaign.run, keys) if keys else None
    items = list(campaign.items.order_by("number").values_list("number", "task_id", "conditions"))
    inputs = {"version": CONTENT_CHECK_VERSION, "campaign": campaign.pk, "conditions": list(campaign.conditions),
              "pairs": campaign.pairs, "bootstrap": {"seed": seed, "draws": draws}, "contrasts": contrasts,
              "grades_sha256": matrix.sha256() if matrix is not None else None,
              "items": [[n, t, c[0]] for n, t, c in items],
              "ratings": [[r.item, r.task, r.person, r.condition, r.rater, r.answer] for r in ratings]}
    return {**inputs, "rows": ratings, "matrix": matrix}, sha256_text(canonical_json(inputs))


def _subsets(inputs: dict) -> dict[str, dict[tuple[int, str], bool]]:
    """subset name → {(task, control): included} for the rated pairs and each rule's kept pairs."""
    item_key = {n: (t, c) for n, t, c in inputs["items"]}
    rated = {item_key[r.item]: True for r in inputs["rows"]}
    out = {"rated tasks": rated}
    for rule in RULES:
        out[f"kept ({rule})"] = {item_key[n]: kept for n, kept in kept_items(inputs["rows"], rule).items()}
    return out


def content_check_payload(inputs: dict) -> dict:
    """Every number of a content-check campaign's results page (no text)."""
    seed, draws = inputs["bootstrap"]["seed"], inputs["bootstrap"]["draws"]
    ratings, matrix = inputs["rows"], inputs["matrix"]
    controls = set(inputs["conditions"])
    contrasts = []
    subsets = _subsets(inputs)
    for contrast in inputs["contrasts"]:
        keys, weights = list(contrast["terms"]), list(contrast["terms"].values())
        rows = matrix.grades[[matrix.conditions.index(k) for k in keys]]
        checked = [k for k in keys if k in controls]
        versions = [{"subset": "all graded tasks",
                     **restricted_contrast(rows, matrix.task_ids, matrix.person, weights,
                                           np.ones(len(matrix.task_ids), dtype=bool), seed=seed, draws=draws)}]
        for subset, included in subsets.items():
            keep = np.array([all(included.get((int(t), k), False) for k in checked) for t in matrix.task_ids],
                            dtype=bool)
            versions.append({"subset": subset, **restricted_contrast(rows, matrix.task_ids, matrix.person, weights,
                                                                     keep, seed=seed, draws=draws)})
        contrasts.append({"name": contrast["name"], "terms": contrast["terms"], "checked": checked,
                          "versions": versions})
    return {"seed": int(seed), "draws": int(draws), "ratings": len(ratings), "rules": RULES,
            "shares": shares(ratings, seed=seed, draws=draws) if ratings else [],
            "agreement": agreement(ratings, seed=seed, draws=draws), "contrasts": contrasts}


def content_check_work(campaign: RatingCampaign, inputs: dict) -> int:
    """Draws × (ratings + graded tasks × contrast versions)."""
    tasks = len(inputs["matrix"].task_ids) if inputs["matrix"] is not None else 0
    return inputs["bootstrap"]["draws"] * (len(inputs["rows"]) + tasks * len(inputs["contrasts"]) * (2 + len(RULES)))


CONTENT_CHECK_RESULTS = ResultsKind(
    version=canonical_json({"kind": CONTENT_CHECK, "version": CONTENT_CHECK_VERSION,
                            "bootstrap": [DEFAULT_SEED, DEFAULT_DRAWS]}),
    inputs=lambda campaign: results_inputs(campaign),
    numbers=lambda campaign, inputs: {**content_check_payload(inputs), "pairs": inputs["pairs"]},
    work=lambda campaign, inputs: content_check_work(campaign, inputs), shows=lambda payload: "shares" in payload)


def content_check_results(campaign: RatingCampaign, *, use_cache: bool = True) -> dict:
    """The campaign's numbers, stored under the sha256 of the inputs and the epochs read before them."""
    return results_of(campaign, CONTENT_CHECK_RESULTS, use_cache=use_cache)


def content_check_results_for_page(campaign: RatingCampaign, *, enqueue) -> tuple[dict | None, bool]:
    """(payload, current), as `campaign_agreement.results_for_page`: a large campaign's numbers go to the
    `analysis` queue (draws × (ratings + graded tasks × contrast versions) above INLINE_BUDGET)."""
    return results_for_page_of(campaign, CONTENT_CHECK_RESULTS, enqueue=enqueue)
