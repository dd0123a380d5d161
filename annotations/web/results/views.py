"""A campaign's results pages: agreement, contrasts under human grades, their CSVs, and the owners' export.

Who sees what (docs/design.md §2):

* owners: everything, with raters' usernames beside their labels, and the export of every
  rating (notes included, ids remapped);
* analysts and viewers: the same aggregate numbers, raters only as R1, R2 …;
* raters: 403 (they must not see the judge's grades or each other's); non-members: 404.

No page here shows participant text, a note or a flag reason: only numbers.
"""
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render

from annotations import campaign_agreement, results_figures
from annotations.core.result_tables import CSV_TABLES, comparisons, table_rows
from annotations.rating_exports import export_csv, export_jsonl
from annotations.jobs import results_enqueue
from annotations.campaign_access import campaign_for
from annotations.content_check import is_content_check
from annotations.web.results.flow import being_computed_csv, being_computed_page, csv_download
from annotations.pairwise import is_pairwise
from experiments.access import AGGREGATE_READERS, OWNERS
from experiments.data.audit_log import Kind, audit_record
from experiments.models import Role


def _names(membership, campaign) -> dict:
    """label → what this member may see of a rater: the username for owners, else nothing."""
    return campaign_agreement.rater_usernames(campaign) if membership.role == Role.OWNER else {}


@login_required
def campaign_results(request, slug, pk):
    """Template annotations/results/campaign_results.html: figures, each with its table and CSV."""
    membership, campaign = campaign_for(request, slug, pk, roles=AGGREGATE_READERS)
    if is_pairwise(campaign):  # preferences, not grades: their own page
        return redirect("pairwise_results", slug, pk)
    if is_content_check(campaign):  # same-content answers: their own page
        return redirect("content_check_results", slug, pk)
    data, current = campaign_agreement.results_for_page(campaign, enqueue=results_enqueue)
    if data is None:
        return being_computed_page(request, membership, campaign)
    names = _names(membership, campaign)
    display = {label: f"{label} ({name})" for label, name in names.items()}
    confusions = [(name, axes, results_figures.confusion(fig, *axes)) for _, name, axes, fig in comparisons(data)[:3]]
    per_condition = [{"condition": c["condition"], "items": c["items"], "rated_items": c["rated_items"],
                      "rows": [(name, fig) for _, name, _, fig in comparisons(data, c, scope=c["condition"])],
                      "alpha": c["between"]["alpha"], "levels": c["levels"]} for c in data["conditions"]]
    context = {
        "membership": membership, "project": membership.project, "campaign": campaign, "data": data,
        "current": current,
        "is_owner": membership.role == Role.OWNER,
        "comparisons": [(results_figures.shown_name(name, display), fig) for _, name, _, fig in comparisons(data)],
        "per_condition": per_condition,
        "raters": table_rows(data, "raters", names),
        "confusions": confusions,
        "agreement_figure": results_figures.agreement(data, display),
        "conditions_figure": results_figures.conditions(data),
        "levels_figure": results_figures.levels(data),
        "distribution_figure": results_figures.distribution(data, display),
        "contrasts_figure": results_figures.contrasts(data),
    }
    return render(request, "annotations/results/campaign_results.html", context)


def _download(text, filename, content_type):
    response = HttpResponse(text, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def campaign_results_csv(request, slug, pk, table):
    """The numbers of one results table as CSV (the raters table has usernames for owners only)."""
    membership, campaign = campaign_for(request, slug, pk, roles=AGGREGATE_READERS)
    if table not in CSV_TABLES or is_pairwise(campaign) or is_content_check(campaign):
        raise Http404("No such table")
    names = _names(membership, campaign)
    header = [h for h in CSV_TABLES[table] if h != "username" or names]
    data, _ = campaign_agreement.results_for_page(campaign, enqueue=results_enqueue)
    if data is None:
        return being_computed_csv()
    return csv_download(request, membership, what=f"campaign {campaign.pk}: results table {table} (CSV)",
                        filename=f"campaign-{campaign.pk}-{table}.csv", header=header, rows=table_rows(data, table, names))


@login_required
def campaign_export(request, slug, pk, fmt):
    """Every rating, remapped ids, CSV or JSONL: owners only."""
    membership, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    if fmt not in ("csv", "jsonl"):
        raise Http404("Exports are .csv or .jsonl")
    audit_record(request, membership.project, Kind.EXPORT, f"campaign {campaign.pk}: every rating ({fmt.upper()})")
    if fmt == "csv":
        return _download(export_csv(campaign), f"campaign-{campaign.pk}-ratings.csv", "text/csv; charset=utf-8")
    return _download(export_jsonl(campaign), f"campaign-{campaign.pk}-ratings.jsonl",
                     "application/jsonl; charset=utf-8")
