"""The project page's one-click ready-made protocols (the paper's experiments, `experiments.execution.protocol_templates`)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from experiments.access import TEXT_READERS, membership_for
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.models import Cohort
from experiments.execution.protocol_templates import TemplateError, protocol_from_template
from experiments.web.bounded_input import BIG_INTEGER_COLUMN_MAX


@login_required
@require_POST
def protocol_from_template_view(request, slug):
    """Create the chosen experiment on the chosen cohort (owners and analysts); its page shows the
    expected calls and tokens and anything left out, before anyone seals it."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    template = request.POST.get("template", "")
    cohort = Cohort.objects.filter(project=membership.project, pk=_int(request.POST.get("cohort"))).first()
    if template not in PAPER_PROTOCOLS or cohort is None:
        messages.error(request, "Nothing was created: choose one of the experiments and one of this project's cohorts.")
        return redirect("project_detail", slug=slug)
    try:
        protocol, made = protocol_from_template(template=template, cohort=cohort, user=request.user)
    except TemplateError as exc:
        messages.error(request, f"Nothing was created: {exc}")
        return redirect("project_detail", slug=slug)
    text = (f"{made.template.title} created on {cohort.name}, with the offline stand-in as generator and judge: "
            "choose the models (Edit), check the expected calls and tokens, then seal it.")
    messages.success(request, text)
    for sentence in made.unavailable:
        messages.warning(request, sentence)
    return redirect("protocol_detail", slug=slug, pk=protocol.pk)


def _int(value) -> int | None:
    """A row id as posted, or None (also for one no id column can hold)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number <= BIG_INTEGER_COLUMN_MAX else None
