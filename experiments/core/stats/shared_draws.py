"""Whole-person bootstrap intervals of many columns with the people drawn once: pure, NumPy.

`shared_intervals_many` gives exactly `experiments.core.stats.paired.paired_bootstrap`'s interval
(task weighting, PCG64(seed), blocks of 2,000, central 95 %, linear percentiles) of every column
of every group, faster: `paired_bootstrap` starts PCG64(seed) afresh on each call and draws
indices into the call's np.unique people, so every column of every group with as many people
draws the same indices; here they are drawn once per block for all of them (`resample`), and
anything else resampled with that stream (the Bradley–Terry refits) takes its blocks too.

A draw's sum: `paired_bootstrap` adds the drawn people's float sums in its own order. When a
column's per-person sums are all multiples of one power of two 2**-e and n_people × their largest
magnitude stays below 2**(53 - e) (halves, quarters and whole numbers: shares of items rated
once, twice or four times, task counts, win counts), every partial sum of a draw is a double
exactly, so no order of adding rounds (`order_free`): such columns are summed as integers, several
packed side by side in one int64 word (`DrawnSums`), and give the very same doubles. Any other
column (thirds, fifths) is gathered and summed as `paired_bootstrap` sums it.

The indices come from `index_streams`: the stream of every number of people from one pass over
PCG64(seed)'s output, a cache-sized piece of whole draws at a time (`Resampled.take`).

In the core's statistics (not in `annotations.core`) because the LLM pairwise judge's numbers
(`experiments.core.pairwise_judge`) use it too, and experiments never import annotations.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import numpy as np

from experiments.core.stats.arguments import bootstrap_tails
from experiments.core.stats.index_streams import BLOCK, IndexStream, each_piece

MANTISSA_BITS = 53


class Resampled(Protocol):
    """Something bootstrapped on `paired_bootstrap`'s stream of `n_people` people."""

    n_people: int

    def take(self, start: int, idx: np.ndarray) -> None:
        """Draws start … start + len(idx): idx (draws × n_people) the people drawn, valid only
        during the call. Pieces come in order and never straddle one of paired_bootstrap's blocks."""


def order_free(values: np.ndarray, n_people: int) -> int | None:
    """The e with every value a multiple of 2**-e and n_people × the largest magnitude below
    2**(53 - e), or None. Then any sum of n_people of `values` (repeats allowed), in any order,
    is the same double: every partial sum is exactly a double, so no addition rounds."""
    values = np.asarray(values, dtype=float)
    if not np.isfinite(values).all():
        return None
    for e in range(MANTISSA_BITS):
        scaled = np.ldexp(values, e)  # exact: a power of two
        if np.array_equal(scaled, np.trunc(scaled)):
            return e if int(np.abs(scaled).max(initial=0)) * n_people < 2 ** MANTISSA_BITS else None
    return None


def blocks(n_people: int, *, seed: int, draws: int) -> Iterator[tuple[int, np.ndarray]]:
    """paired_bootstrap's indices, block by block from a fresh PCG64(seed): (start, idx). The
    reference `resample`'s streams are tested against."""
    rng = np.random.Generator(np.random.PCG64(seed))
    for start in range(0, draws, BLOCK):
        yield start, rng.integers(0, n_people, size=(min(BLOCK, draws - start), n_people))


def resample(consumers: Sequence[Resampled], *, seed: int, draws: int) -> None:
    """paired_bootstrap's stream of draws of each number of people, every piece of it to every
    consumer with as many people (`index_streams.each_piece`: one pass over PCG64(seed) for all)."""
    if draws < 1:
        raise ValueError("draws and block must be positive")

    def handing(same: list) -> Callable[[int, np.ndarray], None]:
        def take(start: int, idx: np.ndarray) -> None:
            for c in same:
                c.take(start, idx)
        return take

    # The largest first: with two threads, the longest streams do not come last.
    sizes = sorted({c.n_people for c in consumers}, reverse=True)
    each_piece([IndexStream(n, draws, handing([c for c in consumers if c.n_people == n])) for n in sizes],
               seed=seed)


def packed_words(columns: np.ndarray, n_people: int) -> tuple[list[np.ndarray], list[tuple[int, int, int]]]:
    """Non-negative integer columns (people × k) packed side by side into int64 words, so that one
    gather and one integer sum per word give every column's sum over a draw of n_people people:
    each column gets the bits its largest such sum needs (below 2**53: `order_free`). The words
    (one array of people each) and each column's (word, shift, mask)."""
    fields, words, used = [], [], 64
    for column in columns.T:
        bits = (int(column.max(initial=0)) * n_people).bit_length() or 1
        if used + bits > 63:  # a new word; its sums stay below 2**63
            words.append(np.zeros(len(columns), dtype=np.int64))
            used = 0
        words[-1] |= column.astype(np.int64) << used
        fields.append((len(words) - 1, used, (1 << bits) - 1))
        used += bits
    return words, fields


class DrawnSums:
    """Per-person sums (people × k) → each draw's sum of every column, the doubles
    `paired_bootstrap` gets (a gather of the drawn people's sums, a pairwise sum per draw).

    Order-free, non-negative columns (module docstring) are summed as integers, exactly, several
    packed in one word: one gather and one integer sum per word; any other column is gathered and
    summed as paired_bootstrap does it."""

    def __init__(self, sums: np.ndarray):
        self.sums = np.asarray(sums, dtype=float)
        n = len(self.sums)
        exponents = [order_free(column, n) for column in self.sums.T]
        self.exact = [j for j, e in enumerate(exponents) if e is not None and self.sums[:, j].min(initial=0) >= 0]
        shifts = np.array([exponents[j] for j in self.exact], dtype=int)
        self.words, self.fields = packed_words(np.ldexp(self.sums[:, self.exact], shifts), n)
        self.scale = np.array([2.0 ** -exponents[j] for j in self.exact])
        # Each exact column's field, as arrays: all of them unpacked by one operation per step.
        self.field_word, self.field_shift, self.field_mask = (
            np.array(part, dtype=np.int64).reshape(-1) for part in zip(*self.fields)) if self.fields else (
            np.zeros(0, dtype=np.int64),) * 3
        self.alone = [j for j in range(self.sums.shape[1]) if j not in self.exact]
        self.gathered = np.empty(0, dtype=np.int64)

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        out = np.empty((len(idx), self.sums.shape[1]))
        # Gathered into one reused array: a piece of draws stays in the cache from gather to sum.
        if self.gathered.size < idx.size:
            self.gathered = np.empty(idx.size, dtype=np.int64)
        words = self.gathered[:idx.size].reshape(idx.shape)
        floats = words.view(float)
        totals = np.empty((len(idx), len(self.words)), dtype=np.int64)
        for k, word in enumerate(self.words):
            # mode="clip": every index is in range, and numpy's bounds check costs more than the gather.
            np.add.reduce(np.take(word, idx, mode="clip", out=words), axis=1, out=totals[:, k])
        if self.exact:  # each exact sum, a double exactly
            out[:, self.exact] = ((totals[:, self.field_word] >> self.field_shift) & self.field_mask) * self.scale
        for j in self.alone:
            out[:, j] = np.take(self.sums[:, j], idx, mode="clip", out=floats).sum(1)
        return out


class Columns:
    """One group's columns (one value per task) for `paired_bootstrap`'s interval of each."""

    def __init__(self, person, columns: dict, *, draws: int):
        person = np.asarray(person)
        self.values = {name: np.asarray(v, dtype=float) for name, v in columns.items()}
        for v in self.values.values():
            if v.ndim != 1 or v.shape != person.shape or v.size == 0 or not np.isfinite(v).all():
                raise ValueError("one finite value per task of `person`, at least one task")
        _, inverse = np.unique(person, return_inverse=True)
        self.n_people = n = int(inverse.max()) + 1
        # Per-person sums exactly as paired_bootstrap forms them; the task counts first.
        sums = [np.bincount(inverse, minlength=n).astype(float)]
        sums += [np.bincount(inverse, weights=v, minlength=n) for v in self.values.values()]
        self.drawn = DrawnSums(np.column_stack(sums))
        self.replicates = np.empty((draws, len(self.values)))

    def take(self, start: int, idx: np.ndarray) -> None:
        drawn = self.drawn(idx)
        self.replicates[start:start + len(idx)] = drawn[:, 1:] / drawn[:, :1]

    def intervals(self) -> dict[str, dict]:
        tails = bootstrap_tails(0.95, None)
        out = {}
        for j, (name, v) in enumerate(self.values.items()):
            lo, hi = np.percentile(self.replicates[:, j], [100 * tails[0], 100 * tails[1]], method="linear")
            out[name] = {"estimate": float(v.mean()), "lo": float(lo), "hi": float(hi)}
        return out


def shared_intervals_many(groups: Sequence[tuple], *, seed: int, draws: int) -> list[dict[str, dict]]:
    """For each (person, {name: values}) group: {name: {estimate, lo, hi}} of each column.

    Exactly `paired_bootstrap`'s numbers (task weighting, blocks of BLOCK, central 95 %, linear
    percentiles), column by column: each call of it starts PCG64(seed) afresh and draws indices
    into its np.unique people, so groups with as many people draw the same indices. Here they are
    drawn once for every group of that size, and each column's per-person sums are those
    `paired_bootstrap` forms, each draw's sum the same double (module docstring)."""
    if draws < 1:
        raise ValueError("draws and block must be positive")
    many = IntervalGroups(groups, draws=draws)
    resample(many.consumers, seed=seed, draws=draws)
    return many.intervals()


class IntervalGroups:
    """`shared_intervals_many` in two steps, so that its draws can share a pass over the stream with
    anything else resampled with the same seed and draws: `consumers` (to `resample`), then `intervals()`."""

    def __init__(self, groups: Sequence[tuple], *, draws: int):
        self.prepared = [Columns(person, columns, draws=draws) for person, columns in groups]
        self.consumers = [Joined([g for g in self.prepared if g.n_people == n])
                          for n in sorted({g.n_people for g in self.prepared})]

    def intervals(self) -> list[dict[str, dict]]:
        return [g.intervals() for g in self.prepared]


class Joined:
    """Groups with as many people summed together: their columns side by side in one DrawnSums, so
    that order-free columns of different groups share the packed words (one gather per word for all).
    A draw's indices name the i-th of each group's np.unique people alike, so each column's sum is the
    one its own group's DrawnSums gives: an exact integer sum, or the column gathered and summed alone."""

    def __init__(self, groups: Sequence[Columns]):
        self.groups = list(groups)
        self.n_people = self.groups[0].n_people
        sums = [g.drawn.sums for g in self.groups]
        self.drawn = DrawnSums(np.column_stack(sums))
        ends = np.cumsum([s.shape[1] for s in sums])
        self.spans = list(zip(ends - [s.shape[1] for s in sums], ends))

    def take(self, start: int, idx: np.ndarray) -> None:
        drawn = self.drawn(idx)
        for g, (first, end) in zip(self.groups, self.spans):
            g.replicates[start:start + len(idx)] = drawn[:, first + 1:end] / drawn[:, first:first + 1]
