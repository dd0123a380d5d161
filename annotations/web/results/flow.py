"""What every campaign kind's results pages do alike: find the campaign of the kind (aggregate
readers only), show "being computed" while its numbers are queued, and hand one table as a CSV
recorded in the audit log. Each kind's views keep what is their own: its numbers, template and tables.
"""
from django.http import Http404, HttpResponse
from django.shortcuts import render

from annotations.campaign_access import campaign_for
from experiments.access import AGGREGATE_READERS
from experiments.analysis.exports import csv_text
from experiments.data.audit_log import Kind, audit_record

BEING_COMPUTED = "The numbers are being computed; try again in a minute."


def campaign_of_kind(request, slug, pk, *, is_kind, kind: str):
    """(membership, campaign) for owners, analysts and viewers; 404 when the campaign is of another kind."""
    membership, campaign = campaign_for(request, slug, pk, roles=AGGREGATE_READERS)
    if not is_kind(campaign):
        raise Http404(f"Not a {kind} campaign")
    return membership, campaign


def being_computed_page(request, membership, campaign):
    """Template annotations/results/campaign_computing.html: the numbers are queued, the page says so."""
    return render(request, "annotations/results/campaign_computing.html",
                  {"membership": membership, "project": membership.project, "campaign": campaign})


def being_computed_csv():
    return HttpResponse(BEING_COMPUTED, status=503, content_type="text/plain")


def csv_download(request, membership, *, what: str, filename: str, header, rows) -> HttpResponse:
    """`rows` (dicts, or sequences in `header`'s order) as an attached CSV, recorded in the project's audit log."""
    audit_record(request, membership.project, Kind.EXPORT, what)
    rows = [row if isinstance(row, dict) else dict(zip(header, row)) for row in rows]
    response = HttpResponse(csv_text(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
