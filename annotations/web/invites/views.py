"""Owners' invite pages: make one invite (its link shown once), a CSV of addresses in and links
out, revoke, deal open items to new raters, and the completion codes; and the rater's own code.

Every view starts with `campaign_for(..., roles=OWNERS)` (or the rater's lookup). A link exists
only in the answer to the request that made it: the database keeps the token's sha256.
"""
import smtplib

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.validators import validate_email
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations.campaign_access import campaign_for, rater_campaign_for
from annotations.campaigns import CampaignError, campaign_progress, open_items_deal
from annotations.completion_codes import completion_code_rows, rater_completion_code
from annotations.core.invite_codes import email_rows
from annotations.invites import (
    InviteError, invite_create, invite_links_mail, invite_revoke, invite_rows, invites_create_bulk, mail_configured,
)
from experiments.access import OWNERS
from experiments.analysis.exports import csv_text
from experiments.core.interviews.records import unstorable_text_problem
from experiments.data.audit_log import Kind, audit_record
from experiments.web.form_errors import errors_text
from annotations.web.invites.forms import BulkInviteForm, InviteForm


def _is_email(text: str) -> bool:
    try:
        validate_email(text)
    except ValidationError:
        return False
    return True


def invite_link(request, token: str) -> str:
    return request.build_absolute_uri(reverse("invite_accept", args=[token]))


def _page(request, membership, campaign, *, status=200, **extra):
    """Template annotations/invites/invites.html: the campaign's invites and the owner's actions."""
    progress = campaign_progress(campaign)
    return render(request, "annotations/invites/invites.html", {
        "membership": membership, "project": membership.project, "campaign": campaign,
        "invites": invite_rows(campaign), "invite_form": InviteForm(), "bulk_form": BulkInviteForm(),
        "new_raters": [r["username"] for r in progress if r["active"] and r["assigned"] == 0],
        "mail": mail_configured(), **extra,
    }, status=status)


@login_required
def invites_page(request, slug, pk):
    membership, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    return _page(request, membership, campaign)


@login_required
@require_POST
def invite_create_view(request, slug, pk):
    """Answers with the page holding the new link: the one time it is shown."""
    membership, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    form = InviteForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"No invite was made: {errors_text(form)}")
        return redirect("campaign_invites", slug, pk)
    try:
        made = invite_create(campaign=campaign, days=form.cleaned_data["days"], by=request.user,
                             path=request.get_full_path())
    except InviteError as e:
        messages.error(request, f"No invite was made: {e}")
        return redirect("campaign_invites", slug, pk)
    return _page(request, membership, campaign, new_link=invite_link(request, made.token), new_invite=made.invite)


@login_required
@require_POST
def invite_bulk_view(request, slug, pk):
    """A CSV of addresses in; a CSV of (email, link, expires_at) out, or every bad row named and nothing made."""
    membership, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    form = BulkInviteForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, membership, campaign, status=400, bulk_problems=[errors_text(form)])
    text = form.cleaned_data["addresses"]
    if problem := unstorable_text_problem(text):
        return _page(request, membership, campaign, status=400, bulk_problems=[f"the file {problem}"])
    emails, problems = email_rows(text, _is_email)
    if problems:
        return _page(request, membership, campaign, status=400, bulk_problems=problems)
    try:
        made = invites_create_bulk(campaign=campaign, emails=emails, days=form.cleaned_data["days"],
                                   by=request.user, path=request.get_full_path())
    except InviteError as e:
        return _page(request, membership, campaign, status=400, bulk_problems=[str(e)])
    rows = [(m.invite.email, invite_link(request, m.token), m.invite.expires_at.isoformat()) for m in made]
    if mail_configured():
        try:
            invite_links_mail(campaign, rows)
        except (OSError, smtplib.SMTPException) as e:  # the invites stand: this file is the only copy of the links
            messages.error(request, f"The links could not be sent by e-mail ({e}); send them from the file "
                                    f"invites-campaign-{campaign.pk}.csv you downloaded.")
    # The app's one CSV rule: an address such as =cmd|…@x.org is never a formula in a spreadsheet.
    text = csv_text(["email", "link", "expires_at"],
                    ({"email": e, "link": link, "expires_at": at} for e, link, at in rows))
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="invites-campaign-{campaign.pk}.csv"'
    return response


@login_required
@require_POST
def invite_revoke_view(request, slug, pk, invite_pk):
    _, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    try:
        invite_revoke(campaign=campaign, invite_pk=invite_pk, by=request.user, path=request.get_full_path())
    except InviteError as e:
        messages.error(request, str(e))
    else:
        messages.success(request, f"Invite {invite_pk} revoked: its link lets nobody in now.")
    return redirect("campaign_invites", slug, pk)


@login_required
@require_POST
def open_items_deal_view(request, slug, pk):
    _, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    try:
        dealt = open_items_deal(campaign=campaign, by=request.user, path=request.get_full_path())
    except CampaignError as e:
        messages.error(request, str(e))
    else:
        messages.success(request, "Open items dealt: " + ", ".join(f"{n} to {name}" for name, n in dealt.items()) + ".")
    return redirect("campaign_invites", slug, pk)


@login_required
def completion_codes_csv(request, slug, pk):
    """Every rater's completion code (owners), to check against a crowd platform's list."""
    _, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    rows = completion_code_rows(campaign)
    audit_record(request, campaign.project, Kind.EXPORT, f"completion codes of campaign {campaign.pk} ({len(rows)} raters)")
    # Through the app's one CSV rule: usernames are chosen by invitees ("+1+1", "-2+3").
    text = csv_text(["rater", "completion_code", "queue_done", "rated", "open", "active"],
                    ({"rater": r["rater"], "completion_code": r["code"], "queue_done": "yes" if r["queue_done"] else "no",
                      "rated": r["rated"], "open": r["open"], "active": "yes" if r["active"] else "no"} for r in rows))
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="completion-codes-campaign-{campaign.pk}.csv"'
    return response


@login_required
def rate_completion_code(request, slug, pk):
    """Template annotations/invites/completion_code.html: the rater's code, once their queue is done."""
    membership, campaign = rater_campaign_for(request, slug, pk)
    return render(request, "annotations/invites/completion_code.html", {
        "membership": membership, "project": membership.project, "campaign": campaign,
        "code": rater_completion_code(campaign, request.user),
    })
