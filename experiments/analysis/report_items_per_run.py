"""Paper-report items computed from one finished run (paper App. F, I.2, I.6; Tables 26, 27).

Builders of the paper report (`core.report_table`), each ``NAME(project, runs)`` with ``runs`` the
project's sealed, finished runs in pk order; each picks the newest run that can feed it and
returns a `ReportTable` naming that run, its cohort, seed and draws, or `Missing` with the
ready-made template (`core.paper_protocols`) that would produce the input:

- ``table26``: concrete minus trait memory (one-shot) by tertile of the session length gap Δn;
- ``table27``: its threshold decomposition on "specific" and other reference answers;
- ``appendix_f_centrality`` and ``appendix_f_routing``: candidates' centrality in their pool
  against their grade, and fusion − one-shot split by pool agreement, copy status, length ratio;
- ``appendix_i6_sampled_agreement``: two judges' agreement on a seeded, stratified sample.

The statistics are pure (`core.stats.memory_gap`, `core.stats.pool_centrality`,
`core.stats.judge_sample`); this module reads the run's grades, memories, reference answers and
candidate texts, and only numbers leave it. Intervals use the run's recorded seed and draws.
"""
from __future__ import annotations

import numpy as np

from experiments.analysis.grades import grade_matrix
from experiments.core.report_table import Missing, ReportInputs, ReportTable
from experiments.core.stats.memory_gap import class_threshold_table, length_gap_table
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED, paired_matrix
from experiments.core.task_attributes import NOT_SPECIFIC, SPECIFIC, is_specific
from experiments.models import CohortTask, Memory, Run

CONCRETE_ONE_SHOT = "memory(concrete,100w)+one-shot"
TRAIT_ONE_SHOT = "memory(trait,100w)+one-shot"
COMMON = "common"          # the ready-made template (`core.paper_protocols`) with both memories and pools
OFFLINE_NOTE = ("Computed from a run on the offline stand-in (a deterministic lexical rule, not a model): "
                "these figures test the pipeline, they are not model results.")
DIFFERENCE_COLUMNS = ("Concrete − trait", "95% lo", "95% hi")


def run_settings(run: Run) -> tuple[int, int]:
    """The run's recorded bootstrap seed and draws (the analysis defaults where none is recorded)."""
    bootstrap = run.protocol.bootstrap or {}
    return int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))


def is_offline(run: Run) -> bool:
    """Whether the offline stand-in generated or graded the run (never to be shown as a model result)."""
    protocol = run.protocol
    return any((getattr(protocol, role) or {}).get("provider") == "offline" for role in ("generator", "judge"))


def report_inputs(run: Run, *extra_runs: Run) -> ReportInputs:
    seed, draws = run_settings(run)
    every = [run, *extra_runs]
    return ReportInputs(runs=tuple(r.pk for r in every), cohorts=tuple(dict.fromkeys(r.protocol.cohort_id for r in every)),
                        seeds=(seed,), draws=draws, offline_runs=tuple(r.pk for r in every if is_offline(r)))


def notes_for(run: Run, *notes: str, extra_runs=()) -> tuple[str, ...]:
    offline = any(is_offline(r) for r in (run, *extra_runs))
    return (*notes, *((OFFLINE_NOTE,) if offline else ()))


def newest_run_with(runs, conditions) -> Run | None:
    """The newest of ``runs`` (not a re-grade) whose protocol has every one of ``conditions``."""
    for run in reversed(list(runs)):
        protocol = run.protocol
        if protocol.regrade_of_id is None and set(conditions) <= set(protocol.conditions):
            return run
    return None


def _one_shot_pairs(run: Run):
    """The jointly graded tasks of the two one-shot memories: (task ids, people, concrete, trait grades)."""
    matrix = grade_matrix(run, [CONCRETE_ONE_SHOT, TRAIT_ONE_SHOT])
    paired = paired_matrix(matrix.grades, matrix.task_ids, person=matrix.person)
    return np.asarray(paired.keys, dtype=np.int64), paired.person, paired.grades[0], paired.grades[1]


def memory_gaps(run: Run) -> dict[int, int]:
    """session id → Δn, the concrete minus the trait memory's whitespace word count (sessions with both)."""
    words: dict[tuple[int, str], int] = {}
    for session_id, kind, text in Memory.objects.filter(run=run, words=100, kind__in=("concrete", "trait")) \
            .exclude(text=None).values_list("session_id", "kind", "text"):
        words[session_id, kind] = len(text.split())
    return {s: words[s, "concrete"] - words[s, "trait"] for s, kind in words if kind == "concrete"
            and (s, "trait") in words}


def _task_rows(run: Run, task_ids) -> dict[int, tuple[int, str]]:
    """task id → (session id, reference answer text), for the run's cohort."""
    rows = CohortTask.objects.filter(cohort_id=run.protocol.cohort_id, task_id__in=[int(t) for t in task_ids]) \
        .values_list("task_id", "task__session_id", "task__answer_turn__text")
    return {task: (session, text or "") for task, session, text in rows}


def _missing_common(what: str) -> Missing:
    return Missing(f"{what} needs a finished run with the concrete and the trait memory, one-shot "
                   f"({CONCRETE_ONE_SHOT}, {TRAIT_ONE_SHOT}): the common experiment.", COMMON)


def table26(project, runs):
    """Table 26: concrete minus trait memory by tertile of the session length gap Δn (App. I.2)."""
    run = newest_run_with(runs, (CONCRETE_ONE_SHOT, TRAIT_ONE_SHOT))
    if run is None:
        return _missing_common("Table 26")
    task_ids, person, concrete, trait = _one_shot_pairs(run)
    gaps = memory_gaps(run)
    attributes = _task_rows(run, task_ids)
    keep = np.array([attributes[int(t)][0] in gaps for t in task_ids], dtype=bool)
    if not keep.any():
        return Missing(f"Run {run.pk} has no task graded under both one-shot memories whose session has both "
                       "memories written.", COMMON)
    session = np.array([attributes[int(t)][0] for t in task_ids[keep]])
    gap = np.array([gaps[s] for s in session.tolist()], dtype=float)
    diff = (concrete[keep] - trait[keep]) / 3
    seed, draws = run_settings(run)
    columns, rows = length_gap_table(session, gap, person[keep], diff, seed=seed, draws=draws)
    return ReportTable(
        columns=columns, rows=tuple(rows), inputs=report_inputs(run),
        digits={"Concrete − trait": 4, "95% lo": 4, "95% hi": 4}, signed=frozenset(DIFFERENCE_COLUMNS),
        notes=notes_for(run, "Table 26: Concrete minus trait memory by tertile of the session length gap Δn "
                        "(concrete minus trait profile words). Task-weighted differences on the 0–1 scale.",
                        f"Run {run.pk}: one-shot concrete minus trait memory on the tasks graded under both; Δn "
                        "counts whitespace words of the session's two written memories. Tertile edges are the "
                        "1/3 and 2/3 quantiles of Δn over sessions (a value on an edge is in the middle third). "
                        "The regression rows: task-weighted least squares of the per-task difference on Δn. "
                        f"95% whole-person bootstrap intervals, seed {seed}, {draws:,} draws."))


def table27(project, runs):
    """Table 27: threshold decomposition of concrete minus trait memory by task class (App. I.2)."""
    run = newest_run_with(runs, (CONCRETE_ONE_SHOT, TRAIT_ONE_SHOT))
    if run is None:
        return _missing_common("Table 27")
    task_ids, person, concrete, trait = _one_shot_pairs(run)
    if task_ids.size == 0:
        return Missing(f"Run {run.pk} has no task graded under both one-shot memories.", COMMON)
    attributes = _task_rows(run, task_ids)
    classes = np.array([SPECIFIC if is_specific(attributes[int(t)][1]) else NOT_SPECIFIC for t in task_ids],
                       dtype=object)
    seed, draws = run_settings(run)
    columns, rows = class_threshold_table(classes, person, concrete, trait, seed=seed, draws=draws)
    return ReportTable(
        columns=columns, rows=tuple(rows), inputs=report_inputs(run),
        digits={"Concrete − trait": 4, "95% lo": 4, "95% hi": 4}, signed=frozenset(DIFFERENCE_COLUMNS),
        notes=notes_for(run, "Table 27: Threshold decomposition of the concrete-minus-trait difference by task "
                        "class. Specific: the reference answer contains a digit or a non-sentence-initial "
                        "capitalized word other than forms of I.",
                        f"Run {run.pk}: one-shot concrete minus trait memory (the paper's Table 27 uses the memory "
                        "experiment; the common experiment's one-shot contrast is its second draw). ΔP(≥k) is the "
                        "paired difference in the share of tasks graded at least k; the normalized difference is "
                        "their mean. Specific − other resamples the people of both classes (no interval when a "
                        f"draw leaves a class empty). 95% whole-person bootstrap intervals, seed {seed}, "
                        f"{draws:,} draws."))
