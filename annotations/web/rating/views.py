"""The rater's page: one item at a time, keyboard first, no reload between items.

The page renders the first item on the server (it works without JavaScript: forms post and
redirect back); static/js/rating.js then submits with fetch and swaps in the next item from
the JSON answer. Every response here is built from `annotations.rating.rater_item`, the one
place that decides what a rater sees.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotations import rubric
from annotations.campaign_access import rater_campaign_for
from annotations.guidelines import guidelines_view
from annotations.content_check import is_content_check
from annotations.pairwise import is_pairwise
from annotations.rating import CALIBRATION_FIRST, RatingError, rater_item, rating_record, rating_undo
from annotations.web.rating.forms import RatingForm
from experiments.data.audit_log import Kind, audit_record


def _wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


@login_required
def rate_page(request, slug, pk):
    """Template annotations/rating/rate.html."""
    membership, campaign = rater_campaign_for(request, slug, pk)
    view, refusal = _current(request, campaign)
    if refusal == CALIBRATION_FIRST:
        return redirect("rate_calibrate", slug, pk)
    return render(request, "annotations/rating/rate.html", {
        "membership": membership, "project": membership.project, "campaign": campaign,
        "view": view, "refusal": refusal, "guidelines": guidelines_view(campaign),
        "instruction": rubric.instruction(), "rubric": rubric.rubric_lines(),
        "grades": sorted(rubric.grade_labels().items(), reverse=True),
    })


def _current(request, campaign) -> tuple[dict | None, str | None]:
    """(the rater's view, None), or (None, why they may not rate). An item shown is a task's
    texts opened: it goes in the audit log like any other."""
    try:
        view = rater_item(campaign, request.user)
    except RatingError as e:
        return None, str(e)
    if view["item"] is not None:
        audit_record(request, campaign.project, Kind.TASK,
                     f"rating item (assignment {view['item']['assignment']}) of campaign {campaign.pk}")
    return view, None


@login_required
def rate_item_json(request, slug, pk):
    _, campaign = rater_campaign_for(request, slug, pk)
    view, refusal = _current(request, campaign)
    return JsonResponse(view if view is not None else {"error": refusal}, status=200 if view else 403)


def _answer(request, campaign, slug, pk, *, error: str | None = None, done: str | None = None):
    if _wants_json(request):
        view, refusal = _current(request, campaign)
        body = {**(view or {}), "error": error or refusal} if (error or refusal) else {**view, "ok": done}
        return JsonResponse(body, status=400 if error else 200)
    if error:
        messages.error(request, error)
    return redirect("rate_page", slug, pk)


@login_required
@require_POST
def rate_submit(request, slug, pk):
    """Store a rating, then answer with the next item (JSON) or redirect (plain form)."""
    _, campaign = rater_campaign_for(request, slug, pk)
    form = RatingForm(request.POST, pairwise=is_pairwise(campaign), content_check=is_content_check(campaign))
    try:
        if not form.is_valid():
            raise RatingError(form.problem())
        rating_record(campaign=campaign, user=request.user, **form.rating())
    except RatingError as e:
        return _answer(request, campaign, slug, pk, error=str(e))
    return _answer(request, campaign, slug, pk, done="stored")


@login_required
@require_POST
def rate_undo(request, slug, pk):
    _, campaign = rater_campaign_for(request, slug, pk)
    try:
        rating_undo(campaign=campaign, user=request.user)
    except RatingError as e:
        return _answer(request, campaign, slug, pk, error=str(e))
    return _answer(request, campaign, slug, pk, done="undone")
