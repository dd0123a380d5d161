"""Pairwise human preference: balanced sides, win rates, a Bradley–Terry scale, the judge's order.

Pure (NumPy, no Django). A pair item is one task's final answers of two conditions X and Y; a
rater sees them as A and B and picks A, B or a tie. `outcome` maps that pick and the side the
rater was shown X on to "x", "y" or "tie"; everything after works on those outcomes.

* `balanced_sides`: which answer a rater sees as A, seeded, so that within the rater's queue
  each condition is on side A half the time, within one (an Euler orientation of the queue's
  condition graph: every condition is entered as often as it is left).
* `win_rates`: per condition pair, the shares of ratings X wins, Y wins and ties, each the
  task-weighted mean of per-task shares (a task's ratings averaged first) with the project's
  whole-person bootstrap (`paired_bootstrap`: run's seed and draws, PCG64, linear percentiles);
  the three use the same seed, so the same resampled people.
* `bradley_terry`: one scale across conditions, ties counted as half a win for each side (not
  Davidson's tie parameter), fitted to the maximum-likelihood strengths by Newton steps (Hunter's
  MM iteration where they fall short); reported as log-strengths centred to mean zero. Its interval
  resamples whole people with the same generator and draws as `paired_bootstrap` (one PCG64(seed)
  stream, blocks of 2,000, linear percentiles) and refits each draw (Newton steps from the estimate,
  MM where they fall short); a draw whose comparisons do not connect every condition both ways (the
  likelihood has no maximum) is left out and counted.
* `judge_order_agreement`: among ratings of pairs the judge graded differently (0–3), the share
  where the person preferred the answer the judge graded higher; human ties count as not
  agreeing and are reported apart. Pairs the judge tied are counted, not scored.

All three resample with one seed, so `pairwise_payload` serves them from one pass over the
stream (`shared_draws.resample`: each piece of draws drawn once for everything with as many people).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from experiments.core.stats.shared_draws import BLOCK, Columns, DrawnSums, resample

PREFERENCES = ("a", "b", "tie")
OUTCOMES = ("x", "y", "tie")
BT_TOLERANCE = 1e-10
BT_MAX_ITERATIONS = 10_000
NEWTON_STEPS = 5
GRADIENT_TOLERANCE = 1e-9
NEWTON_DONE = 1e-12  # a Newton step below this (every draw): the fit has converged


def outcome(preference: str, x_on_a: bool) -> str:
    """The rater's pick as shown (a, b, tie) → the condition it favours: x, y or tie."""
    if preference == "tie":
        return "tie"
    if preference not in ("a", "b"):
        raise ValueError(f"{preference!r} is not a side; sides are a, b or tie")
    return "x" if (preference == "a") == bool(x_on_a) else "y"


def balanced_sides(pairs: Sequence[tuple[Hashable, Hashable]], seed: int) -> list[bool]:
    """For each (X, Y) of one rater's queue, True when X is shown as A.

    Every condition is on side A within one of half its showings. Odd-degree conditions are joined
    to a dummy so every degree is even; the edges are then walked in closed trails (edge order and
    each trail's direction drawn from `seed`), and a walked edge shows its start on side A: each
    condition is left as often as it is entered, but for at most one dummy edge.
    """
    rng = np.random.default_rng(seed)
    nodes = sorted({c for pair in pairs for c in pair}, key=repr)
    index = {c: i for i, c in enumerate(nodes)}
    edges = [(index[x], index[y]) for x, y in pairs]
    if any(u == v for u, v in edges):
        raise ValueError("a pair compares a condition with itself")
    degree = Counter(v for edge in edges for v in edge)
    dummy = len(nodes)
    edges += [(v, dummy) for v in range(len(nodes)) if degree[v] % 2]
    incident: dict[int, list[int]] = defaultdict(list)
    for e in rng.permutation(len(edges)).tolist():
        incident[edges[e][0]].append(e)
        incident[edges[e][1]].append(e)
    used = [False] * len(edges)
    forward = [True] * len(edges)
    cursor: dict[int, int] = defaultdict(int)
    for start in rng.permutation(dummy + 1).tolist():
        while True:
            trail, v = [], start
            while True:
                while cursor[v] < len(incident[v]) and used[incident[v][cursor[v]]]:
                    cursor[v] += 1
                if cursor[v] == len(incident[v]):
                    break
                e = incident[v][cursor[v]]
                used[e] = True
                u, w = edges[e]
                forward[e] = u == v
                trail.append(e)
                v = w if u == v else u
            if not trail:
                break
            if rng.random() < 0.5:  # the same trail walked the other way round
                for e in trail:
                    forward[e] = not forward[e]
    return forward[:len(pairs)]


@dataclass(frozen=True)
class PairRating:
    """One rating of a pair item: the item's number, its person (the bootstrap's cluster), its
    conditions X and Y, the outcome (x, y, tie) and the judge's grades of X's and Y's answers."""

    item: int
    person: Hashable
    x: str
    y: str
    outcome: str
    judge_x: int | None = None
    judge_y: int | None = None


def _items(ratings: Sequence[PairRating]) -> dict[int, list[PairRating]]:
    by_item: dict[int, list[PairRating]] = defaultdict(list)
    for r in ratings:
        if r.outcome not in OUTCOMES:
            raise ValueError(f"{r.outcome!r} is not an outcome")
        by_item[r.item].append(r)
    return dict(sorted(by_item.items()))


def _win_rate_groups(ratings: Sequence[PairRating], draws: int) -> tuple[list[dict], list[Columns]]:
    """`win_rates`' rows without their intervals, and each row's shares to resample."""
    by_pair: dict[tuple[str, str], dict[int, list[PairRating]]] = defaultdict(dict)
    for item, rows in _items(ratings).items():
        by_pair[(rows[0].x, rows[0].y)][item] = rows
    out, groups = [], []
    for (x, y), items in by_pair.items():
        person = [rows[0].person for rows in items.values()]
        shares = {o: [sum(r.outcome == o for r in rows) / len(rows) for rows in items.values()] for o in OUTCOMES}
        counts = Counter(r.outcome for rows in items.values() for r in rows)
        out.append({"x": x, "y": y, "items": len(items), "ratings": sum(counts.values()),
                    "people": len(set(person)), "x_votes": counts["x"], "y_votes": counts["y"],
                    "tie_votes": counts["tie"]})
        groups.append(Columns(person, {"x_wins": shares["x"], "y_wins": shares["y"], "ties": shares["tie"]},
                              draws=draws))
    return out, groups


def _win_rates_done(out: list[dict], groups: list[Columns]) -> list[dict]:
    for row, group in zip(out, groups):
        row.update(group.intervals())
    return out


def win_rates(ratings: Sequence[PairRating], *, seed: int, draws: int) -> list[dict]:
    """One row per condition pair (in first-seen order): items, ratings, people, and for x_wins,
    y_wins and ties the task-weighted share with its whole-person interval (exactly
    `paired_bootstrap`'s, with the people drawn once for every share and pair of as many people)."""
    out, groups = _win_rate_groups(ratings, draws)
    resample(groups, seed=seed, draws=draws)
    return _win_rates_done(out, groups)


def win_matrix(ratings: Sequence[PairRating], conditions: Sequence[str]) -> np.ndarray:
    """W[i, j]: wins of condition i over j, a tie half a win each."""
    index = {c: i for i, c in enumerate(conditions)}
    w = np.zeros((len(conditions), len(conditions)))
    for r in ratings:
        i, j = index[r.x], index[r.y]
        if r.outcome == "x":
            w[i, j] += 1
        elif r.outcome == "y":
            w[j, i] += 1
        else:
            w[i, j] += 0.5
            w[j, i] += 0.5
    return w


def person_win_matrices(ratings: Sequence[PairRating], person_index, n_people: int,
                        conditions: Sequence[str]) -> np.ndarray:
    """`win_matrix` of each person's ratings at once, stacked (n_people, n, n): rating r counts for
    person ``person_index[r]``. Every cell is a sum of ones and halves, so exactly the matrices
    `win_matrix` gives person by person, in one pass over the ratings."""
    index = {c: i for i, c in enumerate(conditions)}
    k = np.asarray(person_index, dtype=np.int64)
    i = np.fromiter((index[r.x] for r in ratings), dtype=np.int64, count=len(ratings))
    j = np.fromiter((index[r.y] for r in ratings), dtype=np.int64, count=len(ratings))
    kind = np.fromiter((0 if r.outcome == "x" else 1 if r.outcome == "y" else 2 for r in ratings),
                       dtype=np.int8, count=len(ratings))
    w = np.zeros((n_people, len(conditions), len(conditions)))
    x, y, tie = kind == 0, kind == 1, kind == 2
    np.add.at(w, (k[x], i[x], j[x]), 1.0)
    np.add.at(w, (k[y], j[y], i[y]), 1.0)
    np.add.at(w, (k[tie], i[tie], j[tie]), 0.5)
    np.add.at(w, (k[tie], j[tie], i[tie]), 0.5)
    return w


def _connected(w: np.ndarray) -> np.ndarray:
    """Per stacked matrix: does every condition reach every other along wins (i beat j: i → j)?"""
    n = w.shape[-1]
    reach = (w > 0) | np.eye(n, dtype=bool)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2)))))):
        reach = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
    return reach.all(axis=(-2, -1))


def _gradient(w: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-likelihood's gradient and information matrix at `theta`, stacked."""
    comparisons = w + np.swapaxes(w, -1, -2)
    p = 1 / (1 + np.exp(theta[..., None, :] - theta[..., :, None]))  # p[i, j]: i beats j
    gradient = w.sum(-1) - (comparisons * p).sum(-1)
    v = comparisons * p * (1 - p)
    information = -v
    diagonal = np.arange(w.shape[-1])
    information[..., diagonal, diagonal] = v.sum(-1)
    return gradient, information


def _fit_near(w: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Bootstrap refits: Newton steps from the full data's estimate (a few suffice for a draw near
    it); any draw whose gradient is not then zero is refitted by `_fit`'s MM iteration."""
    n = w.shape[-1]
    theta = np.broadcast_to(start, w.shape[:-1]).copy()
    for _ in range(NEWTON_STEPS):
        gradient, information = _gradient(w, theta)
        step = np.linalg.solve(information + 1.0 / n, gradient[..., None])[..., 0]
        theta = theta + step
        theta -= theta.mean(-1, keepdims=True)
        # Converged: Newton's steps shrink quadratically, so one this small leaves any later one
        # far below a rounding error (the steps not taken would not change theta).
        if step.size and np.abs(step).max() < NEWTON_DONE:
            break
    gradient, _ = _gradient(w, theta)
    scale = np.maximum(w.sum((-2, -1)), 1.0)
    bad = ~(np.abs(gradient).max(-1) <= GRADIENT_TOLERANCE * scale) | ~np.isfinite(theta).all(-1)
    if bad.any():
        theta[bad] = _fit(w[bad])
    return theta


def _fit(w: np.ndarray) -> np.ndarray:
    """MM fit of stacked win matrices (m, n, n), each connected: centred log-strengths (m, n)."""
    comparisons = w + np.swapaxes(w, -1, -2)
    wins = w.sum(-1)
    p = np.ones(w.shape[:-1])
    for _ in range(BT_MAX_ITERATIONS):
        denominator = (comparisons / (p[..., :, None] + p[..., None, :])).sum(-1)
        new = wins / denominator
        new /= np.exp(np.log(new).mean(-1, keepdims=True))
        change = np.abs(np.log(new) - np.log(p)).max()
        p = new
        if change < BT_TOLERANCE:
            break
    theta = np.log(p)
    return theta - theta.mean(-1, keepdims=True)


class _Refits:
    """The Bradley–Terry bootstrap: each block's draws' win matrices (from the resampling counts),
    those that link every condition refitted from the estimate, the others counted as dropped. Draws
    come in pieces; a block is refitted once complete (its refit stops when all its draws converge)."""

    def __init__(self, per_person: np.ndarray, theta: np.ndarray, draws: int):
        self.n_people, n, _ = per_person.shape
        # Win counts are halves: each draw's sums are exact (`shared_draws.order_free`).
        self.drawn = DrawnSums(per_person.reshape(self.n_people, n * n))
        self.theta, self.draws = theta, draws
        self.block = np.empty((min(BLOCK, draws), n, n))
        self.replicates: list[np.ndarray] = []
        self.dropped = 0

    def take(self, start: int, idx: np.ndarray) -> None:
        first, n = start - start % BLOCK, len(self.theta)  # the block's first draw
        self.block[start - first:start - first + len(idx)] = self.drawn(idx).reshape(len(idx), n, n)
        if start + len(idx) == min(first + BLOCK, self.draws):
            self.fit(self.block[:start + len(idx) - first])

    def fit(self, w: np.ndarray) -> None:
        ok = _connected(w)
        self.dropped += int((~ok).sum())
        if ok.any():
            self.replicates.append(_fit_near(w[ok], self.theta))


def _bt_start(ratings: Sequence[PairRating], conditions: Sequence[str], *, seed: int,
              draws: int) -> tuple[dict, _Refits | None]:
    """`bradley_terry`'s result before its intervals, and its bootstrap (None: nothing to resample)."""
    conditions = list(conditions)
    out = {"seed": int(seed), "draws": int(draws), "estimable": False, "reason": "", "dropped_draws": 0,
           "people": 0, "ties": "half a win each", "conditions": [
               {"condition": c, "theta": None, "lo": None, "hi": None} for c in conditions]}
    if len(conditions) < 2 or not ratings:
        out["reason"] = "no comparison yet"
        return out, None
    # People in np.unique order, as `paired_bootstrap` takes them: the same seed draws the same people.
    people, inverse = np.unique(np.asarray([r.person for r in ratings]), return_inverse=True)
    out["people"] = len(people)
    per_person = person_win_matrices(ratings, inverse, len(people), conditions)
    total = per_person.sum(0)
    if not _connected(total[None])[0]:
        out["reason"] = "the comparisons do not link every condition both ways: no finite scale"
        return out, None
    theta = _fit_near(total[None], np.zeros(len(conditions)))[0]
    for j, row in enumerate(out["conditions"]):
        row["theta"] = float(theta[j])
    out["estimable"] = True
    return out, _Refits(per_person, theta, draws)


def _bt_done(out: dict, refits: _Refits | None, level: float = 0.95) -> dict:
    tails = ((1 - level) / 2, 1 - (1 - level) / 2)
    out["dropped_draws"] = refits.dropped if refits is not None else 0
    if refits is not None and refits.replicates:
        kept = np.concatenate(refits.replicates)
        for j, row in enumerate(out["conditions"]):
            lo, hi = np.percentile(kept[:, j], [100 * tails[0], 100 * tails[1]], method="linear")
            row.update(lo=float(lo), hi=float(hi))
    return out


def bradley_terry(ratings: Sequence[PairRating], conditions: Sequence[str], *, seed: int, draws: int,
                  level: float = 0.95) -> dict:
    """Centred log-strengths per condition with whole-person intervals (see the module docstring):
    {"conditions": [{condition, theta, lo, hi}], "estimable", "reason", "draws", "seed", "dropped_draws",
    "people"}. Not estimable (theta None) when the observed comparisons do not connect every condition both ways."""
    out, refits = _bt_start(ratings, conditions, seed=seed, draws=draws)
    if refits is not None:
        resample([refits], seed=seed, draws=draws)
    return _bt_done(out, refits, level)


def _judge_start(ratings: Sequence[PairRating], draws: int) -> tuple[dict, Columns | None]:
    """`judge_order_agreement`'s counts, and its per-task shares to resample (None: none scored)."""
    agree = human_ties = judge_ties = missing = 0
    per_item, person = [], []
    for rows in _items(ratings).values():
        first = rows[0]
        if first.judge_x is None or first.judge_y is None:
            missing += len(rows)
            continue
        if first.judge_x == first.judge_y:
            judge_ties += len(rows)
            continue
        higher = "x" if first.judge_x > first.judge_y else "y"
        hits = sum(r.outcome == higher for r in rows)
        agree += hits
        human_ties += sum(r.outcome == "tie" for r in rows)
        per_item.append(hits / len(rows))
        person.append(first.person)
    scored = sum(1 for r in ratings if r.judge_x is not None and r.judge_y is not None and r.judge_x != r.judge_y)
    out = {"scored": scored, "agree": agree, "human_ties": human_ties, "judge_ties": judge_ties,
           "missing": missing, "items": len(per_item), "people": len(set(person)), "share": None,
           "share_decided": (agree / (scored - human_ties)) if scored > human_ties else None}
    return out, (Columns(person, {"share": per_item}, draws=draws) if per_item else None)


def judge_order_agreement(ratings: Sequence[PairRating], *, seed: int, draws: int) -> dict:
    """How often the person's preference follows the order of the judge's 0–3 grades.

    Counts ratings: ``scored`` (judge grades differ), ``agree`` (the person preferred the higher
    graded answer), ``human_ties`` (the person saw no difference), ``judge_ties`` (equal grades,
    not scored), ``missing`` (a grade absent). ``share``: agree / scored, with a whole-person
    interval over per-task shares (a task's ratings averaged first; exactly `paired_bootstrap`'s);
    ``share_decided``: agree / (scored − human ties).
    """
    out, shares = _judge_start(ratings, draws)
    if shares is not None:
        resample([shares], seed=seed, draws=draws)
        out["share"] = shares.intervals()["share"]
    return out


def pairwise_payload(ratings: Sequence[PairRating], conditions: Sequence[str], *, seed: int, draws: int,
                     also: Sequence = ()) -> dict:
    """Every number of a pairwise campaign's results page (no text): `win_rates`, `bradley_terry`
    and `judge_order_agreement`, the same numbers, with one pass over the stream of draws for all
    three (they resample with the same seed, so groups of as many people draw the same people), and
    for `also`, other numbers' consumers of the same seed and draws (`pairwise_judge.JudgeNumbers`)."""
    win, win_groups = _win_rate_groups(ratings, draws)
    bt, refits = _bt_start(ratings, conditions, seed=seed, draws=draws)
    judge, shares = _judge_start(ratings, draws)
    resample([*win_groups, *[c for c in (refits, shares) if c is not None], *also], seed=seed, draws=draws)
    if shares is not None:
        judge["share"] = shares.intervals()["share"]
    return {"seed": int(seed), "draws": int(draws), "ratings": len(ratings),
            "win_rates": _win_rates_done(win, win_groups), "bradley_terry": _bt_done(bt, refits),
            "judge_order": judge}


WIN_RATE_COLUMNS = ["condition_x", "condition_y", "items", "ratings", "people", "x_votes", "y_votes", "tie_votes",
                    "x_wins", "x_wins_lo", "x_wins_hi", "y_wins", "y_wins_lo", "y_wins_hi",
                    "ties", "ties_lo", "ties_hi"]
BT_COLUMNS = ["condition", "theta", "lo", "hi"]


def win_rate_rows(payload: dict) -> list[list]:
    return [[r["x"], r["y"], r["items"], r["ratings"], r["people"], r["x_votes"], r["y_votes"], r["tie_votes"]]
            + [r[k][f] for k in ("x_wins", "y_wins", "ties") for f in ("estimate", "lo", "hi")]
            for r in payload["win_rates"]]


def bt_rows(payload: dict) -> list[list]:
    return [[c["condition"], c["theta"], c["lo"], c["hi"]] for c in payload["bradley_terry"]["conditions"]]
