"""Owners' page of a campaign's calibration round and hidden gold checks: the pass mark, which gold
items calibrate, and each rater's verdict and gold accuracy (flagged under the pass mark), with
"try again" and "let in" for a rater who did not pass. Each action posts here and redirects back."""
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect, render

from annotations.calibration import (
    MAX_GOLD_NOTE_CHARS, CalibrationError, calibration_item_set, calibration_let_in, calibration_required,
    qualify_raters_already_rating, rater_quality,
)
from annotations.campaign_access import campaign_for
from annotations.models import CampaignRater, RatingCampaign
from experiments.access import OWNERS
from experiments.web.bounded_input import INTEGER_COLUMN_MAX, BoundedIntegerField
from experiments.web.text_input import StorableTextMixin

ACTIONS = ("pass_mark", "calibration", "retry", "let_in")


class PassMarkForm(forms.Form):
    qualification_percent = BoundedIntegerField(min_value=0, max_value=100, label="Pass mark (% exact)")


class CalibrationItemForm(StorableTextMixin, forms.Form):
    number = BoundedIntegerField(min_value=1, max_value=INTEGER_COLUMN_MAX, label="Gold item")
    on = forms.BooleanField(required=False, label="Use for calibration")
    note = forms.CharField(required=False, max_length=MAX_GOLD_NOTE_CHARS, label="Why this grade (shown as feedback)")


class RaterDecisionForm(StorableTextMixin, forms.Form):
    username = forms.CharField(max_length=150)


def _act(campaign, action, data, user) -> str:
    if action == "pass_mark":
        form = PassMarkForm(data)
        if not form.is_valid():
            raise CalibrationError("the pass mark is a whole percentage, 0 to 100")
        with transaction.atomic():
            locked = RatingCampaign.objects.select_for_update().get(pk=campaign.pk)
            locked.qualification_percent = form.cleaned_data["qualification_percent"]
            locked.save(update_fields=["qualification_percent"])
            kept = qualify_raters_already_rating(locked)
        return f"Pass mark set to {locked.qualification_percent}%." + (
            f" {kept} rater(s) who had rated already keep their queue." if kept else "")
    if action == "calibration":
        form = CalibrationItemForm(data)
        if not form.is_valid():
            raise CalibrationError(next(iter(form.errors.values()))[0])
        item = calibration_item_set(campaign=campaign, by=user, **form.cleaned_data)
        return f"Item {item.number} {'calibrates raters' if item.calibration else 'is back in the queues'}."
    form = RaterDecisionForm(data)
    if not form.is_valid():
        raise CalibrationError("name a rater")
    rater = calibration_let_in(campaign=campaign, username=form.cleaned_data["username"], retry=action == "retry")
    return (f"{rater.user.username} may try again (attempt {rater.calibration_attempt})." if action == "retry"
            else f"{rater.user.username} is let into the queue.")


@login_required
def campaign_calibration(request, slug, pk):
    """Template annotations/campaigns/calibration.html (owners)."""
    membership, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    if request.method == "POST":
        action = request.POST.get("action", "")
        if not campaign.is_open():
            messages.error(request, "This campaign is closed.")
        elif action not in ACTIONS:
            messages.error(request, "Unknown action.")
        else:
            try:
                messages.success(request, _act(campaign, action, request.POST, request.user))
            except CalibrationError as e:
                messages.error(request, str(e))
        return redirect("campaign_calibration", slug, pk)
    quality = rater_quality(campaign)
    raters = [{"username": r.user.username, "active": r.active, **quality[r.user_id]}
              for r in CampaignRater.objects.filter(campaign=campaign).select_related("user")]
    return render(request, "annotations/campaigns/calibration.html", {
        "membership": membership, "project": membership.project, "campaign": campaign,
        "required": calibration_required(campaign), "raters": raters,
        "gold": campaign.items.filter(gold_grade__isnull=False).order_by("number"),
        "pass_form": PassMarkForm(initial={"qualification_percent": campaign.qualification_percent}),
        "item_form": CalibrationItemForm(),
    })
