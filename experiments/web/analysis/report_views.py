"""The paper report of a project: every table and figure of the paper in its order, from the cached
report (`PaperReport`), its archive `report.zip`, and the "Rebuild" button.

Owners and analysts see everything, with the buttons that create a missing item's ready-made
protocol and that rebuild the report; viewers see the same numbers (the report holds numbers and
design labels only, never participant text) without the buttons; raters are refused, outsiders
see no such project. The page never builds: it reads the cache and says when it is stale.
"""
from __future__ import annotations

from html import escape

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from experiments.access import AGGREGATE_READERS, TEXT_READERS, membership_for
from experiments.analysis.paper_report_state import cached_report
from experiments.analysis.report_archive import archive_bytes
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.core.paper_report_catalog import NEEDS_RUN, NOT_HERE, RENDERED
from experiments.core.report_format import display_rows
from experiments.data.audit_log import Kind, audit_record
from experiments.execution.paper_report_build import refresh_report, report_enqueue
from experiments.models import Cohort


NUM_CELL = '<td class="num">'


def table_html(table: dict, cells=None) -> str:
    """The table's <thead> and <tbody>, every cell escaped: one join, not a template loop per cell
    (a report holds a few thousand cells; the template's loops took most of the page's time)."""
    head = "".join(f"<th>{escape(c)}</th>" for c in table["columns"])
    body = "".join("<tr>" + "".join((NUM_CELL if i else "<td>") + escape(cell) + "</td>"
                                    for i, cell in enumerate(row)) + "</tr>"
                   for row in (display_rows(table) if cells is None else cells))
    return mark_safe(f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody>")  # noqa: S308 - escaped above


def _shown(item: dict) -> dict:
    table = item.get("table")
    inputs = (table or {}).get("inputs") or {}
    return {**item, "cells": table_html(table, item.get("cells")) if table else None, "inputs": inputs,
            "offline": bool(inputs.get("offline_runs")),
            "template_here": item.get("template") in PAPER_PROTOCOLS,
            "template_title": PAPER_PROTOCOLS[item["template"]].title if item.get("template") in PAPER_PROTOCOLS
            else None}


@login_required
def paper_report(request, slug):
    """Template experiments/analysis/paper_report.html."""
    membership = membership_for(request, slug, roles=AGGREGATE_READERS)
    project = membership.project
    report, stale = cached_report(project)
    items = [_shown(item) for item in report.items] if report is not None else []
    counts = {key: sum(1 for i in items if i["state"] == state)
              for key, state in (("rendered", RENDERED), ("needs_run", NEEDS_RUN), ("not_here", NOT_HERE))}
    context = {"membership": membership, "project": project, "report": report, "stale": stale, "items": items,
               "counts": counts, "may_act": membership.role in TEXT_READERS,
               "has_figures": any(i.get("figure") and i["figure"].get("data") for i in items),
               "cohorts": list(Cohort.objects.filter(project=project).order_by("pk").values_list("pk", "name"))}
    return render(request, "experiments/analysis/paper_report.html", context)


@login_required
@require_POST
def paper_report_rebuild(request, slug):
    """Queue a rebuild (owners and analysts); without a queue or a worker on it, build it here and say so."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    if report_enqueue(membership.project):
        messages.success(request, "The report is being rebuilt on the queue; reload this page in a moment.")
    elif refresh_report(membership.project, wait=False) is None:
        messages.warning(request, "A rebuild is already in progress; reload this page in a minute.")
    else:
        messages.warning(request, "No queue worker answers: the report was rebuilt in this request.")
    return redirect("paper_report", slug=slug)


@login_required
def paper_report_zip(request, slug):
    """The archive of the cached report (an export: recorded in the audit log)."""
    membership = membership_for(request, slug, roles=AGGREGATE_READERS)
    project = membership.project
    report, stale = cached_report(project)
    if report is None:
        messages.error(request, "The report is not built yet: rebuild it first.")
        return redirect("paper_report", slug=slug)
    audit_record(request, project, Kind.EXPORT, "paper report (report.zip)" + (" (stale)" if stale else ""))
    response = HttpResponse(archive_bytes(report, stale=stale), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-report.zip"'
    return response
