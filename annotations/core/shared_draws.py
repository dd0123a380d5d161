"""Whole-person bootstrap intervals of many columns with the people drawn once: pure, NumPy.

`shared_intervals_many` gives exactly `experiments.core.stats.paired.paired_bootstrap`'s interval
(task weighting, PCG64(seed), blocks of 2,000, central 95 %, linear percentiles) of every column
of every group, faster: `paired_bootstrap` starts PCG64(seed) afresh on each call and draws
indices into the call's np.unique people, so every column of every group with as many people
draws the same indices; here they are drawn once per block for all of them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from experiments.core.stats.arguments import bootstrap_tails

BLOCK = 2_000  # paired_bootstrap's block: the blocks' sizes fix the stream of indices


def shared_intervals_many(groups: Sequence[tuple], *, seed: int, draws: int) -> list[dict[str, dict]]:
    """For each (person, {name: values}) group: {name: {estimate, lo, hi}} of each column.

    Exactly `paired_bootstrap`'s numbers (task weighting, blocks of BLOCK, central 95 %, linear
    percentiles), column by column: each call of it starts PCG64(seed) afresh and draws indices
    into its np.unique people, so groups with as many people draw the same indices. Here they are
    drawn once per block for every group of that size, and each column's per-person sums and
    per-draw sums are those `paired_bootstrap` forms: only the drawing is shared."""
    if draws < 1:
        raise ValueError("draws and block must be positive")
    tails = bootstrap_tails(0.95, None)
    prepared = []
    for person, columns in groups:
        person = np.asarray(person)
        values = {name: np.asarray(v, dtype=float) for name, v in columns.items()}
        for v in values.values():
            if v.ndim != 1 or v.shape != person.shape or v.size == 0 or not np.isfinite(v).all():
                raise ValueError("one finite value per task of `person`, at least one task")
        _, inverse = np.unique(person, return_inverse=True)
        n_people = int(inverse.max()) + 1
        prepared.append({
            "n": n_people, "values": values,
            "sums": {name: np.bincount(inverse, weights=v, minlength=n_people) for name, v in values.items()},
            "tasks": np.bincount(inverse, minlength=n_people).astype(float),
            "replicates": {name: np.empty(draws) for name in values}})
    for n_people in sorted({g["n"] for g in prepared}):
        same = [g for g in prepared if g["n"] == n_people]
        rng = np.random.Generator(np.random.PCG64(seed))
        for start in range(0, draws, BLOCK):
            m = min(BLOCK, draws - start)
            idx = rng.integers(0, n_people, size=(m, n_people))
            for g in same:
                drawn_tasks = np.take(g["tasks"], idx).sum(1)
                for name, s in g["sums"].items():
                    g["replicates"][name][start:start + m] = np.take(s, idx).sum(1) / drawn_tasks
    out = []
    for g in prepared:
        row = {}
        for name, v in g["values"].items():
            lo, hi = np.percentile(g["replicates"][name], [100 * tails[0], 100 * tails[1]], method="linear")
            row[name] = {"estimate": float(v.mean()), "lo": float(lo), "hi": float(hi)}
        out.append(row)
    return out
