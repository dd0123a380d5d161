"""Paper-style tables of a run and across runs: page, CSV and LaTeX, from cached numbers only.

Owners, analysts and viewers see them (numbers, no text); raters do not. The pages never compute
a bootstrap: they read the dashboard's and the robustness tables' caches (`analysis.tables`), and
evaluate the protocol's sealed criteria on the cached figures by code (`core.criteria`).
"""
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from experiments.access import run_for, runs_for
from experiments.analysis.report_items_cross_run import page_tables
from experiments.analysis.report_items_per_run import page_items
from experiments.analysis.tables import cached_results
from experiments.analysis.exports import csv_text
from experiments.data.audit_log import Kind, audit_record
from experiments.core import paper_tables, share_group_stats
from experiments.core.criteria import CriteriaError, evaluate_criteria
from experiments.execution.policy import offline_roles
from experiments.models import Run

FORMATS = ("csv", "latex")


def criteria_verdicts(protocol, dashboard_payload) -> tuple[list[dict], str]:
    """The protocol's criteria, each met / not met / not decided, and a problem if they cannot be read."""
    if not protocol.criteria or dashboard_payload is None:
        return [], ""
    try:
        return evaluate_criteria(protocol.criteria, {c["name"]: c for c in dashboard_payload["contrasts"]}), ""
    except CriteriaError as exc:
        return [], f"the protocol's criteria cannot be evaluated: {exc}"


def _download(request, project, rows, *, stem: str, what: str, fmt: str, caption: str):
    audit_record(request, project, Kind.EXPORT, f"{what} ({'CSV' if fmt == 'csv' else 'LaTeX'})")
    if fmt == "csv":
        response = HttpResponse(csv_text(paper_tables.COLUMNS, rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{stem}.csv"'
    else:
        response = HttpResponse(paper_tables.latex(rows, caption=caption), content_type="text/x-tex; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{stem}.tex"'
    return response


def offline_caption(runs) -> str:
    """What a LaTeX caption adds when some of `runs` ran on the offline stand-in: a table pasted
    into a paper must not pass its numbers for a model's."""
    offline = [run.pk for run in runs if offline_roles(run.protocol)["any"]]
    if not offline:
        return ""
    return f" (run{'s' if len(offline) > 1 else ''} {', '.join(map(str, offline))}: offline stand-in, not model results)"


def _format(request) -> str | None:
    fmt = request.GET.get("format") or None
    if fmt is not None and fmt not in FORMATS:
        raise Http404("No such format")
    return fmt


@login_required
def run_tables(request, slug, pk):
    """Template experiments/analysis/run_tables.html; ``?format=csv`` or ``latex`` downloads the rows."""
    membership, run = run_for(request, slug, pk)
    fmt = _format(request)
    dashboard, tables = cached_results(run)
    rows = paper_tables.planned_rows(dashboard.payload) if dashboard else []
    rows += paper_tables.robustness_rows(tables.payload) if tables else []
    if fmt:
        if not rows:
            return HttpResponse("The analysis is not computed yet.", status=404, content_type="text/plain")
        return _download(request, membership.project, rows, stem=f"run-{run.pk}-tables",
                         what=f"run {run.pk}: paper-style tables", fmt=fmt,
                         caption=f"Run {run.pk}" + offline_caption([run]))
    verdicts, criteria_problem = criteria_verdicts(run.protocol, dashboard.payload if dashboard else None)
    return render(request, "experiments/analysis/run_tables.html", {
        "membership": membership, "project": membership.project, "run": run, "dashboard": dashboard,
        "tables": tables, "groups": paper_tables.grouped(rows), "verdicts": verdicts,
        "criteria_problem": criteria_problem, "offline": offline_roles(run.protocol)["any"],
        "share_columns": [column for column, _, _ in share_group_stats.CONTRASTS],
        "share_groups": share_group_stats.pivot(tables.payload.get("share_groups") or []) if tables else [],
        "share_groups_computed": bool(tables) and "share_groups" in tables.payload,
        "share_group_draws": share_group_stats.SHARE_GROUP_DRAWS,
        "per_run_items": page_items(tables.payload if tables else None)})


@login_required
def run_share_groups_csv(request, slug, pk):
    """The budget sweep by share of the source (App. G.1) as CSV: one row per group and contrast."""
    membership, run = run_for(request, slug, pk)
    _, tables = cached_results(run)
    rows = (tables.payload.get("share_groups") if tables else None) or []
    if not rows:
        return HttpResponse("No share-of-source groups: the robustness tables are not computed, or the run "
                            "has no budget sweep with the whole record.", status=404, content_type="text/plain")
    audit_record(request, membership.project, Kind.EXPORT, f"run {run.pk}: budget sweep by share of the source (CSV)")
    response = HttpResponse(csv_text(share_group_stats.CSV_COLUMNS, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-share-groups.csv"'
    return response


@login_required
def project_tables(request, slug):
    """Template experiments/analysis/project_tables.html: the planned contrasts of chosen runs (``run`` repeated)."""
    membership, runs = runs_for(request, slug)
    project = membership.project
    fmt = _format(request)
    ids = [run.pk for run in runs]
    entries, rows = [], []
    for run in runs:
        dashboard, _ = cached_results(run)
        verdicts, problem = criteria_verdicts(run.protocol, dashboard.payload if dashboard else None)
        entries.append({"run": run, "computed": dashboard is not None, "verdicts": verdicts, "problem": problem})
        if dashboard:
            rows += paper_tables.planned_rows(dashboard.payload, run=f"run {run.pk} ({run.protocol.name})")
    if fmt:
        if not rows:
            return HttpResponse("No chosen run has its analysis computed.", status=404, content_type="text/plain")
        return _download(request, project, rows, stem=f"{project.slug}-runs-" + "-".join(map(str, ids)),
                         what=f"runs {', '.join(map(str, ids))}: paper-style tables", fmt=fmt,
                         caption="Runs " + ", ".join(map(str, ids)) + offline_caption(runs))
    choices = Run.objects.filter(protocol__project=project).select_related("protocol").order_by("-pk")[:200]
    return render(request, "experiments/analysis/project_tables.html", {
        "membership": membership, "project": project, "entries": entries, "choices": choices, "ids": ids,
        "groups": paper_tables.grouped(rows), "cross_run": page_tables(project, runs),
        "offline_runs": sorted(run.pk for run in runs if offline_roles(run.protocol)["any"])})
