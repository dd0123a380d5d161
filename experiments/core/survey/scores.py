"""Scores of survey answers, paired contrasts and prespecified criteria (App. H). No Django.

- Per item: exact-option accuracy (1 or 0) and, on ordinal items, the normalized deviation
  |chosen - recorded| / (options - 1). An item without a usable answer has no score (the pair is
  left out of a contrast, as the paper's Table 22 did with the one omitted item), never a zero.
- Per respondent: the mean of their scored items; a condition's mean is reported both over
  respondents (each counts once) and over items.
- Paired contrasts between two conditions: per item present in both, the difference of scores;
  the estimate is the item-weighted mean and the 95% interval the project's whole-person bootstrap
  (`stats.paired_bootstrap`, via `stats.shared_bootstraps`: all of a respondent's items travel
  together), with the seed of the paper's Twin-2K-500 intervals unless told otherwise.
- The respondents' own waves 1-3 answers scored like a condition: the human test-retest row.
- Prespecified criteria (e.g. "normalized deviation interval below zero") evaluated by code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from experiments.core.stats.paired import BootstrapResult
from experiments.core.survey.targets import TargetItem

SURVEY_SEED = 20260923  # App. B: the seed of the Twin-2K-500 intervals
ACCURACY = "accuracy"
DEVIATION = "deviation"
METRICS = (ACCURACY, DEVIATION)
HUMAN_RETEST = "human test-retest"


@dataclass(frozen=True)
class ItemScore:
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


def score_items(pid: str, items: Sequence[TargetItem], chosen: Sequence[int | None]) -> list[ItemScore]:
    """Score chosen options (one per item, None when unusable) against the recorded wave-4 answers."""
    raise NotImplementedError


def human_retest_scores(pid: str, items: Sequence[TargetItem]) -> list[ItemScore]:
    """The respondent's own waves 1-3 answers scored against their wave-4 answers."""
    raise NotImplementedError


def respondent_means(scores: Sequence[ItemScore]) -> dict[str, tuple[float | None, float | None]]:
    """pid -> (mean accuracy, mean normalized deviation) over that respondent's scored items."""
    raise NotImplementedError


def summarize(condition: str, scores: Sequence[ItemScore]) -> ConditionSummary:
    raise NotImplementedError


def survey_contrasts(scores: Mapping[str, Sequence[ItemScore]], pairs: Sequence[tuple[str, str]], *,
                     seed: int = SURVEY_SEED, draws: int = 100_000,
                     metrics: Sequence[str] = METRICS) -> list[SurveyContrast]:
    """Paired contrasts (first minus second) with 95% whole-person bootstrap intervals, per metric."""
    raise NotImplementedError


def evaluate_criteria(criteria: Sequence[Criterion], contrasts: Sequence[SurveyContrast]) -> list[CriterionResult]:
    """Each criterion against its contrast; a criterion whose contrast is missing is an error."""
    raise NotImplementedError
