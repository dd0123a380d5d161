"""Contrast dashboards and numeric exports of a run: numbers only, no text.

Owners, analysts and viewers see them (the paper's "public package" level); raters do not
(`access.run_for` with its default, the aggregate readers).
"""
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from experiments.analysis import figures
from experiments.core.conditions import SELECTION, get_condition
from experiments.access import run_for
from experiments.data.audit_log import Kind, audit_record
from experiments.analysis.dashboard import dashboard_cached_with_grades
from experiments.core import grade_distribution
from experiments.analysis.exports import csv_text, scores_package_rows
from experiments.execution.policy import offline_roles
from experiments.web.analysis.tables_views import criteria_verdicts
from experiments.execution.kind_table import kind_rules


@login_required
def run_dashboard(request, slug, pk):
    """Template experiments/analysis/run_dashboard.html: figures, each with its table and CSV."""
    membership, run = run_for(request, slug, pk)
    if (dashboard := kind_rules(run.protocol).dashboard) != "run_dashboard":
        return redirect(dashboard, slug=slug, pk=pk)  # a survey's is scored without a judge: its own page
    result, matrix = dashboard_cached_with_grades(run)
    context = {"membership": membership, "project": membership.project, "run": run, "result": result}
    if result is not None:
        data = result.payload
        grades = _grade_distributions(run, matrix)
        # Points open the explorer on the tasks behind them, for roles that may read its text.
        explore = reverse("run_explorer", args=[slug, pk]) if membership.can_read_text() else None
        context.update(
            data=data,
            explore=explore,
            forest=figures.forest(data["contrasts"], explore),
            means=figures.means(data["means"], explore),
            sweep=figures.sweep(data["sweep"], explore),
            thresholds=figures.thresholds(data["contrasts"], explore),
            # A contrast's row opens the same tasks as its figure points (name → explorer link).
            contrast_rows=[(c, figures.contrast_link(explore, c)) for c in data["contrasts"]],
            transitions=[(c["name"], figures.transitions(c, explore)) for c in data["contrasts"]
                         if c.get("transitions")],
            lengths=figures.lengths(data["lengths"], explore),
            cost=figures.cost(data["cost"]["per_phase"], explore),
            grades=grades,
            grades_figure=figures.grade_distribution(grades, explore),
            offline=offline_roles(run.protocol)["any"],
            # The stand-in answers byte-identical requests identically: a selection's three candidates
            # are one text, so it picks its one-shot's answer whatever it chooses.
            offline_selections=offline_roles(run.protocol)["generator"] and [
                key for key in run.protocol.conditions if get_condition(key).workflow == SELECTION],
        )
        context["verdicts"], context["criteria_problem"] = criteria_verdicts(run.protocol, data)
    return render(request, "experiments/analysis/run_dashboard.html", context)


def _grade_distributions(run, matrix) -> list[dict]:
    """Fig. 6: the 0–3 grades of each of the run's conditions, counted from the dashboard's grades."""
    conditions = [c for c in run.protocol.conditions if c in matrix.conditions]
    return grade_distribution.distributions(conditions, [matrix.row(c) for c in conditions])


CSV_TABLES = {
    "contrasts": ["name", "estimate", "lo", "hi", "family_lo", "family_hi", "n_tasks", "lost", "planned", "people",
                  "wins", "ties", "losses", "person_weighted", "study_lo", "study_hi", "bound_lo", "bound_hi",
                  "sign_p", "criterion", "criterion_met", "seed", "draws"],
    "means": ["condition", "mean", "lo", "hi", "graded", "missing", "planned", "people"],
    "thresholds": ["name", "delta_at_least_1", "delta_at_least_2", "delta_at_least_3"],
    "transitions": ["name", "row_condition", "column_condition", "row_grade", "column_grade", "tasks"],
    "sweep": ["builder", "words", "mean", "lo", "hi", "tasks", "condition"],
    "lengths": ["condition", "answers", "median_words", "mean_chars"],
    "cost_phase": ["phase", "attempts", "recoveries", "input_tokens", "output_tokens", "reasoning_tokens",
                   "unreported", "elapsed_s"],
    "cost_condition": ["condition", "slots", "attempts", "recoveries", "input_tokens", "output_tokens",
                       "reasoning_tokens", "unreported", "elapsed_s"],
    "grades": grade_distribution.CSV_COLUMNS,
}


def _table_rows(data, table):
    if table == "contrasts":
        return data["contrasts"]
    if table == "means":
        return data["means"]
    if table == "thresholds":
        return [{"name": c["name"], **{f"delta_at_least_{k + 1}": d for k, d in enumerate(c["delta_at_least"])}}
                for c in data["contrasts"] if c.get("delta_at_least")]
    if table == "transitions":
        return [{"name": c["name"], "row_condition": c["transition_axes"]["rows"],
                 "column_condition": c["transition_axes"]["columns"], "row_grade": i, "column_grade": j, "tasks": n}
                for c in data["contrasts"] if c.get("transitions")
                for i, row in enumerate(c["transitions"]) for j, n in enumerate(row)]
    if table == "sweep":
        return [{"builder": b, **p} for b, points in data["sweep"]["lines"].items() for p in points]
    if table == "lengths":
        return data["lengths"]
    if table == "cost_phase":
        return data["cost"]["per_phase"]
    return data["cost"]["per_condition"]


def _csv_response(filename, header, rows):
    """Every CSV here is written by the app's one rule against formula injection (`exports.csv_text`)."""
    response = HttpResponse(csv_text(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def run_dashboard_csv(request, slug, pk, table):
    """The numbers of one dashboard table as CSV."""
    membership, run = run_for(request, slug, pk)
    if run.protocol.kind == run.protocol.Kind.SURVEY:  # scored without a judge: its own tables
        return redirect("survey_dashboard_csv", slug=slug, pk=pk, table=table)
    result, matrix = dashboard_cached_with_grades(run)
    if table not in CSV_TABLES or result is None:
        return HttpResponse("No such table, or the analysis is not computed yet.", status=404,
                            content_type="text/plain")
    audit_record(request, membership.project, Kind.EXPORT, f"run {run.pk}: dashboard table {table} (CSV)")
    rows = (grade_distribution.csv_rows(_grade_distributions(run, matrix)) if table == "grades"
            else _table_rows(result.payload, table))
    return _csv_response(f"run-{run.pk}-{table}.csv", CSV_TABLES[table], rows)


@login_required
def run_scores_csv(request, slug, pk):
    """The run's numeric package: task-level scores, remapped labels, lengths, no text."""
    membership, run = run_for(request, slug, pk)
    if (dashboard := kind_rules(run.protocol).dashboard) != "run_dashboard":
        return redirect(dashboard, slug=slug, pk=pk)  # its numbers are the survey tables
    header, rows = scores_package_rows(run)
    audit_record(request, membership.project, Kind.EXPORT, f"run {run.pk}: task-level scores (CSV)")
    return _csv_response(f"run-{run.pk}-scores.csv", header, rows)
