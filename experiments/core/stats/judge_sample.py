"""Two judges' agreement on a seeded, stratified sample of graded answers (paper App. I.6).

App. I.6: the second judge "was first used … on 2,000 predictions sampled from that July run", and
the paper's κ = 0.83 is read "on the 501 predictions from the exact cells of Table 30 (250 with
history and 251 question-only …)": a sample spread evenly over the conditions (cells), with
whole-person intervals.

* ``allocate``: how many items each stratum gives to a sample of ``n``: one at a time, round
  robin over the strata in sorted order, skipping a stratum once it is used up (equal allocation;
  the remainder goes to the first strata; a small stratum gives all it has);
* ``stratified_sample``: which items, drawn within each stratum without replacement by one NumPy
  PCG64 generator from ``seed`` (strata in sorted order, ``rng.permutation`` of the stratum's items
  in the caller's order, the first k kept); sorted item positions;
* ``agreement_rows``: exact agreement, agreement within one grade, quadratic-weighted κ and
  ordinal α on the sample and on each stratum of it (`agreement_stats.agreement_bootstrap`,
  unchanged: whole-person intervals on `paired_bootstrap`'s stream).

Pure NumPy; no Django.
"""
from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from experiments.core.stats.agreement_stats import agreement_bootstrap

DEFAULT_SAMPLE_SIZE = 501          # App. I.6: the 501 predictions of the reported κ
DEFAULT_SAMPLE_SEED = 20260917     # App. I.6: the seed of that comparison
MAX_SAMPLE_SIZE = 1_000_000
AGREEMENT_COLUMNS = ("Sample", "Statistic", "Pairs", "People", "Estimate", "95% lo", "95% hi")
STATISTICS = (("exact", "exact agreement"), ("within_one", "within one grade"),
              ("kappa", "quadratic-weighted κ"), ("alpha", "ordinal α"))


def _sorted_strata(strata: Sequence[Hashable]) -> list:
    return sorted(set(strata), key=lambda s: (str(type(s)), str(s)))


def allocate(sizes: dict, n: int) -> dict:
    """stratum → items it gives to a sample of ``n`` (round robin in sorted order, capped by its size)."""
    if n < 0:
        raise ValueError("a sample size is not negative")
    order = _sorted_strata(list(sizes))
    taken = {s: 0 for s in order}
    remaining = min(n, sum(sizes.values()))
    while remaining:
        for s in order:
            if remaining and taken[s] < sizes[s]:
                taken[s] += 1
                remaining -= 1
    return taken


def stratified_sample(strata: Sequence[Hashable], n: int, *, seed: int) -> np.ndarray:
    """Positions (sorted) of a sample of ``n`` items, evenly over the strata, drawn with PCG64(seed)."""
    strata = list(strata)
    positions: dict = {}
    for i, s in enumerate(strata):
        positions.setdefault(s, []).append(i)
    quota = allocate({s: len(p) for s, p in positions.items()}, n)
    rng = np.random.Generator(np.random.PCG64(seed))
    chosen = []
    for s in _sorted_strata(list(positions)):
        items = np.asarray(positions[s])
        chosen.extend(items[rng.permutation(items.size)[:quota[s]]].tolist())
    return np.array(sorted(chosen), dtype=np.int64)


def _rows(label: str, first, second, people, *, seed: int, draws: int) -> list[tuple]:
    result = agreement_bootstrap(first, second, people, draws=draws, seed=seed).as_dict()
    return [(label, name, result["n_pairs"], result["n_people"], result[key]["estimate"], result[key]["lo"],
             result[key]["hi"]) for key, name in STATISTICS]


def agreement_rows(first, second, people, strata, sample, *, sample_label: str, seed: int, draws: int
                   ) -> list[tuple]:
    """AGREEMENT_COLUMNS rows: the sample, then each of its strata (sorted), four statistics each.

    ``first``, ``second`` (grades 0..3), ``people`` and ``strata`` are parallel over all items both
    judges graded; ``sample`` the positions drawn (``stratified_sample``). κ and α are None where
    undefined (a judge used one grade only).
    """
    first, second = np.asarray(first), np.asarray(second)
    people, strata = np.asarray(people), np.asarray(strata, dtype=object)
    sample = np.asarray(sample, dtype=np.int64)
    if sample.size == 0:
        return []
    rows = _rows(sample_label, first[sample], second[sample], people[sample], seed=seed, draws=draws)
    for s in _sorted_strata(strata[sample].tolist()):
        inside = sample[strata[sample] == s]
        rows += _rows(f"{sample_label}: {s}", first[inside], second[inside], people[inside], seed=seed, draws=draws)
    return rows
