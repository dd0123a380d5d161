"""The per-run paper items (Tables 8, 26, 27; App. F centrality and routing; App. I.6), computed from one run.

Each ``*_table(run)`` reads what the run stored — the two one-shot memories' grades, the sessions'
written memories, the reference answers, the candidate pools' texts and grades, or (a re-grade run)
both judges' grades — and returns a `core.report_table.ReportTable` (or `Missing`), with the
statistics of `core.stats.memory_gap`, `core.stats.pool_centrality` and `core.stats.judge_sample`
at the run's recorded seed and draws. Only numbers leave this module.

``per_run_payload(run)`` is what the robustness tables' cache keeps of them (`analysis.tables`), so
that the paper report (`analysis.report_items_per_run`) and the run tables page read them from the
cache; ``item_from_json`` turns a kept item back into a `ReportTable`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from experiments.analysis import report_items_controls as controls
from experiments.analysis.post_hoc_contrasts import CONCRETE_ONE_SHOT, POST_HOC, TRAIT_ONE_SHOT, post_hoc_table
from experiments.analysis.run_report_inputs import notes_for, report_inputs, run_settings
from experiments.analysis.grades import grade_matrix
from experiments.analysis.pools import USABLE, run_pools
from experiments.analysis.sampled_agreement import sampled_agreement
from experiments.core.candidates import CANDIDATE_LABELS
from experiments.core.conditions import ANSWER_PARAPHRASE, FINAL, FUSION, LENGTH, SELECTION, WHOLE_RECORD
from experiments.core.pickers import SIMILARITIES
from experiments.core.report_table import Missing, ReportInputs, ReportTable
from experiments.core.stats.memory_gap import class_threshold_table, length_gap_table
from experiments.core.stats import robustness
from experiments.core.stats.judge_sample import AGREEMENT_COLUMNS, DEFAULT_SAMPLE_SEED, DEFAULT_SAMPLE_SIZE
from experiments.core.stats.paired import paired_matrix
from experiments.core.stats.pool_centrality import (
    CENTRALITY_COLUMNS, ROUTING_COLUMNS, centralities, centrality_slope, pool_agreement, routing_rows,
)
from experiments.core.task_attributes import NOT_SPECIFIC, SPECIFIC, is_specific, length_ratio
from experiments.models import CohortTask, Memory, Prediction, Protocol, Run

logger = logging.getLogger(__name__)
COMMON = "common"          # the ready-made template (`core.paper_protocols`) with both memories and pools
DIFFERENCE_COLUMNS = ("Concrete − trait", "95% lo", "95% hi")
ROUTING_SIMILARITY = "token-f1"   # pool agreement: the first of the consensus pickers' similarities
COPY, NOT_COPY = "copy of a candidate", "not a copy"


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


def gap_table(run: Run):
    """Table 26: concrete minus trait memory by tertile of the session length gap Δn (App. I.2)."""
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


def class_table(run: Run):
    """Table 27: threshold decomposition of concrete minus trait memory by task class (App. I.2)."""
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


# --- App. F: centrality and routing over the run's candidate pools --------------------------------

@dataclass
class PoolTasks:
    """One memory's pools over the run's tasks (cohort order): what the App. F statistics read."""

    person: np.ndarray                         # (T,) person of each task
    texts: list                                # per task the three candidate texts, None when incomplete
    candidates: np.ndarray                     # (3, T) raw grades of b0..b2, NaN missing
    words: np.ndarray                          # (3, T) whitespace words of b0..b2, NaN without a text
    finals: dict = field(default_factory=dict)  # workflow → (grade (T,), words (T,), copy (T,) bool)


def pool_tasks(run: Run) -> dict[str, PoolTasks]:
    """memory key → its pools, read from the run's candidate and final predictions."""
    pools = run_pools(run)
    if not pools:
        return {}
    order = list(CohortTask.objects.filter(cohort_id=run.protocol.cohort_id).order_by("position")
                 .values_list("task_id", "task__session__person_id"))
    at = {task: i for i, (task, _) in enumerate(order)}
    person = np.array([p for _, p in order], dtype=np.int64)
    keys = [key for sources in pools.values() for key in sources.values()]
    by = {}
    for task, condition, label, status, sha, score, text in Prediction.objects.filter(
            run=run, condition__in=keys, task_id__in=list(at)).values_list(
            "task_id", "condition", "label", "status", "answer_sha256", "score", "text"):
        by[task, condition, label] = (status in USABLE, sha, np.nan if score is None else float(score), text or "")
    out = {}
    T = len(order)
    for name in sorted(pools):
        sources = pools[name]
        source = sources.get(FUSION) or sources.get(SELECTION)
        data = PoolTasks(person, [None] * T, np.full((3, T), np.nan), np.full((3, T), np.nan))
        for task, t in at.items():
            rows = [by.get((task, source, label)) for label in CANDIDATE_LABELS]
            for i, row in enumerate(rows):
                if row is not None and row[0]:
                    data.candidates[i, t], data.words[i, t] = row[2], len(row[3].split())
            if all(row is not None and row[0] for row in rows):
                data.texts[t] = [row[3] for row in rows]
        for workflow, key in sorted(sources.items()):
            grade, words, copy = np.full(T, np.nan), np.full(T, np.nan), np.zeros(T, dtype=bool)
            for task, t in at.items():
                final = by.get((task, key, FINAL))
                if final is None:
                    continue
                usable, sha, score, text = final
                grade[t] = score
                if usable:
                    words[t] = len(text.split())
                    copy[t] = any(by.get((task, source, label), (False, None))[0:2] == (True, sha)
                                  for label in CANDIDATE_LABELS)
            data.finals[workflow] = (grade, words, copy)
        out[name] = data
    return out


def centrality_table(run: Run):
    """App. F: a candidate's centrality in its pool against its grade, per SD, pools with unequal grades."""
    seed, draws = run_settings(run)
    rows, undefined = [], []
    for name, data in pool_tasks(run).items():
        complete = [t for t, texts in enumerate(data.texts) if texts is not None]
        for similarity in SIMILARITIES:
            central = np.array([centralities(data.texts[t], similarity) for t in complete]).reshape(-1, 3)
            grades = data.candidates[:, complete].T
            slope = centrality_slope(data.person[complete], central, grades, seed=seed, draws=draws)
            rows.append((name, similarity, slope.pools, slope.candidates, slope.people, slope.estimate, slope.lo,
                         slope.hi, slope.sd))
            if slope.undefined_draws:
                undefined.append(f"{name} ({similarity}): {slope.undefined_draws:,} of {draws:,} draws")
    return ReportTable(
        columns=CENTRALITY_COLUMNS, rows=tuple(rows), inputs=report_inputs(run),
        digits={"Slope per SD (grade points)": 3, "95% lo": 3, "95% hi": 3, "SD of centrality": 3},
        signed=frozenset({"Slope per SD (grade points)", "95% lo", "95% hi"}),
        notes=notes_for(run, "App. F: where candidate grades differ, does a candidate's centrality predict its grade?",
                        f"Run {run.pk}: centrality is a candidate's mean similarity to the other two candidates of "
                        "its pool (the consensus pickers' score); the slope is the within-pool least-squares slope of "
                        "the raw grade (0–3) on centrality in standard deviations, over the complete pools whose "
                        "three grades are not all equal. 95% whole-person bootstrap intervals (a person's pools "
                        f"travel together), seed {seed}, {draws:,} draws."
                        + ("" if not undefined else " No interval where some draws drew only people whose "
                           "centralities do not vary within their pools (no slope in such a draw): "
                           + "; ".join(undefined) + ".")))


def routing_table(run: Run):
    """App. F: fusion (and selection) minus the one-shot by pool agreement, copy status and length ratio."""
    seed, draws = run_settings(run)
    rows = []
    for name, data in pool_tasks(run).items():
        for workflow, (grade, words, copy) in data.finals.items():
            graded = ~np.isnan(grade) & ~np.isnan(data.candidates[0])
            diff = (grade - data.candidates[0]) / 3
            complete = graded & np.array([texts is not None for texts in data.texts], dtype=bool)
            if complete.any():
                agreement = np.array([pool_agreement(data.texts[t], ROUTING_SIMILARITY)
                                      for t in np.flatnonzero(complete)])
                rows += routing_rows(name, workflow, f"pool agreement ({ROUTING_SIMILARITY})",
                                     robustness.tertiles(agreement), robustness.TERTILES, data.person[complete],
                                     diff[complete], seed=seed, draws=draws)
            if workflow == FUSION:
                answered = graded & ~np.isnan(words)
                labels = np.where(copy[answered], COPY, NOT_COPY)
                rows += routing_rows(name, workflow, "copy status", labels, (COPY, NOT_COPY), data.person[answered],
                                     diff[answered], seed=seed, draws=draws, compare=(COPY, NOT_COPY))
            known = graded & ~np.isnan(words) & ~np.isnan(data.words[0])
            if known.any():
                ratio = np.array([length_ratio(a, b) for a, b in zip(words[known], data.words[0][known])])
                rows += routing_rows(name, workflow, f"length ratio ({workflow} / one-shot words)",
                                     robustness.tertiles(ratio), robustness.TERTILES, data.person[known],
                                     diff[known], seed=seed, draws=draws)
    if not rows:
        return Missing(f"Run {run.pk} has no task with a graded workflow answer and a graded one-shot.", COMMON)
    return ReportTable(
        columns=ROUTING_COLUMNS, rows=tuple(rows), inputs=report_inputs(run),
        digits={"Workflow − one-shot": 4, "95% lo": 4, "95% hi": 4},
        signed=frozenset({"Workflow − one-shot", "95% lo", "95% hi"}),
        notes=notes_for(run, "App. F: routing by pool agreement, copy status or length ratio.",
                        f"Run {run.pk}: the workflow's answer minus the pool's one-shot (b0), normalized, split by "
                        f"tertiles of the candidates' mean pairwise {ROUTING_SIMILARITY} similarity, by whether "
                        "fusion's output is a byte copy of a candidate (self-selected: descriptive), and by "
                        "tertiles of the word-count ratio (1 + words) / (1 + one-shot words); the last row of each "
                        "signal is the difference of its outer groups. 95% whole-person bootstrap intervals, seed "
                        f"{seed}, {draws:,} draws."))


# --- App. I.6: two judges on a seeded, stratified sample ------------------------------------------

def agreement_table(run: Run, n: int = DEFAULT_SAMPLE_SIZE, sample_seed: int = DEFAULT_SAMPLE_SEED):
    """App. I.6: the re-grade ``run``'s judge against its source's on a sample of ``n`` answers, evenly over
    the conditions (`analysis.sampled_agreement`)."""
    source = run.protocol.regrade_of
    result = sampled_agreement(run, n=n, sample_seed=sample_seed)
    if not result["rows"]:
        return Missing(f"Re-grade run {run.pk} and its source run {source.pk} have no answer graded by both judges.")
    inputs = report_inputs(run, source)
    strata = "; ".join(f"{name}: {count}" for name, count in sorted(result["strata"].items()))
    return ReportTable(
        columns=AGREEMENT_COLUMNS, rows=tuple(result["rows"]),
        inputs=ReportInputs(runs=inputs.runs, cohorts=inputs.cohorts, seeds=(result["seed"], sample_seed),
                            draws=result["draws"], offline_runs=inputs.offline_runs),
        digits={"Estimate": 3, "95% lo": 3, "95% hi": 3},
        notes=notes_for(run, "App. I.6: agreement of two judges on a sample of graded answers.",
                        f"Run {source.pk} (first judge) and its re-grade run {run.pk} (second judge): of the "
                        f"{result['items']:,} answers both judges graded, a sample of {result['sample']:,} drawn "
                        f"evenly over the conditions that gave them (PCG64 seed {sample_seed}; {strata}). "
                        "Operational zeros are rules, not judgments, and are left out. 95% whole-person bootstrap "
                        f"intervals, seed {result['seed']}, {result['draws']:,} draws. Another sample: manage.py "
                        "judge_sample RUN --n N --seed S.", extra_runs=(source,)))


PER_RUN_KEY = "per_run_items"   # the robustness tables' payload key that keeps these items
AGREEMENT_ITEM = "appendix_i6_sampled_agreement"
COMPUTED = {"table8": post_hoc_table, "table26": gap_table, "table27": class_table,
            "appendix_f_centrality": centrality_table, "appendix_f_routing": routing_table,
            AGREEMENT_ITEM: agreement_table,
            "judge_invariance": controls.judge_invariance_table,
            "contrasts_under_paraphrase": lambda run: controls.contrasts_under_rewrite(run, ANSWER_PARAPHRASE),
            "length_control": lambda run: controls.contrasts_under_rewrite(run, LENGTH)}


def feeds(run: Run) -> list[str]:
    """The per-run items this run can feed: Table 8 the one-shot memories, the current dialogue and the whole
    record; Tables 26 and 27 need both one-shot memories, App. F a pool,
    App. I.6 a re-grade (its default sample); the wording controls answer rewrites (a re-grade's too).
    A pairwise judge feeds none: it names its source's conditions but grades nothing (its own page shows it)."""
    if run.protocol.kind == Protocol.Kind.PAIRWISE:
        return []
    if run.protocol.kind == Protocol.Kind.REGRADE:  # its judge on the source's answers and rewrites
        return [AGREEMENT_ITEM, *_control_items(run)]
    names = []
    if {*(key for _, key in POST_HOC), WHOLE_RECORD} <= set(run.protocol.conditions):
        names.append("table8")
    if {CONCRETE_ONE_SHOT, TRAIT_ONE_SHOT} <= set(run.protocol.conditions):
        names += ["table26", "table27"]
    if run_pools(run):
        names += ["appendix_f_centrality", "appendix_f_routing"]
    return names + _control_items(run)


def _control_items(run: Run) -> list[str]:
    """The wording controls (beyond the paper) where the run has answer rewrites (`report_items_controls`)."""
    names = []
    if controls.rewritten_pairs(run, ANSWER_PARAPHRASE):
        names += ["judge_invariance", "contrasts_under_paraphrase"]
    if controls.rewritten_pairs(run, LENGTH):
        names.append("length_control")
    return names


def per_run_payload(run: Run) -> dict:
    """name → the item as JSON (`ReportTable.as_json`, or {"missing": reason}) for every item the run feeds.

    An item that fails is kept as missing, its traceback logged: it never stops the run's analysis."""
    out = {}
    for name in feeds(run):
        try:
            item = COMPUTED[name](run)
        except Exception as exc:  # noqa: BLE001 - one item's failure is that item's state
            logger.exception("run %s: the per-run item %s failed", run.pk, name)
            item = Missing(f"It could not be computed ({type(exc).__name__}); see the server log.")
        out[name] = _finite(item.as_json()) if isinstance(item, ReportTable) else {"missing": item.reason}
    return out


def _finite(value):
    """NaN or infinity as None: PostgreSQL's JSON has no NaN."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def item_from_json(data: dict, template: str | None = COMMON):
    """A kept item back as the value its builder returns (`ReportTable`, or `Missing`)."""
    if "missing" in data:
        return Missing(data["missing"], template)
    inputs = data["inputs"]
    return ReportTable(
        columns=tuple(data["columns"]), rows=tuple(tuple(row) for row in data["rows"]),
        inputs=ReportInputs(runs=tuple(inputs["runs"]), cohorts=tuple(inputs["cohorts"]), seeds=tuple(inputs["seeds"]),
                            draws=inputs["draws"], offline_runs=tuple(inputs["offline_runs"])),
        digits=dict(data["digits"]), signed=frozenset(data["signed"]), notes=tuple(data["notes"]))
