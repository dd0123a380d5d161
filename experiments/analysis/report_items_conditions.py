"""The paper report's items on the evidence conditions: Table 15 (App. F's evidence × header
factorial), the dense retriever against BM25 (beyond the paper), and App. K's Tables 31 and 32 as
far as a run of this app can give them (representations against the screener-only reference, the
wrong-person control, concrete minus trait with the exclusion rule that needs no historical flags).
Each builder takes the project and its sealed, finished runs and returns a `ReportTable`, or
`Missing` naming the ready-made protocol (`core.paper_protocols`) that would produce it.

Each reads the latest run that has every condition it needs, its final grades
(`grades.grade_matrix`) on the tasks graded under all of them, and computes the whole-person
bootstrap (`stats.paired_bootstrap`) with the run's recorded seed and draws; the interaction is
`stats.grouping.interaction`. They run in the report's job, never in a page request.
"""
from __future__ import annotations

import numpy as np

from experiments.analysis.report_inputs import runs_with
from experiments.analysis.grades import grade_matrix
from experiments.core.conditions import CONDITIONS
from experiments.core.paper_protocols import (
    DENSE, FACTORIAL_CELLS, MEMORY, OWNWORDS, PAPER_PROTOCOLS, SCREENER_REFERENCE, WRONG_PERSON,
)
from experiments.core.prompt_provenance import written_here
from experiments.core.report_table import Missing, ReportInputs, ReportTable
from experiments.core.stats.grouping import interaction
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED, MAX_GRADE, paired_bootstrap, paired_matrix
from experiments.models import Task

OFFLINE = "offline"
OFFLINE_NOTE = ("Run {runs} used the offline stand-in as generator or judge: these numbers test the pipeline, "
                "they are not model results.")
EVIDENCE_LABELS = {"memory": "written memory", "excerpts": "question-free excerpts"}
HEADER_LABELS = {"memory": "memory header (E.6)", "raw": "raw-evidence header (E.7)"}
CONTRAST_COLUMNS = ("row", "evidence", "header", "condition", "mean", "difference", "95% low", "95% high",
                    "tasks", "people")


def _latest_with(runs, keys) -> object | None:
    """The latest interview run (highest pk) whose protocol has every condition in `keys`."""
    found = runs_with(runs, keys)
    return found[-1] if found else None


def _is_offline(run) -> bool:
    return OFFLINE in {(run.protocol.generator or {}).get("provider"), (run.protocol.judge or {}).get("provider")}


def _bootstrap_settings(run) -> tuple[int, int]:
    bootstrap = run.protocol.bootstrap or {}
    return int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))


def _inputs(run, seed: int, draws: int) -> ReportInputs:
    return ReportInputs(runs=(run.pk,), cohorts=(run.protocol.cohort_id,), seeds=(seed,), draws=draws,
                        offline_runs=(run.pk,) if _is_offline(run) else ())


def _common_set(run, keys):
    """The tasks graded under every condition of `keys`: the paired set, in cohort order."""
    matrix = grade_matrix(run, keys)
    return paired_matrix(matrix.grades, matrix.task_ids, person=matrix.person)


def _prompt_notes(keys) -> tuple[str, ...]:
    names = [name for key in keys if key in CONDITIONS for name in CONDITIONS[key].prompt_names()]
    ours = written_here(names)
    if not ours:
        return ()
    return ("Prompts written here, not the paper's (prompts/README.md): "
            + "; ".join(f"{name}: {what}" for name, what in ours.items()) + ".",)


def _contrast_row(label, paired, coefficients, seed, draws, diff=None) -> tuple:
    diff = paired.diff(coefficients) if diff is None else diff
    result = paired_bootstrap(paired.person, diff, seed=seed, draws=draws)
    return (label, None, None, None, None, result.estimate, result.lo, result.hi, result.n_tasks, result.n_people)


def _people(paired) -> int:
    return int(np.unique(paired.person).size)


def table15(project, runs) -> ReportTable | Missing:
    """Table 15: the four cells' mean normalized content scores on the tasks graded in all four,
    then the evidence and header main effects, the interaction, and raw-header excerpts minus the
    memory one-shot, each with its 95% whole-person interval."""
    cells = FACTORIAL_CELLS
    keys = tuple(cells.values())
    run = _latest_with(runs, keys)
    if run is None:
        return Missing("no sealed, finished run has all four cells of the evidence × header factorial "
                       f"({', '.join(keys)})", "factorial")
    seed, draws = _bootstrap_settings(run)
    paired = _common_set(run, keys)
    if paired.n_tasks == 0:
        return Missing(f"run {run.pk} has no task graded in all four cells", "factorial")
    index = {cell: keys.index(key) for cell, key in cells.items()}
    rows = []
    for (evidence, header), key in cells.items():
        mean = float(paired.grades[index[evidence, header]].mean() / MAX_GRADE)
        rows.append((f"{EVIDENCE_LABELS[evidence]}, {HEADER_LABELS[header]}", EVIDENCE_LABELS[evidence],
                     HEADER_LABELS[header], key, mean, None, None, None, paired.n_tasks, _people(paired)))

    def coefficients(terms: dict) -> tuple:
        return tuple(terms.get(cell, 0) for cell in cells)
    half = 0.5
    rows.append(_contrast_row("evidence: excerpts − memory (mean over headers)", paired, coefficients({
        ("excerpts", "memory"): half, ("excerpts", "raw"): half, ("memory", "memory"): -half, ("memory", "raw"): -half}),
        seed, draws))
    rows.append(_contrast_row("header: raw-evidence − memory (mean over evidence)", paired, coefficients({
        ("memory", "raw"): half, ("excerpts", "raw"): half, ("memory", "memory"): -half, ("excerpts", "memory"): -half}),
        seed, draws))
    by_task = [dict(zip(paired.keys, paired.grades[index[cell]])) for cell in
               (("excerpts", "raw"), ("memory", "raw"), ("excerpts", "memory"), ("memory", "memory"))]
    person = dict(zip(paired.keys, paired.person))
    four, diff = interaction(*by_task, person=person)
    rows.append(_contrast_row("interaction: (excerpts − memory, raw-evidence header) − (excerpts − memory, "
                              "memory header)", four, None, seed, draws, diff=diff))
    rows.append(_contrast_row("excerpts, raw-evidence header − memory one-shot", paired,
                              coefficients({("excerpts", "raw"): 1, ("memory", "memory"): -1}), seed, draws))
    notes = (
        f"Run {run.pk} ({PAPER_PROTOCOLS['factorial'].section}): {paired.n_tasks} tasks of {_people(paired)} people "
        f"graded in all four cells ({paired.lost} of {paired.planned} planned tasks lost); every cell is one "
        "generation call at the same per-task character budget B = |memory|.",
        f"95% whole-person bootstrap intervals: {draws:,} PCG64 draws, seed {seed}, linear percentiles.",
        "Question-free excerpts: OwnWords with the source's twelve most frequent content words as the query "
        "(App. F), so the factorial compares two evidence constructions under common headers.",
        *_prompt_notes(keys),
        *((OFFLINE_NOTE.format(runs=run.pk),) if _is_offline(run) else ()),
    )
    return ReportTable(CONTRAST_COLUMNS, tuple(rows), _inputs(run, seed, draws),
                       digits={"mean": 4, "difference": 4, "95% low": 4, "95% high": 4},
                       signed=frozenset({"difference", "95% low", "95% high"}), notes=notes)


def dense_vs_bm25(project, runs) -> ReportTable | Missing:
    """Beyond the paper: OwnWords (BM25) against the dense ranker on the same path, at B = |memory|,
    and each against the memory one-shot when the run has it; means on the common tasks, then the
    differences with 95% whole-person intervals."""
    run = _latest_with(runs, (OWNWORDS, DENSE))
    if run is None:
        return Missing(f"no sealed, finished run has both {OWNWORDS} and {DENSE} (not an item of the paper)",
                       "dense-vs-bm25")
    keys = (MEMORY, OWNWORDS, DENSE) if MEMORY in run.protocol.conditions else (OWNWORDS, DENSE)
    seed, draws = _bootstrap_settings(run)
    paired = _common_set(run, keys)
    if paired.n_tasks == 0:
        return Missing(f"run {run.pk} has no task graded under {', '.join(keys)}", "dense-vs-bm25")
    labels = {MEMORY: "written memory (one-shot)", OWNWORDS: "OwnWords (BM25)", DENSE: "dense (MiniLM cosine)"}
    rows = [(labels[key], None, None, key, float(paired.grades[i].mean() / MAX_GRADE), None, None, None,
             paired.n_tasks, _people(paired)) for i, key in enumerate(keys)]
    pairs = [("dense − OwnWords (BM25)", DENSE, OWNWORDS)]
    if MEMORY in keys:
        pairs += [("dense − memory", DENSE, MEMORY), ("OwnWords − memory", OWNWORDS, MEMORY)]
    for label, first, second in pairs:
        coefficients = tuple(1 if key == first else -1 if key == second else 0 for key in keys)
        rows.append(_contrast_row(label, paired, coefficients, seed, draws))
    notes = (
        "Not in the paper: the dense retriever is the future work its limitations name. Both retrievers share "
        "OwnWords's segmentation, record, budget, greedy fill in temporal order, no-fit fallback and "
        "\"source fits\" branch; only the ranker differs.",
        f"Run {run.pk}: {paired.n_tasks} tasks of {_people(paired)} people graded under {len(keys)} conditions "
        f"({paired.lost} of {paired.planned} planned tasks lost). 95% whole-person bootstrap intervals: "
        f"{draws:,} PCG64 draws, seed {seed}, linear percentiles.",
        *(f"The seal names the embedding model: {name}." for name in run.protocol.seal.get("prompts", {})
          if name.startswith("dense ranker")),
        *_prompt_notes(keys),
        *((OFFLINE_NOTE.format(runs=run.pk),) if _is_offline(run) else ()),
    )
    return ReportTable(CONTRAST_COLUMNS, tuple(rows), _inputs(run, seed, draws),
                       digits={"mean": 4, "difference": 4, "95% low": 4, "95% high": 4},
                       signed=frozenset({"difference", "95% low", "95% high"}), notes=notes)


TRAIT = "memory(trait,100w)+one-shot"
PROFILE = "memory(profile,100w)+one-shot"  # App. K's combined profile, where this installation has it
REPRESENTATIONS = {MEMORY: "concrete memory", TRAIT: "trait memory", PROFILE: "combined profile"}
K_COLUMNS = ("row", "condition", "mean", "difference", "95% low", "95% high", "tasks", "people")
K_DIGITS = {"mean": 6, "difference": 6, "95% low": 6, "95% high": 6}  # App. K prints six decimals


def _k_rows(run, keys, labels, pairs):
    """Means of `keys` on their common tasks, then each (label, first, second) difference with its interval."""
    seed, draws = _bootstrap_settings(run)
    paired = _common_set(run, keys)
    if paired.n_tasks == 0:
        return paired, []
    rows = [(labels[key], key, float(paired.grades[i].mean() / MAX_GRADE), None, None, None, paired.n_tasks,
             _people(paired)) for i, key in enumerate(keys)]
    for label, first, second in pairs:
        coefficients = tuple(1 if key == first else -1 if key == second else 0 for key in keys)
        result = paired_bootstrap(paired.person, paired.diff(coefficients), seed=seed, draws=draws)
        rows.append((label, None, None, result.estimate, result.lo, result.hi, result.n_tasks, result.n_people))
    return paired, rows


def _runs_inputs(used) -> ReportInputs:
    settings = [_bootstrap_settings(run) for run in used]
    return ReportInputs(runs=tuple(run.pk for run in used),
                        cohorts=tuple(dict.fromkeys(run.protocol.cohort_id for run in used)),
                        seeds=tuple(dict.fromkeys(seed for seed, _ in settings)),
                        draws=settings[0][1] if len({d for _, d in settings}) == 1 else None,
                        offline_runs=tuple(run.pk for run in used if _is_offline(run)))


def table31(project, runs) -> ReportTable | Missing:
    """Table 31 anew: each representation's mean and its gain over the screener-only reference on
    their common tasks (concrete and trait memories, the combined profile where a run has it), and
    App. K's control on its own intersection: own memory, a wrong person's, the screener reference
    and own minus wrong person. The paper's numbers are reanalyses of old outputs; these are new runs."""
    rep_run = _latest_with([r for r in runs if sum(k in r.protocol.conditions for k in REPRESENTATIONS) >= 2],
                           (SCREENER_REFERENCE,))
    control_run = _latest_with(runs, (MEMORY, WRONG_PERSON, SCREENER_REFERENCE))
    if rep_run is None and control_run is None:
        return Missing("no sealed, finished run has the screener-only reference with two representations "
                       "(template representations) or the wrong-person control (template wrong-person)", "wrong-person")
    rows, used, notes = [], [], []
    if rep_run is not None:
        keys = (SCREENER_REFERENCE, *(k for k in REPRESENTATIONS if k in rep_run.protocol.conditions))
        labels = {SCREENER_REFERENCE: "screener-only reference", **REPRESENTATIONS}
        paired, part = _k_rows(rep_run, keys, labels,
                               [(f"{REPRESENTATIONS[k]} − screener-only", k, SCREENER_REFERENCE) for k in keys[1:]])
        rows += part
        used.append(rep_run)
        notes.append(f"Representations: run {rep_run.pk}, {paired.n_tasks} tasks of {_people(paired) if part else 0} "
                     f"people graded under all {len(keys)} conditions (the common set).")
    if control_run is not None:
        labels = {MEMORY: "own concrete memory", WRONG_PERSON: "wrong person's concrete memory",
                  SCREENER_REFERENCE: "screener-only reference"}
        paired, part = _k_rows(control_run, (MEMORY, WRONG_PERSON, SCREENER_REFERENCE), labels,
                               [("own − wrong person", MEMORY, WRONG_PERSON)])
        rows += part
        used += [control_run] if control_run not in used else []
        notes.append(f"Wrong-person control: run {control_run.pk}, {paired.n_tasks} tasks on the control intersection; "
                     "each session is shown another cohort member's memory (a seeded derangement across people, its "
                     "seed in the condition's key). The control reflects both own-person information and harm from "
                     "irrelevant narratives.")
    if not rows:
        return Missing("the runs with these conditions have no task graded under all of them", "wrong-person")
    inputs = _runs_inputs(used)
    settings = ", ".join(f"run {r.pk}: seed {seed}, {draws:,} draws"
                         for r, (seed, draws) in zip(used, map(_bootstrap_settings, used)))
    notes += [f"95% whole-person bootstrap intervals with each run's seed and draws ({settings}), linear percentiles.",
              "The paper's Table 31 is a reanalysis of historical outputs; these rows are new runs of the app.",
              *_prompt_notes([key for run in used for key in run.protocol.conditions if key in CONDITIONS])]
    if inputs.offline_runs:
        notes.append(OFFLINE_NOTE.format(runs=", ".join(map(str, inputs.offline_runs))))
    return ReportTable(K_COLUMNS, tuple(rows), inputs, digits=K_DIGITS,
                       signed=frozenset({"difference", "95% low", "95% high"}), notes=tuple(notes))


def table32(project, runs) -> ReportTable | Missing:
    """Table 32 as far as a new run gives it: concrete minus trait memory on all tasks, and without
    the people who have more than one session in the cohort (the first of App. K's two fixed
    exclusion rules). The second rule (people flagged for historical source risk) needs the
    historical provenance flags, which no run of this app has: it is said, not computed."""
    run = _latest_with(runs, (MEMORY, TRAIT))
    if run is None:
        return Missing(f"no sealed, finished run has both {MEMORY} and {TRAIT}", "common")
    seed, draws = _bootstrap_settings(run)
    matrix = grade_matrix(run, (MEMORY, TRAIT))
    session_of = dict(Task.objects.filter(pk__in=matrix.task_ids.tolist()).values_list("pk", "session_id"))
    sessions: dict = {}
    for task_id, person in zip(matrix.task_ids.tolist(), matrix.person.tolist()):
        sessions.setdefault(person, set()).add(session_of[task_id])
    single = np.array([len(sessions[p]) == 1 for p in matrix.person.tolist()], dtype=bool)
    rows = []
    for label, kept in (("all tasks", np.ones(len(single), dtype=bool)),
                        ("without people with more than one session", single)):
        paired = paired_matrix(matrix.grades[:, kept], matrix.task_ids[kept], person=matrix.person[kept])
        if paired.n_tasks == 0:
            rows.append((label, None, None, None, 0, 0))
            continue
        result = paired_bootstrap(paired.person, paired.diff((1, -1)), seed=seed, draws=draws)
        rows.append((label, result.estimate, result.lo, result.hi, result.n_tasks, result.n_people))
    rows.append(("without the historical source-risk people", None, None, None, None, None))
    notes = (f"Run {run.pk}: concrete − trait memory, one-shot; 95% whole-person bootstrap intervals, {draws:,} PCG64 "
             f"draws, seed {seed}, linear percentiles.",
             "The paper's Table 32 reanalyses old predictions; the source-risk exclusion needs their provenance flags, "
             "which no run of this app has, so that row is empty.",
             *((OFFLINE_NOTE.format(runs=run.pk),) if _is_offline(run) else ()))
    return ReportTable(("exclusion", "concrete − trait", "95% low", "95% high", "tasks", "people"), tuple(rows),
                       _inputs(run, seed, draws), digits={"concrete − trait": 6, "95% low": 6, "95% high": 6},
                       signed=frozenset({"concrete − trait", "95% low", "95% high"}), notes=notes)
