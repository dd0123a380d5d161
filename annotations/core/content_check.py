"""Checking the paraphrases: "same content?" ratings of original–paraphrase pairs. Pure (NumPy, no Django).

The wording controls (`experiments.core.paraphrase`) assume a paraphrase keeps its original's
content; a content-check campaign measures it. An item is one original and its paraphrase (an
answer and its rewrite in other words, or the verbatim excerpts and their paraphrase) of one
control condition on one task; a rater answers yes, partly or no.

* `shares`: per control condition, the share of ratings yes, partly and no, each the task-weighted
  mean of per-item shares (an item's ratings averaged first), with the project's whole-person
  bootstrap (`paired_bootstrap`'s numbers, drawn once for the three by `shared_intervals_many`).
* `agreement`: between raters, `rater_agreement.between_raters` on the answers coded no 0,
  partly 1, yes 2 (on its 0..3 scale grade 3 is never used, which leaves quadratic κ and ordinal α
  as they would be on three levels; within one: the answers are at most one step apart).
* `kept_items`: whether raters judged an item's paraphrase to keep the content, under a rule of
  RULES: ``majority`` (more than half of the item's raters answered yes) or ``unanimous`` (every
  rater of the item answered yes). A flag-only rating is no answer: it counts for neither.
* `restricted_contrast`: a contrast of judge grades on the tasks of a mask (all, or only those whose
  paraphrases were judged to keep the content), `paired_bootstrap` with the run's seed and draws.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from annotations.core.rater_agreement import LEVEL, between_raters
from experiments.core.stats.shared_draws import shared_intervals_many
from experiments.core.stats.paired import paired_bootstrap, paired_matrix

ANSWERS = ("yes", "partly", "no")
CODES = {"no": 0, "partly": 1, "yes": 2}
MAJORITY, UNANIMOUS = "majority", "unanimous"
RULES = {MAJORITY: "more than half of the item's raters answered yes",
         UNANIMOUS: "every rater of the item answered yes"}


@dataclass(frozen=True)
class ContentRating:
    """One rater's answer on one item: the item's number, its task and person (the bootstrap's
    cluster), its control condition, the rater's opaque label and the answer (yes, partly, no)."""

    item: int
    task: Hashable
    person: Hashable
    condition: str
    rater: str
    answer: str


def _items(ratings: Sequence[ContentRating]) -> dict[int, list[ContentRating]]:
    by_item: dict[int, list[ContentRating]] = defaultdict(list)
    for r in ratings:
        if r.answer not in ANSWERS:
            raise ValueError(f"{r.answer!r} is not an answer; answers are yes, partly or no")
        by_item[r.item].append(r)
    return dict(sorted(by_item.items()))


def shares(ratings: Sequence[ContentRating], *, seed: int, draws: int) -> list[dict]:
    """One row per control condition (in first-seen order): items, ratings, people, votes, and for
    yes, partly and no the task-weighted share with its whole-person interval."""
    by_condition: dict[str, dict[int, list[ContentRating]]] = defaultdict(dict)
    for item, rows in _items(ratings).items():
        by_condition[rows[0].condition][item] = rows
    out, groups = [], []
    for condition, items in by_condition.items():
        person = [rows[0].person for rows in items.values()]
        counts = Counter(r.answer for rows in items.values() for r in rows)
        out.append({"condition": condition, "items": len(items), "ratings": sum(counts.values()),
                    "people": len(set(person)), **{f"{a}_votes": counts[a] for a in ANSWERS}})
        groups.append((person, {a: [sum(r.answer == a for r in rows) / len(rows) for rows in items.values()]
                                for a in ANSWERS}))
    for row, intervals in zip(out, shared_intervals_many(groups, seed=seed, draws=draws)):
        row.update(intervals)
    return out


def kept_items(ratings: Sequence[ContentRating], rule: str) -> dict[int, bool]:
    """item → whether its raters judged the paraphrase to keep the content, under `rule` (RULES)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; rules are {', '.join(RULES)}")
    out = {}
    for item, rows in _items(ratings).items():
        yes = sum(r.answer == "yes" for r in rows)
        out[item] = yes == len(rows) if rule == UNANIMOUS else 2 * yes > len(rows)
    return out


def agreement(ratings: Sequence[ContentRating], *, seed: int, draws: int) -> dict:
    """Between raters: pairs (exact, within one, quadratic κ) and ordinal α over every rater, on the
    answers coded no 0, partly 1, yes 2, with whole-person intervals (`rater_agreement.between_raters`)."""
    items = _items(ratings)
    raters = sorted({r.rater for rows in items.values() for r in rows}, key=lambda label: (len(label), label))
    column = {label: j for j, label in enumerate(raters)}
    if not items:
        return {"pairs": None, "alpha": None, "items": 0, "coding": "no 0, partly 1, yes 2"}
    grades = np.full((len(items), len(raters)), np.nan)
    for i, rows in enumerate(items.values()):
        for r in rows:
            grades[i, column[r.rater]] = CODES[r.answer]
    person = np.asarray([rows[0].person for rows in items.values()])
    result = between_raters(grades, person, np.ones(len(items), dtype=bool),
                            {"seed": int(seed), "draws": int(draws), "level": LEVEL})
    return {**result, "coding": "no 0, partly 1, yes 2"}


def restricted_contrast(grades, task_ids, person, coefficients: Sequence[float], keep, *,
                        seed: int, draws: int) -> dict:
    """A contrast Σ c_j g_j / 3 of the (conditions, tasks) raw grades on the tasks where `keep` is
    True and every condition was graded: estimate, 95 % whole-person interval, tasks, people."""
    keep = np.asarray(keep, dtype=bool)
    g = np.asarray(grades, dtype=float)[:, keep]
    pair = paired_matrix(g, np.asarray(task_ids)[keep], person=np.asarray(person)[keep])
    if pair.n_tasks == 0:
        return {"estimate": None, "lo": None, "hi": None, "tasks": 0, "people": 0}
    result = paired_bootstrap(pair.person, pair.diff(coefficients), seed=seed, draws=draws)
    return {"estimate": result.estimate, "lo": result.lo, "hi": result.hi, "tasks": result.n_tasks,
            "people": result.n_people}


SHARE_COLUMNS = ["condition", "items", "ratings", "people", "yes_votes", "partly_votes", "no_votes",
                 "yes", "yes_lo", "yes_hi", "partly", "partly_lo", "partly_hi", "no", "no_lo", "no_hi"]
CONTRAST_COLUMNS = ["contrast", "tasks_used", "estimate", "lo", "hi", "tasks", "people"]


def share_rows(payload: dict) -> list[list]:
    return [[r["condition"], r["items"], r["ratings"], r["people"], *(r[f"{a}_votes"] for a in ANSWERS)]
            + [r[a][f] for a in ANSWERS for f in ("estimate", "lo", "hi")] for r in payload["shares"]]


def contrast_rows(payload: dict) -> list[list]:
    return [[c["name"], v["subset"], v["estimate"], v["lo"], v["hi"], v["tasks"], v["people"]]
            for c in payload["contrasts"] for v in c["versions"]]
