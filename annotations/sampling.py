"""Which items a campaign rates and who rates them: pure, seeded, no Django.

`stratified_sample` draws a sample spread over strata (condition × judge grade) in
proportion to their size and, within a stratum, over tasks before any task repeats.
`assign` gives each item to exactly k distinct raters, keeping loads within one of each
other, and orders every rater's queue by a seeded shuffle so conditions are mixed.
Everything is reproducible from the seed.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from typing import Hashable, Sequence

import numpy as np


def _allocation(sizes: Sequence[int], total: int) -> list[int]:
    """Largest-remainder shares of `total` proportional to `sizes`, each ≤ its size.

    Every non-empty stratum gets at least one when `total` allows it, so a rare
    judge grade is never absent from a sample.
    """
    sizes = list(sizes)
    if total >= sum(sizes):
        return sizes
    shares = [0] * len(sizes)
    non_empty = [i for i, s in enumerate(sizes) if s > 0]
    floor = 1 if total >= len(non_empty) else 0
    for i in non_empty:
        shares[i] = floor
    left = total - floor * len(non_empty)
    weight = sum(sizes)
    exact = [left * s / weight for s in sizes]
    for i in non_empty:
        shares[i] += min(int(exact[i]), sizes[i] - shares[i])
    # Hand out what rounding left by the largest remainders, then wherever there is room.
    order = sorted(non_empty, key=lambda i: (-(exact[i] - int(exact[i])), i))
    while sum(shares) < total:
        for i in order:
            if sum(shares) < total and shares[i] < sizes[i]:
                shares[i] += 1
    return shares


def stratified_sample(strata: Sequence[Hashable], tasks: Sequence[Hashable], size: int, seed: int) -> list[int]:
    """Indices of a seeded sample of `size` items, stratified by `strata`, spread over `tasks`.

    `strata[i]` and `tasks[i]` describe item i. The result is sorted.
    """
    if size < 1:
        raise ValueError("a sample has at least one item")
    if len(strata) != len(tasks):
        raise ValueError("one stratum and one task per item")
    rng = np.random.default_rng(seed)
    by_stratum: dict[Hashable, list[int]] = defaultdict(list)
    for i, stratum in enumerate(strata):
        by_stratum[stratum].append(i)
    keys = sorted(by_stratum, key=repr)
    shares = _allocation([len(by_stratum[k]) for k in keys], size)
    chosen: list[int] = []
    for key, share in zip(keys, shares):
        members = [by_stratum[key][j] for j in rng.permutation(len(by_stratum[key]))]
        # Round-robin over tasks (in shuffled order): a task gets a second item only
        # after every task of the stratum has one.
        rounds: dict[Hashable, int] = defaultdict(int)
        ranked = []
        for rank, i in enumerate(members):
            ranked.append((rounds[tasks[i]], rank, i))
            rounds[tasks[i]] += 1
        chosen.extend(i for _, _, i in sorted(ranked)[:share])
    return sorted(chosen)


def assign(n_items: int, raters: Sequence[Hashable], k: int, seed: int) -> dict[Hashable, list[int]]:
    """rater → the item indices of their queue, in queue order.

    Each item goes to exactly `k` distinct raters; items are dealt in a seeded order to the
    least-loaded raters (ties broken by a seeded rank), so loads differ by at most one.
    """
    raters = list(raters)
    if len(set(raters)) != len(raters):
        raise ValueError("a rater is listed twice")
    if k < 1:
        raise ValueError("each item needs at least one rating")
    if len(raters) < k:
        raise ValueError(f"{k} ratings per item need at least {k} raters; the campaign has {len(raters)}")
    rng = np.random.default_rng(seed)
    tie_rank = {r: int(x) for r, x in zip(raters, rng.permutation(len(raters)))}
    heap = [(0, tie_rank[r], r) for r in raters]
    heapq.heapify(heap)
    queues: dict[Hashable, list[int]] = {r: [] for r in raters}
    for item in rng.permutation(n_items).tolist():
        taken = [heapq.heappop(heap) for _ in range(k)]
        for load, rank, rater in taken:
            queues[rater].append(item)
            heapq.heappush(heap, (load + 1, rank, rater))
    for rater in raters:
        queue = queues[rater]
        queues[rater] = [queue[j] for j in rng.permutation(len(queue))]
    return queues


def reassign(open_items: Sequence[int], holders: dict[int, set], loads: dict[Hashable, int]) -> dict[int, Hashable]:
    """item → new rater for a departing rater's open items.

    `holders[item]` are the raters who hold (or held) the item, who must not get it again;
    `loads` are the remaining raters' open loads. The least-loaded eligible rater gets each
    item, in item order. Raises ValueError naming the first item nobody can take.
    """
    loads = dict(loads)
    moved: dict[int, Hashable] = {}
    for item in open_items:
        eligible = [r for r in loads if r not in holders[item]]
        if not eligible:
            raise ValueError(f"item {item} has no rater left who has not already rated or held it")
        rater = min(eligible, key=lambda r: (loads[r], repr(r)))
        moved[item] = rater
        loads[rater] += 1
    return moved


def with_repeats(queue: Sequence[int], percent: int, seed: int) -> list[tuple[int, bool]]:
    """One rater's queue with hidden repeats: [(item, is_repeat)] in showing order.

    round(percent% × len(queue)) items, drawn by a seeded permutation, are shown a second time,
    each at a seeded later place at least two places after its first showing (never adjacent),
    so the rater meets it again as any other item. Fewer than three items: no repeat fits.
    """
    if not 0 <= percent <= 100:
        raise ValueError("a repeat share is between 0 and 100 percent")
    shown: list[tuple[int, bool]] = [(item, False) for item in queue]
    want = round(len(queue) * percent / 100)
    if want == 0 or len(queue) < 3:
        return shown
    rng = np.random.default_rng(seed)
    # Candidates: items whose first showing leaves room for a place two or more later.
    candidates = [queue[j] for j in rng.permutation(len(queue) - 2)]
    for item in candidates[:want]:
        first = shown.index((item, False))
        # Later insertions only move pairs apart (or both together), never closer.
        place = int(rng.integers(first + 2, len(shown) + 1))
        shown.insert(place, (item, True))
    return shown
