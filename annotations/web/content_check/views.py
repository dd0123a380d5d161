"""Content-check campaign pages: an owner creates one; owners, analysts and viewers read its numbers.

Results show numbers only (no text, no rater names); raters get 403 as on the other kinds' results,
non-members 404. The CSVs are recorded in the audit log like the other results tables.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render

from annotations.content_check import (
    NO_CONTROL, ContentCheckError, content_check_campaign_create, content_check_results_for_page, control_conditions,
    is_content_check,
)
from annotations.core.content_check import CONTRAST_COLUMNS, SHARE_COLUMNS, contrast_rows, share_rows
from annotations.jobs import results_enqueue
from annotations.web.content_check.forms import ContentCheckForm
from annotations.web.results.flow import being_computed_csv, being_computed_page, campaign_of_kind, csv_download
from experiments.access import OWNERS, run_for
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
    return campaign_of_kind(request, slug, pk, is_kind=is_content_check, kind="content-check")


@login_required
def content_check_results_page(request, slug, pk):
    """Template annotations/results/content_check_results.html: shares, agreement, restricted contrasts."""
    membership, campaign = _content_check_campaign(request, slug, pk)
    data, current = content_check_results_for_page(campaign, enqueue=results_enqueue)
    if data is None:
        return being_computed_page(request, membership, campaign)
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
        return being_computed_csv()
    return csv_download(request, membership, what=f"campaign {campaign.pk}: content-check table {table} (CSV)",
                        filename=f"campaign-{campaign.pk}-content-check-{table}.csv", header=header, rows=rows(data))
