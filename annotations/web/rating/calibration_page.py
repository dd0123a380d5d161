"""The rater's calibration round: one gold item at a time, the gold grade and the owner's reason
shown after each, then the verdict. Works without JavaScript (plain forms)."""
from django import forms
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from annotations import rubric
from annotations.calibration import CalibrationError, calibration_answer, calibration_state
from annotations.campaign_access import rater_campaign_for
from experiments.data.audit_log import Kind, audit_record
from experiments.web.bounded_input import INTEGER_COLUMN_MAX, BoundedIntegerField


class CalibrationForm(forms.Form):
    number = BoundedIntegerField(min_value=1, max_value=INTEGER_COLUMN_MAX)
    grade = forms.TypedChoiceField(choices=[(g, g) for g in range(4)], coerce=int)


@login_required
def calibrate_page(request, slug, pk):
    """Template annotations/rating/calibrate.html."""
    membership, campaign = rater_campaign_for(request, slug, pk)
    feedback, error = None, None
    if request.method == "POST":
        form = CalibrationForm(request.POST)
        if not form.is_valid():
            error = "choose a grade from 0 to 3"
        else:
            try:
                feedback = calibration_answer(campaign=campaign, user=request.user, **form.cleaned_data)
            except CalibrationError as e:
                error = str(e)
    try:
        state = calibration_state(campaign, request.user)
    except CalibrationError as e:
        state, error = None, str(e)
    if state and state["qualified"] and feedback is None and request.method == "GET":
        return redirect("rate_page", slug, pk)
    if state and state["item"] is not None and feedback is None:
        # Texts opened, as on the rating page: in the audit log.
        audit_record(request, campaign.project, Kind.TASK,
                     f"calibration item {state['item']['number']} of campaign {campaign.pk}")
    return render(request, "annotations/rating/calibrate.html", {
        "membership": membership, "project": membership.project, "campaign": campaign, "state": state,
        "feedback": feedback, "error": error, "instruction": rubric.instruction(), "rubric": rubric.rubric_lines(),
        "grades": sorted(rubric.grade_labels().items(), reverse=True),
    }, status=400 if error and request.method == "POST" else 200)
