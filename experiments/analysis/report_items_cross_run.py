"""Paper-report items that read several runs or the condition registry (`core.report_table` values):

- `table1`: Table 1, OwnWords against memory systems on one run, with the context each condition
  actually received in units of B (the concrete memory's length, measured from the run's stored
  evidence: the mean over tasks of evidence characters / B) and the calls per answer (from the
  registry, `core.information_matrix`);
- `table4`: Table 4, what each registered condition sees (no run needed);
- `table16`: Table 16, OwnWords minus each design of Tables 1 and 2 and the no-budget reference,
  per cohort;
- `table30` and `figure3a`: Table 30 and Figure 3a, history minus question alone per generator,
  across runs whose sealed protocols differ only in the generator.

Signature of each: `NAME(project, runs)`, `runs` the project's sealed, finished runs in pk order.
They read the runs' cached dashboards (`analysis.dashboard`); a difference no run planned is
computed with the whole-person bootstrap at the run's seed and draws when that is cheap
(`core.cross_run_tables`). Numbers only: no participant text is read or returned.
"""
from __future__ import annotations

from django.db.models import Avg, Count, FloatField, OuterRef, Subquery
from django.db.models.functions import Cast, Length

from experiments.analysis.dashboard import dashboard_cached_with_grades
from experiments.core import cross_run_tables as shape
from experiments.core.conditions import CONCRETE, CONDITIONS, DEFAULT_MEMORY_WORDS, FINAL
from experiments.core.information_matrix import COLUMNS as TABLE4_COLUMNS
from experiments.core.information_matrix import NOT_CLASSIFIED, calls_per_answer, information_rows, paper_conditions
from experiments.core.report_format import display_rows
from experiments.core.report_table import Missing, ReportFigure, ReportInputs, ReportTable
from experiments.models import CohortTask, Memory, Prediction, Run

OWNWORDS = "ownwords(B=|memory|)"
MEMORY = "memory(concrete,100w)+one-shot"
MEM0 = "mem0(B=|memory|)"
MEMGPT = "memgpt-style(B=|memory|)"
WHOLE_RECORD = "whole-record"
QUESTION_ONLY = "question-only"
# The history conditions of Table 30, in order of preference: the interview up to the question
# (both speakers), else the permitted record; each also sees the screener.
HISTORY = ("current-dialogue", "whole-record")

TABLE1_METHODS = (("Written memory", MEMORY), ("Mem0 as deployed", MEM0), ("MemGPT-style", MEMGPT),
                  ("Whole record (no budget)", WHOLE_RECORD))
TABLE16_DESIGNS = (("Written memory", MEMORY), ("Mem0 as deployed", MEM0), ("MemGPT-style", MEMGPT),
                   ("Most recent sentences †", "recency(B=|memory|)"), ("Memory + OwnWords", "memory+ownwords"),
                   ("Memory + whole record", "memory+whole-record"),
                   ("No budget: whole record (−Gap(B))", WHOLE_RECORD))
ANSWERED = (Prediction.Status.OK, Prediction.Status.EMPTY)
STAND_IN = "Offline stand-in: {runs} answered and graded by the deterministic offline backend, not by a model."


def _is_offline(run: Run) -> bool:
    protocol = run.protocol
    return "offline" in (protocol.generator.get("provider"), protocol.judge.get("provider"))


def _interview_runs(runs) -> list[Run]:
    return [run for run in runs if run.protocol.kind == "interview" and run.status == Run.Status.FINISHED]


class _Numbers:
    """A run's cached dashboard payload and its grade matrix, read once per builder."""

    def __init__(self, compute: bool = True):
        self._cache: dict[int, tuple[dict | None, object]] = {}
        self.compute = compute  # False: cached differences only (a page never runs a bootstrap)

    def of(self, run: Run) -> tuple[dict | None, object]:
        if run.pk not in self._cache:
            result, matrix = dashboard_cached_with_grades(run)
            self._cache[run.pk] = (result.payload if result else None, matrix)
        return self._cache[run.pk]

    def inputs(self, run: Run) -> ReportInputs:
        payload = self.of(run)[0] or {}
        return ReportInputs(runs=(run.pk,), cohorts=(run.protocol.cohort_id,),
                            seeds=(payload["seed"],) if "seed" in payload else (), draws=payload.get("draws"),
                            offline_runs=(run.pk,) if _is_offline(run) else ())

    def difference(self, run: Run, a: str, b: str) -> shape.Difference | str | None:
        """a − b on the run: its planned contrast, else computed from its grades when cheap."""
        payload, matrix = self.of(run)
        planned = shape.planned_difference(payload["contrasts"], a, b)
        if planned is not None:
            return planned
        if a not in matrix.conditions or b not in matrix.conditions:
            return None
        if not self.compute:
            return f"not planned by run {run.pk}: the paper report computes it"
        return shape.computed_difference(matrix.row(a), matrix.row(b), matrix.task_ids, matrix.person,
                                         seed=payload["seed"], draws=payload["draws"])

    def mean(self, run: Run, condition: str) -> float | None:
        payload = self.of(run)[0]
        return next((m["mean"] for m in payload["means"] if m["condition"] == condition), None)


def measured_context(run: Run, conditions) -> dict[str, tuple[float, int]]:
    """condition → (mean over answered tasks of evidence characters / B, tasks), B the length of
    the session's concrete 100-word memory in this run; tasks without that memory are left out."""
    b = (Memory.objects.filter(run=OuterRef("run"), session=OuterRef("task__session"), kind=CONCRETE,
                               words=DEFAULT_MEMORY_WORDS)
         .annotate(n=Length("text")).values("n")[:1])
    rows = (Prediction.objects.filter(run=run, label=FINAL, condition__in=list(conditions), status__in=ANSWERED)
            .annotate(b=Subquery(b)).filter(b__gt=0).values("condition")
            .annotate(ratio=Avg(Cast("evidence_chars", FloatField()) / Cast("b", FloatField())), tasks=Count("pk"))
            .order_by("condition"))
    return {row["condition"]: (row["ratio"], row["tasks"]) for row in rows}


def _calls(condition: str) -> str | None:
    return calls_per_answer(CONDITIONS[condition]) if condition in CONDITIONS else None


def _stand_in_note(inputs: ReportInputs) -> tuple[str, ...]:
    runs = inputs.offline_runs
    named = f"run {runs[0]} was" if len(runs) == 1 else f"runs {', '.join(map(str, runs))} were"
    return (STAND_IN.format(runs=named),) if runs else ()


def _stale(run: Run) -> Missing:
    return Missing(f"run {run.pk}'s dashboard is not computed for its current grades: refresh its analysis "
                   "(manage.py analysis_refresh) and rebuild the report")


# --- Table 1 ------------------------------------------------------------------------------------

def table1(project, runs, *, compute: bool = True) -> ReportTable | Missing:
    """Table 1 on the run with OwnWords and the most of its methods (earliest on a tie); `compute`
    False leaves out a difference the run did not plan instead of bootstrapping it."""
    candidates = [r for r in _interview_runs(runs) if OWNWORDS in r.protocol.conditions
                  and any(c in r.protocol.conditions for _, c in TABLE1_METHODS)]
    if not candidates:
        return Missing("no finished run has OwnWords at B = |memory| with the written memory or a memory system",
                       "memory-systems")
    run = max(candidates, key=lambda r: (sum(c in r.protocol.conditions for _, c in TABLE1_METHODS), -r.pk))
    numbers = _Numbers(compute)
    if numbers.of(run)[0] is None:
        return _stale(run)
    conditions = run.protocol.conditions
    context = measured_context(run, [OWNWORDS, *(c for _, c in TABLE1_METHODS)])
    rows = [shape.MethodRow("OwnWords", OWNWORDS, context.get(OWNWORDS, (None,))[0], _calls(OWNWORDS),
                            numbers.mean(run, OWNWORDS))]
    for label, condition in TABLE1_METHODS:
        if condition not in conditions:
            rows.append(shape.MethodRow(label, None, None, _calls(condition), None, why_missing=f"not in run {run.pk}"))
            continue
        difference = numbers.difference(run, OWNWORDS, condition)
        why = difference if isinstance(difference, str) else "" if difference else "no task graded under both"
        rows.append(shape.MethodRow(label, condition, context.get(condition, (None,))[0], _calls(condition),
                                    numbers.mean(run, condition),
                                    difference if isinstance(difference, shape.Difference) else None, why))
    inputs = numbers.inputs(run)
    tasks = numbers.of(run)[0]["planned_tasks"]
    notes = (f"Run {run.pk} ({run.protocol.name}), cohort {run.protocol.cohort.name}: "
             f"{_people(run.protocol.cohort_id)} people, {tasks} tasks. "
             "Difference: OwnWords minus the method, paired, 95% whole-person interval; excludes 0: the paper's bold.",
             "Context: characters of personal evidence the condition received, in units of B (the session's "
             "concrete 100-word memory), mean over answered tasks; composite evidence counts its blank-line "
             "separator. Calls per answer from the condition registry; (+1): one more call per session to "
             "write the memory or Mem0's store. All methods also see the screener and question.",
             *_stand_in_note(inputs))
    return shape.table1(rows, inputs, notes)


# --- Table 4 ------------------------------------------------------------------------------------

def table4(project, runs) -> ReportTable:
    """Table 4 for every registered condition, the paper's first (needs no run)."""
    ours = paper_conditions()
    rows = information_rows()
    beyond = [r[0] for r in rows if r[0] not in ours]
    other, reference = TABLE4_COLUMNS.index("Another person's data"), TABLE4_COLUMNS.index("Reference answer")
    notes = ("Derived from the condition registry and the answering prompts' fields, not typed per condition.",)
    if all(r[reference] == "no" for r in rows):
        notes += ("No condition receives the reference answer (only the judge does).",)
    if all(r[other] == "no" for r in rows):
        notes += ("No condition receives another person's data.",)
    elif any(r[other] == NOT_CLASSIFIED for r in rows):
        notes += (f"{NOT_CLASSIFIED}: an evidence construction the table's rules do not know yet "
                  "(core.information_matrix.EVIDENCE_SEES); read its builder.",)
    if beyond:
        notes += (f"After the paper's conditions: {len(beyond)} further registered conditions.",)
    return ReportTable(TABLE4_COLUMNS, tuple(rows), ReportInputs(), notes=notes)


# --- Table 16 -----------------------------------------------------------------------------------

def _people(cohort_id: int) -> int:
    return (CohortTask.objects.filter(cohort_id=cohort_id).values("task__session__person_id").distinct().count())


def table16(project, runs, *, compute: bool = True) -> ReportTable | Missing:
    """Designs × cohorts: for each cohort, the run on it with OwnWords and the design (one that
    planned the pair first, then the earliest)."""
    with_ownwords = [r for r in _interview_runs(runs) if OWNWORDS in r.protocol.conditions]
    if not with_ownwords:
        return Missing("no finished run has OwnWords at B = |memory|", "memory-systems")
    numbers = _Numbers(compute)
    fresh = [r for r in with_ownwords if numbers.of(r)[0] is not None]
    if not fresh:
        return _stale(with_ownwords[0])
    cohorts, entries, used, lengths, skipped = {}, {}, {}, {}, []
    for run in fresh:
        cohort = run.protocol.cohort
        if cohort.pk not in cohorts:
            cohorts[cohort.pk] = shape.CohortColumn(cohort.pk, cohort.name, _people(cohort.pk))
    for _, design in TABLE16_DESIGNS:
        for cohort_id in cohorts:
            on_cohort = [r for r in fresh if r.protocol.cohort_id == cohort_id and design in r.protocol.conditions]
            planned = [r for r in on_cohort
                       if shape.planned_difference(numbers.of(r)[0]["contrasts"], OWNWORDS, design)]
            for run in planned + [r for r in on_cohort if r not in planned]:
                difference = numbers.difference(run, OWNWORDS, design)
                if isinstance(difference, shape.Difference):
                    entries[design, cohort_id] = (difference, run.pk)
                    used[run.pk] = run
                    break
                if isinstance(difference, str):
                    skipped.append(f"{design}, run {run.pk}: {difference}")
    for run in used.values():
        for condition, (ratio, tasks) in measured_context(run, [c for _, c in TABLE16_DESIGNS]).items():
            total, count = lengths.get(condition, (0.0, 0))
            lengths[condition] = (total + ratio * tasks, count + tasks)
    designs = [(label, design, lengths[design][0] / lengths[design][1] if design in lengths else None,
                _calls(design)) for label, design in TABLE16_DESIGNS]
    inputs = shape.merged_inputs([numbers.inputs(r) for r in used.values()]) if used else ReportInputs()
    notes = ("Entries: OwnWords minus the row's design, mean normalized content score (positive: OwnWords higher); "
             "excludes 0: the 95% whole-person interval excludes zero (the paper's bold); –: not run. Length: "
             "characters of personal evidence in units of B, mean over answered tasks. OwnWords itself uses ≤ B "
             "and 1 call.",
             *skipped, *_stand_in_note(inputs))
    return shape.table16(designs, list(cohorts.values()), entries, inputs, notes)


# --- Table 30 and Figure 3a ---------------------------------------------------------------------

def _settings(run: Run) -> dict:
    """What a sealed protocol fixes besides how its calls are paced (`core.cross_run_tables`)."""
    protocol, seal = run.protocol, run.protocol.seal or {}
    return {"kind": protocol.kind, "cohort": protocol.cohort_id, "task_list": seal.get("task_list_sha256"),
            "prompts": seal.get("prompts"), "conditions": sorted(protocol.conditions), "judge": protocol.judge,
            "contrasts": protocol.contrasts, "bootstrap": protocol.bootstrap, "criteria": protocol.criteria}


def table30(project, runs, *, compute: bool = True) -> ReportTable | Missing:
    """History minus question alone per generator configuration, on the largest group of runs whose
    sealed protocols differ only in the generator."""
    candidates = [r for r in _interview_runs(runs) if QUESTION_ONLY in r.protocol.conditions
                  and any(h in r.protocol.conditions for h in HISTORY)]
    if not candidates:
        return Missing("no finished run has question-only with the current dialogue or the whole record",
                       "history-benchmark")
    group = shape.generator_group([{"run": r, "settings": _settings(r), "generator": r.protocol.generator}
                                   for r in candidates])
    if not group:
        return Missing("no two finished runs with question-only and a history condition differ only in the "
                       "generator (same cohort, conditions, prompts, judge and analysis)", "history-benchmark")
    members = [m["run"] for m in group]
    history = next(h for h in HISTORY if h in members[0].protocol.conditions)
    numbers = _Numbers(compute)
    rows = []
    for run in members:
        if numbers.of(run)[0] is None:
            return _stale(run)
        difference = numbers.difference(run, history, QUESTION_ONLY)
        rows.append((shape.generator_label(run.protocol.generator), run.pk, numbers.mean(run, history),
                     numbers.mean(run, QUESTION_ONLY), difference if isinstance(difference, shape.Difference) else None))
    inputs = shape.merged_inputs([numbers.inputs(r) for r in members])
    notes = (f"History: {history} (with the screener); question alone: {QUESTION_ONLY} (no screener). "
             f"Runs {', '.join(str(r.pk) for r in members)} share the cohort {members[0].protocol.cohort.name}, "
             "conditions, prompts, judge and analysis settings; only the generator differs.",
             *_stand_in_note(inputs))
    return shape.table30(rows, inputs, notes)


def figure3a(project, runs) -> ReportFigure | Missing:
    """Figure 3a: Table 30's differences as bars with their intervals."""
    table = table30(project, runs)
    if isinstance(table, Missing):
        return table
    return ReportFigure(shape.figure3a(table), table)


PAGE_TABLES = (("Table 1", "OwnWords against memory systems at the memory's length", table1),
               ("Table 16", "Tables 1 and 2, plus the no-budget reference, by cohort", table16),
               ("Table 30", "History and screener against the question alone, per generator", table30))


def page_tables(project, runs) -> list[dict]:
    """Tables 1, 16 and 30 of the chosen finished runs, for the project tables page: cached numbers
    only (a difference no run planned is left out with a note), each as {id, title, table JSON}."""
    finished = _interview_runs(runs)
    shown = []
    for item, title, builder in PAGE_TABLES:
        built = builder(project, finished, compute=False)
        if isinstance(built, ReportTable):
            table = built.as_json()
            shown.append({"id": item, "title": title, "table": table, "cells": display_rows(table)})
    return shown
