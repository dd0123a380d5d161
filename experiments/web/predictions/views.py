"""Prediction pages (participant text: owners and analysts): a run's tasks, and one task's answers beside the real one."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render

from urllib.parse import urlencode

from experiments.access import TEXT_READERS, run_for
from experiments.data.audit_log import Kind, audit_record
from experiments.analysis.explorer import PAGE_SIZE, ExplorerQuery, explorer_neighbours
from experiments.analysis.grades import final_grades
from experiments.web.predictions.task_page import task_cards, transcript

from experiments.data.sessions import cohort_tasks
from experiments.execution.policy import offline_roles
from experiments.execution.kind_table import kind_rules
from experiments.models import CohortTask

TASKS_PER_PAGE = 25


@login_required
def prediction_list(request, slug, pk):
    """Template experiments/predictions/prediction_list.html: the run's tasks with each condition's grade."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    if respondents := kind_rules(run.protocol).respondents:
        return redirect(respondents, slug=slug, pk=pk)  # a survey run has respondents, not tasks
    protocol = run.protocol
    page = Paginator(cohort_tasks(protocol.cohort), TASKS_PER_PAGE).get_page(request.GET.get("page"))
    audit_record(request, membership.project, Kind.TASK, f"task list of run {run.pk}, page {page.number}")
    grades = final_grades(run)
    rows = [
        {"task": task, "number": page.start_index() + i,
         "grades": [grades.get(key, {}).get(task.pk) for key in protocol.conditions]}
        for i, task in enumerate(page)
    ]
    return render(request, "experiments/predictions/prediction_list.html", {
        "membership": membership, "project": membership.project, "run": run, "protocol": protocol,
        "page": page, "rows": rows, "offline": offline_roles(protocol),
    })


@login_required
def prediction_detail(request, slug, pk, task_pk):
    """Template experiments/predictions/prediction_detail.html: one task, a card per condition and
    slot, the transcript with each condition's evidence marked, and j/k through the explorer's
    list: the page's query string is the explorer's filters and sort (see `run_explorer`)."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    protocol = run.protocol
    entry = get_object_or_404(
        CohortTask.objects.select_related("task__session__person", "task__session__study",
                                          "task__question_turn", "task__answer_turn"),
        cohort=protocol.cohort, task_id=task_pk,
    )
    task = entry.task
    audit_record(request, membership.project, Kind.TASK, f"task {task.pk} (session {task.session.external_id}) in run {run.pk}")
    query = ExplorerQuery.from_params(request.GET, protocol.conditions)
    cards = task_cards(run, task)
    filters = urlencode(query.params())
    neighbours = explorer_neighbours(run, query, task.pk, entry.position)
    # "back to the list" opens the explorer page holding this task, not always the first one.
    list_page = (neighbours["place"] - 1) // PAGE_SIZE + 1 if neighbours.get("place") else 1
    list_filters = urlencode([*query.params(), ("page", list_page)]) if list_page > 1 else filters
    return render(request, "experiments/predictions/prediction_detail.html", {
        "membership": membership, "project": membership.project, "run": run, "protocol": protocol,
        "task": task, "position": entry.position + 1, "columns": cards["columns"],
        "identical": cards["identical"], "transcript": transcript(task, cards["columns"]),
        "neighbours": neighbours, "filters": filters, "list_filters": list_filters, "query": query,
        "reference_words": len(task.answer_turn.text.split()), "offline": offline_roles(protocol),
    })
