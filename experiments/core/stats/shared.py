"""Many whole-person bootstraps on one stream of draws: identical to `paired_bootstrap`, to the last bit.

Every interval of one analysis uses the same seed, so statistics with the same set of
clusters (people, or studies) resample the same clusters in every draw.  Instead of
redrawing the indices once per statistic, ``shared_bootstraps`` draws each chunk of
indices once, turns it into resampling counts (draws × clusters) and applies it to all
statistics at once: one matrix product of the counts with the per-cluster sums of every
statistic.  Memory is bounded by the chunk, never by draws × clusters.

Why the result is the same to the last bit, not merely to 1e-15
---------------------------------------------------------------
``paired_bootstrap``'s replicate is a floating-point sum of per-person float sums in the
order the indices came out, divided by the sampled task count.  A matrix product sums in
another order, so its floats differ in the last bits.  But normalized differences are
thirds (``diff == raw / 3`` with integer ``raw``), so the product of the counts with the
integer per-person sums is *exact*, and it orders the draws by their exact values.  The
float a draw would get in ``paired_bootstrap`` lies within ``δ`` (a rigorous rounding bound)
of its exact value; hence the order statistics a percentile reads are found among the few
draws whose exact value lies within ``2δ`` of the exact order statistics.  Only those draws
are recomputed exactly as ``paired_bootstrap`` computes them (the generator state is kept
every few draws, and PCG64 integers continue seamlessly across calls), and the percentile
is taken with NumPy's own ``np.percentile`` on an array with those order statistics in
place.  With few clusters (studies) every replicate is computed directly, as
``paired_bootstrap`` does, on the shared draws.  A statistic whose differences are not
thirds is computed by ``paired_bootstrap`` itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from experiments.core.stats.arguments import bootstrap_tails, check_draws, check_paired
from experiments.core.stats.paired import BootstrapResult, MAX_GRADE, paired_bootstrap

UNIT_ROUNDOFF = 2.0 ** -53
# Rows of draws generated and counted at once: the memory bound (rows × clusters counts).
CHUNK_ROWS = 128
# Draws between two kept generator states: a needed draw is redrawn from the state before it.
STATE_ROWS = 16
# NumPy draws integers below 2**32 from the same 32-bit stream whatever the integer type,
# so 32-bit indices are paired_bootstrap's (64-bit) ones at half the memory (tests check it).
INDEX_DTYPE = np.int32
# Up to this many clusters (studies) the replicates are computed directly, as paired_bootstrap
# does, on the shared draws: cheap, and ties there are too many for the exact-key windows.
DIRECT_CLUSTERS = 64


@dataclass(frozen=True)
class BootstrapRequest:
    """One statistic: ``paired_bootstrap(cluster, diff, tails=t)`` for every ``t`` in ``tails``."""

    cluster: Sequence
    diff: Sequence[float]
    tails: tuple[tuple[float, float], ...] = (bootstrap_tails(0.95, None),)


@dataclass
class _Statistic:
    index: int                # position in the caller's requests
    diff: np.ndarray
    sums: np.ndarray          # per-cluster float sums, exactly as paired_bootstrap builds them
    counts: np.ndarray        # per-cluster task counts (float)
    raw: np.ndarray           # per-cluster integer sums of 3 × diff (exact)
    tails: tuple[tuple[float, float], ...]


def _exact_thirds(diff: np.ndarray) -> np.ndarray | None:
    """Integers ``raw`` with ``raw / 3 == diff`` bit for bit, or None if ``diff`` is not thirds."""
    raw = np.rint(diff * MAX_GRADE)
    if np.array_equal(raw / MAX_GRADE, diff) and np.abs(raw).sum() < 2 ** 50:
        return raw
    return None


def shared_bootstraps(requests: Sequence[BootstrapRequest], *, seed: int, draws: int = 100_000,
                      block: int = 2_000, chunk_rows: int = CHUNK_ROWS,
                      direct_clusters: int = DIRECT_CLUSTERS) -> list[list[BootstrapResult]]:
    """``[[paired_bootstrap(r.cluster, r.diff, seed=seed, draws=draws, tails=t) for t in r.tails] for r in requests]``.

    Statistics sharing their set of clusters share their draws; each such group is one pass
    over the stream.  ``block`` is accepted for ``paired_bootstrap``'s signature: the stream
    does not depend on it, and memory is bounded by ``chunk_rows`` (at most ``block``).
    Groups of at most ``direct_clusters`` clusters compute every replicate directly.
    """
    check_draws(draws, block)
    chunk_rows = max(1, min(chunk_rows, block))
    results: list[list[BootstrapResult] | None] = [None] * len(requests)
    groups: dict[tuple, tuple[np.ndarray, list[_Statistic]]] = {}
    for i, request in enumerate(requests):
        tails = tuple(bootstrap_tails(0.95, t) for t in request.tails)
        cluster, diff = check_paired(request.cluster, request.diff)
        raw = _exact_thirds(diff)
        if raw is None:
            results[i] = [paired_bootstrap(cluster, diff, seed=seed, draws=draws, block=block, tails=t)
                          for t in tails]
            continue
        labels, inverse = np.unique(cluster, return_inverse=True)
        n = labels.size
        statistic = _Statistic(
            i, diff,
            np.bincount(inverse, weights=diff, minlength=n),
            np.bincount(inverse, minlength=n).astype(float),
            np.bincount(inverse, weights=raw, minlength=n),
            tails)
        key = (labels.dtype.str, labels.tobytes()) if labels.dtype != object else ("O", tuple(labels.tolist()))
        groups.setdefault(key, (labels, []))[1].append(statistic)
    # Products of a chunk are small: a second BLAS thread only waits for the first, and on a
    # busy machine its spinning costs more than it gives.
    with threadpool_limits(limits=1, user_api="blas"):
        by_group = {key: _group(labels.size, statistics, seed, draws, chunk_rows, direct_clusters)
                     for key, (labels, statistics) in groups.items()}
    for key, (labels, statistics) in groups.items():
        for statistic, intervals in zip(statistics, by_group[key]):
            results[statistic.index] = [
                BootstrapResult(float(statistic.diff.mean()), lo, hi, int(statistic.diff.size), labels.size,
                                seed, draws, tails)
                for tails, (lo, hi) in zip(statistic.tails, intervals)]
    return results


def _integer_counts(idx: np.ndarray, n: int, out: np.ndarray) -> np.ndarray:
    """Resampling counts (rows × n) of a chunk of indices, written into ``out``."""
    rows = idx.shape[0]
    if n < 1024:      # small rows: one flat bincount is cheaper than a call per row
        offsets = (np.arange(rows, dtype=np.intp) * n)[:, None]
        out[:rows] = np.bincount((idx + offsets).ravel(), minlength=rows * n).reshape(rows, n)
    else:             # large rows: a row's bins stay in cache
        for r in range(rows):
            out[r] = np.bincount(idx[r], minlength=n)
    return out[:rows]


def _group(n: int, statistics: list[_Statistic], seed: int, draws: int, chunk_rows: int,
           direct_clusters: int) -> list[list[tuple]]:
    """One pass over the stream for statistics with the same n clusters: their intervals."""
    if n <= direct_clusters:
        replicates = _direct(n, statistics, seed, draws, chunk_rows)
        return [_percentiles(s, replicates[:, j]) for j, s in enumerate(statistics)]
    keys, states, state_rows = _exact_keys(n, statistics, seed, draws, chunk_rows)
    # Per statistic and tail value: the positions numpy's percentile may read, the number of
    # draws surely below them, and the draws that may hold them (sorted).
    windows = []
    for j, s in enumerate(statistics):
        column = keys[:, j]
        ordered = np.sort(column)
        margin = _margin(s, n)
        per_tail = []
        for q in sorted({q for tails in s.tails for q in tails}):
            positions = _read_positions(draws, q)
            lower = ordered[positions[0]] - margin
            upper = ordered[positions[-1]] + margin
            below = int(np.searchsorted(ordered, lower, side="left"))
            per_tail.append((positions, below, np.flatnonzero((column >= lower) & (column <= upper))))
        windows.append(per_tail)
    needed = [np.unique(np.concatenate([members for _, _, members in per_tail])) for per_tail in windows]
    values = _recompute(n, statistics, needed, states, state_rows)
    out = []
    for j, s in enumerate(statistics):
        order_statistics = {}
        for positions, below, members in windows[j]:
            held = np.sort(values[j][np.searchsorted(needed[j], members)])
            for p in positions:
                order_statistics[p] = held[p - below]
        # An array whose sorted values hold those order statistics at their positions:
        # np.percentile reads only them, so it returns what it returns on all replicates.
        stand_in = np.empty(draws)
        previous = 0
        for p in sorted(order_statistics):
            stand_in[previous:p + 1] = order_statistics[p]
            previous = p + 1
        stand_in[previous:] = order_statistics[max(order_statistics)]
        out.append(_percentiles(s, stand_in))
    return out


def _read_positions(draws: int, q: float) -> list[int]:
    """The sorted positions np.percentile(method="linear") reads for quantile q: floor(h) and
    the next, h = (draws - 1)·q; both neighbours when h is within rounding of an integer,
    since numpy computes h in its own floating-point order."""
    h = (draws - 1) * q
    slack = 1e-9 * max(1.0, h)
    first, last = math.floor(h - slack), math.floor(h + slack) + 1
    return [p for p in range(first, last + 1) if 0 <= p < draws]


def _percentiles(s: _Statistic, replicates: np.ndarray) -> list[tuple[float, float]]:
    """paired_bootstrap's reading of its replicates, once per pair of tails."""
    return [tuple(float(x) for x in np.percentile(replicates, [100 * lo, 100 * hi], method="linear"))
            for lo, hi in s.tails]


def _direct(n: int, statistics: list[_Statistic], seed: int, draws: int, chunk_rows: int) -> np.ndarray:
    """Few clusters (studies): every replicate as paired_bootstrap computes it, one draw for all."""
    replicates = np.empty((draws, len(statistics)))
    rng = np.random.Generator(np.random.PCG64(seed))
    for start in range(0, draws, chunk_rows):
        rows = min(chunk_rows, draws - start)
        idx = rng.integers(0, n, size=(rows, n), dtype=INDEX_DTYPE)
        for j, s in enumerate(statistics):
            replicates[start:start + rows, j] = s.sums[idx].sum(1) / s.counts[idx].sum(1)
    return replicates


def _exact_keys(n: int, statistics: list[_Statistic], seed: int, draws: int, chunk_rows: int):
    """Every draw's exact value (× 3, rounded once) for every statistic; the stream's state every state_rows draws."""
    k = len(statistics)
    # Statistics over the same tasks share their count column (and equal sums theirs):
    # one product column per distinct column.
    matrix, column = np.unique(np.column_stack([s.raw for s in statistics] + [s.counts for s in statistics]),
                               axis=1, return_inverse=True)
    column = column.ravel()
    # Integer products are exact in float32 below 2**24, in float64 below 2**53.
    largest = float(np.abs(matrix).sum(axis=0).max()) * n
    if largest >= 2 ** 53:
        raise ValueError("sums too large for exact integer products")
    dtype = np.float32 if largest < 2 ** 24 else np.float64
    matrix = matrix.astype(dtype)
    # The state is kept every state_rows draws (a chunk is a whole number of them), so that a
    # draw is later redrawn from at most state_rows - 1 draws before it.
    state_rows = min(STATE_ROWS, chunk_rows)
    chunk_rows -= chunk_rows % state_rows
    counts_buffer = np.empty((chunk_rows, n), dtype=dtype)
    keys = np.empty((draws, k))
    states = []
    rng = np.random.Generator(np.random.PCG64(seed))
    for start in range(0, draws, chunk_rows):
        rows = min(chunk_rows, draws - start)
        for first in range(0, rows, state_rows):
            m = min(state_rows, rows - first)
            states.append(rng.bit_generator.state)
            idx = rng.integers(0, n, size=(m, n), dtype=INDEX_DTYPE)
            _integer_counts(idx, n, counts_buffer[first:first + m])
        totals = (counts_buffer[:rows] @ matrix).astype(np.float64)[:, column]
        # raw sum / task count: the exact value × 3, correctly rounded, so monotone in it.
        keys[start:start + rows] = totals[:, :k] / totals[:, k:]
    return keys, states, state_rows


def _recompute(n: int, statistics: list[_Statistic], needed: list[np.ndarray], states: list,
               chunk_rows: int) -> list[np.ndarray]:
    """The replicates of the ``needed`` draws (sorted, per statistic) exactly as paired_bootstrap computes them."""
    values = [np.empty(d.size) for d in needed]
    chunks = np.unique(np.concatenate(needed) // chunk_rows)
    for c in chunks.tolist():
        first = c * chunk_rows
        spans = [(np.searchsorted(d, first), np.searchsorted(d, first + chunk_rows)) for d in needed]
        last = max(int(needed[j][b - 1]) for j, (a, b) in enumerate(spans) if b > a) - first
        generator = np.random.PCG64()
        generator.state = states[c]
        idx = np.random.Generator(generator).integers(0, n, size=(last + 1, n), dtype=INDEX_DTYPE)
        for j, (a, b) in enumerate(spans):
            if b > a:
                rows = idx[needed[j][a:b] - first]
                values[j][a:b] = statistics[j].sums[rows].sum(1) / statistics[j].counts[rows].sum(1)
    return values


def _margin(s: _Statistic, n: int) -> float:
    """Half-width, on the key scale, of the window around an exact order statistic.

    A replicate of ``paired_bootstrap`` differs from its exact value by at most
    δ = (t + n + 2)·u·max|diff| to first order (each diff rounded once, t - 1 additions in a
    person's sum, n - 1 in the draw's sum, one division), t the most tasks of a cluster.
    Its order statistics then lie within δ of the exact ones, and only draws within 2δ can
    hold them.  Keys are 3 × the exact values, rounded once.  Generous factors cover the
    higher-order terms; a wider window only costs a few more recomputed draws.
    """
    scale = float(np.abs(s.diff).max()) if s.diff.size else 0.0
    delta = 2 * (float(s.counts.max()) + n + 4) * UNIT_ROUNDOFF * scale
    return MAX_GRADE * 4 * delta + 8 * UNIT_ROUNDOFF * MAX_GRADE * scale
