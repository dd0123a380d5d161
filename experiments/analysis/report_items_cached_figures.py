"""The paper report's figures the app already draws (`analysis.figures`), each with the table of the
numbers it draws: the common experiment's means (Fig. 3b, 3c), its planned contrasts (Fig. 7), its
grade distributions (Fig. 6), the budget sweep and its replication (Fig. 4, 11), the cohort map
(Fig. 5), and the parameters of the two diagrams (Fig. 1, Algorithm 1; Fig. 8, the workflows).
"""
from __future__ import annotations

from experiments.analysis import figures
from experiments.analysis.cohort_map_data import project_draws
from experiments.analysis.grades import grade_matrix
from experiments.analysis.report_inputs import cached, inputs_of, needs, not_cached, template_runs
from experiments.core import grade_distribution
from experiments.core.cohort_map_counts import cohort_map
from experiments.core.conditions import DECISION_CANDIDATES, FUSION, SELECTION
from experiments.core.evidence import BM25_B, BM25_K1
from experiments.core.report_table import ReportFigure, ReportInputs, ReportTable

INTERVAL = ("95% lo", "95% hi")
MEANS_COLUMNS = ("Condition", "Mean", *INTERVAL, "Graded", "Planned", "People")


def _latest_common(runs, name="dashboard"):
    found = template_runs(runs, "common")
    if not found:
        return None, needs("common", "the common memory-by-workflow experiment (`common`)")
    run = found[-1]
    payload = cached(run, name)
    return (run, payload) if payload is not None else (None, not_cached(run, name, "common"))


def _means_table(run, rows) -> ReportTable:
    return ReportTable(
        columns=MEANS_COLUMNS, inputs=inputs_of([run]), digits={"Mean": 4, "95% lo": 4, "95% hi": 4},
        rows=tuple((m["condition"], m["mean"], m["lo"], m["hi"], m["graded"], m["planned"], m.get("people"))
                   for m in rows))


def _figure(figure, table, why: str):
    if figure is None:
        return needs("common", why)
    return ReportFigure(figure=figure, table=table)


def figure1(project, runs):
    """Algorithm 1 is a diagram; its parameters are what the app can show."""
    rows = (("ranker", "BM25 over the person's own sentences, the question as query"), ("BM25 k1", BM25_K1),
            ("BM25 b", BM25_B), ("budget B", "|memory| characters (the written memory's length)"),
            ("fill", "greedy, in rank order, stopping at the first sentence that does not fit"),
            ("answering calls", 1))
    table = ReportTable(columns=("Parameter", "Value"), rows=rows, inputs=ReportInputs(), digits={"Value": 2})
    return ReportFigure(figure={"data": [], "layout": {"title": {"text": "Algorithm 1 (diagram): parameters"}}},
                        table=table)


def figure8(project, runs):
    rows = (("candidates per task and memory", DECISION_CANDIDATES),
            ("workflows after the candidates", f"{FUSION}, {SELECTION}"),
            ("one-shot", "the first candidate (b0), fixed before any scoring"),
            ("display order", "deterministic hash order, the same for fusion and selection"))
    table = ReportTable(columns=("Parameter", "Value"), rows=rows, inputs=ReportInputs())
    return ReportFigure(figure={"data": [], "layout": {"title": {"text": "Workflows (diagram): parameters"}}},
                        table=table)


def figure3b(project, runs):
    run, payload = _latest_common(runs)
    if run is None:
        return payload
    rows = [m for m in payload["means"] if m["condition"].endswith("+one-shot") and m["condition"].startswith("memory(")]
    return _figure(figures.means(rows), _means_table(run, rows), "graded one-shot answers of both memories")


def figure3c(project, runs):
    run, payload = _latest_common(runs)
    if run is None:
        return payload
    return _figure(figures.means(payload["means"]), _means_table(run, payload["means"]), "graded answers")


def figure7(project, runs):
    run, payload = _latest_common(runs)
    if run is None:
        return payload
    contrasts = payload["contrasts"]
    table = ReportTable(
        columns=("Contrast", "Estimate", *INTERVAL, "Family lo", "Family hi", "Tasks", "People"),
        rows=tuple((c["name"], c.get("estimate"), c.get("lo"), c.get("hi"), c.get("family_lo"), c.get("family_hi"),
                    c.get("n_tasks"), c.get("people")) for c in contrasts),
        inputs=inputs_of([run]), digits={k: 4 for k in ("Estimate", *INTERVAL, "Family lo", "Family hi")},
        signed=frozenset(("Estimate", *INTERVAL, "Family lo", "Family hi")))
    return _figure(figures.forest(contrasts), table, "a planned contrast with an estimate")


def figure6(project, runs):
    found = template_runs(runs, "common")
    if not found:
        return needs("common", "the common memory-by-workflow experiment (`common`)")
    run = found[-1]
    conditions = list(run.protocol.conditions)
    matrix = grade_matrix(run, conditions)  # one aggregate query; counting, no bootstrap
    rows = grade_distribution.distributions(conditions, [matrix.row(c) for c in conditions])
    table = ReportTable(
        columns=("Condition", "Planned", "Grade 0", "Grade 1", "Grade 2", "Grade 3", "Missing"),
        rows=tuple((r["condition"], r["planned"], *r["counts"], r["missing"]) for r in rows), inputs=inputs_of([run]))
    return _figure(figures.grade_distribution(rows), table, "graded answers")


def _sweep(run) -> ReportFigure | None:
    data = cached(run, "dashboard")["sweep"]
    figure = figures.sweep(data)
    if figure is None:
        return None
    rows = tuple((builder, p["words"], p["mean"], p["lo"], p["hi"], p["tasks"])
                 for builder, points in data["lines"].items() for p in points)
    table = ReportTable(columns=("Builder", "Memory words", "Mean", *INTERVAL, "Tasks"), rows=rows,
                        inputs=inputs_of([run]), digits={"Mean": 4, "95% lo": 4, "95% hi": 4},
                        notes=(f"whole record: {data.get('whole_record')}",) if data.get("whole_record") is not None
                        else ())
    return ReportFigure(figure=figure, table=table)


def _sweep_runs(runs):
    return [r for r in template_runs(runs, "budget-sweep") if cached(r, "dashboard") is not None]


def figure4(project, runs):
    sweeps = _sweep_runs(runs)
    made = _sweep(sweeps[0]) if sweeps else None
    return made or needs("budget-sweep", "the budget sweep (`budget-sweep`)")


def figure11(project, runs):
    """The replication: the budget sweep on a second cohort (the first sweep's run is Figure 4's)."""
    sweeps = [r for r in _sweep_runs(runs)]
    later = [r for r in sweeps[1:] if r.protocol.cohort_id != sweeps[0].protocol.cohort_id]
    made = _sweep(later[0]) if later else None
    return made or needs("budget-sweep", "the budget sweep's replication on another cohort (`budget-sweep`)")


def figure5(project, runs):
    found = cohort_map(project_draws(project))  # counts only: no labels
    if not found.names:
        return needs("common", "a cohort (draw one on the project page)")
    names = list(found.names)
    table = ReportTable(columns=("Cohort", "People", "Sessions"),
                        rows=tuple(zip(names, (int(p) for p in found.people), (int(s) for s in found.sessions))),
                        inputs=inputs_of(runs),
                        notes=("counts of the people and sessions each cohort drew, from the cohorts themselves",))
    return ReportFigure(figure=figures.cohort_overlap(names, found.shared_people, found.shared_sessions), table=table)
