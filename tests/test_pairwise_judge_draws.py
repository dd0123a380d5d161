"""The LLM pairwise judge's intervals on shared draws (`shared_intervals_many`) are, bit for bit, the
ones it had from one `paired_bootstrap` per share: the previous computation is kept here as the
reference and compared with == on seeded inputs (halves, thirds, several pairs, groups of different
sizes, empty groups)."""
import numpy as np
import pytest

from experiments.core.pairwise_judge import (
    HumanPreference, JudgedPair, combined, human_agreement, judge_rows, judge_rows_and_agreement, order_outcomes,
)
from experiments.core.stats.paired import paired_bootstrap


def reference_interval(person, values, *, seed, draws):
    """The interval as judge_rows and human_agreement computed it before the shared draws."""
    if not values:
        return None
    result = paired_bootstrap(np.asarray(person), np.asarray(values, dtype=float), seed=seed, draws=draws)
    return {"estimate": result.estimate, "lo": result.lo, "hi": result.hi}


def reference_shares(judged, *, seed, draws):
    """(x, y) → every interval of judge_rows' row, one paired_bootstrap each (as it stood)."""
    out = {}
    for x, y in dict.fromkeys((p.x, p.y) for p in judged):
        pairs = [p for p in judged if (p.x, p.y) == (x, y)]
        usable = [(p, [o for o in order_outcomes(p) if o is not None]) for p in pairs]
        usable = [(p, o) for p, o in usable if o]
        both = [p for p in pairs if p.x_as_a is not None and p.y_as_a is not None]
        decisive = [(p.person, [v for v in (p.x_as_a, p.y_as_a) if v in ("a", "b")]) for p in pairs]
        decisive = [(person, sides) for person, sides in decisive if sides]
        row = {name: reference_interval([p.person for p, _ in usable], [o.count(v) / len(o) for _, o in usable],
                                        seed=seed, draws=draws)
               for name, v in (("x_wins", "x"), ("y_wins", "y"), ("ties", "tie"))}
        row["first_position_wins"] = reference_interval([p for p, _ in decisive],
                                                        [s.count("a") / len(s) for _, s in decisive],
                                                        seed=seed, draws=draws)
        both_person = [p.person for p in both]
        row["follows_side"] = reference_interval(both_person, [float(p.x_as_a == p.y_as_a != "tie") for p in both],
                                                 seed=seed, draws=draws)
        row["consistent"] = reference_interval(both_person, [float(len(set(order_outcomes(p))) == 1) for p in both],
                                               seed=seed, draws=draws)
        out[(x, y)] = row
    return out


def seeded_case(seed: int):
    rng = np.random.default_rng(seed)
    verdicts = np.array(["a", "b", "tie", None], dtype=object)
    judged, ratings = [], []
    for x, y, tasks, people in (("c0", "c1", 120, 40), ("c0", "c2", 90, 25), ("c1", "c2", 60, 40)):
        for task in range(tasks):
            person = int(rng.integers(0, people))
            judged.append(JudgedPair(task=task, person=person, x=x, y=y,
                                     x_as_a=rng.choice(verdicts, p=[.4, .3, .2, .1]),
                                     y_as_a=rng.choice(verdicts, p=[.3, .4, .2, .1])))
            for _ in range(int(rng.integers(1, 4))):  # 1–3 ratings a task: halves and thirds
                ratings.append(HumanPreference(task=task, person=person, x=x, y=y,
                                               outcome=str(rng.choice(["x", "y", "tie"]))))
    # a pair whose judge gave no usable verdict at all: every interval None
    judged += [JudgedPair(task=t, person=t, x="c2", y="c3", x_as_a=None, y_as_a=None) for t in range(5)]
    return judged, ratings


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_judge_rows_on_shared_draws_equal_one_bootstrap_per_share(seed):
    judged, _ = seeded_case(seed)
    expected = reference_shares(judged, seed=seed + 100, draws=3_001)
    rows = judge_rows(judged, seed=seed + 100, draws=3_001)
    assert [(r["x"], r["y"]) for r in rows] == list(expected)
    for row in rows:
        assert {k: row[k] for k in expected[(row["x"], row["y"])]} == expected[(row["x"], row["y"])]
    assert rows[-1]["x_wins"] is None and rows[-1]["follows_side"] is None


@pytest.mark.parametrize("seed", [1, 2])
def test_human_agreement_on_shared_draws_equals_one_bootstrap_per_pair(seed):
    judged, ratings = seeded_case(seed)
    verdict = {(p.task, p.x, p.y): combined(p) for p in judged}
    rows = human_agreement(ratings, judged, seed=seed, draws=2_500)
    assert len(rows) == 3
    for row in rows:
        tasks = {}
        for r in ratings:
            if (r.x, r.y) == (row["x"], row["y"]) and verdict[(r.task, r.x, r.y)] is not None:
                tasks.setdefault(r.task, []).append(r)
        agree = [sum(r.outcome == verdict[(t, r.x, r.y)] for r in rs) / len(rs) for t, rs in tasks.items()]
        expected = reference_interval([rs[0].person for rs in tasks.values()], agree, seed=seed, draws=2_500)
        assert row["agreement"] == expected and row["tasks"] == len(agree)
    assert human_agreement(ratings[:1], [], seed=seed, draws=100)[0]["agreement"] is None


def test_both_on_one_pass_equal_each_on_its_own():
    judged, ratings = seeded_case(4)
    assert judge_rows_and_agreement(judged, ratings, seed=8, draws=2_000) == (
        judge_rows(judged, seed=8, draws=2_000), human_agreement(ratings, judged, seed=8, draws=2_000))


def test_the_judge_on_the_peoples_pass_equals_each_on_its_own():
    """`JudgeNumbers` resampled on `pairwise_payload`'s pass (`also`): both sets of numbers are, bit
    for bit, what each gives on a pass of its own (the pairs' groups have the same people)."""
    from annotations.core.pairwise import PairRating, pairwise_payload
    from experiments.core.pairwise_judge import JudgeNumbers

    judged, ratings = seeded_case(5)
    pairs = list(dict.fromkeys((r.x, r.y) for r in ratings))
    rows = [PairRating(item=1_000 * pairs.index((r.x, r.y)) + r.task, person=r.person, x=r.x, y=r.y,
                       outcome=r.outcome, judge_x=r.task % 4, judge_y=1) for r in ratings]
    conditions = ["c0", "c1", "c2", "c3"]
    for draws in (1, 2_001):
        both = JudgeNumbers(judged, ratings, draws=draws)
        together = pairwise_payload(rows, conditions, seed=9, draws=draws, also=both.consumers)
        assert together == pairwise_payload(rows, conditions, seed=9, draws=draws)
        assert both.results() == judge_rows_and_agreement(judged, ratings, seed=9, draws=draws)
