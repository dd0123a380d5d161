"""The run explorer and search (participant text: owners and analysts) and the cross-run
comparison (numbers only: every role but the rater)."""
from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.html import escape
from django.utils.safestring import mark_safe

from experiments.data.audit_log import Kind, audit_record
from experiments.execution.kind_table import kind_rules
from experiments.access import TEXT_READERS, membership_for, run_for, runs_for
from experiments.analysis.explorer import explorer_page
from experiments.analysis.explorer_query import GRADES, ExplorerQuery
from experiments.analysis.explorer_search import search_predictions, search_tasks
from experiments.analysis.task_filters import offered_filters
from experiments.analysis.run_comparison import ComparisonError, compare_runs
from experiments.core.conditions import FUSION, SELECTION, get_condition, prediction_labels
from experiments.execution.policy import offline_roles
from experiments.models import Run, Study


@login_required
def run_explorer(request, slug, pk):
    """Template experiments/predictions/run_explorer.html: the run's tasks × conditions, filtered
    and sorted by the query string, 50 per page. Every filter lives in the URL, so a filtered
    list can be shared and the back button returns to it; the dashboard links here.

    Query-string parameters (all optional, combined with AND):
    - `condition` + `grade` (repeatable, paired in order): that condition's grade is 0–3;
    - `a`, `ga`, `b`, `gb`: disagreement, condition `a` graded `ga` and `b` graded `gb`
      (e.g. a=ownwords…&ga=3&b=memory…&gb=0); `a` and `b` without grades: their grades differ;
    - `study` (study key), `person` (person label), `q` (words in the question, case-insensitive);
    - `missing=1`: some condition's grade is missing;
    - `copied=1`: a fusion condition's answer is a verbatim copy of one of its candidates;
    - `chosen=<label>`: a selection condition chose candidate `label` (b0, b1, b2);
    - `answered=<condition>`: that condition's final answer has a text (an empty one too: the
      answers the dashboard's answer-length box of the condition counts);
    - `filter=<key>` (repeatable): a filter another app registered (`analysis.task_filters`),
      e.g. `judge-human`: the human raters' consensus differs from the judge (offered only on
      runs with a rating campaign; annotations registers it, experiments never imports it);
    - `sort`: `task` (cohort order, the default), `person`, `study`, `grade:<condition>`,
      `diff` (grade of `a` minus grade of `b`); a leading `-` sorts descending;
    - `page`: 1-based page number.
    """
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    if respondents := kind_rules(run.protocol).respondents:
        return redirect(respondents, slug=slug, pk=pk)  # items and options, not tasks
    protocol = run.protocol
    query = ExplorerQuery.from_params(request.GET, protocol.conditions)
    page = explorer_page(run, query)
    audit_record(request, membership.project, Kind.TASK, f"explorer of run {run.pk}, page {page.number}")
    filters = urlencode(query.params())
    sorts = {"task": "task", "person": "person", "study": "study"}
    # The current sort, marked on its column (aria-sort and an arrow): a second click reverses it.
    sort_key = query.sort.lstrip("-")
    sort_direction = "descending" if query.sort.startswith("-") else "ascending"
    return render(request, "experiments/predictions/run_explorer.html", {
        "membership": membership, "project": membership.project, "run": run, "protocol": protocol,
        "query": query, "page": page, "filters": filters,
        "rows": [{**row, "chips": grade_chips(row["cells"], protocol.conditions)} for row in page.rows],
        "conditions": protocol.conditions, "grades": GRADES,
        "grade_pairs": list(query.grades) + [("", None)],
        "studies": Study.objects.filter(project=membership.project).values_list("key", flat=True),
        "has_fusion": any(get_condition(k).workflow == FUSION for k in protocol.conditions),
        "selection_labels": _selection_labels(protocol.conditions),
        "task_filters": offered_filters(run),
        "sort_links": {name: _with(query, sort=_toggled(query.sort, value)) for name, value in sorts.items()},
        "grade_sort_links": [(key, _with(query, sort=_toggled(query.sort, f"grade:{key}")), sort_key == f"grade:{key}")
                             for key in protocol.conditions],
        "sort_key": sort_key, "sort_direction": sort_direction,
        "sort_arrow": "▼" if sort_direction == "descending" else "▲",
        "diff_sort_link": _with(query, sort=_toggled(query.sort, "diff")) if query.a and query.b else "",
        "previous_link": _with(query, page=page.number - 1), "next_link": _with(query, page=page.number + 1),
        "last_link": _with(query, page=page.pages),
        "offline": offline_roles(protocol),
    })


def grade_chips(cells: dict, conditions) -> str:
    """A row's grade cells as HTML, built here rather than in the template: 50 rows × 14
    conditions of template tags and filters cost more than the query behind the page. Plain
    string formatting: a score is an int, a status a fixed word; the chosen label is escaped."""
    parts = []
    for key in conditions:
        cell = cells.get(key)
        if cell is None or cell["score"] is None:
            title = escape(cell["status"]) if cell else "no answer"
            parts.append(f'<td class="num"><span class="chip gnone" title="{title}">—</span></td>')
            continue
        score = int(cell["score"])
        chosen = f' <span class="muted" title="selection chose">{escape(cell["chosen"])}</span>' if cell["chosen"] else ""
        parts.append(f'<td class="num"><span class="chip g{score}" title="normalized {cell["normalized"]:.2f}">{score}</span>'
                     f'{chosen}</td>')
    return mark_safe("".join(parts))  # numbers, and words escaped above


def _selection_labels(conditions) -> list[str]:
    labels = set()
    for key in conditions:
        condition = get_condition(key)
        if condition.workflow == SELECTION:
            labels.update(prediction_labels(condition))
    return sorted(labels)


def _toggled(current: str, value: str) -> str:
    """Sort by `value`; a second click on the same column reverses it."""
    return f"-{value}" if current == value else value


def _with(query: ExplorerQuery, **changes) -> str:
    """The query string of `query` with a new sort or page."""
    pairs = [(k, v) for k, v in query.params() if k not in changes]
    for name, value in changes.items():
        if not (name == "sort" and value == "task") and not (name == "page" and value == 1):
            pairs.append((name, str(value)))
    return "?" + urlencode(pairs)


@login_required
def project_search(request, slug):
    """Template experiments/predictions/project_search.html: `q` searched in the project's task
    questions, reference answers and predictions (PostgreSQL full text)."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    project = membership.project
    text = (request.GET.get("q") or "").strip()[:200]
    tasks = search_tasks(project, text) if text else []
    predictions = search_predictions(project, text) if text else []
    if text:
        audit_record(request, project, Kind.TASK, f"search for {text!r}")
    runs = Run.objects.select_related("protocol").filter(pk__in={row["prediction"].run_id for row in predictions})
    return render(request, "experiments/predictions/project_search.html", {
        "membership": membership, "project": project, "q": text, "tasks": tasks, "predictions": predictions,
        "offline_runs": offline_run_numbers(runs, "generator"),
    })


def offline_run_numbers(runs, role: str = "any") -> list[int]:
    """The runs among `runs` whose `role` (generator, judge or any) is the offline stand-in,
    in order: a page mixing runs names them once, so no stand-in output passes for a model's."""
    return sorted(run.pk for run in runs if offline_roles(run.protocol)[role])


@login_required
def run_compare(request, slug):
    """Template experiments/predictions/run_compare.html: two or more runs on the same cohort
    side by side (`run` repeated), each condition's mean, and for `condition` the paired
    whole-person contrast of every run against the first. Numbers only."""
    membership, runs = runs_for(request, slug)
    project = membership.project
    comparison, error = None, ""
    if len(runs) >= 2:
        try:
            comparison = compare_runs(runs, request.GET.get("condition") or "")
        except ComparisonError as exc:
            error = str(exc)
    choices = Run.objects.filter(protocol__project=project).select_related("protocol").order_by("-pk")[:200]
    return render(request, "experiments/predictions/run_compare.html", {
        "membership": membership, "project": project, "runs": runs, "choices": choices,
        "comparison": comparison, "error": error, "can_read_text": membership.can_read_text(),
        "offline_runs": offline_run_numbers(runs) if comparison else [],
    })
