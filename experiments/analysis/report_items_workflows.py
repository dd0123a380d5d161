"""The paper report's items on the answering workflows and representations: App. F's development
attempts (prompts App. E.12) — question-specific notes, then an answer, and pruning the one-shot
draft — against the memory one-shot (and the notes against the whole record, the paper's
comparison); and App. K's representations run anew (the combined profile of imputed scales beside
the concrete and trait memories), as gains over the screener-only reference like Table 31.

A builder takes the project and its sealed, finished runs and returns a `ReportTable`, or `Missing`
naming the ready-made protocol (`core.paper_protocols`) that would produce it. It reads one run (the
latest that has the memory one-shot and an attempt), the final grades (`grades.grade_matrix`) on the
tasks graded under both conditions of each row, and computes the whole-person bootstrap
(`stats.paired_bootstrap`) with the run's recorded seed and draws. It runs in the report's job,
never in a page request.
"""
from __future__ import annotations

import numpy as np

from experiments.analysis.report_inputs import is_interview, runs_with
from experiments.analysis.journal_reads import settled_calls
from experiments.analysis.grades import grade_matrix
from experiments.core.conditions import CONDITIONS, FINAL, NOTES_WORDS
from experiments.core.paper_protocols import (
    MEMORY, NOTES_FROM_MEMORY, NOTES_FROM_RECORD, PROFILE, PRUNED, SCREENER_ONLY, TAGS, TRAIT, WHOLE_RECORD,
)
from experiments.core.prompt_provenance import written_here
from experiments.core.report_table import Missing, ReportInputs, ReportTable
from experiments.core.slot_keys import NotesKey
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED, MAX_GRADE, paired_bootstrap, paired_matrix
from experiments.core.workflows import cap_notes
from experiments.models import Memory, ModelCall, Prediction

TEMPLATE = "development-attempts"
OFFLINE = "offline"
OFFLINE_NOTE = ("Run {runs} used the offline stand-in as generator or judge: these numbers test the pipeline, "
                "they are not model results.")
# (condition, comparator, label), in the order of App. F's paragraphs.
ROWS = (
    (NOTES_FROM_RECORD, WHOLE_RECORD, "notes from the whole record, then an answer − one call on the whole record"),
    (NOTES_FROM_RECORD, MEMORY, "notes from the whole record, then an answer − memory one-shot"),
    (NOTES_FROM_MEMORY, MEMORY, "notes from the memory, then an answer − memory one-shot"),
    (PRUNED, MEMORY, "pruned one-shot draft − memory one-shot (the unedited draft)"),
)
COLUMNS = ("comparison", "condition", "comparator", "mean", "comparator mean", "difference", "95% low",
           "95% high", "tasks", "people")
ATTEMPTS = (NOTES_FROM_RECORD, NOTES_FROM_MEMORY, PRUNED)


def _is_offline(run) -> bool:
    return OFFLINE in {(run.protocol.generator or {}).get("provider"), (run.protocol.judge or {}).get("provider")}


def _latest(runs):
    having = [run for run in runs if is_interview(run) and MEMORY in run.protocol.conditions
              and set(ATTEMPTS) & set(run.protocol.conditions)]
    return max(having, key=lambda run: run.pk) if having else None


def _median_words(texts) -> float | None:
    counts = [len(text.split()) for text in texts if text is not None]
    return float(np.median(counts)) if counts else None


def _notes_lengths(run) -> tuple[float | None, int, int]:
    """(median words of the notes replies, replies cut at the cap, replies) from the journal."""
    # One reply per notes slot: the attempt that settled it (a late receipt of an earlier one is not a reply).
    replies = settled_calls(ModelCall.objects.filter(slot__run=run, slot__key__startswith=NotesKey.prefix())
                            ).values_list("text", flat=True)
    capped = [cap_notes(text or "") for text in replies]
    median = float(np.median([c.words for c in capped])) if capped else None
    return median, sum(c.cut for c in capped), len(capped)


def _pruning_notes(run, paired_draft) -> list[str]:
    """App. F's pruning descriptives: median words before and after, and the moves across grade 1."""
    finals = dict(Prediction.objects.filter(run=run, condition=PRUNED, label=FINAL).values_list("task_id", "text"))
    drafts = dict(Prediction.objects.filter(run=run, condition=PRUNED, label="b0").values_list("task_id", "text"))
    both = [task for task in finals if finals[task] is not None and drafts.get(task) is not None]
    notes = []
    if both:
        notes.append(f"Pruning: median answer length {_median_words(drafts[t] for t in both):g} words for the draft, "
                     f"{_median_words(finals[t] for t in both):g} after the edit ({len(both)} tasks with both).")
    if paired_draft is not None and paired_draft.n_tasks:
        pruned, draft = paired_draft.grades
        up = int(((draft == 0) & (pruned >= 1)).sum())
        down = int(((draft >= 1) & (pruned == 0)).sum())
        notes.append(f"At the lowest threshold (grade ≥ 1) the edit raised {up} tasks from grade 0 and lowered "
                     f"{down} to grade 0, of {paired_draft.n_tasks} with both grades.")
    return notes


def _prompt_note(keys) -> list[str]:
    names = [name for key in keys if key in CONDITIONS for name in CONDITIONS[key].prompt_names()]
    ours = written_here(names)
    if not ours:
        return []
    return ["Prompts written here, not the paper's (prompts/README.md): "
            + "; ".join(f"{name}: {what}" for name, what in ours.items()) + "."]


def _inputs(run, seed: int, draws: int) -> ReportInputs:
    return ReportInputs(runs=(run.pk,), cohorts=(run.protocol.cohort_id,), seeds=(seed,), draws=draws,
                        offline_runs=(run.pk,) if _is_offline(run) else ())


def _seed_draws(run) -> tuple[int, int]:
    bootstrap = run.protocol.bootstrap or {}
    return int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))


def development_attempts(project, runs) -> ReportTable | Missing:
    """App. F / E.12: each development attempt's mean normalized content score and the comparator's on
    the tasks graded under both, the difference and its 95% whole-person interval; the notes' lengths
    (cap 120 words) and the pruning's lengths and grade moves in the notes."""
    run = _latest(runs)
    if run is None:
        return Missing("no sealed, finished run has the memory one-shot with a development attempt "
                       f"({', '.join(ATTEMPTS)})", TEMPLATE)
    present = set(run.protocol.conditions)
    rows_wanted = [row for row in ROWS if {row[0], row[1]} <= present]
    keys = tuple(dict.fromkeys(key for row in rows_wanted for key in row[:2]))
    seed, draws = _seed_draws(run)
    matrix = grade_matrix(run, keys)
    rows, pruned_pair = [], None
    for condition, comparator, label in rows_wanted:
        pair = paired_matrix(matrix.grades[[keys.index(condition), keys.index(comparator)]], matrix.task_ids,
                             person=matrix.person)
        if condition == PRUNED:
            pruned_pair = pair
        if pair.n_tasks == 0:
            rows.append((label, condition, comparator, None, None, None, None, None, 0, 0))
            continue
        result = paired_bootstrap(pair.person, pair.diff((1, -1)), seed=seed, draws=draws)
        means = pair.grades.mean(axis=1) / MAX_GRADE
        rows.append((label, condition, comparator, float(means[0]), float(means[1]), result.estimate, result.lo,
                     result.hi, result.n_tasks, result.n_people))
    notes = [f"Run {run.pk} (App. F, E.12; cohort {run.protocol.cohort_id}): each row's tasks are those graded under "
             "both of its conditions.",
             f"95% whole-person bootstrap intervals: {draws:,} PCG64 draws, seed {seed}, linear percentiles."]
    if {NOTES_FROM_RECORD, NOTES_FROM_MEMORY} & present:
        median, cut, replies = _notes_lengths(run)
        if replies:
            notes.append(f"Notes: median {median:g} words over {replies} notes calls; {cut} cut at the "
                         f"{NOTES_WORDS}-word cap before the answering call.")
    if PRUNED in present:
        notes += _pruning_notes(run, pruned_pair)
    notes += _prompt_note(keys)
    if _is_offline(run):
        notes.append(OFFLINE_NOTE.format(runs=run.pk))
    return ReportTable(COLUMNS, tuple(rows), _inputs(run, seed, draws),
                       digits={"mean": 4, "comparator mean": 4, "difference": 4, "95% low": 4, "95% high": 4},
                       signed=frozenset({"difference", "95% low", "95% high"}), notes=tuple(notes))


# App. K's representations, in Table 31's spirit: (label, condition), the reference first.
REPRESENTATIONS = (("screener-only reference", SCREENER_ONLY), ("concrete memory", MEMORY), ("trait memory", TRAIT),
                   ("combined profile of imputed scales", PROFILE), ("tags: 6-10 of the cohort's 40 most frequent labels", TAGS))
REPRESENTATION_COLUMNS = ("representation", "condition", "words (median)", "mean", "gain over screener-only",
                          "95% low", "95% high", "tasks", "people")


def representations(project, runs) -> ReportTable | Missing:
    """App. K run anew: each representation's mean normalized content score on the tasks graded under
    every representation the run has (the common set), its gain over the screener-only reference with a
    95% whole-person interval, and the median length in words of the written artifact (once per session)."""
    having = runs_with(runs, {SCREENER_ONLY, PROFILE})
    if not having:
        return Missing(f"no sealed, finished run has the combined profile ({PROFILE}) with the screener-only "
                       "reference", "representations")
    run = max(having, key=lambda run: run.pk)
    present = [(label, key) for label, key in REPRESENTATIONS if key in run.protocol.conditions]
    keys = tuple(key for _, key in present)
    seed, draws = _seed_draws(run)
    matrix = grade_matrix(run, keys)
    paired = paired_matrix(matrix.grades, matrix.task_ids, person=matrix.person)
    if paired.n_tasks == 0:
        return Missing(f"run {run.pk} has no task graded under every representation", "representations")
    lengths: dict[tuple, list[int]] = {}
    for kind, words, text in Memory.objects.filter(run=run, text__isnull=False).values_list("kind", "words", "text"):
        lengths.setdefault((kind, words), []).append(len(text.split()))
    shown_tags = dict(Prediction.objects.filter(run=run, condition=TAGS, label=FINAL, slot__isnull=False)
                      .values_list("task__session_id", "evidence"))  # one session's tags answer all its tasks
    lengths[TAGS] = [len(text.split()) for text in shown_tags.values()]
    people = int(np.unique(paired.person).size)
    reference = keys.index(SCREENER_ONLY)
    rows = []
    for index, (label, key) in enumerate(present):
        condition = CONDITIONS[key]
        counts = (lengths[TAGS] if key == TAGS else lengths.get((condition.memory_kind, condition.memory_words))
                  if condition.needs_memory else None)
        words = float(np.median(counts)) if counts else None
        mean = float(paired.grades[index].mean() / MAX_GRADE)
        if index == reference:
            rows.append((label, key, words, mean, None, None, None, paired.n_tasks, people))
            continue
        coefficients = [0] * len(keys)
        coefficients[index], coefficients[reference] = 1, -1
        result = paired_bootstrap(paired.person, paired.diff(coefficients), seed=seed, draws=draws)
        rows.append((label, key, words, mean, result.estimate, result.lo, result.hi, result.n_tasks, result.n_people))
    notes = [f"Run {run.pk} (App. K run anew; cohort {run.protocol.cohort_id}): {paired.n_tasks} tasks of {people} "
             f"people graded under every representation ({paired.lost} of {paired.planned} tasks lost). Not the "
             "paper's historical reanalysis (Tables 31-32): every representation here is written from the permitted "
             "record before the session's earliest target.",
             f"95% whole-person bootstrap intervals: {draws:,} PCG64 draws, seed {seed}, linear percentiles.",
             "Words: the median length of the written artifact, one per session (for the tags, the chosen tags).",
             *_prompt_note(keys)]
    if _is_offline(run):
        notes.append(OFFLINE_NOTE.format(runs=run.pk))
    return ReportTable(REPRESENTATION_COLUMNS, tuple(rows), _inputs(run, seed, draws),
                       digits={"words (median)": 0, "mean": 4, "gain over screener-only": 4, "95% low": 4,
                               "95% high": 4},
                       signed=frozenset({"gain over screener-only", "95% low", "95% high"}), notes=tuple(notes))
