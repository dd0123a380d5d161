"""paired_bootstrap's drawn people for every number of people from one pass over PCG64(seed): pure NumPy.

`paired_bootstrap` draws ``rng.integers(0, n, size=(block, n))`` from a fresh PCG64(seed). For
1 < n < 2**32 NumPy draws each such index (whatever its integer type) by Lemire's method on its
32-bit stream: every 64-bit output of PCG64 split in two halves, low half first, the unused half
kept by the generator from one call to the next, so the blocks' sizes do not change the indices.
A half u gives the index (u·n) >> 32, unless (u·n) mod 2**32 < 2**32 mod n: then it is rejected
(a few in a hundred million halves for a thousand people) and the next half is tried. For n = 1
NumPy draws nothing and every index is 0.

So the indices of every number of people are one and the same sequence of halves, mapped and
filtered. `each_piece` generates that sequence once for all of them (`integers` would generate it
afresh for each), maps it with whole-array operations a piece at a time, and hands each piece
(`PIECE` indices at most, whole draws) to everything resampled on that many people while it is
still in the processor's cache. Pieces never straddle one of paired_bootstrap's blocks.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BLOCK = 2_000  # paired_bootstrap's block of draws
# Indices mapped and handed on at once: 2 MiB of int64, in the cache while gathered and summed; fewer
# NumPy calls than smaller pieces (measured: 2**16 and 2**20 slower).
PIECE = 1 << 18
RAW_WORDS = 1 << 20  # 64-bit outputs of PCG64 generated at once (8 MiB), shared by every number of people
THREADS = 2


def piece_rows(n_people: int) -> int:
    """Draws in a piece: the most that keeps it within PIECE indices and divides BLOCK (so a piece
    never straddles a block), at least one."""
    return max(r for r in range(1, BLOCK + 1) if BLOCK % r == 0 and (r * n_people <= PIECE or r == 1))


class IndexStream:
    """The draws of one number of people, fed the halves in order: each full piece goes to `take`,
    called as take(start, idx) with idx (draws × n_people, int64) valid only during the call."""

    def __init__(self, n_people: int, draws: int, take: Callable[[int, np.ndarray], None]):
        if not 0 < n_people < 2 ** 32:
            raise ValueError("between 1 and 2**32 - 1 people")
        self.n_people, self.draws, self.take = n_people, draws, take
        self.rows = piece_rows(n_people)
        self.start = 0  # the first draw of the piece being filled
        self.filled = 0
        self.piece = np.zeros(self.rows * n_people, dtype=np.uint64)
        self.low = np.empty(self.piece.size, dtype=np.uint32)
        self.n32, self.n64 = np.uint32(n_people % 2 ** 32), np.uint64(n_people)
        self.threshold = 2 ** 32 % n_people  # a half whose product's low 32 bits fall below is rejected

    @property
    def done(self) -> bool:
        return self.start >= self.draws

    def _size(self) -> int:
        return min(self.rows, self.draws - self.start) * self.n_people

    def _hand_on(self) -> None:
        size = self._size()
        self.take(self.start, self.piece[:size].view(np.int64).reshape(-1, self.n_people))
        self.start += size // self.n_people
        self.filled = 0

    def feed(self, halves: np.ndarray) -> None:
        """The next halves of the stream (uint32, in order); those after the last draw are ignored."""
        if self.n_people == 1:  # NumPy consumes nothing: every draw is person 0 (the piece stays zero)
            while not self.done:
                self._hand_on()
            return
        at = 0
        while at < len(halves) and not self.done:
            part = halves[at:at + self._size() - self.filled]
            at += len(part)
            low = np.multiply(part, self.n32, out=self.low[:len(part)])  # (u·n) mod 2**32
            if self.threshold and low.min() < self.threshold:
                part = part[low >= self.threshold]  # Lemire's rejections: the next half is tried
            out = self.piece[self.filled:self.filled + len(part)]
            np.multiply(part, self.n64, out=out)
            np.right_shift(out, 32, out=out)
            self.filled += len(part)
            if self.filled == self._size():
                self._hand_on()


def each_piece(streams: Sequence[IndexStream], *, seed: int, threads: int | None = None) -> None:
    """Feeds every stream PCG64(seed)'s halves until each has handed on all its draws. The streams
    are independent: `threads` work on them at once (NumPy maps, gathers and sums without holding
    the interpreter lock), the next raw outputs generated meanwhile; the first streams first."""
    generator = np.random.PCG64(seed)
    if (threads or THREADS) == 1:
        while any(not s.done for s in streams):
            halves = _halves(generator.random_raw(RAW_WORDS))
            for s in streams:
                s.feed(halves)
        return
    with ThreadPoolExecutor(threads or THREADS) as pool:
        raw = generator.random_raw(RAW_WORDS)
        while any(not s.done for s in streams):
            following = pool.submit(generator.random_raw, RAW_WORDS)
            halves = _halves(raw)
            for done in [pool.submit(s.feed, halves) for s in streams if not s.done]:
                done.result()
            raw = following.result()


def _halves(raw: np.ndarray) -> np.ndarray:
    """PCG64's 64-bit outputs as NumPy's 32-bit stream uses them: low half, then high half."""
    if sys.byteorder == "little":
        return raw.view(np.uint32)  # in memory the low half comes first: no copy
    return np.column_stack([raw & 0xFFFFFFFF, raw >> 32]).astype(np.uint32).ravel()
