"""The project page's fixed task list: a cohort of exactly the listed targets (owners: it adds tasks)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from experiments.access import OWNERS, membership_for
from experiments.core.fixed_input_lists import FixedInputError
from experiments.data.sessions import CohortError
from experiments.data.fixed_input_cohorts import cohort_from_task_list
from experiments.web.form_errors import errors_text
from experiments.web.projects.forms import FIXED_INPUT_MAX_BYTES, TaskListForm


@login_required
@require_POST
def task_list_import_view(request, slug):
    """All or nothing; every problem is named with its line and nothing is stored."""
    membership = membership_for(request, slug, roles=OWNERS)
    form = TaskListForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, f"No cohort made: {errors_text(form)}")
        return redirect("project_detail", slug=slug)
    upload = form.cleaned_data["task_list"]
    if upload.size > FIXED_INPUT_MAX_BYTES:
        messages.error(request, f"No cohort made: the task list is over {FIXED_INPUT_MAX_BYTES // (1024 * 1024)} MB.")
        return redirect("project_detail", slug=slug)
    try:
        cohort = cohort_from_task_list(project=membership.project, name=form.cleaned_data["name"], data=upload.read(),
                                       label=upload.name, user=request.user)
    except (FixedInputError, CohortError) as exc:
        messages.error(request, f"No cohort made: {exc}")
        return redirect("project_detail", slug=slug)
    messages.success(request, f"Cohort {cohort.name}: {cohort.rule['targets']} tasks from the fixed task list.")
    return redirect("cohort_detail", slug=slug, pk=cohort.pk)
