"""A run's robustness tables (paper App. I.1, I.2, I.4, I.5, I.7, I.8), cached like the dashboard.

For every planned contrast: task- and person-weighted estimates, ΔP≥k with intervals and what a
monotone rescoring can do, subgroups by target position, by "specific" reference answers and by
tertiles of the answer-length ratio and of the evidence-length gap (each with the difference of
two groups), regressions of the per-task difference on the log answer-length gap and on the
evidence-length gap, and the contrast without people of several sessions. Numbers only: the
reference answers are read here to mark tasks specific, and only the marks' counts leave.

The cache (`TablesResult`) keeps the sha256 of its inputs: the dashboard's inputs (the grade
table, planned contrasts, bootstrap settings) and this module's version. Answer texts need no
hash of their own: a grade is bound to its answer's sha256, so a changed answer changes the grades.
"""
from __future__ import annotations

import numpy as np
from django.utils import timezone

from experiments.analysis.answers_sql import answer_measure_rows
from experiments.analysis.dashboard import dashboard_inputs
from experiments.analysis.per_run_tables import PER_RUN_KEY, per_run_payload
from experiments.analysis.share_groups import run_share_groups
from experiments.core import stats
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.conditions import FINAL
from experiments.core.stats import robustness
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.core.task_attributes import (
    FIRST_TARGET, LATER_TARGETS, NOT_SPECIFIC, SPECIFIC, is_specific, length_ratio, log_length_gap, target_group,
)
from experiments.models import AnalysisResult, CohortTask, Run, TablesResult

TABLES_VERSION = "3"    # 2: the budget sweep by share of the source (`share_groups`); 3: the per-run paper items
EVIDENCE_UNIT = 100     # the evidence-length gap is regressed per 100 characters


def tables_inputs(run: Run):
    matrix, dashboard_sha = dashboard_inputs(run)
    return matrix, sha256_text(canonical_json({"version": TABLES_VERSION, "dashboard": dashboard_sha}))


def tables_cached(run: Run) -> TablesResult | None:
    _, inputs_sha = tables_inputs(run)
    return TablesResult.objects.filter(run=run, inputs_sha256=inputs_sha).first()


def cached_results(run: Run) -> tuple[AnalysisResult | None, TablesResult | None]:
    """The dashboard's and the tables' cached results if current, from one read of the grades."""
    _, dashboard_sha = dashboard_inputs(run)
    tables_sha = sha256_text(canonical_json({"version": TABLES_VERSION, "dashboard": dashboard_sha}))
    return (AnalysisResult.objects.filter(run=run, inputs_sha256=dashboard_sha).first(),
            TablesResult.objects.filter(run=run, inputs_sha256=tables_sha).first())


def tables_refresh(run: Run) -> TablesResult:
    matrix, inputs_sha = tables_inputs(run)
    payload = tables_compute(run, matrix)
    result, _ = TablesResult.objects.update_or_create(
        run=run, defaults={"inputs_sha256": inputs_sha, "payload": payload, "computed_at": timezone.now()})
    return result


def _task_attributes(run: Run, task_ids: np.ndarray) -> dict:
    """Target position, specificity and sessions per person, in the grade matrix's task order."""
    rows = {task_id: (position, text, session)
            for task_id, position, text, session in CohortTask.objects.filter(cohort_id=run.protocol.cohort_id)
            .values_list("task_id", "task__position", "task__answer_turn__text", "task__session_id")}
    ordered = [rows[int(t)] for t in task_ids]
    return {"target": np.array([target_group(r[0]) for r in ordered], dtype=object),
            "specific": np.array([SPECIFIC if is_specific(r[1]) else NOT_SPECIFIC for r in ordered], dtype=object),
            "session": np.array([r[2] for r in ordered])}


def _answer_measures(run: Run, conditions, task_ids: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """condition → (answer words, evidence characters) per task in matrix order; NaN where no answer."""
    where = {int(t): i for i, t in enumerate(task_ids)}
    out = {c: (np.full(task_ids.size, np.nan), np.full(task_ids.size, np.nan)) for c in conditions}
    if not conditions:
        return out          # no planned contrast: nothing to measure
    for condition, task_id, words, evidence in answer_measure_rows(run.pk, FINAL, conditions):
        i = where.get(task_id)
        if i is not None:
            out[condition][0][i], out[condition][1][i] = words, evidence
    return out


def tables_compute(run: Run, matrix) -> dict:
    protocol = run.protocol
    seed = int(protocol.bootstrap.get("seed", DEFAULT_SEED))
    draws = int(protocol.bootstrap.get("draws", DEFAULT_DRAWS))
    attributes = _task_attributes(run, matrix.task_ids)
    names = list(dict.fromkeys(n for c in protocol.contrasts for n in c["terms"]))
    measures = _answer_measures(run, names, matrix.task_ids)
    sessions_of = {}
    for person, session in zip(matrix.person.tolist(), attributes["session"].tolist()):
        sessions_of.setdefault(person, set()).add(session)
    multi = sorted(p for p, s in sessions_of.items() if len(s) > 1)
    contrasts = [_contrast_tables(c, matrix, attributes, measures, multi, seed, draws) for c in protocol.contrasts]
    return {"seed": seed, "draws": draws, "contrasts": contrasts,
            "specific_tasks": int((attributes["specific"] == SPECIFIC).sum()), "tasks": int(matrix.task_ids.size),
            "multi_session_people": len(multi), "share_groups": run_share_groups(run, matrix, seed=seed),
            PER_RUN_KEY: per_run_payload(run)}


def _interval(result) -> dict:
    return {"estimate": result.estimate, "lo": result.lo, "hi": result.hi,
            "n_tasks": result.n_tasks, "n_people": result.n_people}


def _groups(labels, order, people, diff, seed, draws, compare=None) -> dict:
    split = robustness.subgroups(labels, people, diff, seed=seed, draws=draws, order=order, compare=compare)
    difference = None
    if split.difference is not None:
        difference = {"first": split.first, "second": split.second, **_interval(split.difference),
                      "undefined_draws": split.difference.undefined_draws}
    return {"groups": [{"label": g, **_interval(r)} for g, r in split.groups.items()], "difference": difference}


def _contrast_tables(contrast, matrix, attributes, measures, multi, seed, draws) -> dict:
    names = list(contrast["terms"])
    coefficients = [float(contrast["terms"][n]) for n in names]
    columns = np.vstack([matrix.row(n) for n in names])
    kept = ~np.isnan(columns).any(axis=0)
    row = {"name": contrast["name"], "terms": contrast["terms"], "n_tasks": int(kept.sum())}
    if not kept.any():
        return row
    paired = stats.paired_matrix(columns, matrix.task_ids, person=matrix.person)
    diff, people = paired.diff(coefficients), paired.person
    task, by_person = robustness.weightings(people, diff, seed=seed, draws=draws)
    row.update(task_weighted=_interval(task), person_weighted=_interval(by_person))
    decomposition = stats.threshold_decomposition(*paired.grades, coefficients=coefficients)
    thresholds = robustness.threshold_robustness(people, decomposition.per_task, seed=seed, draws=draws)
    row["thresholds"] = {"delta": [{"k": k + 1, **vars(d)} for k, d in enumerate(thresholds.delta)],
                         "smallest": thresholds.smallest, "largest": thresholds.largest,
                         "same_sign": thresholds.same_sign, "top_step_share": thresholds.top_step_share}
    subgroups = {
        "target position": _groups(attributes["target"][kept], [FIRST_TARGET, LATER_TARGETS], people, diff,
                                   seed, draws, compare=(LATER_TARGETS, FIRST_TARGET)),
        "reference answer": _groups(attributes["specific"][kept], [SPECIFIC, NOT_SPECIFIC], people, diff, seed, draws),
    }
    regressions = {}
    if sorted(coefficients) == [-1.0, 1.0]:
        a, b = (names[0], names[1]) if coefficients[0] == 1 else (names[1], names[0])
        words_a, words_b = measures[a][0][kept], measures[b][0][kept]
        evidence_gap = (measures[a][1][kept] - measures[b][1][kept]) / EVIDENCE_UNIT
        # A graded operational zero (an invalid selection) has no text: no length, left out of these.
        known = ~np.isnan(words_a) & ~np.isnan(words_b)
        if known.sum() >= 3:
            ratio = np.array([length_ratio(x, y) for x, y in zip(words_a[known], words_b[known])])
            gap = np.array([log_length_gap(x, y) for x, y in zip(words_a[known], words_b[known])])
            subgroups["answer length ratio"] = _groups(robustness.tertiles(ratio), robustness.TERTILES,
                                                       people[known], diff[known], seed, draws, ("top", "bottom"))
            regressions["log answer length gap"] = _regression(people[known], gap, diff[known], seed, draws)
            evidence = evidence_gap[known]
            if np.ptp(evidence) > 0:
                subgroups["evidence length gap"] = _groups(robustness.tertiles(evidence), robustness.TERTILES,
                                                           people[known], diff[known], seed, draws, ("top", "bottom"))
                regressions[f"evidence length gap ({EVIDENCE_UNIT} characters)"] = _regression(
                    people[known], evidence, diff[known], seed, draws)
    row["subgroups"] = subgroups
    row["regressions"] = regressions
    everyone, without = robustness.without_people(people, diff, multi, seed=seed, draws=draws)
    row["exclusions"] = [{"rule": "without people of several sessions", "people_excluded":
                          int(np.isin(np.unique(people), multi).sum()),
                          "all": _interval(everyone), "kept": None if without is None else _interval(without)}]
    return row


def _regression(people, x, diff, seed, draws) -> dict | None:
    if np.ptp(x) == 0:
        return None
    fit = robustness.covariate_regression(people, x, diff, seed=seed, draws=draws)
    return {"slope": vars(fit.slope), "intercept": vars(fit.intercept)}
