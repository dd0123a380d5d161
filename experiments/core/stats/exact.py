"""Exact reference tests in plain math (App. I.3): χ² against a uniform split, the exact binomial test.

The app does not import scipy (a test-only reference there); tests check these against it.
"""
from __future__ import annotations

import math
from typing import Sequence

# Continued fraction and series of the incomplete gamma function (Numerical Recipes §6.2).
_EPS = 1e-16
_TINY = 1e-300
_ITERATIONS = 10_000


def _lower_series(a: float, x: float) -> float:
    """P(a, x) by its series, for x < a + 1."""
    term = total = 1.0 / a
    n = a
    for _ in range(_ITERATIONS):
        n += 1
        term *= x / n
        total += term
        if abs(term) < abs(total) * _EPS:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _upper_fraction(a: float, x: float) -> float:
    """Q(a, x) by Lentz's continued fraction, for x >= a + 1."""
    b = x + 1 - a
    c = 1 / _TINY
    d = 1 / b
    h = d
    for i in range(1, _ITERATIONS):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < _EPS:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chi2_sf(statistic: float, df: int) -> float:
    """P(χ²_df ≥ statistic): the regularized upper incomplete gamma Q(df/2, statistic/2)."""
    if df < 1:
        raise ValueError("degrees of freedom must be positive")
    if statistic <= 0:
        return 1.0
    a, x = df / 2, statistic / 2
    if x < a + 1:
        return max(0.0, 1.0 - _lower_series(a, x))
    return _upper_fraction(a, x)


def chi2_uniform(counts: Sequence[int]) -> tuple[float, float]:
    """Pearson's χ² of ``counts`` against equal expected counts, and its p-value (df = k − 1)."""
    total = sum(counts)
    if total == 0 or len(counts) < 2:
        return float("nan"), float("nan")
    expected = total / len(counts)
    statistic = sum((c - expected) ** 2 / expected for c in counts)
    return statistic, chi2_sf(statistic, len(counts) - 1)


def binomial_test(k: int, n: int, p: float) -> float:
    """Two-sided exact binomial p-value: the probability of every count no more likely than k.

    Counts whose probability is within a relative 1e-7 of k's count as equally likely (the
    rule scipy.stats.binomtest uses for its default two-sided test).
    """
    if not 0 <= k <= n or not 0 < p < 1:
        raise ValueError("need 0 <= k <= n and 0 < p < 1")
    if n == 0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)

    def log_pmf(i: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q

    threshold = log_pmf(k) + math.log1p(1e-7)
    return min(1.0, math.fsum(math.exp(lp) for lp in map(log_pmf, range(n + 1)) if lp <= threshold))
