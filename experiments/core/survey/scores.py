"""Scores of survey answers, paired contrasts and prespecified criteria (App. H). No Django.

- Per item: exact-option accuracy (1 or 0) and, on ordinal items, the normalized deviation
  |chosen - recorded| / (options - 1). An item without a usable answer has no score (the pair is
  left out of a contrast, as the paper's Table 22 did with the one omitted item), never a zero.
- Per respondent: the mean of their scored items; a condition's mean is reported both over
  respondents (each counts once) and over items.
- Paired contrasts between two conditions: per item present in both, the difference of scores;
  the estimate is the item-weighted mean and the 95% interval the project's whole-person bootstrap
  (`stats.paired_bootstrap`'s figures to the last bit, via `stats.shared_bootstraps` for accuracy
  and `intervals.shared_draw_bootstraps` for deviation: all of a respondent's items travel
  together), with the seed of the paper's Twin-2K-500 intervals unless told otherwise.
- The respondents' own waves 1-3 answers scored like a condition: the human test-retest row.
- A condition's mean over respondents with its whole-person interval (`mean_intervals`).
- Prespecified criteria (e.g. "normalized deviation interval below zero") evaluated by code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from experiments.core.stats.paired import BootstrapResult
from experiments.core.stats.shared import BootstrapRequest, shared_bootstraps
from experiments.core.survey.intervals import shared_draw_bootstraps
from experiments.core.survey.prompt import (
    MEMORY, MEMORY_PLUS_OWNWORDS, MEMORY_PLUS_WHOLE_PERSONA, OWNWORDS, SCREENER_ONLY, WHOLE_PERSONA,
)
from experiments.core.survey.targets import TargetItem

SURVEY_SEED = 20260923  # App. B: the seed of the Twin-2K-500 intervals
ACCURACY = "accuracy"
DEVIATION = "deviation"
METRICS = (ACCURACY, DEVIATION)
HUMAN_RETEST = "human test-retest"


class ItemScore(NamedTuple):  # a named tuple: a run scores tens of thousands at once
    pid: str
    key: str  # TargetItem.key
    ordinal: bool
    accuracy: float | None  # 1.0 or 0.0; None without a usable answer
    deviation: float | None  # ordinal items with a usable answer; else None


@dataclass(frozen=True)
class ConditionSummary:
    condition: str
    n_people: int
    n_items: int  # scored items
    n_unscored: int  # items without a usable answer
    accuracy: float  # mean of per-respondent means
    deviation: float  # mean of per-respondent means over ordinal items
    accuracy_items: float  # mean over items
    deviation_items: float


@dataclass(frozen=True)
class SurveyContrast:
    first: str
    second: str  # first minus second
    metric: str  # ACCURACY or DEVIATION
    result: BootstrapResult


@dataclass(frozen=True)
class Criterion:
    """A prespecified criterion on one contrast: `rule` is "below-zero" (interval's upper bound < 0),
    "above-zero" (lower bound > 0) or "lower-bound-above" (lower bound > threshold)."""

    first: str
    second: str
    metric: str
    rule: str
    threshold: float = 0.0
    label: str = ""


@dataclass(frozen=True)
class CriterionResult:
    criterion: Criterion
    met: bool
    contrast: SurveyContrast
    sentence: str  # e.g. "met: -0.0081 [-0.0105, -0.0056] is below zero"


def _score(pid: str, item: TargetItem, option: int | None) -> ItemScore:
    if option is None:
        return ItemScore(pid, item.key, item.ordinal, None, None)
    if isinstance(option, bool) or not isinstance(option, int) or not 1 <= option <= len(item.options):
        raise ValueError(f"respondent {pid} item {item.number} ({item.key}): option {option!r} is not one of "
                         f"1..{len(item.options)}")
    deviation = abs(option - item.wave4) / (len(item.options) - 1) if item.ordinal else None
    return ItemScore(pid, item.key, item.ordinal, 1.0 if option == item.wave4 else 0.0, deviation)


def score_items(pid: str, items: Sequence[TargetItem], chosen: Sequence[int | None]) -> list[ItemScore]:
    """Score chosen options (one per item, None when unusable) against the recorded wave-4 answers."""
    if len(chosen) != len(items):
        raise ValueError(f"respondent {pid}: {len(chosen)} answers for {len(items)} items")
    return [_score(pid, item, option) for item, option in zip(items, chosen)]


def human_retest_scores(pid: str, items: Sequence[TargetItem]) -> list[ItemScore]:
    """The respondent's own waves 1-3 answers scored against their wave-4 answers."""
    return [_score(pid, item, item.earlier or None) for item in items]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def respondent_means(scores: Sequence[ItemScore]) -> dict[str, tuple[float, float]]:
    """pid -> (mean accuracy, mean normalized deviation) over that respondent's scored items
    (NaN where they have none)."""
    accuracy: dict[str, list[float]] = {}
    deviation: dict[str, list[float]] = {}
    for score in scores:
        accuracy.setdefault(score.pid, [])
        deviation.setdefault(score.pid, [])
        if score.accuracy is not None:
            accuracy[score.pid].append(score.accuracy)
        if score.deviation is not None:
            deviation[score.pid].append(score.deviation)
    return {pid: (_mean(accuracy[pid]), _mean(deviation[pid])) for pid in accuracy}


def summarize(condition: str, scores: Sequence[ItemScore]) -> ConditionSummary:
    means = respondent_means(scores)
    accuracy = [a for a, _ in means.values() if not math.isnan(a)]
    deviation = [d for _, d in means.values() if not math.isnan(d)]
    scored = [s.accuracy for s in scores if s.accuracy is not None]
    deviations = [s.deviation for s in scores if s.deviation is not None]
    return ConditionSummary(condition, len(means), len(scored), len(scores) - len(scored),
                            _mean(accuracy), _mean(deviation), _mean(scored), _mean(deviations))


def paired_differences(first: Sequence[ItemScore], second: Sequence[ItemScore],
                       metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(respondent labels, first minus second) for every item scored in both, in `first`'s order."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    other = {(s.pid, s.key): getattr(s, metric) for s in second}
    people, diffs = [], []
    for score in first:
        a, b = getattr(score, metric), other.get((score.pid, score.key))
        if a is not None and b is not None:
            people.append(score.pid)
            diffs.append(a - b)
    return np.array(people, dtype=object), np.array(diffs, dtype=float)


def survey_contrasts(scores: Mapping[str, Sequence[ItemScore]], pairs: Sequence[tuple[str, str]], *,
                     seed: int = SURVEY_SEED, draws: int = 100_000,
                     metrics: Sequence[str] = METRICS) -> list[SurveyContrast]:
    """Paired contrasts (first minus second) with 95% whole-person bootstrap intervals, per metric.

    Every contrast uses the same seed, so contrasts over the same respondents resample the same
    respondents in every draw (App. B.3); `shared_bootstraps` gives `paired_bootstrap`'s figures.
    """
    labels, whole, fractional = [], [], []
    for first, second in pairs:
        for name in (first, second):
            if name not in scores:
                raise ValueError(f"no scores for condition {name!r}")
        for metric in metrics:
            people, diffs = paired_differences(scores[first], scores[second], metric)
            if diffs.size == 0:
                raise ValueError(f"{first} minus {second}: no item is scored in both for {metric}")
            # Labels as text: np.unique orders people the same way in every contrast.
            (whole if metric == ACCURACY else fractional).append((len(labels), people.astype(str), diffs))
            labels.append((first, second, metric))
    results: list[BootstrapResult | None] = [None] * len(labels)
    # Accuracy differences are -1, 0 or 1: shared_bootstraps computes them by exact integer products.
    for (i, _people, _diffs), result in zip(whole, shared_bootstraps(
            [BootstrapRequest(people, diffs) for _i, people, diffs in whole], seed=seed, draws=draws)):
        results[i] = result[0]
    for (i, _people, _diffs), result in zip(fractional, shared_draw_bootstraps(
            [(people, diffs) for _i, people, diffs in fractional], seed=seed, draws=draws)):
        results[i] = result
    return [SurveyContrast(first, second, metric, result) for (first, second, metric), result in zip(labels, results)]


def mean_intervals(scores: Mapping[str, Sequence[ItemScore]], *, seed: int = SURVEY_SEED,
                   draws: int = 100_000) -> dict[str, dict[str, BootstrapResult]]:
    """condition -> metric -> the 95% whole-person interval of its mean over respondents (each
    respondent's mean counts once, as `summarize` reports it): `paired_bootstrap` with one value per
    respondent, all on one stream of draws (`intervals.shared_draw_bootstraps`). A condition or
    metric without a scored respondent has no entry."""
    requests, labels = [], []
    for condition, condition_scores in scores.items():
        means = respondent_means(condition_scores)
        for position, metric in enumerate(METRICS):
            kept = [(pid, values[position]) for pid, values in means.items() if not math.isnan(values[position])]
            if kept:
                requests.append((np.array([pid for pid, _ in kept], dtype=str),
                                 np.array([value for _, value in kept], dtype=float)))
                labels.append((condition, metric))
    out: dict[str, dict[str, BootstrapResult]] = {}
    for (condition, metric), result in zip(labels, shared_draw_bootstraps(requests, seed=seed, draws=draws)
                                           if requests else []):
        out.setdefault(condition, {})[metric] = result
    return out


RULES = ("below-zero", "above-zero", "lower-bound-above")

# The criteria the paper fixed before its reported sample of 400 (App. H): each a 95% interval
# below zero in normalized deviation, against the memory; accuracy reported two-sided.
REPORTED_SAMPLE_CRITERIA = (
    Criterion(OWNWORDS, MEMORY, DEVIATION, "below-zero", label="primary"),
    Criterion(MEMORY_PLUS_OWNWORDS, MEMORY, DEVIATION, "below-zero", label="secondary"),
)


# The four criteria fixed before the second sample's first call (App. H, Table 23): the memory plus
# the whole persona against the memory (higher accuracy, lower deviation), against OwnWords and
# against the whole persona (higher accuracy).
SECOND_SAMPLE_CRITERIA = (
    Criterion(MEMORY_PLUS_WHOLE_PERSONA, MEMORY, ACCURACY, "above-zero", label="second sample: accuracy vs memory"),
    Criterion(MEMORY_PLUS_WHOLE_PERSONA, MEMORY, DEVIATION, "below-zero", label="second sample: deviation vs memory"),
    Criterion(MEMORY_PLUS_WHOLE_PERSONA, OWNWORDS, ACCURACY, "above-zero", label="second sample: accuracy vs OwnWords"),
    Criterion(MEMORY_PLUS_WHOLE_PERSONA, WHOLE_PERSONA, ACCURACY, "above-zero",
              label="second sample: accuracy vs whole persona"),
)

# The paired differences (first minus second) in the order App. H reports them.
PAPER_PAIRS = (
    (OWNWORDS, MEMORY), (MEMORY_PLUS_OWNWORDS, MEMORY), (OWNWORDS, SCREENER_ONLY), (MEMORY, SCREENER_ONLY),
    (WHOLE_PERSONA, MEMORY), (WHOLE_PERSONA, OWNWORDS), (MEMORY_PLUS_OWNWORDS, OWNWORDS),
    (MEMORY_PLUS_OWNWORDS, WHOLE_PERSONA),
    (MEMORY_PLUS_WHOLE_PERSONA, MEMORY), (MEMORY_PLUS_WHOLE_PERSONA, OWNWORDS), (MEMORY_PLUS_WHOLE_PERSONA, WHOLE_PERSONA),
    (MEMORY_PLUS_WHOLE_PERSONA, MEMORY_PLUS_OWNWORDS), (MEMORY_PLUS_WHOLE_PERSONA, SCREENER_ONLY),
    (WHOLE_PERSONA, SCREENER_ONLY), (MEMORY_PLUS_OWNWORDS, SCREENER_ONLY),
)


def every_pair(conditions: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of the conditions once: the paper's pairs in its order and orientation, then each
    other pair as the later condition minus the earlier."""
    ran = list(dict.fromkeys(conditions))
    paper = [pair for pair in PAPER_PAIRS if pair[0] in ran and pair[1] in ran]
    covered = {frozenset(pair) for pair in paper}
    rest = [(ran[j], ran[i]) for i in range(len(ran)) for j in range(i + 1, len(ran))
            if frozenset((ran[i], ran[j])) not in covered]
    return paper + rest


def evaluate_criteria(criteria: Sequence[Criterion], contrasts: Sequence[SurveyContrast]) -> list[CriterionResult]:
    """Each criterion against its contrast; a criterion whose contrast is missing is an error."""
    by_key = {(c.first, c.second, c.metric): c for c in contrasts}
    out = []
    for criterion in criteria:
        if criterion.rule not in RULES:
            raise ValueError(f"unknown rule {criterion.rule!r}; known: {', '.join(RULES)}")
        contrast = by_key.get((criterion.first, criterion.second, criterion.metric))
        if contrast is None:
            raise ValueError(f"no contrast {criterion.first} minus {criterion.second} in {criterion.metric}")
        r = contrast.result
        figure = f"{r.estimate:+.4f} [{r.lo:+.4f}, {r.hi:+.4f}]"
        if criterion.rule == "below-zero":
            met, test = r.hi < 0, "interval below zero"
        elif criterion.rule == "above-zero":
            met, test = r.lo > 0, "interval above zero"
        else:
            met, test = r.lo > criterion.threshold, f"lower bound above {criterion.threshold:+.4f}"
        sentence = (f"{criterion.label + ': ' if criterion.label else ''}{criterion.first} minus {criterion.second}, "
                    f"{criterion.metric} {figure}: {'met' if met else 'not met'} ({test})")
        out.append(CriterionResult(criterion, met, contrast, sentence))
    return out
