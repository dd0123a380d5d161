"""Concrete minus trait memory by the memories' length gap and by answer class (paper App. I.2, Tables 26, 27).

* ``length_gap_table`` (Table 26): the per-task difference split by tertile of the session length
  gap Δn (the concrete memory's minus the trait memory's word count), on the |Δn| ≤ 10 and
  ≤ 15 subsets, and regressed on Δn (slope per 10 words, the fitted difference at Δn = 0);
* ``class_threshold_table`` (Table 27): ΔP≥k (k = 1..3) and the normalized difference on the
  "specific" tasks (`core.task_attributes.is_specific`), the other tasks and all of them, and
  the difference between the two classes.

Every interval is a whole-person bootstrap interval on `paired_bootstrap`'s stream (through
`shared_bootstraps`, identical to the bit; a class difference and a regression on the draws of
`robustness`). Differences are normalized (raw / 3), ΔP≥k shares of tasks. Pure NumPy.
"""
from __future__ import annotations

import numpy as np

from experiments.core.stats import robustness
from experiments.core.stats.arguments import check_paired
from experiments.core.stats.shared import BootstrapRequest, shared_bootstraps
from experiments.core.stats.shifts import threshold_decomposition
from experiments.core.task_attributes import NOT_SPECIFIC, SPECIFIC

GAP_LIMITS = (10, 15)          # App. I.2: the |Δn| ≤ 10 and ≤ 15 subsets
SLOPE_UNIT = 10                # App. I.2: the slope is given per 10 words
TERTILE_LABELS = {"bottom": "lowest third of Δn", "middle": "middle third of Δn", "top": "highest third of Δn"}

GAP_COLUMNS = ("Sessions by Δn", "Δn range", "Sessions", "Tasks", "People", "Concrete − trait", "95% lo", "95% hi")
CLASS_COLUMNS = ("Task class", "Threshold", "Tasks", "People", "Concrete − trait", "95% lo", "95% hi")
THRESHOLD_LABELS = ("ΔP(≥1)", "ΔP(≥2)", "ΔP(≥3)", "normalized difference")
CLASS_DIFFERENCE = f"{SPECIFIC} − {NOT_SPECIFIC}"


def session_tertiles(session, gap) -> np.ndarray:
    """Each task's tertile of its session's Δn: the edges are the 1/3 and 2/3 quantiles over the
    sessions (one value each, NumPy's linear quantiles), not over tasks, so a session's number of
    tasks does not move them; a value on an edge goes to the middle third (`robustness.tertiles`)."""
    session = np.asarray(session)
    gap = np.asarray(gap, dtype=float)
    if session.shape != gap.shape or session.ndim != 1:
        raise ValueError("one session and one gap per task")
    first: dict = {}
    for s, g in zip(session.tolist(), gap.tolist()):
        if first.setdefault(s, g) != g:
            raise ValueError(f"session {s!r} has more than one length gap")
    labels = dict(zip(first, robustness.tertiles(list(first.values())).tolist()))
    return np.array([labels[s] for s in session.tolist()], dtype=object)


def _span(values: np.ndarray) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:g}" if low == high else f"{low:g} to {high:g}"


def length_gap_table(session, gap, person, diff, *, seed: int, draws: int,
                     limits=GAP_LIMITS) -> tuple[tuple[str, ...], list[tuple]]:
    """Table 26's rows: (group, Δn range, sessions, tasks, people, estimate, lo, hi).

    ``session``, ``gap`` (the session's Δn, words), ``person`` and ``diff`` (the per-task
    normalized concrete − trait difference) are parallel per task. Rows: the three tertiles,
    |Δn| ≤ each limit, all tasks, then the task-weighted regression of the difference on Δn
    (its slope per 10 words and its value at Δn = 0; None where a draw leaves it undefined).
    """
    person, diff = check_paired(person, diff)
    gap = np.asarray(gap, dtype=float)
    session = np.asarray(session)
    if gap.shape != diff.shape or session.shape != diff.shape or not np.isfinite(gap).all():
        raise ValueError("one session and one finite gap per task")
    tertile = session_tertiles(session, gap)
    groups = [(TERTILE_LABELS[t], tertile == t) for t in robustness.TERTILES]
    groups += [(f"|Δn| ≤ {limit}", np.abs(gap) <= limit) for limit in limits]
    groups.append(("all sessions", np.ones(diff.size, dtype=bool)))
    present = [(label, mask) for label, mask in groups if mask.any()]
    results = shared_bootstraps([BootstrapRequest(person[mask], diff[mask]) for _, mask in present],
                                seed=seed, draws=draws)
    rows = []
    for (label, mask), (result,) in zip(present, results):
        rows.append((label, _span(gap[mask]), len(set(session[mask].tolist())), result.n_tasks, result.n_people,
                     result.estimate, result.lo, result.hi))
    if np.ptp(gap) > 0:
        fit = robustness.covariate_regression(person, gap / SLOPE_UNIT, diff, seed=seed, draws=draws)
        every = (_span(gap), len(set(session.tolist())), fit.slope.n_tasks, fit.slope.n_people)
        rows.append((f"slope per {SLOPE_UNIT} words of Δn", *every, fit.slope.estimate, fit.slope.lo, fit.slope.hi))
        rows.append(("fitted difference at Δn = 0", *every, fit.intercept.estimate, fit.intercept.lo,
                     fit.intercept.hi))
    return GAP_COLUMNS, rows


def class_threshold_table(classes, person, concrete, trait, *, seed: int, draws: int
                          ) -> tuple[tuple[str, ...], list[tuple]]:
    """Table 27's rows: (class, threshold, tasks, people, estimate, lo, hi).

    ``classes`` holds SPECIFIC or NOT_SPECIFIC per task, ``concrete`` and ``trait`` the raw
    grades 0..3 of the two conditions on the same (jointly graded) tasks. Per class (specific,
    other, all tasks): ΔP≥1, ΔP≥2, ΔP≥3 and the normalized difference, each
    `paired_bootstrap` over the class's people; then specific − other for each of the four,
    resampling the people of both classes (`robustness.group_difference`; None where a draw
    leaves a class empty).
    """
    person = np.asarray(person)
    classes = np.asarray(classes, dtype=object)
    concrete, trait = np.asarray(concrete, dtype=float), np.asarray(trait, dtype=float)
    if not (classes.shape == person.shape == concrete.shape == trait.shape) or person.ndim != 1:
        raise ValueError("one class, person and pair of grades per task")
    unknown = set(classes.tolist()) - {SPECIFIC, NOT_SPECIFIC}
    if unknown:
        raise ValueError(f"unknown task classes {sorted(map(str, unknown))}")
    decomposition = threshold_decomposition(concrete, trait)
    per_task = np.vstack([decomposition.per_task, (concrete - trait)[None, :] / 3])   # (4, tasks)
    groups = [(SPECIFIC, classes == SPECIFIC), (NOT_SPECIFIC, classes == NOT_SPECIFIC),
              ("all tasks", np.ones(person.size, dtype=bool))]
    present = [(label, mask) for label, mask in groups if mask.any()]
    requests = [BootstrapRequest(person[mask], row[mask]) for _, mask in present for row in per_task]
    results = iter(shared_bootstraps(requests, seed=seed, draws=draws))
    rows = []
    for label, mask in present:
        for threshold in THRESHOLD_LABELS:
            (result,) = next(results)
            rows.append((label, threshold, result.n_tasks, result.n_people, result.estimate, result.lo, result.hi))
    specific, other = classes == SPECIFIC, classes == NOT_SPECIFIC
    if specific.any() and other.any():
        for threshold, row in zip(THRESHOLD_LABELS, per_task):
            d = robustness.group_difference(specific, other, person, row, seed=seed, draws=draws)
            rows.append((CLASS_DIFFERENCE, threshold, d.n_tasks, d.n_people, d.estimate, d.lo, d.hi))
    return CLASS_COLUMNS, rows
