"""Pairwise campaign pages: an owner creates one; owners, analysts and viewers read its numbers.

Results show numbers only (no text, no rater names); raters get 403 as on a grade campaign's
results, non-members 404. The CSVs are recorded in the audit log like the other results tables.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render

from annotations.core.pairwise import BT_COLUMNS, WIN_RATE_COLUMNS, bt_rows, win_rate_rows
from annotations.jobs import results_enqueue
from annotations.pairwise import PairwiseError, is_pairwise, pairwise_campaign_create, pairwise_results_for_page
from annotations.web.pairwise.forms import PairwiseForm
from annotations.web.pairwise.llm_judge import llm_judge_beside_people
from annotations.web.results.flow import being_computed_csv, being_computed_page, campaign_of_kind, csv_download
from experiments.access import OWNERS, run_for
from experiments.models import Role

CSV_TABLES = {
    "wins": (WIN_RATE_COLUMNS, win_rate_rows),
    "bradley-terry": (BT_COLUMNS, bt_rows),
    "pairs": (["condition_x", "condition_y", "items", "identical", "missing", "sampled"],
              lambda data: [[p["x"], p["y"], p["items"], p["identical"], p["missing"], p.get("sampled")]
                            for p in data["pairs"]]),
    "judge-order": (["scored", "agree", "human_ties", "judge_ties", "missing", "items", "people", "share", "share_lo",
                     "share_hi", "share_decided"],
                    lambda data: [[*(data["judge_order"][k] for k in ("scored", "agree", "human_ties", "judge_ties",
                                                                       "missing", "items", "people")),
                                   *((data["judge_order"]["share"] or {}).get(k) for k in ("estimate", "lo", "hi")),
                                   data["judge_order"]["share_decided"]]]),
}


@login_required
def pairwise_create_view(request, slug, run_pk):
    """Template annotations/campaigns/pairwise_form.html (owners)."""
    membership, run = run_for(request, slug, run_pk, roles=OWNERS)
    form = PairwiseForm(request.POST or None, run=run)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = pairwise_campaign_create(
                run=run, name=data["name"], conditions=data["conditions"], raters=data["raters"], user=request.user,
                sample=data["sample"], sample_size=data["sample_size"], seed=data["seed"],
                ratings_per_item=data["ratings_per_item"])
        except PairwiseError as e:
            form.add_error(None, str(e))
        else:
            skipped = sum(p["identical"] for p in campaign.pairs)
            messages.success(request, f"Pairwise campaign {campaign.name} created: {campaign.items.count()} pairs "
                                      f"({skipped} tasks with identical answers skipped as ties by construction).")
            return redirect("campaign_detail", slug, campaign.pk)
    return render(request, "annotations/campaigns/pairwise_form.html", {
        "membership": membership, "project": membership.project, "run": run, "form": form,
    })


def _pairwise_campaign(request, slug, pk):
    return campaign_of_kind(request, slug, pk, is_kind=is_pairwise, kind="pairwise")


@login_required
def pairwise_results_page(request, slug, pk):
    """Template annotations/results/pairwise_results.html: win rates, the Bradley–Terry scale, the judge's order."""
    membership, campaign = _pairwise_campaign(request, slug, pk)
    data, current = pairwise_results_for_page(campaign, enqueue=results_enqueue)
    if data is None:
        return being_computed_page(request, membership, campaign)
    return render(request, "annotations/results/pairwise_results.html", {
        "membership": membership, "project": membership.project, "campaign": campaign, "data": data,
        "is_owner": membership.role == Role.OWNER, "tables": list(CSV_TABLES), "current": current,
        "skipped": sum(p["identical"] for p in data["pairs"]),
        "llm_judge": llm_judge_beside_people(data),
    })


@login_required
def pairwise_results_csv(request, slug, pk, table):
    membership, campaign = _pairwise_campaign(request, slug, pk)
    if table not in CSV_TABLES:
        raise Http404("No such table")
    header, rows = CSV_TABLES[table]
    data, _ = pairwise_results_for_page(campaign, enqueue=results_enqueue)
    if data is None:
        return being_computed_csv()
    return csv_download(request, membership, what=f"campaign {campaign.pk}: pairwise table {table} (CSV)",
                        filename=f"campaign-{campaign.pk}-pairwise-{table}.csv", header=header, rows=rows(data))
