"""The LLM pairwise judge's numbers: win rates, position bias, consistency, agreement with people. Pure, NumPy.

A judged pair is one task's answers of two conditions X and Y, asked in both orders: X shown as A
(`x_as_a`, the verdict "a", "b" or "tie", None when the call gave no usable verdict) and Y shown as
A (`y_as_a`). Mapped to the answers, a verdict favours X, Y or neither (`order_outcomes`).

Rules (stated on every page that shows them):

* **Win rates**: the two orders are two verdicts. Per task the shares of its usable verdicts that
  favour X, Y or neither, then the task-weighted mean with the whole-person bootstrap
  (`paired_bootstrap`: the run's seed and draws) — the rule of the people's win rates
  (`annotations.core.pairwise.win_rates`, a task's ratings averaged first), so the two compare.
* **Combined verdict** of a task (what agreement with people compares): X's verdicts minus Y's;
  positive X, negative Y, zero a tie. So two orders that disagree (X then Y) are a tie, and a tie
  beside X is X; a task with one usable verdict has that one.
* **Position bias**, over tasks with both verdicts usable: the share whose verdict follows the side
  (A in both orders, or B in both), and apart the share of A in both; **first position wins**: per
  task the share of its decisive verdicts (A or B, not a tie) that pick A, task-weighted over the
  tasks with one, with its interval (0.5 for a judge blind to the side). **Consistency**: the share
  of both-order tasks whose two verdicts favour the same answer (or are both ties); the rest favour X
  in one order and Y in the other (the side, A or B, in both) or have one tie beside a preference.
* **Agreement with people**: each person's rating (X, Y or tie) beside the judge's combined verdict
  of the same task and pair: the share agreeing (a task's ratings averaged first, whole-person
  interval), and Cohen's κ (unweighted, pooled over ratings) on x/y/tie where chance agreement is
  below 1.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from experiments.core.parsers import PAIRWISE_VERDICTS
from experiments.core.stats.shared_draws import IntervalGroups, resample

OUTCOMES = ("x", "y", "tie")
JUDGE_GROUPS = 3  # groups of tasks of a judge row: usable verdicts, decisive ones, both orders usable
# A verdict given with X shown as A, and with Y shown as A, as the answer it favours.
_X_AS_A = {"a": "x", "b": "y", "tie": "tie"}
_Y_AS_A = {"a": "y", "b": "x", "tie": "tie"}


@dataclass(frozen=True)
class JudgedPair:
    """One task's pair X, Y with the judge's verdict in each order (None: no usable verdict)."""

    task: Hashable
    person: Hashable
    x: str
    y: str
    x_as_a: str | None
    y_as_a: str | None

    def __post_init__(self):
        for verdict in (self.x_as_a, self.y_as_a):
            if verdict is not None and verdict not in PAIRWISE_VERDICTS:
                raise ValueError(f"{verdict!r} is not a verdict; verdicts are a, b or tie")


def order_outcomes(pair: JudgedPair) -> tuple[str | None, str | None]:
    """(X-as-A verdict, Y-as-A verdict) as the answer each favours: x, y, tie or None."""
    return (_X_AS_A[pair.x_as_a] if pair.x_as_a is not None else None,
            _Y_AS_A[pair.y_as_a] if pair.y_as_a is not None else None)


def combined(pair: JudgedPair) -> str | None:
    """The task's one verdict: X's verdicts minus Y's (module docstring); None with none usable."""
    outcomes = [o for o in order_outcomes(pair) if o is not None]
    if not outcomes:
        return None
    net = outcomes.count("x") - outcomes.count("y")
    return "x" if net > 0 else "y" if net < 0 else "tie"


class JudgeIntervals:
    """For each (person, {name: values}) group: {name: {estimate, lo, hi}}, each `paired_bootstrap`'s
    numbers exactly (`shared_draws.IntervalGroups`: groups with as many people share their draws); a
    group without tasks gives None for each name. In two steps, so that the draws can share a pass
    with other numbers of the same seed and draws: `consumers` (to `resample`), then `intervals()`."""

    def __init__(self, groups: list[tuple[list, dict[str, list[float]]]], *, draws: int):
        self.groups = groups
        self.filled = IntervalGroups([(person, columns) for person, columns in groups if person], draws=draws)
        self.consumers = self.filled.consumers

    def intervals(self) -> list[dict[str, dict | None]]:
        computed = iter(self.filled.intervals())
        return [next(computed) if person else dict.fromkeys(columns) for person, columns in self.groups]


def _intervals(groups: list[tuple[list, dict[str, list[float]]]], *, seed: int,
               draws: int) -> list[dict[str, dict | None]]:
    """`JudgeIntervals`' numbers, on a pass of their own (none without a group with tasks)."""
    intervals = JudgeIntervals(groups, draws=draws)
    if intervals.consumers:
        resample(intervals.consumers, seed=seed, draws=draws)
    return intervals.intervals()


def _by_pair(pairs: Sequence[JudgedPair]) -> dict[tuple[str, str], list[JudgedPair]]:
    grouped: dict[tuple[str, str], list[JudgedPair]] = defaultdict(list)
    for pair in pairs:
        grouped[(pair.x, pair.y)].append(pair)
    return dict(grouped)


def _filled(rows: list[dict], intervals: list[dict], per_row: int) -> list[dict]:
    """Each row with its `per_row` groups' intervals (in `intervals`, row after row)."""
    for n, row in enumerate(rows):
        for part in intervals[per_row * n:per_row * (n + 1)]:
            row.update(part)
    return rows


def judge_rows(pairs: Sequence[JudgedPair], *, seed: int, draws: int) -> list[dict]:
    """One row per condition pair (first-seen order): counts, win rates, position bias and
    consistency, each share with its whole-person interval (None where no task counts)."""
    rows, groups = _judge_parts(pairs)
    return _filled(rows, _intervals(groups, seed=seed, draws=draws), JUDGE_GROUPS)


def judge_rows_and_agreement(pairs: Sequence[JudgedPair], ratings: Sequence[HumanPreference], *, seed: int,
                             draws: int) -> tuple[list[dict], list[dict]]:
    """(`judge_rows`, `human_agreement`) with every interval of both on one pass over the draws per
    number of people (the agreement's tasks are mostly the judge's: the same people, the same stream)."""
    both = JudgeNumbers(pairs, ratings, draws=draws)
    both.resample(seed)
    return both.results()


class JudgeNumbers:
    """`judge_rows_and_agreement` in two steps, so that its draws can share a pass over the stream with
    other numbers of the same seed and draws (the people's own): `consumers` (to
    `shared_draws.resample`, or `resample` for a pass of their own), then `results()`."""

    def __init__(self, pairs: Sequence[JudgedPair], ratings: Sequence[HumanPreference], *, draws: int):
        self.rows, groups = _judge_parts(pairs)
        self.agreement, agreement_groups = _agreement_parts(ratings, pairs)
        self.split, self.draws = len(groups), draws
        self.intervals = JudgeIntervals(groups + agreement_groups, draws=draws)
        self.consumers = self.intervals.consumers

    def resample(self, seed: int) -> None:
        """On a pass of their own (none without a group with tasks)."""
        if self.consumers:
            resample(self.consumers, seed=seed, draws=self.draws)

    def results(self) -> tuple[list[dict], list[dict]]:
        intervals = self.intervals.intervals()
        return (_filled(self.rows, intervals[:self.split], JUDGE_GROUPS),
                _filled(self.agreement, intervals[self.split:], 1))


def _judge_parts(pairs: Sequence[JudgedPair]) -> tuple[list[dict], list[tuple]]:
    """judge_rows' rows without their intervals, and their JUDGE_GROUPS groups of shares each."""
    rows, groups = [], []
    for (x, y), judged in _by_pair(pairs).items():
        usable = [(p, [o for o in order_outcomes(p) if o is not None]) for p in judged]
        usable = [(p, outcomes) for p, outcomes in usable if outcomes]
        both = [p for p in judged if p.x_as_a is not None and p.y_as_a is not None]
        decisive = [(p.person, [v for v in (p.x_as_a, p.y_as_a) if v in ("a", "b")]) for p in judged]
        decisive = [(person, sides) for person, sides in decisive if sides]
        votes = [o for _, outcomes in usable for o in outcomes]
        rows.append({
            "x": x, "y": y, "tasks": len(judged), "judged_tasks": len(usable), "both_orders": len(both),
            "verdicts": len(votes), "missing_verdicts": 2 * len(judged) - len(votes),
            "x_votes": votes.count("x"), "y_votes": votes.count("y"), "tie_votes": votes.count("tie"),
            "combined": {o: sum(combined(p) == o for p, _ in usable) for o in OUTCOMES},
            "a_both": sum(p.x_as_a == p.y_as_a == "a" for p in both),
            "b_both": sum(p.x_as_a == p.y_as_a == "b" for p in both),
        })
        # Three groups of tasks, each share with its whole-person interval.
        groups += [([p.person for p, _ in usable],
                    {name: [o.count(outcome) / len(o) for _, o in usable]
                     for name, outcome in (("x_wins", "x"), ("y_wins", "y"), ("ties", "tie"))}),
                   ([person for person, _ in decisive],
                    {"first_position_wins": [sides.count("a") / len(sides) for _, sides in decisive]}),
                   ([p.person for p in both],
                    {"follows_side": [float(p.x_as_a == p.y_as_a != "tie") for p in both],
                     "consistent": [float(len(set(order_outcomes(p))) == 1) for p in both]})]
    return rows, groups


def cohen_kappa(a: Sequence[str], b: Sequence[str], categories: Sequence[str] = OUTCOMES) -> float | None:
    """Unweighted Cohen's κ of two equally long label lists; None when chance agreement is 1
    (both give one and the same label throughout) or there is nothing to compare."""
    if len(a) != len(b):
        raise ValueError("two equally long lists of labels")
    if not a:
        return None
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    for u, v in zip(a, b):
        table[index[u], index[v]] += 1
    n = table.sum()
    observed = np.trace(table) / n
    chance = float((table.sum(1) * table.sum(0)).sum() / n ** 2)
    if chance == 1:
        return None
    return float((observed - chance) / (1 - chance))


@dataclass(frozen=True)
class HumanPreference:
    """One person's rating of a pair item: its task, the interviewee (the bootstrap's cluster),
    the conditions X and Y, and the outcome x, y or tie."""

    task: Hashable
    person: Hashable
    x: str
    y: str
    outcome: str


def human_agreement(ratings: Sequence[HumanPreference], judged: Sequence[JudgedPair], *,
                    seed: int, draws: int) -> list[dict]:
    """Per condition pair of the ratings (first-seen order): how many ratings have a combined
    judge verdict to compare with, the share agreeing (a task's ratings averaged first, with its
    whole-person interval), Cohen's κ on x/y/tie, and the 3×3 table (rows: people, columns: judge)."""
    rows, groups = _agreement_parts(ratings, judged)
    return _filled(rows, _intervals(groups, seed=seed, draws=draws), 1)


def _agreement_parts(ratings: Sequence[HumanPreference], judged: Sequence[JudgedPair]) -> tuple[list[dict], list]:
    """human_agreement's rows without their intervals, and one group of shares each."""
    verdict = {(p.task, p.x, p.y): combined(p) for p in judged}
    grouped: dict[tuple[str, str], dict[Hashable, list]] = defaultdict(lambda: defaultdict(list))
    for rating in ratings:
        if rating.outcome not in OUTCOMES:
            raise ValueError(f"{rating.outcome!r} is not an outcome")
        grouped[(rating.x, rating.y)][rating.task].append(rating)
    rows, groups = [], []
    for (x, y), tasks in grouped.items():
        people, agree, human, judge = [], [], [], []
        for task, task_ratings in tasks.items():
            judge_says = verdict.get((task, x, y))
            if judge_says is None:
                continue
            people.append(task_ratings[0].person)
            agree.append(sum(r.outcome == judge_says for r in task_ratings) / len(task_ratings))
            human += [r.outcome for r in task_ratings]
            judge += [judge_says] * len(task_ratings)
        table = [[sum(h == a and j == b for h, j in zip(human, judge)) for b in OUTCOMES] for a in OUTCOMES]
        rows.append({"x": x, "y": y, "ratings": sum(len(r) for r in tasks.values()), "compared": len(human),
                     "tasks": len(agree), "kappa": cohen_kappa(human, judge), "table": table})
        groups.append((people, {"agreement": agree}))
    return rows, groups
