"""Faster pairwise results, the same numbers. Win rates draw their people once for the three
shares: bit for bit the numbers of one bootstrap per share. The Bradley–Terry bootstrap
(per-person win matrices in one pass, Newton stopped once converged, the draws' bins offset in
place) gives the numbers it gave before: the implementation as it stood is kept below, verbatim
but for its helpers' names, as the reference, and both are run on fixed inputs (with ties,
unlinked draws, few and many people), equal to 1e-9. The payload, its three statistics served by
one pass over the stream with sums packed as integers, equals with == the computation before that
(`head_payload`: `paired_bootstrap` per share, Bradley–Terry as it stood), halves, quarters and
thirds alike."""
from itertools import combinations
from typing import Sequence

import numpy as np
import pytest

from annotations.core import pairwise
from annotations.core.pairwise import (
    GRADIENT_TOLERANCE, NEWTON_STEPS, PairRating, _connected, _fit, _gradient, bradley_terry,
    person_win_matrices, win_matrix,
)
from experiments.core.stats.shared_draws import BLOCK

def reference_fit_near(w: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Bootstrap refits: Newton steps from the full data's estimate (a few suffice for a draw near
    it); any draw whose gradient is not then zero is refitted by `_fit`'s MM iteration."""
    n = w.shape[-1]
    theta = np.broadcast_to(start, w.shape[:-1]).copy()
    for _ in range(NEWTON_STEPS):
        gradient, information = _gradient(w, theta)
        step = np.linalg.solve(information + 1.0 / n, gradient[..., None])[..., 0]
        theta = theta + step
        theta -= theta.mean(-1, keepdims=True)
    gradient, _ = _gradient(w, theta)
    scale = np.maximum(w.sum((-2, -1)), 1.0)
    bad = ~(np.abs(gradient).max(-1) <= GRADIENT_TOLERANCE * scale) | ~np.isfinite(theta).all(-1)
    if bad.any():
        theta[bad] = _fit(w[bad])
    return theta


def reference_bradley_terry(ratings: Sequence[PairRating], conditions: Sequence[str], *, seed: int, draws: int,
                  level: float = 0.95) -> dict:
    """Centred log-strengths per condition with whole-person intervals (see the module docstring).

    {"conditions": [{condition, theta, lo, hi}], "estimable", "reason", "draws", "seed",
    "dropped_draws", "people"}. Not estimable (theta None) when the observed comparisons do not
    connect every condition both ways.
    """
    conditions = list(conditions)
    out = {"seed": int(seed), "draws": int(draws), "estimable": False, "reason": "", "dropped_draws": 0,
           "people": 0, "ties": "half a win each", "conditions": [
               {"condition": c, "theta": None, "lo": None, "hi": None} for c in conditions]}
    if len(conditions) < 2 or not ratings:
        out["reason"] = "no comparison yet"
        return out
    # People in np.unique order, as `paired_bootstrap` takes them: the same seed draws the same people.
    people, inverse = np.unique(np.asarray([r.person for r in ratings]), return_inverse=True)
    out["people"] = len(people)
    per_person = np.stack([win_matrix([r for r, k in zip(ratings, inverse) if k == j], conditions)
                           for j in range(len(people))])
    total = per_person.sum(0)
    if not _connected(total[None])[0]:
        out["reason"] = "the comparisons do not link every condition both ways: no finite scale"
        return out
    theta = reference_fit_near(total[None], np.zeros(len(conditions)))[0]
    tails = ((1 - level) / 2, 1 - (1 - level) / 2)
    rng = np.random.Generator(np.random.PCG64(seed))
    n_people, n = len(people), len(conditions)
    flat = per_person.reshape(n_people, n * n)
    replicates, dropped = [], 0
    for start in range(0, draws, BLOCK):
        m = min(BLOCK, draws - start)
        idx = rng.integers(0, n_people, size=(m, n_people))
        counts = np.bincount((np.arange(m)[:, None] * n_people + idx).ravel(), minlength=m * n_people)
        w = (counts.reshape(m, n_people) @ flat).reshape(m, n, n)
        ok = _connected(w)
        dropped += int((~ok).sum())
        if ok.any():
            replicates.append(reference_fit_near(w[ok], theta))
    out.update(estimable=True, dropped_draws=dropped)
    kept = np.concatenate(replicates) if replicates else np.empty((0, n))
    for j, row in enumerate(out["conditions"]):
        row["theta"] = float(theta[j])
        if len(kept):
            lo, hi = np.percentile(kept[:, j], [100 * tails[0], 100 * tails[1]], method="linear")
            row.update(lo=float(lo), hi=float(hi))
    return out



def ratings(people: int, per_person: int, conditions: int, seed: int, tie_share: float = 0.15) -> list[PairRating]:
    rng = np.random.default_rng(seed)
    names = [f"c{i}" for i in range(conditions)]
    pairs = list(combinations(names, 2))
    strength = dict(zip(names, np.linspace(0, 1, conditions)))
    out, item = [], 0
    for p in range(people):
        for _ in range(per_person):
            item += 1
            x, y = pairs[rng.integers(len(pairs))]
            for _ in range(2):
                if rng.random() < tie_share:
                    o = "tie"
                else:
                    o = "x" if rng.random() < 1 / (1 + np.exp(strength[y] - strength[x])) else "y"
                out.append(PairRating(item, f"person-{p:04d}", x, y, o, int(rng.integers(0, 4)), 1))
    return out


CASES = [  # (people, ratings per person / 2, conditions, seed, draws)
    (6, 3, 3, 1, 3_000),        # few people: many draws do not link every condition and are dropped
    (40, 25, 4, 2, 10_000),     # the size once measured at ~10 s for 100,000 draws
    (300, 4, 4, 3, 4_001),      # a last block of one draw
    (25, 6, 5, 4, 2_000),
]


@pytest.mark.parametrize("people, per, n, seed, draws", CASES)
def test_the_faster_bootstrap_gives_the_reference_numbers(people, per, n, seed, draws):
    rows = ratings(people, per, n, seed)
    conditions = [f"c{i}" for i in range(n)]
    new = bradley_terry(rows, conditions, seed=20260918 + seed, draws=draws)
    old = reference_bradley_terry(rows, conditions, seed=20260918 + seed, draws=draws)
    assert new["estimable"] and old["estimable"]
    assert (new["dropped_draws"], new["people"], new["draws"]) == (old["dropped_draws"], old["people"], old["draws"])
    for a, b in zip(new["conditions"], old["conditions"]):
        assert a["condition"] == b["condition"]
        for key in ("theta", "lo", "hi"):
            assert abs(a[key] - b[key]) <= 1e-9, (key, a, b)
    if people == 6:
        assert new["dropped_draws"] > 0


def test_per_person_win_matrices_are_each_persons_win_matrix():
    rows = ratings(30, 5, 4, 9, tie_share=0.3)
    conditions = ["c0", "c1", "c2", "c3"]
    people, inverse = np.unique(np.asarray([r.person for r in rows]), return_inverse=True)
    stacked = person_win_matrices(rows, inverse, len(people), conditions)
    for j in range(len(people)):
        expected = win_matrix([r for r, k in zip(rows, inverse) if k == j], conditions)
        assert np.array_equal(stacked[j], expected)
    # a hand case: one person, x beats y once, one tie
    hand = [PairRating(1, "p", "c0", "c1", "x"), PairRating(2, "p", "c0", "c1", "tie")]
    assert person_win_matrices(hand, [0, 0], 1, ["c0", "c1"]).tolist() == [[[0, 1.5], [0.5, 0]]]


def test_the_newton_refit_stops_only_once_converged():
    rows = ratings(40, 25, 4, 2)
    conditions = ["c0", "c1", "c2", "c3"]
    total = win_matrix(rows, conditions)
    start = pairwise._fit(total[None])[0]
    rng = np.random.default_rng(1)
    w = total[None] * rng.uniform(0.8, 1.2, size=(50, 4, 4))
    assert np.abs(pairwise._fit_near(w, start) - reference_fit_near(w, start)).max() <= 1e-12


@pytest.mark.parametrize("people, per, draws, seed", [(7, 3, 2_500, 1), (120, 5, 4_001, 2), (40, 25, 2_000, 3)])
def test_win_rates_draw_people_once_with_exactly_the_numbers_of_one_bootstrap_per_share(people, per, draws, seed):
    from experiments.core.stats.paired import paired_bootstrap
    rows = ratings(people, per, 3, seed, tie_share=0.25)
    got = pairwise.win_rates(rows, seed=20260918 + seed, draws=draws)
    assert len(got) == 3
    for row in got:
        items = {}
        for r in rows:
            if (r.x, r.y) == (row["x"], row["y"]):
                items.setdefault(r.item, []).append(r)
        person = [v[0].person for v in items.values()]
        for name, o in (("x_wins", "x"), ("y_wins", "y"), ("ties", "tie")):
            share = [sum(r.outcome == o for r in v) / len(v) for v in items.values()]
            one = paired_bootstrap(person, np.asarray(share), seed=20260918 + seed, draws=draws)
            # bit for bit: the same stream, sums and percentiles as one bootstrap per share
            assert row[name] == {"estimate": one.estimate, "lo": one.lo, "hi": one.hi}, (name, row[name], one)
        assert 0 <= row["x_wins"]["lo"] <= row["x_wins"]["estimate"] <= row["x_wins"]["hi"] <= 1
        assert row["x_wins"]["lo"] < row["x_wins"]["hi"]


def test_shared_draws_give_each_columns_own_bootstrap_bit_for_bit():
    from experiments.core.stats.shared_draws import shared_intervals_many
    from experiments.core.stats.paired import paired_bootstrap
    rng = np.random.default_rng(4)
    groups = []
    for people, tasks in ((30, 90), (30, 45), (17, 40)):   # two groups of 30 people share their draws
        person = [f"p{k}" for k in rng.integers(0, people, tasks)]
        person[:people] = [f"p{k}" for k in range(people)]
        groups.append((person, {"a": rng.random(tasks), "b": rng.integers(0, 2, tasks).astype(float)}))
    got = shared_intervals_many(groups, seed=11, draws=4_321)
    for (person, columns), intervals in zip(groups, got):
        for name, values in columns.items():
            one = paired_bootstrap(person, values, seed=11, draws=4_321)
            assert intervals[name] == {"estimate": one.estimate, "lo": one.lo, "hi": one.hi}
    with pytest.raises(ValueError):
        shared_intervals_many([(["p"], {"a": [float("nan")]})], seed=1, draws=10)


# ---------------------------------------------------------------------------------------------
# One pass over the stream for all three statistics, sums packed as integers: the same numbers
# ---------------------------------------------------------------------------------------------
# The reference: the results as computed before one stream served all three statistics (copied
# from annotations/core/pairwise.py as it stood; its helpers `_connected`, `_fit_near` and
# `person_win_matrices` are unchanged): Bradley–Terry with its own pass over the stream and the
# counts' product, each win-rate share and the judge's share by `paired_bootstrap`, the function
# every interval of the project must equal.

def head_bradley_terry(ratings, conditions, *, seed, draws, level=0.95):
    conditions = list(conditions)
    out = {"seed": int(seed), "draws": int(draws), "estimable": False, "reason": "", "dropped_draws": 0,
           "people": 0, "ties": "half a win each", "conditions": [
               {"condition": c, "theta": None, "lo": None, "hi": None} for c in conditions]}
    if len(conditions) < 2 or not ratings:
        out["reason"] = "no comparison yet"
        return out
    people, inverse = np.unique(np.asarray([r.person for r in ratings]), return_inverse=True)
    out["people"] = len(people)
    per_person = person_win_matrices(ratings, inverse, len(people), conditions)
    total = per_person.sum(0)
    if not _connected(total[None])[0]:
        out["reason"] = "the comparisons do not link every condition both ways: no finite scale"
        return out
    theta = pairwise._fit_near(total[None], np.zeros(len(conditions)))[0]
    tails = ((1 - level) / 2, 1 - (1 - level) / 2)
    rng = np.random.Generator(np.random.PCG64(seed))
    n_people, n = len(people), len(conditions)
    flat = per_person.reshape(n_people, n * n)
    replicates, dropped = [], 0
    for start in range(0, draws, BLOCK):
        m = min(BLOCK, draws - start)
        idx = rng.integers(0, n_people, size=(m, n_people))
        idx += np.arange(0, m * n_people, n_people)[:, None]
        counts = np.bincount(idx.ravel(), minlength=m * n_people)
        w = (counts.reshape(m, n_people) @ flat).reshape(m, n, n)
        ok = _connected(w)
        dropped += int((~ok).sum())
        if ok.any():
            replicates.append(pairwise._fit_near(w[ok], theta))
    out.update(estimable=True, dropped_draws=dropped)
    kept = np.concatenate(replicates) if replicates else np.empty((0, n))
    for j, row in enumerate(out["conditions"]):
        row["theta"] = float(theta[j])
        if len(kept):
            lo, hi = np.percentile(kept[:, j], [100 * tails[0], 100 * tails[1]], method="linear")
            row.update(lo=float(lo), hi=float(hi))
    return out


def one_bootstrap(person, values, seed, draws):
    from experiments.core.stats.paired import paired_bootstrap
    one = paired_bootstrap(person, np.asarray(values, dtype=float), seed=seed, draws=draws)
    return {"estimate": one.estimate, "lo": one.lo, "hi": one.hi}


def head_payload(rows, conditions, *, seed, draws):
    by_item = {}
    for r in sorted(rows, key=lambda r: r.item):
        by_item.setdefault(r.item, []).append(r)
    by_pair = {}
    for item, group in by_item.items():
        by_pair.setdefault((group[0].x, group[0].y), {})[item] = group
    win = []
    for (x, y), items in by_pair.items():
        person = [g[0].person for g in items.values()]
        votes = {o: sum(r.outcome == o for g in items.values() for r in g) for o in ("x", "y", "tie")}
        row = {"x": x, "y": y, "items": len(items), "ratings": sum(votes.values()), "people": len(set(person)),
               "x_votes": votes["x"], "y_votes": votes["y"], "tie_votes": votes["tie"]}
        for name, o in (("x_wins", "x"), ("y_wins", "y"), ("ties", "tie")):
            row[name] = one_bootstrap(person, [sum(r.outcome == o for r in g) / len(g) for g in items.values()],
                                      seed, draws)
        win.append(row)
    judge = pairwise.judge_order_agreement(rows, seed=seed, draws=draws)  # its counts; its interval below
    scored = [g for g in by_item.values() if g[0].judge_x is not None and g[0].judge_y is not None
              and g[0].judge_x != g[0].judge_y]
    if scored:
        higher = ["x" if g[0].judge_x > g[0].judge_y else "y" for g in scored]
        judge["share"] = one_bootstrap([g[0].person for g in scored],
                                       [sum(r.outcome == h for r in g) / len(g) for g, h in zip(scored, higher)],
                                       seed, draws)
    return {"seed": seed, "draws": draws, "ratings": len(rows), "win_rates": win,
            "bradley_terry": head_bradley_terry(rows, conditions, seed=seed, draws=draws), "judge_order": judge}


def mixed_ratings(people: int, items: int, conditions: int, seed: int, per_item=(2,), tie_share=0.15):
    """Items of random pairs and people, each rated by a number of raters drawn from `per_item`
    (1, 2, 4: halves and quarters, summed as integers; 3: thirds, summed as paired_bootstrap does)."""
    rng = np.random.default_rng(seed)
    names = [f"c{i}" for i in range(conditions)]
    pairs = list(combinations(names, 2))
    out = []
    for item in range(1, items + 1):
        x, y = pairs[rng.integers(len(pairs))]
        person = f"person-{int(rng.integers(people)):04d}"
        judge = rng.integers(0, 4, size=2)
        for _ in range(int(rng.choice(per_item))):
            o = "tie" if rng.random() < tie_share else ("x" if rng.random() < 0.55 else "y")
            out.append(PairRating(item, person, x, y, o, int(judge[0]), int(judge[1])))
    return out


PAYLOAD_CASES = [  # (people, items, conditions, seed, draws, ratings per item)
    (60, 400, 4, 1, 4_001, (2,)),          # the benchmark's shape: halves, several numbers of people
    (60, 400, 4, 2, 2_500, (1, 2, 4)),     # halves and quarters
    (40, 300, 3, 3, 2_000, (3,)),          # thirds: summed as paired_bootstrap sums them
    (40, 300, 3, 4, 3_000, (2, 3)),        # halves and thirds in one column
    (5, 12, 3, 5, 2_100, (2,)),            # few people: draws that do not link every condition
    (300, 2_000, 5, 6, 1, (2,)),           # one draw
]


@pytest.mark.parametrize("people, items, n, seed, draws, per_item", PAYLOAD_CASES)
def test_the_payload_is_the_reference_bit_for_bit(people, items, n, seed, draws, per_item):
    rows = mixed_ratings(people, items, n, seed, per_item)
    conditions = [f"c{i}" for i in range(n)]
    got = pairwise.pairwise_payload(rows, conditions, seed=20260918 + seed, draws=draws)
    assert got == head_payload(rows, conditions, seed=20260918 + seed, draws=draws)
    # ... and each statistic alone gives what the payload gives
    assert got["win_rates"] == pairwise.win_rates(rows, seed=20260918 + seed, draws=draws)
    assert got["bradley_terry"] == bradley_terry(rows, conditions, seed=20260918 + seed, draws=draws)
    assert got["judge_order"] == pairwise.judge_order_agreement(rows, seed=20260918 + seed, draws=draws)
    if people == 5:
        assert got["bradley_terry"]["dropped_draws"] > 0
    assert len({r["people"] for r in got["win_rates"]}) > 1 or len(got["win_rates"]) == 1


def test_drawn_sums_are_paired_bootstraps_sums_whatever_the_column():
    from experiments.core.stats.shared_draws import DrawnSums, order_free, packed_words
    rng = np.random.default_rng(12)
    n = 300
    columns = np.column_stack([
        rng.integers(0, 9, n).astype(float),                 # task counts
        rng.integers(0, 17, n) / 2,                          # halves
        rng.integers(0, 40, n) / 4,                          # quarters
        rng.integers(0, 30, n) / 3,                          # thirds: not order-free
        rng.random(n),                                       # any double: not order-free
        -rng.integers(0, 5, n) / 2,                          # negative halves: order-free, summed alone
        np.zeros(n),
        np.full(n, 2.0 ** 40),                               # order-free, a word of its own
        np.full(n, 2.0 ** 50),                               # not order-free: n × value reaches 2**53
    ])
    assert [order_free(c, n) for c in columns.T][:4] == [0, 1, 2, None]
    assert order_free(np.array([2.0 ** 45]), 2 ** 10) is None   # n × value reaches 2**53
    words, fields = packed_words(columns[:, [0, 1, 7]] * [1, 2, 1], n)   # counts, halves × 2, 2**40
    assert [w for w, _, _ in fields] == [0, 0, 1] and len(words) == 2       # 2**40 × 300 needs a word of its own
    idx = rng.integers(0, n, size=(777, n))
    assert order_free(columns[:, 8], n) is None
    for chosen in ([0, 1, 2], [0, 1, 2, 3, 4], [0, 5], [6], [0, 7], [1, 8], list(range(9))):
        got = DrawnSums(columns[:, chosen])(idx)
        for k, j in enumerate(chosen):
            assert np.array_equal(got[:, k], columns[:, j][idx].sum(1)), (chosen, j)
