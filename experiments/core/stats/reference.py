"""The whole-person bootstrap as plain loops: a slow, obviously correct reference for `paired.paired_bootstrap`."""
from __future__ import annotations

import math

import numpy as np

from experiments.core.stats.arguments import bootstrap_tails, check_draws, check_paired
from experiments.core.stats.paired import BootstrapResult


def _percentile_linear(sorted_values: list[float], q: float) -> float:
    """Hyndman & Fan type 7 (NumPy's "linear"), from its textbook definition."""
    h = (len(sorted_values) - 1) * q
    below = math.floor(h)
    if below + 1 >= len(sorted_values):
        return sorted_values[-1]
    a, b = sorted_values[below], sorted_values[below + 1]
    return a + (h - below) * (b - a)


def paired_bootstrap_loop(person, diff, *, seed: int, draws: int = 100_000,
                          block: int = 2_000, level: float = 0.95,
                          tails: tuple[float, float] | None = None,
                          weighting: str = "task",
                          keep_replicates: bool = False) -> BootstrapResult:
    """Slow, obviously correct reference for ``paired_bootstrap``.

    Plain Python loops over draws and sampled people.  It makes the same
    generator calls (one ``integers`` block per ``block`` draws), so it
    resamples exactly the same people; only the floating-point order of the
    sums and the percentile formula are its own.  Used by the tests and by
    ``benchmarks/stats.py``; never by the app.
    """
    person = [p.item() if isinstance(p, np.generic) else p for p in np.asarray(person)]
    diff = [float(d) for d in diff]
    check_paired(person, diff)
    check_draws(draws, block)
    tails = bootstrap_tails(level, tails)
    people = sorted(set(person))
    position = {p: i for i, p in enumerate(people)}
    S = [0.0] * len(people)
    N = [0.0] * len(people)
    for p, d in zip(person, diff):
        S[position[p]] += d
        N[position[p]] += 1
    if weighting == "person":
        S = [s / n for s, n in zip(S, N)]
        N = [1.0] * len(people)
    elif weighting != "task":
        raise ValueError("weighting must be 'task' or 'person'")
    estimate = sum(S) / sum(N)

    rng = np.random.Generator(np.random.PCG64(seed))
    replicates = []
    done = 0
    while done < draws:
        m = min(block, draws - done)
        idx = rng.integers(0, len(people), size=(m, len(people)))
        for row in idx.tolist():
            total, count = 0.0, 0.0
            for j in row:
                total += S[j]
                count += N[j]
            replicates.append(total / count)
        done += m
    ordered = sorted(replicates)
    lo = _percentile_linear(ordered, tails[0])
    hi = _percentile_linear(ordered, tails[1])
    return BootstrapResult(estimate, lo, hi, len(diff), len(people), seed, draws,
                           tails, weighting,
                           np.array(replicates) if keep_replicates else None)
