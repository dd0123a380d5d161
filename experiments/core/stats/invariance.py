"""Judge invariance (beyond the paper: its content-versus-wording control): the same judge's grades of
each answer and of the answer paraphrased with its content kept, compared. Pure computation, no Django.

`judge_invariance(original, paraphrased, persons)` gives the share of grades that change (1 − exact
agreement, its interval the exact agreement's mirrored), the shares that go up and down, and the
quadratic-weighted κ between the two gradings, each with a whole-person interval: the pairs are the
answers, people are resampled whole with the agreement statistics' own bootstrap
(`agreement_stats.agreement_bootstrap`: PCG64, the recorded seed and draws, linear percentiles).
A judge that reads content only changes no grade (share 0, κ 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.core.stats.agreement_stats import AgreementResult, Interval, agreement_bootstrap
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED


@dataclass(frozen=True)
class JudgeInvariance:
    """The comparison of original and paraphrase grades; `agreement` keeps every statistic behind it."""

    n_pairs: int
    n_people: int
    changed: Interval  # share of answers whose grade changed
    up: float  # share graded higher after the paraphrase
    down: float  # share graded lower
    kappa: Interval  # quadratic-weighted κ, original (rows) against paraphrase (columns)
    agreement: AgreementResult

    def as_dict(self) -> dict:
        return {"n_pairs": self.n_pairs, "n_people": self.n_people, "changed": self.changed.as_dict(),
                "up": self.up, "down": self.down, "kappa": self.kappa.as_dict()}


def judge_invariance(original, paraphrased, persons, *, draws: int = DEFAULT_DRAWS,
                     seed: int = DEFAULT_SEED) -> JudgeInvariance:
    """`original` and `paraphrased`: grades 0..3 of the same answers (no missing values); `persons`
    the person of each answer's task."""
    a, b = np.asarray(original), np.asarray(paraphrased)
    result = agreement_bootstrap(a, b, persons, draws=draws, seed=seed)
    exact = result.exact
    changed = Interval(1.0 - exact.estimate, 1.0 - exact.hi, 1.0 - exact.lo)
    n = a.size
    up = float(np.sum(b.astype(float) > a.astype(float)) / n) if n else float("nan")
    down = float(np.sum(b.astype(float) < a.astype(float)) / n) if n else float("nan")
    return JudgeInvariance(result.n_pairs, result.n_people, changed, up, down, result.kappa, result)


__all__ = ["JudgeInvariance", "judge_invariance"]
