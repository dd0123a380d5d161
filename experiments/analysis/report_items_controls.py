"""The paper report's items on the wording controls (beyond the paper; its closing paragraph asks for "a
controlled paraphrase comparison" to tell preserved content from wording): the evidence-paraphrase
control — OwnWords, recency and the whole record, each verbatim and in other words at the same
character budget (`core.paraphrase`); judge invariance — each answer and its paraphrase graded by the
same judge (`<base>+answer-paraphrased`); and the length control — each answer rewritten to a fixed
number of words or to another condition's median length, the planned contrasts at equal length
(`<base>+length(60w)`, `<base>+length(median:<other>)`). The last two are also
per-run items of the run's tables page (`per_run_tables`).

A builder takes the project and its sealed, finished runs and returns a `ReportTable`, or `Missing`
naming the ready-made protocol (`core.paper_protocols`) that would produce it. It reads one run (the
latest with a paraphrased condition and its verbatim condition; never a pairwise judge, which copies its
source's conditions but answers and grades nothing), the final grades
(`grades.grade_matrix`) on the tasks graded under both conditions of each row, and computes the
whole-person bootstrap (`stats.paired_bootstrap`) with the run's recorded seed and draws.
"""
from __future__ import annotations

import re

import numpy as np

from experiments.analysis.grades import grade_matrix
from experiments.analysis.journal_reads import recorded_length_target, settled_calls
from experiments.core.conditions import ANSWER_PARAPHRASE, CONDITIONS, FINAL, LENGTH, LENGTH_WORDS, PARAPHRASE
from experiments.core.paper_protocols import MEMORY, OWNWORDS, PARAPHRASED
from experiments.core.paraphrase import fit_to_budget, rewritten_base
from experiments.core.prompt_provenance import written_here
from experiments.core.report_table import Missing, ReportInputs, ReportTable
from experiments.core.slot_keys import ParaphraseKey
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED, MAX_GRADE, paired_bootstrap, paired_matrix
from experiments.core.stats.invariance import judge_invariance
from experiments.models import ModelCall, Prediction, Protocol

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


def answers_its_conditions(run) -> bool:
    """Whether the run's conditions are answered and graded in it: not a pairwise judge, which copies its
    source's conditions to name its pairs but stores no answer and no grade."""
    return run.protocol.kind != Protocol.Kind.PAIRWISE


def paraphrase_cuts(run) -> tuple[int, int, float | None]:
    """(paraphrase replies cut at their budget, replies, median reply length ÷ budget) from the journal:
    each paraphrase slot's settling reply (`journal_reads.settled_calls`: a late receipt is not a reply)."""
    calls = settled_calls(ModelCall.objects.filter(slot__run=run, slot__key__startswith=ParaphraseKey.prefix())
                          ).values_list("text", "slot__user")
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
    having = [run for run in runs if answers_its_conditions(run) and any(
        CONDITIONS[key].workflow == PARAPHRASE for key in run.protocol.conditions if key in CONDITIONS)]
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


# --- judge invariance and the length control: per run ----------------------------------------------

REWRITE_SUFFIX = {ANSWER_PARAPHRASE: "+answer-paraphrased", LENGTH: f"+length({LENGTH_WORDS}w)"}
MEDIAN_SUFFIX = "+length(median:…)"
INVARIANCE_COLUMNS = ("condition", "answers", "people", "grades changed", "95% low", "95% high", "graded higher",
                      "graded lower", "quadratic κ", "κ 95% low", "κ 95% high")
CONTRAST_COLUMNS = ("contrast", "grades", "difference", "95% low", "95% high", "tasks", "people", "median words")


def rewritten_pairs(run, workflow: str) -> list[tuple[str, str]]:
    """(base, rewritten) condition keys of the run, for one rewrite workflow, in protocol order (a base may
    have several length controls: at LENGTH_WORDS and at another condition's median); none for a pairwise
    judge (`answers_its_conditions`)."""
    if not answers_its_conditions(run):
        return []
    present = set(run.protocol.conditions)
    return [(base, key) for key in run.protocol.conditions
            if key in CONDITIONS and CONDITIONS[key].workflow == workflow and (base := rewritten_base(key)) in present]


def _rewrite_versions(run, workflow: str) -> list[tuple[str, dict[str, str]]]:
    """(version name, base → rewritten key) per target of the workflow's rewrites: the paraphrase grades;
    or one per length target — LENGTH_WORDS, and each other condition's median with the words it came to."""
    by_target: dict[str | None, dict[str, str]] = {}
    for base, key in rewritten_pairs(run, workflow):
        by_target.setdefault(CONDITIONS[key].length_from, {})[base] = key
    versions = []
    for other, mapped in by_target.items():
        if other is None:
            versions.append((_version_name(workflow), mapped))
            continue
        words = recorded_length_target(run, next(iter(mapped.values())))
        versions.append((f"at the median length of {other} ({words if words is not None else '–'} words)", mapped))
    return versions


def _run_inputs(run) -> tuple[int, int, ReportInputs]:
    bootstrap = run.protocol.bootstrap or {}
    seed, draws = int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))
    inputs = ReportInputs(runs=(run.pk,), cohorts=(run.protocol.cohort_id,), seeds=(seed,), draws=draws,
                          offline_runs=(run.pk,) if _is_offline(run) else ())
    return seed, draws, inputs


def _median_words(run, condition: str, task_ids) -> float | None:
    texts = Prediction.objects.filter(run=run, condition=condition, label=FINAL, task_id__in=list(task_ids),
                                      text__isnull=False).values_list("text", flat=True)
    counts = [len(text.split()) for text in texts]
    return float(np.median(counts)) if counts else None


def _contrast_rows(run, workflow: str, seed: int, draws: int) -> list[tuple]:
    """Each planned contrast whose conditions all have a rewritten version: as graded, then rewritten (once
    per target of the rewrites)."""
    versions = _rewrite_versions(run, workflow)
    rows = []
    for contrast in run.protocol.contrasts or []:
        terms = contrast["terms"]
        rewritten = [(name, tuple(mapped[k] for k in terms)) for name, mapped in versions
                     if terms and set(terms) <= set(mapped)]
        if not rewritten:
            continue
        for version, keys in (("as answered", tuple(terms)), *rewritten):
            matrix = grade_matrix(run, keys)
            pair = paired_matrix(matrix.grades, matrix.task_ids, person=matrix.person)
            if pair.n_tasks == 0:
                rows.append((contrast["name"], version, None, None, None, 0, 0, ""))
                continue
            result = paired_bootstrap(pair.person, pair.diff([terms[k] for k in terms]), seed=seed, draws=draws)
            words = " / ".join(f"{w:g}" if (w := _median_words(run, key, pair.keys)) is not None else "–"
                               for key in keys)
            rows.append((contrast["name"], version, result.estimate, result.lo, result.hi, result.n_tasks,
                         result.n_people, words))
    return rows


def _version_name(workflow: str) -> str:
    return "paraphrase grades" if workflow == ANSWER_PARAPHRASE else f"at {LENGTH_WORDS} words"


def judge_invariance_table(run) -> ReportTable | Missing:
    """Each answer and its paraphrase (content kept) graded by the same judge: the share of grades that
    change, up and down, and quadratic κ, with whole-person intervals, per base condition."""
    pairs = rewritten_pairs(run, ANSWER_PARAPHRASE)
    if not pairs:
        return Missing("the run has no answer-paraphrased condition with its base condition", TEMPLATE)
    seed, draws, inputs = _run_inputs(run)
    rows = []
    for base, paraphrased in pairs:
        matrix = grade_matrix(run, (base, paraphrased))
        pair = paired_matrix(matrix.grades, matrix.task_ids, person=matrix.person)
        if pair.n_tasks == 0:
            rows.append((base, 0, 0, *([None] * 8)))
            continue
        result = judge_invariance(pair.grades[0].astype(int), pair.grades[1].astype(int), pair.person,
                                  draws=draws, seed=seed)
        rows.append((base, result.n_pairs, result.n_people, result.changed.estimate, result.changed.lo,
                     result.changed.hi, result.up, result.down, result.kappa.estimate, result.kappa.lo,
                     result.kappa.hi))
    notes = [f"Run {run.pk}: each answer (the base condition's final) and the same answer rewritten in other words "
             "with its content kept, graded by the same judge in the same run; one pair per task graded under both.",
             f"95% whole-person intervals: {draws:,} PCG64 draws, seed {seed}, linear percentiles. A judge that reads "
             "content only changes no grade (share 0, κ 1)."]
    if _is_offline(run):
        notes.append(OFFLINE_NOTE.format(runs=run.pk))
    return ReportTable(INVARIANCE_COLUMNS, tuple(rows), inputs,
                       digits={name: 3 for name in INVARIANCE_COLUMNS[3:]}, notes=tuple(notes))


def contrasts_under_rewrite(run, workflow: str) -> ReportTable | Missing:
    """Every planned contrast whose conditions all have a rewritten version, graded as answered and as
    rewritten (the paraphrase grades; or at equal length), with whole-person intervals."""
    seed, draws, inputs = _run_inputs(run)
    rows = _contrast_rows(run, workflow, seed, draws)
    if not rows:
        suffix = REWRITE_SUFFIX[workflow] + (f" or {MEDIAN_SUFFIX}" if workflow == LENGTH else "")
        return Missing(f"no planned contrast of the run has every condition with its {suffix} version", TEMPLATE)
    rewrite = ("in other words (content kept), graded by the same judge" if workflow == ANSWER_PARAPHRASE
               else f"rewritten to about {LENGTH_WORDS} words, or to the median length in words of another "
                    "condition's answers (computed when the rewrites were planned, as their requests state it)")
    notes = [f"Run {run.pk}: each planned contrast on the tasks graded under all its conditions, first as the "
             f"conditions answered, then with each answer {rewrite}. Median words: each condition's final answers "
             "on those tasks, in the contrast's order.",
             f"95% whole-person bootstrap intervals: {draws:,} PCG64 draws, seed {seed}, linear percentiles."]
    if workflow == LENGTH:
        notes.append("Beside it: the regression of the per-task difference on the log answer-length gap, in the "
                     "robustness table of this run's tables page.")
    if _is_offline(run):
        notes.append(OFFLINE_NOTE.format(runs=run.pk))
    return ReportTable(CONTRAST_COLUMNS, tuple(rows), inputs,
                       digits={"difference": 4, "95% low": 4, "95% high": 4},
                       signed=frozenset({"difference", "95% low", "95% high"}), notes=tuple(notes))


def _latest_with(runs, workflow: str):
    """The newest run with a rewrite of `workflow` and its base (never a pairwise judge: `rewritten_pairs`)."""
    having = [run for run in runs if rewritten_pairs(run, workflow)]
    return max(having, key=lambda run: run.pk) if having else None


def judge_invariance_report(project, runs) -> ReportTable | Missing:
    """The paper report's judge-invariance table: the latest run with an answer-paraphrased condition."""
    run = _latest_with(runs, ANSWER_PARAPHRASE)
    return judge_invariance_table(run) if run else Missing(
        "no sealed, finished run has an answer-paraphrased condition with its base condition", TEMPLATE)


def length_control_report(project, runs) -> ReportTable | Missing:
    """The paper report's length control: the planned contrasts as answered and at equal length."""
    run = _latest_with(runs, LENGTH)
    return contrasts_under_rewrite(run, LENGTH) if run else Missing(
        f"no sealed, finished run has a length({LENGTH_WORDS}w) or length(median:…) condition with its base "
        "condition", TEMPLATE)
