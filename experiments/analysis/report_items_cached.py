"""The paper report's items that the app already computes and caches: each `build(project, runs)` reads
a run's dashboard (AnalysisResult), robustness tables (TablesResult) or pools (PoolAnalysisResult)
and shapes the paper's table from it, in its column order; never a bootstrap.

A run is picked by its conditions (`report_inputs.template_runs`): the latest finished run of the
ready-made protocol an item needs, or a Missing naming that protocol. The figures are in
`report_items_cached_figures` and answer to this module's names too.
"""
from __future__ import annotations

from experiments.analysis.report_inputs import (
    cached, find_contrast, inputs_of, mean_row, needs, not_cached, oriented, runs_with, template_runs,
)
from experiments.analysis.report_items_cached_figures import (  # noqa: F401 - the catalog names them here
    figure1, figure3b, figure3c, figure4, figure5, figure6, figure7, figure8, figure11,
)
from experiments.core.conditions import CURRENT_DIALOGUE, WHOLE_RECORD, get_condition
from experiments.core.paper_protocols import (
    MEMORY, MEMORY_PLUS_OWNWORDS, OWNWORDS, PAPER_PROTOCOLS, WHOLE_RECORD as WHOLE_RECORD_KEY,
)
from experiments.core.report_table import Missing, ReportTable

D4 = 4
INTERVAL = ("95% lo", "95% hi")


def _common(runs, name: str = "dashboard"):
    """(run, payload) of the latest common-experiment run, or (None, Missing)."""
    found = template_runs(runs, "common")
    if not found:
        return None, needs("common", "the common memory-by-workflow experiment (`common`)")
    run = found[-1]
    payload = cached(run, name)
    return (run, payload) if payload is not None else (None, not_cached(run, name, "common"))


def _digits(columns, *, signed=(), counts=()) -> tuple[dict, frozenset]:
    return {c: D4 for c in columns if c not in counts}, frozenset(signed)


def _table(columns, rows, runs, *, signed=(), counts=(), notes=()) -> ReportTable:
    digits, signed = _digits(columns, signed=signed, counts=counts)
    return ReportTable(columns=tuple(columns), rows=tuple(tuple(r) for r in rows), inputs=inputs_of(runs),
                       digits=digits, signed=signed, notes=tuple(notes))


# ---- main text ----------------------------------------------------------------------------------

TABLE2_ROWS = (("written memory", MEMORY), ("most recent sentences", "recency(B=|memory|)"),
               ("memory + OwnWords", MEMORY_PLUS_OWNWORDS), ("whole record, no budget (−Gap(B))", WHOLE_RECORD_KEY))


def table2(project, runs):
    """OwnWords minus each compared procedure, from the latest run that planned that contrast."""
    columns = ("Compared procedure", "Run", "OwnWords − procedure", *INTERVAL, "Tasks", "People")
    rows, used, absent = [], [], []
    for label, other in TABLE2_ROWS:
        for run in reversed(runs_with(runs, {OWNWORDS, other})):
            contrast, sign = find_contrast(cached(run, "dashboard"), OWNWORDS, other)
            if contrast is not None:
                rows.append((label, run.pk, *oriented(contrast, sign), contrast.get("n_tasks"), contrast.get("people")))
                used.append(run)
                break
        else:
            absent.append(label)
    if not rows:
        return needs("memory-systems", "the memory-systems comparison (`memory-systems`) or the budget sweep")
    notes = [f"not run yet: {', '.join(absent)}"] if absent else []
    return _table(columns, rows, used, signed=("OwnWords − procedure", *INTERVAL), counts=("Run", "Tasks", "People"),
                  notes=notes)


# ---- App. B -------------------------------------------------------------------------------------

def _means_table(run, payload, conditions=None):
    columns = ("Condition", "Mean", *INTERVAL, "Graded", "Planned", "People")
    rows = [(m["condition"], m["mean"], m["lo"], m["hi"], m["graded"], m["planned"], m.get("people"))
            for m in payload["means"] if conditions is None or m["condition"] in conditions]
    return _table(columns, rows, [run], counts=("Graded", "Planned", "People"))


def table5(project, runs):
    run, payload = _common(runs)
    return payload if run is None else _means_table(run, payload)


def table6(project, runs):
    """The common experiment's conditions, from the condition registry (a design, not a result)."""
    columns = ("Condition", "Evidence", "Memory", "Workflow", "Candidates", "Budget")
    rows = []
    for key in PAPER_PROTOCOLS["common"].conditions:
        c = get_condition(key)
        rows.append((key, c.evidence, c.memory_kind or "–", c.workflow, c.candidates, str(c.budget or "–")))
    found = template_runs(runs, "common")
    return _table(columns, rows, found[-1:], counts=("Candidates",),
                  notes=("the design of App. B.2, from the condition registry; with each memory, the one-shot is "
                         "the first of the three candidates (b0)",))


def _contrast_rows(contrasts):
    return [(c["name"], c.get("estimate"), c.get("lo"), c.get("hi"), c.get("family_lo"), c.get("family_hi"),
             c.get("wins"), c.get("ties"), c.get("losses"), c.get("n_tasks"), c.get("people"),
             None if c.get("criterion_met") is None else ("met" if c["criterion_met"] else "not met"))
            for c in contrasts]


CONTRAST_COLUMNS = ("Contrast", "Estimate", *INTERVAL, "Family lo", "Family hi", "Wins", "Ties", "Losses", "Tasks",
                    "People", "Criterion")
CONTRAST_SIGNED = ("Estimate", *INTERVAL, "Family lo", "Family hi")
CONTRAST_COUNTS = ("Wins", "Ties", "Losses", "Tasks", "People", "Criterion", "Contrast")


def table7(project, runs):
    run, payload = _common(runs)
    if run is None:
        return payload
    family = [c for c in payload["contrasts"] if c.get("family")]
    if not family:
        return needs("common", "a common experiment with its planned family")
    return _table(CONTRAST_COLUMNS, _contrast_rows(family), [run], signed=CONTRAST_SIGNED, counts=CONTRAST_COUNTS,
                  notes=("pointwise 95% and Bonferroni family intervals from the same whole-person draws",))


def _pools(runs):
    run, payload = _common(runs, "pools")
    if run is None:
        return None, payload
    if not payload.get("diagnostics"):
        return None, needs("common", "a common experiment with fusion and selection pools")
    return run, payload


def table9(project, runs):
    run, payload = _pools(runs)
    if run is None:
        return payload
    columns = ("Pool", "Picker", "Mean", "Picker − candidate mean", *INTERVAL, "Wins", "Ties", "Losses", "Tasks",
               "People")
    rows = []
    for table in payload["pickers"]:
        for r in table["rows"]:
            versus = next((c for c in r["contrasts"] if c["versus"] == "candidate mean"), None)
            if versus is not None:
                rows.append((table["pool"], r["picker"], r.get("mean_estimate"), versus.get("estimate"),
                             versus.get("lo"), versus.get("hi"), versus.get("wins"), versus.get("ties"),
                             versus.get("losses"), versus.get("n_tasks"), versus.get("people")))
    return _table(columns, rows, [run], signed=("Picker − candidate mean", *INTERVAL),
                  counts=("Wins", "Ties", "Losses", "Tasks", "People"),
                  notes=("candidate mean: the mean of b0, b1 and b2 for that task and memory",))


def table10(project, runs):
    run, payload = _pools(runs)
    if run is None:
        return payload
    columns = ("Pool", "Tasks", "Complete pools", "All equal", "All zero", "Unequal", "Score matches (all)",
               "Scored (all)", "Score matches (unequal)", "Scored (unequal)")
    rows = []
    for d in payload["diagnostics"]:
        every, unequal = (d["oracle_match"] + [{}, {}])[:2]
        rows.append((d["pool"], d["tasks"], d["complete"], d["all_equal"], d["all_zero"], d["unequal"],
                     every.get("matches"), every.get("n"), unequal.get("matches"), unequal.get("n")))
    return _table(columns, rows, [run], counts=columns)


def table11(project, runs):
    run, payload = _pools(runs)
    if run is None:
        return payload
    columns = ("Pool", "Diagnostic", "Estimate", *INTERVAL, "Tasks", "People")
    rows = []
    for d in payload["diagnostics"]:
        for m in d["oracle_match"]:
            rows.append((d["pool"], f"selection − oracle ({m['pools']})", m.get("estimate"), m.get("lo"), m.get("hi"),
                         m.get("n"), m.get("people")))
        for w in d.get("words", {}).get("differences", []):
            rows.append((d["pool"], f"words: {w['difference']}", w.get("estimate"), w.get("lo"), w.get("hi"),
                         w.get("n_tasks"), w.get("people")))
    return _table(columns, rows, [run], signed=("Estimate", *INTERVAL), counts=("Tasks", "People"),
                  notes=("descriptive 95% intervals; fusion minus oracle is a signed difference, not a regret",))


def table12(project, runs):
    run, payload = _common(runs)
    if run is None:
        return payload
    columns = ("Contrast", "Lower bound", "Upper bound", "Planned tasks", "Tasks lost", "Observed estimate")
    rows = [(c["name"], c.get("bound_lo"), c.get("bound_hi"), c.get("planned"), c.get("lost"), c.get("estimate"))
            for c in payload["contrasts"]]
    return _table(columns, rows, [run], signed=("Lower bound", "Upper bound", "Observed estimate"),
                  counts=("Planned tasks", "Tasks lost"))


# ---- App. G -------------------------------------------------------------------------------------

def _sweeps(runs):
    return [r for r in template_runs(runs, "budget-sweep") if cached(r, "dashboard") is not None]


def table17(project, runs):
    sweeps = _sweeps(runs)
    if not sweeps:
        return needs("budget-sweep", "the budget sweep (`budget-sweep`)")
    columns = ("Run", "Cohort", "Contrast", "Difference", *INTERVAL, "Tasks", "People", "Criterion")
    rows = [(run.pk, run.protocol.cohort_id, c["name"], c.get("estimate"), c.get("lo"), c.get("hi"), c.get("n_tasks"),
             c.get("people"), None if c.get("criterion_met") is None else ("met" if c["criterion_met"] else "not met"))
            for run in sweeps for c in cached(run, "dashboard")["contrasts"]]
    return _table(columns, rows, sweeps, signed=("Difference", *INTERVAL),
                  counts=("Run", "Cohort", "Tasks", "People", "Criterion"))


def table18(project, runs):
    sweeps = _sweeps(runs)
    if not sweeps:
        return needs("budget-sweep", "the budget sweep (`budget-sweep`)")
    run = sweeps[0]
    payload = cached(run, "dashboard")
    columns = ("Memory words", "Memory", "OwnWords", "Recent sentences", "OwnWords − memory", "lo (memory)",
               "hi (memory)", "OwnWords − recency", "lo (recency)", "hi (recency)")
    rows = []
    for words in (50, 100, 200, 400):
        budget = "B=|memory|" if words == 100 else f"B=|memory(concrete,{words}w)|"
        memory, own, recent = f"memory(concrete,{words}w)+one-shot", f"ownwords({budget})", f"recency({budget})"
        a, sa = find_contrast(payload, own, memory)
        b, sb = find_contrast(payload, own, recent)
        rows.append((words, *((mean_row(payload, k) or {}).get("mean") for k in (memory, own, recent)),
                     *(oriented(a, sa) if a else (None,) * 3), *(oriented(b, sb) if b else (None,) * 3)))
    whole = (mean_row(payload, WHOLE_RECORD_KEY) or {}).get("mean")
    return _table(columns, rows, [run], counts=("Memory words",),
                  signed=("OwnWords − memory", "lo (memory)", "hi (memory)", "OwnWords − recency", "lo (recency)",
                          "hi (recency)"),
                  notes=(f"the one-shot on the whole record scores {'–' if whole is None else f'{whole:.4f}'}",))


def _versus_ownwords(template: str, what: str, runs):
    """Means and design − OwnWords differences of the latest run of `template`."""
    found = [r for r in template_runs(runs, template) if cached(r, "dashboard") is not None]
    if not found:
        return needs(template, what)
    run = found[-1]
    payload = cached(run, "dashboard")
    columns = ("Condition", "Mean", *INTERVAL, "Row − OwnWords", "lo (difference)", "hi (difference)", "Tasks", "People")
    rows = []
    for m in payload["means"]:
        contrast, sign = find_contrast(payload, m["condition"], OWNWORDS)
        diff = oriented(contrast, sign) if contrast else (None, None, None)
        rows.append((m["condition"], m["mean"], m["lo"], m["hi"], *diff, m["graded"], m.get("people")))
    return _table(columns, rows, [run], signed=("Row − OwnWords", "lo (difference)", "hi (difference)"),
                  counts=("Tasks", "People"))


def table19(project, runs):
    return _versus_ownwords("confirmation", "the OwnWords confirmation (`confirmation`)", runs)


def table20(project, runs):
    return _versus_ownwords("memory-systems", "the memory-systems comparison (`memory-systems`)", runs)


# ---- App. I -------------------------------------------------------------------------------------

def table24(project, runs):
    run, payload = _common(runs)
    if run is None:
        return payload
    tables = {c["name"]: c for c in (cached(run, "tables") or {}).get("contrasts", [])}
    columns = ("Contrast", "ΔP≥1", "ΔP≥2", "ΔP≥3", "Normalized difference", "Sign independent of spacing")
    rows = []
    for c in payload["contrasts"]:
        if c.get("delta_at_least"):
            same = tables.get(c["name"], {}).get("thresholds", {}).get("same_sign")
            rows.append((c["name"], *c["delta_at_least"], c.get("estimate"), None if same is None else
                         ("yes" if same else "no")))
    return _table(columns, rows, [run], signed=("ΔP≥1", "ΔP≥2", "ΔP≥3", "Normalized difference"),
                  counts=("Sign independent of spacing",),
                  notes=("each normalized difference equals one third of the sum of the three ΔP≥k",))


def table25(project, runs):
    run, payload = _common(runs)
    if run is None:
        return payload
    columns = ("Contrast", "Grade (second-named)", "First 0", "First 1", "First 2", "First 3", "First higher", "Tied",
               "First lower")
    rows = []
    for c in payload["contrasts"]:
        if c.get("transitions"):
            for g, counts in enumerate(c["transitions"]):
                tail = (c.get("wins"), c.get("ties"), c.get("losses")) if g == 0 else (None, None, None)
                rows.append((c["name"] if g == 0 else "", g, *counts, *tail))
    return _table(columns, rows, [run], counts=columns)


def table28(project, runs):
    run, payload = _pools(runs)
    if run is None:
        return payload
    columns = ("Pool", "Group", "Tasks", "Fusion", "One-shot", "Fusion − one-shot", *INTERVAL, "People")
    rows = [(d["pool"], s["group"], s.get("n_tasks"), s.get("fusion_mean"), s.get("one_shot_mean"), s.get("estimate"),
             s.get("lo"), s.get("hi"), s.get("people"))
            for d in payload["diagnostics"] if d.get("fusion") for s in d["fusion"].get("split", [])]
    if not rows:
        return needs("common", "a common experiment with fusion")
    return _table(columns, rows, [run], signed=("Fusion − one-shot", *INTERVAL), counts=("Tasks", "People"),
                  notes=("self-selected groups; descriptive",))


def table29(project, runs):
    run, payload = _common(runs, "tables")
    if run is None:
        return payload
    columns = ("Contrast", "Target group", "Estimate", *INTERVAL, "Tasks", "People")
    rows = []
    for c in payload["contrasts"]:
        if not ({WHOLE_RECORD, CURRENT_DIALOGUE} & set(c.get("terms", {}))):
            continue
        split = c.get("subgroups", {}).get("target position")
        for g in (split or {}).get("groups", []):
            rows.append((c["name"], g["label"], g.get("estimate"), g.get("lo"), g.get("hi"), g.get("n_tasks"),
                         g.get("n_people")))
        d = (split or {}).get("difference")
        if d:
            rows.append((c["name"], f"{d['first']} − {d['second']}", d.get("estimate"), d.get("lo"), d.get("hi"),
                         d.get("n_tasks"), d.get("n_people")))
    if not rows:
        return Missing("the common run's robustness tables have no raw-evidence contrast", "common")
    return _table(columns, rows, [run], signed=("Estimate", *INTERVAL), counts=("Tasks", "People"))

