"""A campaign's guidelines page: owners publish versions; raters of the campaign and the project's
other members read the latest. Publishing goes through `annotations.guidelines`."""
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from annotations.campaign_access import campaign_for, rater_campaign_for
from annotations.core.guidelines_markup import MAX_GUIDELINES_CHARS
from annotations.guidelines import GuidelinesError, guidelines_current, guidelines_history, guidelines_publish, guidelines_view
from experiments.access import AGGREGATE_READERS, OWNERS, membership_for
from experiments.models import Role
from experiments.web.text_input import StorableTextMixin


class GuidelinesForm(StorableTextMixin, forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 18, "cols": 90}), max_length=MAX_GUIDELINES_CHARS,
                           label="Guidelines (Markdown)", strip=False,
                           help_text="headings, lists, emphasis, tables, quotes and code; no images or raw HTML")


@login_required
def campaign_guidelines(request, slug, pk):
    """Template annotations/campaigns/guidelines.html."""
    if membership_for(request, slug).role == Role.RATER:
        membership, campaign = rater_campaign_for(request, slug, pk)
    else:
        membership, campaign = campaign_for(request, slug, pk, roles=AGGREGATE_READERS)
    is_owner = membership.role == Role.OWNER
    form = None
    if is_owner:
        current = guidelines_current(campaign)
        form = GuidelinesForm(request.POST or None, initial={"text": current.text if current else ""})
        if request.method == "POST" and form.is_valid():
            try:
                published = guidelines_publish(campaign=campaign, text=form.cleaned_data["text"], user=request.user)
            except GuidelinesError as e:
                form.add_error(None, str(e))
            else:
                messages.success(request, f"Guidelines version {published.version} published: raters see it "
                                          "on their next page, and their ratings record it.")
                return redirect("campaign_guidelines", slug, pk)
    elif request.method == "POST":
        campaign_for(request, slug, pk, roles=OWNERS)  # refused: 403 for every other role
    return render(request, "annotations/campaigns/guidelines.html", {
        "membership": membership, "project": membership.project, "campaign": campaign, "is_owner": is_owner,
        "guidelines": guidelines_view(campaign), "form": form,
        "history": guidelines_history(campaign) if is_owner else [],
    })
