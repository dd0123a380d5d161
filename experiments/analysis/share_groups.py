"""The budget sweep of a run grouped by the share of the source its budget covers (App. G.1, beside
Table 18): the per-task budgets and source lengths read from the run's final predictions, the
statistics in `core.share_group_stats`. Numbers only (budgets and lengths in characters, grades).

Source: the whole record's evidence, the permitted respondent-only record (its 12,000-character
cap applied), which is what OwnWords and the most recent sentences pass unchanged when B covers
it. B_w: the budget OwnWords (else the most recent sentences) had at memory length w, |m_w|.
A run without the whole record, or without a memory, OwnWords or recency condition at
B = |memory|, has no groups (`None`).
"""
from __future__ import annotations

import numpy as np

from experiments.core.conditions import (
    CONCRETE, FINAL, MEMORY, MEMORY_LENGTH, ONE_SHOT, OWNWORDS, RECENCY, WHOLE_RECORD, get_condition,
)
from experiments.core.share_group_stats import MEM, OWN, REC, SHARE_GROUP_DRAWS, SweepLength, share_groups
from experiments.models import Prediction

_ROLES = {MEMORY: MEM, OWNWORDS: OWN, RECENCY: REC}


def sweep_conditions(conditions) -> dict[int, dict[str, str]]:
    """memory length w → {MEM / OWN / REC → condition key} among ``conditions``."""
    out: dict[int, dict[str, str]] = {}
    for key in conditions:
        try:
            condition = get_condition(key)
        except KeyError:
            continue
        if (condition.evidence in _ROLES and condition.workflow == ONE_SHOT and condition.memory_kind == CONCRETE
                and (condition.evidence == MEMORY or condition.budget == MEMORY_LENGTH)):
            out.setdefault(condition.memory_words, {})[_ROLES[condition.evidence]] = key
    return dict(sorted(out.items()))


def run_share_groups(run, matrix, *, seed: int) -> list[dict] | None:
    """The rows of `core.share_group_stats.share_groups` for ``run`` (its grades in ``matrix``, the
    dashboard's `GradeMatrix`; intervals with the run's ``seed``), or None when the run has no
    sweep to group."""
    protocol = run.protocol
    sweep = {w: roles for w, roles in sweep_conditions(protocol.conditions).items()
             if OWN in roles or REC in roles}
    if WHOLE_RECORD not in matrix.conditions or not sweep:
        return None
    where = {int(t): i for i, t in enumerate(matrix.task_ids)}
    n = len(where)
    source = np.full(n, np.nan)
    budgets = {w: {role: np.full(n, np.nan) for role in (OWN, REC)} for w in sweep}
    role_of = {key: (w, role) for w, roles in sweep.items() for role, key in roles.items() if role != MEM}
    rows = Prediction.objects.filter(run=run, label=FINAL, condition__in=[WHOLE_RECORD, *role_of]).values_list(
        "task_id", "condition", "budget", "evidence_chars")
    for task_id, condition, budget, evidence_chars in rows.iterator(chunk_size=10_000):
        i = where.get(task_id)
        if i is None:
            continue
        if condition == WHOLE_RECORD:
            source[i] = evidence_chars
        elif budget is not None:
            w, role = role_of[condition]
            budgets[w][role][i] = budget
    lengths = []
    for w, roles in sweep.items():
        budget = np.where(np.isnan(budgets[w][OWN]), budgets[w][REC], budgets[w][OWN])
        grades = {role: matrix.row(key) for role, key in roles.items() if key in matrix.conditions}
        lengths.append(SweepLength(words=w, budget=budget, grades=grades))
    return share_groups(matrix.task_ids, matrix.person, source, matrix.row(WHOLE_RECORD), lengths,
                        seed=seed, draws=SHARE_GROUP_DRAWS)
