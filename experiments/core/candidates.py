"""Candidate-level conditions derived without a call (paper §7, App. F, Tables 9-11).

A fusion or selection condition keeps its pool's three candidates b0, b1, b2 (b0 is the
one-shot). From their stored grades, with no new call, come four comparators per memory,
usable in contrasts like any condition:

``memory(concrete,100w)+b1``, ``…+b2``   one candidate alone (``…+b0`` is the one-shot's answer)
``memory(concrete,100w)+candidate-mean``  the mean grade of the three candidates: the expected
                                          grade of a uniformly random pick (Table 9)
``memory(concrete,100w)+oracle``          the best candidate's grade (defined only after grading)

A derived column is missing on a task unless every candidate the rule reads is graded
(the complete pools of Table 10); ``+bK`` reads only candidate K. Its grades are raw 0..3
(the candidate mean in ninths of a point: not an integer grade, so no threshold table).
Pure Python and NumPy, no Django.
"""
from __future__ import annotations

import re

import numpy as np

from experiments.core.conditions import (
    CONDITIONS, DECISION_CANDIDATES, FUSION, SELECTION, get_condition, memory_key,
)

CANDIDATE_LABELS = tuple(f"b{i}" for i in range(DECISION_CANDIDATES))
CANDIDATE_MEAN = "candidate-mean"
ORACLE = "oracle"
DERIVED_RULES = (*CANDIDATE_LABELS, CANDIDATE_MEAN, ORACLE)
_DERIVED = re.compile(r"(memory\((?:concrete|trait),\d+w\))\+(" + "|".join(map(re.escape, DERIVED_RULES)) + r")")


def derived_key(pool: str, rule: str) -> str:
    """``derived_key("memory(concrete,100w)", "oracle")`` → ``memory(concrete,100w)+oracle``."""
    if rule not in DERIVED_RULES:
        raise ValueError(f"unknown candidate rule {rule!r}; known: {', '.join(DERIVED_RULES)}")
    return f"{pool}+{rule}"


def parse_derived(key: str) -> tuple[str, str] | None:
    """(pool, rule) of a derived key, e.g. ("memory(trait,100w)", "b1"); None for any other key."""
    match = _DERIVED.fullmatch(key)
    return (match.group(1), match.group(2)) if match else None


def is_derived(key: str) -> bool:
    return parse_derived(key) is not None


def pool_of(condition_key: str) -> str | None:
    """The pool (memory key) of a fusion or selection condition; None for any other condition."""
    condition = CONDITIONS.get(condition_key)
    if condition is None or condition.workflow not in (FUSION, SELECTION):
        return None
    return memory_key(condition.memory_kind, condition.memory_words)


def pool_sources(pool: str, conditions) -> list[str]:
    """The protocol conditions that hold ``pool``'s candidates, fusion first.

    Fusion and selection of one memory send byte-identical base calls, which share one
    generation, so either holds the same pool; the first present is read.
    """
    present = [key for key in conditions if pool_of(key) == pool]
    return sorted(present, key=lambda key: get_condition(key).workflow != FUSION)


def display_key(task_id: int, pool: str) -> str:
    """The key of a pool's display order (`parsers.candidate_display_order`): fusion and
    selection of the same memory show their pool in the same order (App. B.2)."""
    return f"task {task_id}|{pool}"


def registry_derived_keys() -> list[str]:
    """Every derived key of the registry's fusion and selection pools, for a page's lists."""
    pools = dict.fromkeys(pool for pool in map(pool_of, CONDITIONS) if pool is not None)
    return [derived_key(pool, rule) for pool in pools for rule in DERIVED_RULES]


def derived_problem(key: str, conditions) -> str | None:
    """Why ``key`` cannot be a derived column of a protocol with ``conditions``; None when it can."""
    parsed = parse_derived(key)
    if parsed is None:
        return f"{key} is not a candidate-level condition"
    if not pool_sources(parsed[0], conditions):
        return (f"{key} reads the candidates of {parsed[0]}, but the protocol has neither its fusion "
                "nor its selection condition")
    return None


def derive_column(rule: str, candidates: np.ndarray) -> np.ndarray:
    """A derived column from the pool's candidate grades (3 × tasks, raw, NaN missing)."""
    candidates = np.asarray(candidates, dtype=float)
    if candidates.ndim != 2 or candidates.shape[0] != len(CANDIDATE_LABELS):
        raise ValueError(f"need {len(CANDIDATE_LABELS)} rows of candidate grades")
    if rule in CANDIDATE_LABELS:
        return candidates[CANDIDATE_LABELS.index(rule)].copy()
    complete = ~np.isnan(candidates).any(axis=0)
    out = np.full(candidates.shape[1], np.nan)
    if rule == CANDIDATE_MEAN:
        out[complete] = candidates[:, complete].sum(axis=0) / len(CANDIDATE_LABELS)
    elif rule == ORACLE:
        out[complete] = candidates[:, complete].max(axis=0)
    else:
        raise ValueError(f"unknown candidate rule {rule!r}")
    return out


def is_integer_grade_row(row: np.ndarray) -> bool:
    """Whether observed grades are whole (a threshold table and transitions need them)."""
    observed = row[~np.isnan(row)]
    return bool(np.array_equal(observed, np.round(observed)))
