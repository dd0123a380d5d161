"""Content-check campaign pages: an owner creates one; owners, analysts and viewers read its numbers.

Results show numbers only (no text, no rater names); raters get 403 as on the other kinds' results,
non-members 404. The CSVs are recorded in the audit log like the other results tables.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render

from annotations.campaign_access import campaign_for
from annotations.content_check import (
    NO_CONTROL, ContentCheckError, content_check_campaign_create, content_check_results_for_page, control_conditions,
    is_content_check,
)
from annotations.core.content_check import CONTRAST_COLUMNS, SHARE_COLUMNS, contrast_rows, share_rows
from annotations.jobs import results_enqueue
from annotations.web.content_check.forms import ContentCheckForm
from experiments.access import AGGREGATE_READERS, OWNERS, run_for
from experiments.analysis.exports import csv_text
from experiments.data.audit_log import Kind, audit_record
from experiments.models import Role

CSV_TABLES = {
    "shares": (SHARE_COLUMNS, share_rows),
    "contrasts": (CONTRAST_COLUMNS, contrast_rows),
    "pairs": (["condition", "original", "items", "missing", "sampled"],
              lambda data: [[p["condition"], p["original"], p["items"], p["missing"], p.get("sampled")]
                            for p in data["pairs"]]),
}


@login_required
def content_check_create_view(request, slug, run_pk):
    """Template annotations/campaigns/content_check_form.html (owners)."""
    membership, run = run_for(request, slug, run_pk, roles=OWNERS)
    form = ContentCheckForm(request.POST or None, run=run)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = content_check_campaign_create(
                run=run, name=data["name"], conditions=data["conditions"], raters=data["raters"], user=request.user,
                sample=data["sample"], sample_size=data["sample_size"], seed=data["seed"],
                ratings_per_item=data["ratings_per_item"])
        except ContentCheckError as e:
            form.add_error(None, str(e))
        else:
            messages.success(request, f"Content-check campaign {campaign.name} created: "
                                      f"{campaign.items.count()} original–paraphrase pairs.")
            return redirect("campaign_detail", slug, campaign.pk)
    return render(request, "annotations/campaigns/content_check_form.html", {
        "membership": membership, "project": membership.project, "run": run, "form": form,
        "no_control": None if control_conditions(run) else NO_CONTROL,
    })


def _content_check_campaign(request, slug, pk):
    membership, campaign = campaign_for(request, slug, pk, roles=AGGREGATE_READERS)
    if not is_content_check(campaign):
        raise Http404("Not a content-check campaign")
    return membership, campaign


@login_required
def content_check_results_page(request, slug, pk):
    """Template annotations/results/content_check_results.html: shares, agreement, restricted contrasts."""
    membership, campaign = _content_check_campaign(request, slug, pk)
    data, current = content_check_results_for_page(campaign, enqueue=results_enqueue)
    if data is None:
        return render(request, "annotations/results/campaign_computing.html",
                      {"membership": membership, "project": membership.project, "campaign": campaign})
    return render(request, "annotations/results/content_check_results.html", {
        "membership": membership, "project": membership.project, "campaign": campaign, "data": data,
        "is_owner": membership.role == Role.OWNER, "current": current,
    })


@login_required
def content_check_results_csv(request, slug, pk, table):
    membership, campaign = _content_check_campaign(request, slug, pk)
    if table not in CSV_TABLES:
        raise Http404("No such table")
    header, rows = CSV_TABLES[table]
    data, _ = content_check_results_for_page(campaign, enqueue=results_enqueue)
    if data is None:
        return HttpResponse("The numbers are being computed; try again in a minute.", status=503,
                            content_type="text/plain")
    audit_record(request, membership.project, Kind.EXPORT, f"campaign {campaign.pk}: content-check table {table} (CSV)")
    body = csv_text(header, [dict(zip(header, row)) for row in rows(data)])
    response = HttpResponse(body, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-content-check-{table}.csv"'
    return response
