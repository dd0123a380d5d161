"""The paper report's items on the wording controls (beyond the paper; its closing paragraph asks for "a
controlled paraphrase comparison" to tell preserved content from wording): the evidence-paraphrase
control — OwnWords, recency and the whole record, each verbatim and in other words at the same
character budget (`core.paraphrase`).

A builder takes the project and its sealed, finished runs and returns a `ReportTable`, or `Missing`
naming the ready-made protocol (`core.paper_protocols`) that would produce it. It reads one run (the
latest with a paraphrased condition and its verbatim condition), the final grades
(`grades.grade_matrix`) on the tasks graded under both conditions of each row, and computes the
whole-person bootstrap (`stats.paired_bootstrap`) with the run's recorded seed and draws.
"""
from __future__ import annotations

import re

import numpy as np

from experiments.analysis.grades import grade_matrix
from experiments.core.conditions import CONDITIONS, PARAPHRASE
from experiments.core.paper_protocols import MEMORY, OWNWORDS, PARAPHRASED
from experiments.core.paraphrase import fit_to_budget
from experiments.core.prompt_provenance import written_here
from experiments.core.report_table import Missing, ReportInputs, ReportTable
from experiments.core.slot_keys import ParaphraseKey
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED, MAX_GRADE, paired_bootstrap, paired_matrix
from experiments.models import ModelCall

TEMPLATE = "paraphrase-controls"
OFFLINE_NOTE = ("Run {runs} used the offline stand-in as generator or judge: these numbers test the pipeline, "
                "they are not model results.")
COLUMNS = ("comparison", "condition", "comparator", "mean", "comparator mean", "difference", "95% low",
           "95% high", "tasks", "people")
# The paraphrase call's budget, as its sealed prompt states it.
BUDGET_LINE = re.compile(r"Use at most (\d+) characters\.")


def _rows_wanted(present: set[str]) -> list[tuple[str, str, str]]:
    rows = [(verbatim, paraphrased, f"{verbatim}: verbatim − paraphrased")
            for verbatim, paraphrased in PARAPHRASED.items() if {verbatim, paraphrased} <= present]
    if {OWNWORDS, PARAPHRASED[OWNWORDS], MEMORY} <= present:
        rows += [(OWNWORDS, MEMORY, "OwnWords − memory (verbatim)"),
                 (PARAPHRASED[OWNWORDS], MEMORY, "OwnWords − memory (paraphrased)")]
    return rows


def _is_offline(run) -> bool:
    return "offline" in {(run.protocol.generator or {}).get("provider"), (run.protocol.judge or {}).get("provider")}


def paraphrase_cuts(run) -> tuple[int, int, float | None]:
    """(paraphrase replies cut at their budget, replies, median reply length ÷ budget) from the journal."""
    calls = ModelCall.objects.filter(slot__run=run, slot__key__startswith=ParaphraseKey.prefix(),
                                     outcome=ModelCall.Outcome.OK).values_list("text", "slot__user")
    fitted = []
    for text, user in calls:
        found = BUDGET_LINE.search(user or "")
        if found:
            fitted.append(fit_to_budget(text or "", int(found.group(1))))
    ratios = [f.chars / f.budget for f in fitted if f.budget]
    return sum(f.cut for f in fitted), len(fitted), float(np.median(ratios)) if ratios else None


def paraphrase_controls(project, runs) -> ReportTable | Missing:
    """Content versus wording: for OwnWords, recency and the whole record, the verbatim condition's mean
    normalized content score, the paraphrased one's on the tasks graded under both, the difference
    verbatim − paraphrased and its 95% whole-person interval; OwnWords − memory both ways when the
    memory ran; the share of paraphrases cut at the budget in the notes."""
    having = [run for run in runs if any(CONDITIONS[key].workflow == PARAPHRASE for key in run.protocol.conditions
                                         if key in CONDITIONS)]
    run = max(having, key=lambda run: run.pk) if having else None
    present = set(run.protocol.conditions) if run else set()
    wanted = _rows_wanted(present)
    if not wanted:
        return Missing("no sealed, finished run has a paraphrased condition with its verbatim condition", TEMPLATE)
    bootstrap = run.protocol.bootstrap or {}
    seed, draws = int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))
    keys = tuple(dict.fromkeys(key for row in wanted for key in row[:2]))
    matrix = grade_matrix(run, keys)
    rows = []
    for condition, comparator, label in wanted:
        pair = paired_matrix(matrix.grades[[keys.index(condition), keys.index(comparator)]], matrix.task_ids,
                             person=matrix.person)
        if pair.n_tasks == 0:
            rows.append((label, condition, comparator, None, None, None, None, None, 0, 0))
            continue
        result = paired_bootstrap(pair.person, pair.diff((1, -1)), seed=seed, draws=draws)
        means = pair.grades.mean(axis=1) / MAX_GRADE
        rows.append((label, condition, comparator, float(means[0]), float(means[1]), result.estimate, result.lo,
                     result.hi, result.n_tasks, result.n_people))
    cut, replies, ratio = paraphrase_cuts(run)
    notes = [f"Run {run.pk} (beyond the paper; cohort {run.protocol.cohort_id}): each row's tasks are those graded "
             "under both of its conditions. The paraphrased condition answers with the verbatim condition's prompt; "
             "only the evidence's wording differs.",
             f"95% whole-person bootstrap intervals: {draws:,} PCG64 draws, seed {seed}, linear percentiles.",
             f"Paraphrases: {cut} of {replies} replies were over their budget and cut at it (at the last whitespace "
             "within it)" + (f"; median reply length {ratio:.2f} × the budget." if ratio is not None else ".")]
    ours = written_here([name for key in keys for name in CONDITIONS[key].prompt_names()])
    if ours:
        notes.append("Prompts written here, not the paper's (prompts/README.md): "
                     + "; ".join(f"{name}: {what}" for name, what in ours.items()) + ".")
    if _is_offline(run):
        notes.append(OFFLINE_NOTE.format(runs=run.pk))
    inputs = ReportInputs(runs=(run.pk,), cohorts=(run.protocol.cohort_id,), seeds=(seed,), draws=draws,
                          offline_runs=(run.pk,) if _is_offline(run) else ())
    return ReportTable(COLUMNS, tuple(rows), inputs,
                       digits={"mean": 4, "comparator mean": 4, "difference": 4, "95% low": 4, "95% high": 4},
                       signed=frozenset({"difference", "95% low", "95% high"}), notes=tuple(notes))
