"""The drawn people of every number of people from one pass over PCG64's output are, index for index,
`paired_bootstrap`'s (NumPy's `integers` block by block), and the intervals built on them are its
intervals bit for bit: compared with ``==`` on seeded inputs, with Lemire's rejections, one person,
odd numbers of draws and of halves, thirds, negative and arbitrary values."""
import numpy as np
import pytest

from experiments.core.stats import index_streams
from experiments.core.stats.index_streams import BLOCK, IndexStream, each_piece, piece_rows
from experiments.core.stats.paired import paired_bootstrap
from experiments.core.stats.shared_draws import blocks, shared_intervals_many

# (people, draws): one person (NumPy draws nothing), two, odd sizes whose blocks end on a half
# (2,000 × 875 is even, 2,999 × 875 is not), the sizes of a campaign, a power of two (nothing is
# ever rejected), and sizes where Lemire rejects a half now and then (2**32 mod n is large).
SIZES = [(1, 7), (2, 4_001), (3, 333), (875, 2_999), (1_000, 2_001), (1_024, 5), (65_537, 33),
         (100_000, 23), (1_000_003, 3)]


def drawn(sizes, seed, threads=None):
    """Every stream's indices as handed on, and the pieces' (start, rows)."""
    got = {n: np.full((draws, n), -1) for n, draws in sizes}
    pieces = {n: [] for n, _ in sizes}

    def taking(n):
        def take(start, idx):
            got[n][start:start + len(idx)] = idx
            pieces[n].append((start, len(idx)))
        return take

    each_piece([IndexStream(n, draws, taking(n)) for n, draws in sizes], seed=seed, threads=threads)
    return got, pieces


@pytest.mark.parametrize("seed", [1, 20260918])
def test_every_stream_is_paired_bootstraps_blocks(seed, monkeypatch):
    monkeypatch.setattr(index_streams, "RAW_WORDS", 12_345)  # halves end mid-piece and mid-draw
    got, pieces = drawn(SIZES, seed)
    for n, draws in SIZES:
        expected = np.vstack([idx for _, idx in blocks(n, seed=seed, draws=draws)])
        assert np.array_equal(got[n], expected), n
        # in order, whole draws, never across a block's end
        starts = [start for start, _ in pieces[n]]
        assert starts == sorted(starts) and sum(rows for _, rows in pieces[n]) == draws
        assert all(start // BLOCK == (start + rows - 1) // BLOCK for start, rows in pieces[n])


def test_lemire_rejections_are_among_the_halves_read():
    """The stream of 100,000 people over 23 draws reads halves that Lemire rejects: the test above
    checks the rejection, not only the multiplication."""
    n, draws = 100_000, 23
    halves = np.random.PCG64(1).random_raw(n * draws).view(np.uint32)
    rejected = (halves * np.uint32(n)) < np.uint32(2 ** 32 % n)
    assert rejected[:n * draws].sum() > 0


def test_one_thread_and_two_give_the_same_indices():
    sizes = [(875, 2_001), (861, 2_001), (1_000, 2_001)]
    one, _ = drawn(sizes, 5, threads=1)
    two, _ = drawn(sizes, 5, threads=2)
    assert all(np.array_equal(one[n], two[n]) for n, _ in sizes)


def test_a_piece_divides_the_block_and_stays_within_its_size():
    for n in (1, 2, 7, 875, 1_000, 4_000, 300_000):
        rows = piece_rows(n)
        assert BLOCK % rows == 0 and (rows * n <= index_streams.PIECE or rows == 1)
    with pytest.raises(ValueError):
        IndexStream(0, 10, lambda start, idx: None)


def test_intervals_on_the_streams_are_paired_bootstraps_bit_for_bit():
    rng = np.random.default_rng(9)
    groups = []
    for people, tasks in ((1, 4), (2, 7), (3, 3), (40, 130), (40, 90), (57, 200), (100_000, 100_000)):
        person = np.concatenate([np.arange(people), rng.integers(0, people, tasks - people)]) if tasks > people \
            else np.arange(people)
        groups.append((person, {
            "thirds": rng.integers(-3, 4, person.size) / 3,                 # summed as paired_bootstrap does
            "halves": rng.integers(0, 3, person.size) / 2,                  # summed as integers
            "negative halves": -rng.integers(0, 3, person.size) / 2,
            "any": rng.normal(size=person.size),
        }))
    for draws in (1, 3, 2_001):
        # a hundred thousand people: only a few draws (paired_bootstrap's own cost), with rejections
        chosen = groups if draws < 10 else groups[:-1]
        got = shared_intervals_many(chosen, seed=77, draws=draws)
        for (person, columns), intervals in zip(chosen, got):
            for name, values in columns.items():
                one = paired_bootstrap(person, values, seed=77, draws=draws)
                assert intervals[name] == {"estimate": one.estimate, "lo": one.lo, "hi": one.hi}, (name, draws)


def test_halves_are_numpys_order_low_then_high():
    raw = np.random.PCG64(3).random_raw(101)
    expected = np.column_stack([raw & 0xFFFFFFFF, raw >> 32]).astype(np.uint32).ravel()
    assert np.array_equal(index_streams._halves(raw), expected)
    generator = np.random.Generator(np.random.PCG64(3))
    # NumPy's own 32-bit draws read the same halves in the same order
    assert np.array_equal(generator.integers(0, 2 ** 32, size=202, dtype=np.uint32), expected)
