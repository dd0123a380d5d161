"""Pages for protocols, runs and predictions (issue 4, DESIGN §2).

Each view starts with one access helper (`membership_for`, `protocol_for`, `run_for`), which is
the whole access check. Who may do what:

- owners and analysts define, edit (while unsealed), seal and run protocols, and read predictions
  (participant text);
- viewers see protocols and runs: settings, counts and aggregate results, never text;
- raters see none of it: they are blinded to condition names and grades;
- only owners amend a run: pause, resume, re-issue unknown slots, change concurrency.

Starting or continuing a run goes through the queue. When no queue answers, the page says so
and does nothing: model calls never run inside a web request.
"""
from __future__ import annotations

import dataclasses
import functools

import django_rq
import redis
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST
from rq import Worker

from experiments import engine, jobs, llm, planning
from experiments.access import OWNERS, TEXT_READERS, membership_for, protocol_for, run_for
from experiments.analysis import final_grades
from experiments.concurrency import InflightLimiter
from experiments.forms_runs import ConcurrencyForm, ProtocolEditor, ReasonForm, format_terms
from experiments.conditions import get_condition
from experiments.models import CohortTask, Grade, Memory, ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase
from experiments.sealing import protocol_problems, protocol_seal
from experiments.services import cohort_tasks

TASKS_PER_PAGE = 25
WORKER_COMMAND = "manage.py rqworker --with-scheduler default memories generation decisions judging analysis"
NO_QUEUE = (
    "No queue is reachable (the Redis server did not answer), so nothing changed: model calls never run "
    f"inside a web request. Start Redis and a worker ({WORKER_COMMAND}), or {{alternative}}."
)
# The keys sent with a protocol form: Django's error reports must never show them.
KEY_FIELDS = ("generator-api_key_env", "judge-api_key_env")


# --- the queue --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _redis() -> redis.Redis:
    """The queue's Redis with short timeouts: a page must not hang on an unreachable server."""
    pool = django_rq.get_connection("default").connection_pool
    kwargs = {**pool.connection_kwargs, "socket_connect_timeout": 1, "socket_timeout": 2}
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs))


def queue_reachable() -> bool:
    try:
        return bool(_redis().ping())
    except (redis.RedisError, OSError):
        return False


def _worker_count() -> int | None:
    try:
        return Worker.count(connection=_redis())
    except (redis.RedisError, OSError):
        return None


def in_flight(run: Run, *, redis_up: bool = True) -> list[dict]:
    """Requests in flight per service, from the Redis limiter shared by every worker (0 without Redis)."""
    rows = {}
    for role in (Slot.Role.GENERATOR, Slot.Role.JUDGE):
        config = engine.role_config(run, role)
        name = engine.limiter_name(config)
        if name in rows:
            continue
        try:
            count = InflightLimiter(_redis()).in_flight(name) if redis_up else 0
        except (redis.RedisError, OSError):
            count = 0
        label = f"{config.provider} at {config.base_url}" if config.base_url else config.provider
        rows[name] = {"service": label, "provider": config.provider, "in_flight": count,
                      "cap": engine.effective_concurrency(run, config.provider)}
    return list(rows.values())


# --- protocols --------------------------------------------------------------------------------

@login_required
@sensitive_post_parameters(*KEY_FIELDS)
def protocol_create(request, slug):
    """Template experiments/protocol_form.html: a new protocol (owners and analysts)."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    project = membership.project
    editor = ProtocolEditor(request.POST or None, project=project)
    if request.method == "POST" and editor.is_valid():
        protocol = editor.save(user=request.user)
        messages.success(request, f"Protocol {protocol.name} created. Check it, then seal it to run it.")
        return redirect("protocol_detail", slug=slug, pk=protocol.pk)
    return render(request, "experiments/protocol_form.html",
                  {"membership": membership, "project": project, "editor": editor, "protocol": None,
                   "offline_label": llm.OFFLINE_LABEL})


@login_required
@sensitive_post_parameters(*KEY_FIELDS)
def protocol_edit(request, slug, pk):
    """Template experiments/protocol_form.html: edit while unsealed; a sealed protocol is read-only."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    if protocol.is_sealed():
        messages.error(request, "This protocol is sealed and read-only; nothing was changed. "
                                "Changes after sealing are amendments, recorded on a run.")
        return redirect("protocol_detail", slug=slug, pk=pk)
    editor = ProtocolEditor(request.POST or None, project=membership.project, protocol=protocol)
    if request.method == "POST" and editor.is_valid():
        try:
            editor.save(user=request.user)
        except engine.RunError as exc:
            messages.error(request, f"Nothing was changed: {exc}")
        else:
            messages.success(request, "Protocol saved.")
        return redirect("protocol_detail", slug=slug, pk=pk)
    return render(request, "experiments/protocol_form.html",
                  {"membership": membership, "project": membership.project, "editor": editor, "protocol": protocol,
                   "offline_label": llm.OFFLINE_LABEL})


@login_required
def protocol_detail(request, slug, pk):
    """Template experiments/protocol_detail.html: settings, seal, runs; buttons for owners and analysts."""
    membership, protocol = protocol_for(request, slug, pk)
    context = {
        "membership": membership,
        "project": membership.project,
        "protocol": protocol,
        "runs": protocol.runs.select_related("created_by"),
        "can_edit": membership.can_read_text(),
        "offline": offline_roles(protocol),
        **_protocol_facts(protocol),
    }
    if not protocol.is_sealed():
        context["problems"] = protocol_problems(protocol)
    elif membership.can_read_text():
        context["queue_reachable"] = queue_reachable()
    return render(request, "experiments/protocol_detail.html", context)


@login_required
@require_POST
def protocol_seal_view(request, slug, pk):
    """Seal the protocol (owners and analysts); redirects to its page, which shows the seal."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    try:
        protocol_seal(protocol=protocol, user=request.user)
    except engine.RunError as exc:
        messages.error(request, f"Not sealed: {exc}")
    else:
        messages.success(request, "Sealed. The protocol is read-only now; its seal is below.")
    return redirect("protocol_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_create(request, slug, pk):
    """Create a run of a sealed protocol and start it through the queue (owners and analysts)."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    if not queue_reachable():
        messages.error(request, NO_QUEUE.format(
            alternative=f"run it from a shell in one process: manage.py run_start {protocol.pk} --inline"))
        return redirect("protocol_detail", slug=slug, pk=pk)
    try:
        with transaction.atomic():
            run = Run.objects.create(protocol=protocol, created_by=request.user)
            engine.run_start(run=run)
            jobs.run_enqueue(run.pk)  # django-rq enqueues when this transaction commits
    except engine.RunError as exc:
        messages.error(request, f"The run did not start: {exc}")
        return redirect("protocol_detail", slug=slug, pk=pk)
    messages.success(request, f"Run {run.pk} started through the queue.")
    return redirect("run_detail", slug=slug, pk=run.pk)


def _protocol_facts(protocol) -> dict:
    """What protocol_settings_block.html shows besides the protocol itself."""
    return {
        "model_configs": [("generator", _effective(protocol.generator)), ("judge", _effective(protocol.judge))],
        "retry_policy": {**engine.DEFAULT_RETRY, **protocol.retry_policy},
        "contrasts": [{**c, "expression": format_terms(c["terms"])} for c in protocol.contrasts],
    }


def _effective(config: dict) -> dict:
    """The settings as the engine applies them (defaults filled in); as stored when they are invalid."""
    try:
        return dataclasses.asdict(engine.model_config(config))
    except engine.RunError:
        return config


# --- runs -------------------------------------------------------------------------------------

def offline_roles(protocol) -> dict:
    """Which roles the offline stand-in plays: every page showing its output must say so (DESIGN §7)."""
    roles = {role: getattr(protocol, role).get("provider") == "offline" for role in ("generator", "judge")}
    return {**roles, "any": any(roles.values()), "label": llm.OFFLINE_LABEL}


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _progress(run: Run) -> dict:
    """What the progress block shows, for the page and the JSON endpoint alike."""
    progress = engine.run_progress(run)
    # Asked once: a page polled every 2 s must not wait on an unreachable Redis several times.
    redis_up = queue_reachable()
    return {
        **progress,
        "run": run,
        "eta": duration_text(progress["eta_s"]),
        "in_flight": in_flight(run, redis_up=redis_up),
        "workers": _worker_count() if redis_up and not run.inline else None,
        "finished": run.status == Run.Status.FINISHED,
        "current_phase": Phase(run.phase).label,
    }


@login_required
def run_detail(request, slug, pk):
    """Template experiments/run_detail.html: live progress, amendments, seal and the analysis.

    Counts and aggregates only, so viewers may see it; owners get the amendment forms.
    """
    membership, run = run_for(request, slug, pk)
    protocol = run.protocol
    context = {
        "membership": membership,
        "project": membership.project,
        "run": run,
        "protocol": protocol,
        "progress": _progress(run),
        "amendments": run.amendments.select_related("created_by"),
        "offline": offline_roles(protocol),
        "analysis": run.analysis if run.status == Run.Status.FINISHED else None,
        **_protocol_facts(protocol),
    }
    if membership.is_owner() and run.status != Run.Status.FINISHED:
        unknown = Slot.objects.filter(run=run, status=Slot.Status.UNKNOWN)
        context["unknown_now"] = unknown.filter(phase=run.phase).count()
        # The engine re-issues the current phase's unknown slots only; say so rather than hide them.
        context["unknown_earlier"] = unknown.exclude(phase=run.phase).count()
        # One form per action; distinct ids keep the page's labels pointing at the right box.
        for action in ("pause", "resume", "reissue"):
            context[f"{action}_form"] = ReasonForm(auto_id=f"{action}_%s")
        context["concurrency_form"] = ConcurrencyForm(providers=_providers(protocol))
    return render(request, "experiments/run_detail.html", context)


def _providers(protocol) -> list[str]:
    return list(dict.fromkeys([protocol.generator["provider"], protocol.judge["provider"]]))


@login_required
def run_progress_json(request, slug, pk):
    """The progress block as JSON (and its HTML) for static/js/run_progress.js; same access as the page."""
    membership, run = run_for(request, slug, pk)
    progress = _progress(run)
    return JsonResponse({
        "status": run.status,
        "phase": run.phase,
        "circuit_open": run.circuit_open,
        "finished": progress["finished"],
        "phases": progress["phases"],
        "calls_per_second": progress["calls_per_second"],
        "eta_s": progress["eta_s"],
        "tokens": progress["tokens"],
        "attempts": progress["attempts"],
        "in_flight": progress["in_flight"],
        "html": render_to_string("experiments/run_progress_block.html", {"progress": progress}, request=request),
    })


def _reason(request, form_class=ReasonForm, **kwargs):
    """The bound amendment form, or None after putting its errors on the page."""
    form = form_class(request.POST, **kwargs)
    if form.is_valid():
        return form
    messages.error(request, "Nothing changed: " + "; ".join(m for ms in form.errors.values() for m in ms))
    return None


@login_required
@require_POST
def run_pause_view(request, slug, pk):
    """Pause a running run (owners): nothing more is sent; queued requests become no-ops."""
    membership, run = run_for(request, slug, pk, roles=OWNERS)
    form = _reason(request)
    if form:
        try:
            engine.run_pause(run=run, user=request.user, reason=form.cleaned_data["reason"])
        except engine.RunError as exc:
            messages.error(request, f"Not paused: {exc}")
        else:
            messages.success(request, "Paused. Only an owner resumes it.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_resume_view(request, slug, pk):
    """Resume a paused or stopped run (owners); an amendment, then the queue continues it."""
    membership, run = run_for(request, slug, pk, roles=OWNERS)
    form = _reason(request)
    if form and _queue_or_message(
        request, f"resume it from a shell in one process: manage.py run_resume {run.pk} --reason '…' --inline"
    ):
        try:
            with transaction.atomic():
                engine.run_resume(run=run, user=request.user, reason=form.cleaned_data["reason"])
                jobs.run_enqueue(run.pk)
        except engine.RunError as exc:
            messages.error(request, f"Not resumed: {exc}")
        else:
            messages.success(request, "Resumed: recorded as an amendment.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_reissue_view(request, slug, pk):
    """Allow one more identical request for each unknown slot of the current phase (owners)."""
    membership, run = run_for(request, slug, pk, roles=OWNERS)
    form = _reason(request)
    # A paused run sends the released slots when it is resumed; a running one needs the queue now.
    needs_queue = run.status == Run.Status.RUNNING
    if form and (not needs_queue or _queue_or_message(
        request, "pause the run, re-issue the unknown slots, then resume it from a shell in one process: "
        f"manage.py run_resume {run.pk} --reason '…' --inline"
    )):
        try:
            with transaction.atomic():
                amendment = engine.run_reissue_unknown(run=run, user=request.user, reason=form.cleaned_data["reason"])
                if needs_queue:
                    jobs.run_enqueue(run.pk)
        except engine.RunError as exc:
            messages.error(request, f"Nothing re-issued: {exc}")
        else:
            messages.success(request, f"{len(amendment.payload['slots'])} unknown slots may be sent once more.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_concurrency_view(request, slug, pk):
    """Change a provider's in-flight cap for this run (owners); recorded as an amendment."""
    membership, run = run_for(request, slug, pk, roles=OWNERS)
    form = _reason(request, ConcurrencyForm, providers=_providers(run.protocol))
    if form:
        data = form.cleaned_data
        try:
            engine.run_set_concurrency(run=run, user=request.user, provider=data["provider"], cap=data["cap"],
                                       reason=data["reason"])
        except engine.RunError as exc:
            messages.error(request, f"Not changed: {exc}")
        else:
            messages.success(request, f"{data['provider']}: at most {data['cap']} requests in flight from now on.")
    return redirect("run_detail", slug=slug, pk=pk)


def _queue_or_message(request, alternative: str) -> bool:
    if queue_reachable():
        return True
    messages.error(request, NO_QUEUE.format(alternative=alternative))
    return False


# --- predictions (participant text: owners and analysts) --------------------------------------

@login_required
def prediction_list(request, slug, pk):
    """Template experiments/prediction_list.html: the run's tasks with each condition's grade."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    protocol = run.protocol
    page = Paginator(cohort_tasks(protocol.cohort), TASKS_PER_PAGE).get_page(request.GET.get("page"))
    grades = final_grades(run)
    rows = [
        {"task": task, "number": page.start_index() + i,
         "grades": [grades.get(key, {}).get(task.pk) for key in protocol.conditions]}
        for i, task in enumerate(page)
    ]
    return render(request, "experiments/prediction_list.html", {
        "membership": membership, "project": membership.project, "run": run, "protocol": protocol,
        "page": page, "rows": rows, "offline": offline_roles(protocol),
    })


@login_required
def prediction_detail(request, slug, pk, task_pk):
    """Template experiments/prediction_detail.html: one task, every condition side by side."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    protocol = run.protocol
    entry = get_object_or_404(
        CohortTask.objects.select_related("task__session", "task__question_turn", "task__answer_turn"),
        cohort=protocol.cohort, task_id=task_pk,
    )
    return render(request, "experiments/prediction_detail.html", {
        "membership": membership, "project": membership.project, "run": run, "protocol": protocol,
        "task": entry.task, "position": entry.position + 1,
        "columns": _condition_columns(run, entry.task), "offline": offline_roles(protocol),
    })


def _condition_columns(run: Run, task) -> list[dict]:
    """Per condition: the final answer, its candidates, evidence, grade, and what made them."""
    predictions = list(Prediction.objects.filter(run=run, task=task).select_related("slot"))
    grades = {g.answer_sha256: g for g in Grade.objects.filter(run=run, task=task).select_related("slot")}
    slot_ids = {p.slot_id for p in predictions if p.slot_id} | {g.slot_id for g in grades.values() if g.slot_id}
    last_call = {}
    for call in ModelCall.objects.filter(slot_id__in=slot_ids).order_by("slot_id", "attempt"):
        last_call[call.slot_id] = call
    memories = {
        (m.kind, m.words): {"memory": m, "call": last_call.get(m.slot_id)}
        for m in _with_last_calls(Memory.objects.filter(run=run, session_id=task.session_id).select_related("slot"),
                                  last_call)
    }
    by_condition: dict[str, dict[str, Prediction]] = {}
    for prediction in predictions:
        by_condition.setdefault(prediction.condition, {})[prediction.label] = prediction

    def answer(prediction):
        if prediction is None:
            return None
        grade = grades.get(prediction.answer_sha256) if prediction.answer_sha256 else None
        return {
            "prediction": prediction,
            "call": last_call.get(prediction.slot_id),
            "grade": grade,
            "judge_call": last_call.get(grade.slot_id) if grade and grade.slot_id else None,
        }

    columns = []
    for key in run.protocol.conditions:
        labels = by_condition.get(key, {})
        condition = get_condition(key)
        columns.append({
            "condition": key,
            "memory": memories.get((condition.memory_kind, condition.memory_words)) if condition.needs_memory else None,
            "final": answer(labels.get(planning.FINAL)),
            "candidates": [answer(labels[label]) for label in sorted(labels) if label != planning.FINAL],
        })
    return columns


def _with_last_calls(memories, last_call: dict) -> list:
    """The memories, with the last attempt of each memory's slot added to `last_call`."""
    memories = list(memories)
    for call in ModelCall.objects.filter(slot_id__in=[m.slot_id for m in memories]).order_by("slot_id", "attempt"):
        last_call[call.slot_id] = call
    return memories
