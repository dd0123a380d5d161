"""Owners' campaign pages: create over a finished run, raters, reassignment, gold, close, adjudication.

Every action posts to its own URL, calls one service of `annotations.campaigns` or
`annotations.adjudication` and redirects back with the service's message.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.db.models.functions import Substr
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotations.campaign_access import campaign_for
from annotations.adjudication import AdjudicationError, adjudicate, adjudication_queue, disputed_items
from annotations.campaigns import (
    CampaignError, assignments_reassign, campaign_close, campaign_create, campaign_progress, gold_set, rater_add,
    rater_remove,
)
from annotations.models import Assignment, CampaignRater, RatingCampaign
from annotations.web.campaigns.forms import AdjudicationForm, CampaignForm, GoldForm, RaterForm
from experiments.access import OWNERS, membership_for, run_for
from experiments.data.audit_log import Kind, audit_record
from experiments.models import Membership, Role, Run


GOLD_CHOICES_SHOWN = 2000


@login_required
def campaign_list(request, slug):
    """Template annotations/campaigns/campaign_list.html.

    Raters see only the campaigns they rate, with their own progress; other roles see all
    campaigns (names and counts), owners also the finished runs they can start one on.
    """
    membership = membership_for(request, slug)
    project = membership.project
    campaigns = RatingCampaign.objects.filter(project=project).select_related("run__protocol")
    context = {"membership": membership, "project": project}
    if membership.role == Role.RATER:
        mine = campaigns.filter(raters__user=request.user).annotate(
            assigned=Count("assignments", filter=Q(assignments__rater=request.user)
                           & ~Q(assignments__status=Assignment.Status.REASSIGNED)),
            done=Count("assignments", filter=Q(assignments__rater=request.user,
                                               assignments__status=Assignment.Status.DONE)),
        )
        context["campaigns"] = mine
    else:
        context["campaigns"] = campaigns.annotate(item_count=Count("items", distinct=True))
    if membership.is_owner():
        context["finished_runs"] = Run.objects.filter(protocol__project=project, status=Run.Status.FINISHED
                                                      ).select_related("protocol")
    return render(request, "annotations/campaigns/campaign_list.html", context)


@login_required
def campaign_create_view(request, slug, run_pk):
    """Template annotations/campaigns/campaign_form.html (owners)."""
    membership, run = run_for(request, slug, run_pk, roles=OWNERS)
    form = CampaignForm(request.POST or None, run=run)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = campaign_create(
                run=run, name=data["name"], conditions=data["conditions"], raters=data["raters"],
                user=request.user, sample=data["sample"], sample_size=data["sample_size"], seed=data["seed"],
                ratings_per_item=data["ratings_per_item"], repeat_percent=data["repeat_percent"] or 0,
            )
        except CampaignError as e:
            form.add_error(None, str(e))
        else:
            messages.success(request, f"Campaign {campaign.name} created: {campaign.items.count()} items.")
            return redirect("campaign_detail", slug, campaign.pk)
    return render(request, "annotations/campaigns/campaign_form.html", {
        "membership": membership, "project": membership.project, "run": run, "form": form,
    })


@login_required
def campaign_detail(request, slug, pk):
    """Template annotations/campaigns/campaign_detail.html: progress per rater and the owner's actions.

    Analysts and viewers go to the results (aggregate numbers); raters to their queue.
    """
    membership = membership_for(request, slug)
    if membership.role == Role.RATER:
        return redirect("rate_page", slug, pk)
    if not membership.is_owner():
        return redirect("campaign_results", slug, pk)
    membership, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    active = set(CampaignRater.objects.filter(campaign=campaign, active=True).values_list("user__username", flat=True))
    addable = (Membership.objects.filter(project=campaign.project, role=Role.RATER)
               .exclude(user__username__in=active).select_related("user").order_by("user__username"))
    gold_choices = []
    if campaign.kind == "grade":  # (a pairwise or content-check campaign has no gold items)
        # The gold form's choices: each item's number and the start of its answer, participant-derived
        # text an owner reads, so audited.
        gold_choices = list(campaign.items.order_by("number").annotate(preview=Substr("prediction__text", 1, 70))
                            .values_list("number", "preview")[:GOLD_CHOICES_SHOWN])
        audit_record(request, campaign.project, Kind.TASK, f"answer previews of campaign {campaign.pk} (gold choices)")
    return render(request, "annotations/campaigns/campaign_detail.html", {
        "membership": membership, "project": membership.project, "campaign": campaign,
        "progress": campaign_progress(campaign), "addable": addable,
        "items": campaign.items.count(), "gold": campaign.items.filter(gold_grade__isnull=False).order_by("number"),
        "gold_choices": gold_choices,
        "disputed": len(disputed_items(campaign)),  # a count: no texts loaded
        "rater_form": RaterForm(), "gold_form": GoldForm(),
    })


def _owner_action(request, slug, pk, action, success):
    """Run `action(campaign)` for an owner; its CampaignError becomes the page's message."""
    _, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    try:
        result = action(campaign)
    except CampaignError as e:
        messages.error(request, str(e))
    else:
        messages.success(request, success(result))
    return redirect("campaign_detail", slug, pk)


@login_required
@require_POST
def campaign_rater_add(request, slug, pk):
    name = request.POST.get("username", "").strip()
    return _owner_action(request, slug, pk, lambda c: rater_add(campaign=c, username=name),
                         lambda _: f"{name} added. Reassign open items to share the work.")


@login_required
@require_POST
def campaign_rater_remove(request, slug, pk):
    name = request.POST.get("username", "").strip()
    return _owner_action(request, slug, pk, lambda c: rater_remove(campaign=c, username=name, by=request.user,
                                                               path=request.get_full_path()),
                         lambda n: f"{name} removed; {n} open items went to the other raters.")


@login_required
@require_POST
def campaign_reassign(request, slug, pk):
    name = request.POST.get("username", "").strip()
    return _owner_action(request, slug, pk,
                         lambda c: assignments_reassign(campaign=c, username=name, by=request.user),
                         lambda n: f"{n} open items of {name} went to the other raters.")


@login_required
@require_POST
def campaign_gold(request, slug, pk):
    form = GoldForm(request.POST)
    if not form.is_valid():
        campaign_for(request, slug, pk, roles=OWNERS)  # the access check comes before any message
        messages.error(request, "Give an item number and a gold grade of 0 to 3.")
        return redirect("campaign_detail", slug, pk)
    number, grade = form.cleaned_data["number"], form.cleaned_data["grade"]
    return _owner_action(request, slug, pk, lambda c: gold_set(campaign=c, number=number, grade=grade),
                         lambda _: f"Item {number} is {'no longer gold' if grade is None else f'gold, grade {grade}'}.")


@login_required
@require_POST
def campaign_close_view(request, slug, pk):
    return _owner_action(request, slug, pk, lambda c: campaign_close(campaign=c),
                         lambda _: "Campaign closed: no more ratings are taken.")


@login_required
def campaign_adjudication(request, slug, pk):
    """Template annotations/campaigns/adjudication.html: disputed items with every rating (owners)."""
    membership, campaign = campaign_for(request, slug, pk, roles=OWNERS)
    if request.method == "POST":
        form = AdjudicationForm(request.POST)
        if form.is_valid():
            try:
                adjudicate(campaign=campaign, user=request.user, **form.cleaned_data)
            except AdjudicationError as e:
                messages.error(request, str(e))
            else:
                messages.success(request, f"Item {form.cleaned_data['number']} adjudicated.")
        else:
            messages.error(request, "An adjudicated grade is 0, 1, 2 or 3.")
        return redirect("campaign_adjudication", slug, pk)
    rows = adjudication_queue(campaign)
    if rows:  # questions, real answers and predictions shown: a task's texts opened, in the audit log
        audit_record(request, campaign.project, Kind.TASK,
                     f"adjudication of campaign {campaign.pk} ({len(rows)} disputed items)")
    return render(request, "annotations/campaigns/adjudication.html", {
        "membership": membership, "project": membership.project, "campaign": campaign,
        "rows": rows, "form": AdjudicationForm(),
    })
