"""Pages for projects, sessions, imports and cohorts.

Each view starts with `membership_for`, which is the whole access check.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from experiments.data.audit_log import Kind, audit_record
from experiments.access import (
    AGGREGATE_READERS, OWNERS, PROJECT_CREATION_REFUSAL, TEXT_READERS, may_create_projects, membership_for,
    memberships_of,
)
from experiments.data.import_jobs import (
    QueueUnavailable, background_threshold_bytes, import_enqueue, import_progress, upload_limit_bytes,
)
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.web.form_errors import errors_text
from experiments.web.projects.next_step import next_step
from experiments.core.fixed_input_lists import FixedInputError
from experiments.data.fixed_input_cohorts import cohort_draw_excluding
from experiments.web.projects.forms import (FIXED_INPUT_MAX_BYTES, CohortForm, ImportForm, TaskListForm, TaskRuleForm,
                                            declared_upload_over, upload_too_large_message)
from experiments.core.interviews.readers import GENAGENTS_FILES, format_from_name, parse_genagents, stream_binary
from experiments.core.interviews.records import InterviewFileError, Problem, decode_utf8, unstorable_text_problem
from experiments.models import Cohort, Run, Session, Study, SurveyItem, SurveyRespondent, Task, Turn
from experiments.data.sessions import (
    CohortError, cohort_draw, cohort_tasks, project_task_rule, sessions_import, tasks_derive,
)
from experiments.core.tasks import TaskRule

SESSIONS_PER_PAGE = 100


@login_required
def project_list(request):
    """Template experiments/projects/project_list.html: the projects the user belongs to (a
    superuser: every project, `access.SUPERUSER_ROLE` where not a member)."""
    memberships = memberships_of(request.user)
    return render(request, "experiments/projects/project_list.html", {
        "memberships": memberships, "may_create": may_create_projects(request.user),
        "creation_refusal": PROJECT_CREATION_REFUSAL})


@login_required
def project_detail(request, slug):
    """Template experiments/projects/project_detail.html: studies, sessions, cohorts and counts.

    Viewers and raters see counts only; the session list (ids linking to
    transcripts) is for roles that may read text.
    """
    membership = membership_for(request, slug)
    project = membership.project
    task_set = project.current_task_set()
    task_filter = Q(sessions__tasks__task_set=task_set) if task_set else Q(pk__in=[])
    studies = Study.objects.filter(project=project).annotate(
        session_count=Count("sessions", distinct=True),
        task_count=Count("sessions__tasks", filter=task_filter, distinct=True),
    )
    context = {
        "membership": membership,
        "project": project,
        "task_set": task_set,
        "studies": studies,
        "session_count": Session.objects.filter(project=project).count(),
        "turn_count": Turn.objects.filter(session__project=project).count(),
        "task_count": task_set.tasks.count() if task_set else 0,
        "eligible_count": task_set.tasks.values("session").distinct().count() if task_set else 0,
        "cohorts": project.cohorts.annotate(task_count=Count("cohort_tasks")).select_related("task_set"),
    }
    if membership.can_read_text():
        sessions = (
            Session.objects.filter(project=project)
            .select_related("study", "person")
            .annotate(
                # Correlated counts: joining turns and tasks at once would multiply rows.
                turn_count=_count_per_session(Turn.objects.all()),
                task_count=_count_per_session(Task.objects.filter(task_set=task_set)),
            )
            .order_by("external_id")
        )
        context["page"] = Paginator(sessions, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
        context["cohort_form"] = CohortForm(project=project)
        if membership.is_owner():
            context["task_list_form"] = TaskListForm()
    if membership.is_owner():
        context["rule_form"] = TaskRuleForm(initial=_rule_initial(project_task_rule(project)))
    if membership.role in AGGREGATE_READERS:
        # Raters are blinded to conditions and grades, so protocols and runs are not listed for them.
        context["protocols"] = project.protocols.select_related("cohort").prefetch_related("runs")
        context["paper_protocols"] = [(p.key, f"{p.title} ({p.section})") for p in PAPER_PROTOCOLS.values()]
    # A project of survey studies and no interview: its own summary and steps, no interview forms.
    survey_only = context["session_count"] == 0 and project.survey_studies.exists()
    if survey_only:
        context["survey_summary"] = survey_summary(project)
        context.pop("paper_protocols", None)
    context["survey_only"] = survey_only
    step = next_step(membership, sessions=context["session_count"], tasks=context["task_count"],
                     cohorts=len(context["cohorts"]), survey_only=survey_only)
    if step is not None:
        context["next_step"] = step
        context["next_step_url"] = reverse(step.url_name, args=step.args) + step.anchor
        if step.also is not None:
            context["next_step_also_url"] = reverse(step.also.url_name, args=step.also.args) + step.also.anchor
    return render(request, "experiments/projects/project_detail.html", context)


def survey_summary(project) -> dict:
    """Counts of a survey project's page: respondents, their target items, samples and runs."""
    return {
        "respondents": SurveyRespondent.objects.filter(study__project=project).count(),
        "items": SurveyItem.objects.filter(respondent__study__project=project).count(),
        "samples": project.cohorts.count(),
        "runs": Run.objects.filter(protocol__project=project).count(),
    }


def _count_per_session(queryset):
    counts = queryset.filter(session=OuterRef("pk")).order_by().values("session").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counts), 0)


def _rule_initial(rule: TaskRule):
    return {"min_pairs": rule.min_pairs, "min_targets": rule.min_targets, "max_targets": rule.max_targets}


@login_required
def session_detail(request, slug, session_id):
    """Template experiments/projects/session_detail.html: transcript, screener, targets and cut.

    Participant text: owners and analysts only.
    """
    membership = membership_for(request, slug, roles=TEXT_READERS)
    project = membership.project
    if unstorable_text_problem(session_id):  # no stored id holds one; the database would refuse the lookup
        raise Http404("No such session")
    session = get_object_or_404(
        Session.objects.select_related("study", "person"), project=project, external_id=session_id
    )
    audit_record(request, project, Kind.SESSION, f"session {session.external_id}")
    task_set = project.current_task_set()
    tasks = list(Task.objects.filter(session=session, task_set=task_set).order_by("position")) if task_set else []
    targets_by_question = {t.cut: t for t in tasks}
    answers = {t.answer_turn_id for t in tasks}
    record_cut = tasks[0].record_cut if tasks else None
    rows = []
    for turn in session.turns.all():
        rows.append(
            {
                "turn": turn,
                "target": targets_by_question.get(turn.index),
                "is_reference": turn.pk in answers,
                "record_cut_here": turn.index == record_cut,
            }
        )
    return render(
        request,
        "experiments/projects/session_detail.html",
        {
            "membership": membership,
            "project": project,
            "session": session,
            "rows": rows,
            "screener": session.screener_items.all(),
            "tasks": tasks,
            "task_set": task_set,
        },
    )


@csrf_exempt
@login_required
def session_import(request, slug):
    """Template experiments/projects/session_import.html: upload interview files (owners).

    An upload larger than OWNWORDS_MAX_UPLOAD_MB is refused from its Content-Length, before
    its body is read; that is why this outer view runs before the CSRF check (which would
    read the body) and the inner one is CSRF-protected.
    """
    membership = membership_for(request, slug, roles=OWNERS)
    if (declared := declared_upload_over(request, upload_limit_bytes())) is not None:
        return _import_page(request, membership, ImportForm(), status=413,
                            results=[(False, upload_too_large_message(None, declared))])
    return _session_import_checked(request, membership)


@csrf_protect
def _session_import_checked(request, membership):
    project = membership.project
    results = []
    if request.method == "POST":
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            results, queued = _import_uploads(project, form.cleaned_data["files"], form.cleaned_data["format"],
                                              request.user)
            if all(ok for ok, _ in results):
                for _, text in results:
                    messages.success(request, text)
                if len(queued) == 1 and len(results) == 1:
                    return redirect("import_progress", slug=project.slug, job_id=queued[0])
                return redirect("project_detail", slug=project.slug)
    else:
        form = ImportForm()
    return _import_page(request, membership, form, results=results)


def _import_page(request, membership, form, *, results, status=200):
    return render(
        request,
        "experiments/projects/session_import.html",
        {"membership": membership, "project": membership.project, "form": form, "results": results,
         "max_upload_mb": upload_limit_bytes() / 2**20, "background_mb": background_threshold_bytes() / 2**20},
        status=status,
    )


def _import_uploads(project, uploads, fmt, user):
    """Import each uploaded file in its own transaction; a genagents folder counts as one file.

    A JSONL or CSV file over the background threshold is queued instead (its job id is
    returned in `queued`); smaller ones are read as a stream right here. Returns
    ([(ok, message) per file], [job ids]).
    """
    genagents = [u for u in uploads if u.name in GENAGENTS_FILES]
    if fmt == "genagents" or (not fmt and genagents):
        groups = [("genagents", "genagents folder", uploads)]
    else:
        groups = [(fmt or format_from_name(u.name), u.name, [u]) for u in uploads]
    results, queued = [], []
    for group_fmt, label, files in groups:
        try:
            if group_fmt is None:
                raise InterviewFileError(
                    [Problem(label, "", "", "cannot tell the format from the name (.jsonl or .csv); choose one")]
                )
            if group_fmt != "genagents" and files[0].size > background_threshold_bytes():
                job_id = import_enqueue(project=project, upload=files[0], fmt=group_fmt, label=label, user=user)
                queued.append(job_id)
                url = reverse("import_progress", args=[project.slug, job_id])
                results.append((True, f"{label}: importing in the background; progress at {url}"))
                continue
            if group_fmt == "genagents":
                texts = {u.name: decode_utf8(u.read(), u.name) for u in files}
                parsed = parse_genagents(texts, label)
            else:
                upload = files[0]
                parsed = stream_binary(lambda mode: _reopened(upload), label, group_fmt, upload.size)
            summary = sessions_import(
                project=project, parsed=parsed, source_format=group_fmt, source_file=label, user=user
            )
        except InterviewFileError as exc:
            results.append((False, f"Nothing imported from {label}:\n{exc}"))
        except QueueUnavailable:
            results.append((False, f"Nothing imported from {label}: it is large enough to import in the "
                                   "background, and the background queue does not answer. Try again later."))
        else:
            results.append((True, f"{label}: {summary}"))
    return results, queued


def _reopened(upload):
    upload.seek(0)
    return upload


@login_required
def import_progress_view(request, slug, job_id):
    """Template experiments/projects/import_progress.html: a background import's progress (owners)."""
    membership = membership_for(request, slug, roles=OWNERS)
    progress = import_progress(job_id, membership.project)
    if progress is None:
        raise Http404("No such import")
    return render(request, "experiments/projects/import_progress.html",
                  {"membership": membership, "project": membership.project, "progress": progress})


@login_required
@require_POST
def tasks_derive_view(request, slug):
    """Derive tasks with new thresholds (owners); redirects to the project page."""
    membership = membership_for(request, slug, roles=OWNERS)
    form = TaskRuleForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Tasks not derived: {errors_text(form, names=False)}")
        return redirect("project_detail", slug=slug)
    rule = TaskRule(**form.cleaned_data)
    new_tasks = tasks_derive(project=membership.project, rule=rule)
    messages.success(request, f"{new_tasks} new tasks under {rule.min_pairs}/{rule.min_targets}/{rule.max_targets}.")
    return redirect("project_detail", slug=slug)


@login_required
@require_POST
def cohort_draw_view(request, slug):
    """Draw a cohort (owners and analysts); redirects to the cohort's page."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    project = membership.project
    form = CohortForm(request.POST, request.FILES, project=project)
    if not form.is_valid():
        messages.error(request, f"No cohort drawn: {errors_text(form)}")
        return redirect("project_detail", slug=slug)
    draw = dict(project=project, name=form.cleaned_data["name"], size=form.cleaned_data["size"],
                seed=form.cleaned_data["seed"], exclude_cohorts=form.cleaned_data["exclude"], user=request.user)
    listed = form.cleaned_data.get("exclusion_list")
    try:
        if listed:
            if listed.size > FIXED_INPUT_MAX_BYTES:
                raise CohortError(f"the exclusion list is over {FIXED_INPUT_MAX_BYTES // (1024 * 1024)} MB")
            cohort = cohort_draw_excluding(exclusion_list=listed.read(), label=listed.name, **draw)
        else:
            cohort = cohort_draw(**draw)
    except (CohortError, FixedInputError) as exc:
        messages.error(request, f"No cohort drawn: {exc}")
        return redirect("project_detail", slug=slug)
    return redirect("cohort_detail", slug=slug, pk=cohort.pk)


@login_required
def cohort_detail(request, slug, pk):
    """Template experiments/projects/cohort_detail.html: the rule, seed, hash and (for text roles) the tasks."""
    membership = membership_for(request, slug)
    cohort = get_object_or_404(Cohort.objects.select_related("task_set"), project=membership.project, pk=pk)
    context = {
        "membership": membership,
        "project": membership.project,
        "cohort": cohort,
        "task_count": cohort.cohort_tasks.count(),
        "excluded": cohort.excluded_cohorts.all(),
    }
    if membership.can_read_text():
        context["tasks"] = cohort_tasks(cohort)
        audit_record(request, membership.project, Kind.TASK, f"task list of cohort {cohort.name}")
    return render(request, "experiments/projects/cohort_detail.html", context)
