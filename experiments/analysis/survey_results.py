"""A survey run's numbers (App. H): per condition accuracy and normalized deviation,
paired differences with whole-person intervals, the human test-retest row and the prespecified
criteria, all by `core.survey.scores`; kept on the run as its analysis (the dashboard reads it).
A run whose protocol shows no condition the screener (Table 21) says "no screener" in its labels and
its `screener` entry."""
from __future__ import annotations

import math

from experiments.core.contrasts import INTERVAL_ABOVE_ZERO
from experiments.core.survey.prompt import NO_SCREENER, SURVEY_CONDITIONS, condition_label
from experiments.core.survey.scores import (
    ACCURACY, DEVIATION, HUMAN_RETEST, REPORTED_SAMPLE_CRITERIA, SECOND_SAMPLE_CRITERIA, SURVEY_SEED, Criterion,
    evaluate_criteria, every_pair, human_retest_scores, mean_intervals, score_items, summarize, survey_contrasts,
)
from experiments.core.survey.targets import TargetItem
from experiments.models import Run, SurveyAnswer
from experiments.data.surveys import is_further_sample, respondent_items, sample_respondents, sample_study

DEFAULT_DRAWS = 10_000


def target_item(row) -> TargetItem:
    return TargetItem(number=row.number, key=row.key, qid=row.qid, row_id=row.row_id, block=row.block,
                      question=row.question, row=row.row, options=tuple(row.options), kind=row.kind,
                      wave4=row.wave4, earlier=row.earlier)


def contrast_pairs(run: Run) -> tuple[list[tuple[str, str]], list[Criterion]]:
    """The protocol's contrasts (terms +1/-1; a criterion "interval above zero" means that first
    improves on second: its normalized-deviation interval lies below zero) and criteria; without
    any: every condition against the first (screener only, when run) and the paper's prespecified
    criteria whose conditions were run; on a further sample of new respondents (Table 23), every
    pair and the second sample's criteria."""
    conditions = list(run.protocol.conditions)
    pairs, criteria = [], []
    for contrast in run.protocol.contrasts or []:
        terms = contrast.get("terms", {})
        first = [k for k, v in terms.items() if v == 1]
        second = [k for k, v in terms.items() if v == -1]
        if len(terms) == 2 and len(first) == 1 and len(second) == 1:
            pairs.append((first[0], second[0]))
            if contrast.get("criterion") == INTERVAL_ABOVE_ZERO:
                # The protocol's one criterion, "first improves on second", read as the paper
                # prespecified it for the survey (App. H): the deviation interval below zero.
                criteria.append(Criterion(first[0], second[0], DEVIATION, "below-zero",
                                          label=contrast.get("name", "")))
    if not pairs and is_further_sample(run.protocol.cohort):
        # A further sample of new respondents (Table 23): every paired difference, and the criteria
        # fixed before the second sample whose conditions were run.
        pairs = every_pair(conditions)
        criteria = [c for c in SECOND_SAMPLE_CRITERIA if c.first in conditions and c.second in conditions]
    elif not pairs:
        pairs = [(key, conditions[0]) for key in conditions[1:]]
        for criterion in REPORTED_SAMPLE_CRITERIA:
            if criterion.first in conditions and criterion.second in conditions:
                criteria.append(criterion)
                if (criterion.first, criterion.second) not in pairs:
                    pairs.append((criterion.first, criterion.second))
    return pairs, criteria


def _number(value: float) -> float | None:
    return None if value is None or math.isnan(value) else value


def survey_summary(run: Run) -> dict:
    cohort = run.protocol.cohort
    respondents = sample_respondents(cohort)
    items = {rid: [target_item(row) for row in rows] for rid, rows in respondent_items(r.pk for r in respondents).items()}
    pid = {r.pk: r.pid for r in respondents}
    scores = {key: [] for key in run.protocol.conditions}
    problems = {key: {} for key in run.protocol.conditions}
    for answer in SurveyAnswer.objects.filter(run=run):
        its = items[answer.respondent_id]
        chosen = [entry[0] for entry in answer.items] if answer.items else [None] * len(its)
        scores[answer.condition] += score_items(pid[answer.respondent_id], its, chosen)
        for entry in answer.items or [[None, "missing", ""]] * len(its):
            if entry[1]:
                problems[answer.condition][entry[1]] = problems[answer.condition].get(entry[1], 0) + 1
    human = [s for r in respondents for s in human_retest_scores(r.pid, items[r.pk])]
    seed = run.protocol.bootstrap.get("seed", SURVEY_SEED)
    draws = run.protocol.bootstrap.get("draws", DEFAULT_DRAWS)
    # The means' own intervals (Tables 22 and 23): new entries of each row; nothing above changes.
    intervals = mean_intervals({**scores, HUMAN_RETEST: human}, seed=seed, draws=draws)
    rows = []
    for key, condition_scores in [*scores.items(), (HUMAN_RETEST, human)]:
        s = summarize(key, condition_scores)
        label = condition_label(key, screener=run.protocol.survey_screener) if key in SURVEY_CONDITIONS else key
        rows.append({"condition": key, "label": label,
                     # respondents with a scored item (the core's n_people also counts those without)
                     "people": len({score.pid for score in condition_scores if score.accuracy is not None}),
                     "items": s.n_items, "unscored": s.n_unscored,
                     "accuracy": _number(s.accuracy), "deviation": _number(s.deviation),
                     "problems": problems.get(key, {}), "reference": key == HUMAN_RETEST,
                     **{f"{metric}_{end}": getattr(intervals[key][metric], end) if metric in intervals.get(key, {})
                        else None for metric in (ACCURACY, DEVIATION) for end in ("lo", "hi")}})
    pairs, criteria = contrast_pairs(run)
    contrasts, errors = [], []
    for first, second in pairs:
        try:
            contrasts += survey_contrasts(scores, [(first, second)], seed=seed, draws=draws)
        except ValueError as error:
            errors.append(f"{first} minus {second}: {error}")
    evaluated = []
    for criterion in criteria:
        try:
            evaluated += evaluate_criteria([criterion], contrasts)
        except ValueError as error:
            errors.append(f"criterion {criterion.label or criterion.first}: {error}")
    study = sample_study(cohort)
    # Only a run without the screener says so, so every other run's analysis is what it was.
    screener = {} if run.protocol.survey_screener else {"screener": NO_SCREENER}
    return {**screener,
        "kind": "survey", "synthetic": bool(study and study.synthetic), "study": study.name if study else "",
        "respondents": len(respondents), "seed": seed, "draws": draws, "means": rows,
        "contrasts": [{"first": c.first, "second": c.second, "metric": c.metric, "estimate": c.result.estimate,
                       "lo": c.result.lo, "hi": c.result.hi, "people": c.result.n_people} for c in contrasts],
        "criteria": [{"sentence": r.sentence, "met": r.met, "label": r.criterion.label, "rule": r.criterion.rule,
                      "first": r.criterion.first, "second": r.criterion.second, "metric": r.criterion.metric}
                     for r in evaluated],
        "errors": errors, "metrics": [ACCURACY, DEVIATION],
    }
