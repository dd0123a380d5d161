"""Pages for protocols and runs (issue 4, DESIGN §2): define, edit, seal, start, watch and amend.

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

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from experiments.access import OWNERS, TEXT_READERS, membership_for, protocol_for, run_for
from experiments.core.contrasts import format_terms
from experiments.core.llm.offline import OFFLINE_LABEL
from experiments.execution import control, jobs, policy, progress
from experiments.execution.jobs import WORKER_COMMAND
from experiments.execution.sealing import protocol_problems, protocol_seal
from experiments.models import Run, Slot
from experiments.models.runs import Phase
from experiments.web.runs.forms import ConcurrencyForm, ProtocolEditor, ReasonForm
from experiments.web.runs.regrade import regrade_context

NO_QUEUE = (
    "No queue is reachable (the Redis server did not answer), so nothing changed: model calls never run "
    f"inside a web request. Start Redis and a worker ({WORKER_COMMAND}), or {{alternative}}."
)
# The keys sent with a protocol form: Django's error reports must never show them.
KEY_FIELDS = ("generator-api_key_env", "judge-api_key_env")

# --- protocols --------------------------------------------------------------------------------

@login_required
@sensitive_post_parameters(*KEY_FIELDS)
def protocol_create(request, slug):
    """Template experiments/runs/protocol_form.html: a new protocol (owners and analysts)."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    project = membership.project
    editor = ProtocolEditor(request.POST or None, project=project)
    if request.method == "POST" and editor.is_valid():
        protocol = editor.save(user=request.user)
        messages.success(request, f"Protocol {protocol.name} created. Check it, then seal it to run it.")
        return redirect("protocol_detail", slug=slug, pk=protocol.pk)
    return render(request, "experiments/runs/protocol_form.html",
                  {"membership": membership, "project": project, "editor": editor, "protocol": None,
                   "offline_label": OFFLINE_LABEL})


@login_required
@sensitive_post_parameters(*KEY_FIELDS)
def protocol_edit(request, slug, pk):
    """Template experiments/runs/protocol_form.html: edit while unsealed; a sealed protocol is read-only."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    if protocol.is_sealed():
        messages.error(request, "This protocol is sealed and read-only; nothing was changed. "
                                "Changes after sealing are amendments, recorded on a run.")
        return redirect("protocol_detail", slug=slug, pk=pk)
    editor = ProtocolEditor(request.POST or None, project=membership.project, protocol=protocol)
    if request.method == "POST" and editor.is_valid():
        try:
            editor.save(user=request.user)
        except policy.RunError as exc:
            messages.error(request, f"Nothing was changed: {exc}")
        else:
            messages.success(request, "Protocol saved.")
        return redirect("protocol_detail", slug=slug, pk=pk)
    return render(request, "experiments/runs/protocol_form.html",
                  {"membership": membership, "project": membership.project, "editor": editor, "protocol": protocol,
                   "offline_label": OFFLINE_LABEL})


@login_required
def protocol_detail(request, slug, pk):
    """Template experiments/runs/protocol_detail.html: settings, seal, runs; buttons for owners and analysts."""
    membership, protocol = protocol_for(request, slug, pk)
    context = {
        "membership": membership,
        "project": membership.project,
        "protocol": protocol,
        "runs": protocol.runs.select_related("created_by"),
        "can_edit": membership.can_read_text(),
        "offline": policy.offline_roles(protocol),
        **_protocol_facts(protocol),
    }
    if not protocol.is_sealed():
        context["problems"] = protocol_problems(protocol)
    elif membership.can_read_text():
        context["queue_reachable"] = progress.queue_reachable()
    return render(request, "experiments/runs/protocol_detail.html", context)


@login_required
@require_POST
def protocol_seal_view(request, slug, pk):
    """Seal the protocol (owners and analysts); redirects to its page, which shows the seal."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    try:
        protocol_seal(protocol=protocol, user=request.user)
    except policy.RunError as exc:
        messages.error(request, f"Not sealed: {exc}")
    else:
        messages.success(request, "Sealed. The protocol is read-only now; its seal is below.")
    return redirect("protocol_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_create(request, slug, pk):
    """Create a run of a sealed protocol and start it through the queue (owners and analysts)."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    if not progress.queue_reachable():
        messages.error(request, NO_QUEUE.format(
            alternative=f"run it from a shell in one process: manage.py run_start {protocol.pk} --inline"))
        return redirect("protocol_detail", slug=slug, pk=pk)
    try:
        with transaction.atomic():
            run = Run.objects.create(protocol=protocol, created_by=request.user)
            control.run_start(run=run)
            jobs.run_enqueue(run.pk)  # django-rq enqueues when this transaction commits
    except policy.RunError as exc:
        messages.error(request, f"The run did not start: {exc}")
        return redirect("protocol_detail", slug=slug, pk=pk)
    messages.success(request, f"Run {run.pk} started through the queue.")
    return redirect("run_detail", slug=slug, pk=run.pk)


def _protocol_facts(protocol) -> dict:
    """What protocol_settings_block.html shows besides the protocol itself."""
    return {
        "model_configs": [("generator", _effective(protocol.generator)), ("judge", _effective(protocol.judge))],
        "retry_policy": {**policy.DEFAULT_RETRY, **protocol.retry_policy},
        "contrasts": [{**c, "expression": format_terms(c["terms"])} for c in protocol.contrasts],
    }


def _effective(config: dict) -> dict:
    """The settings as the engine applies them (defaults filled in); as stored when they are invalid."""
    try:
        return dataclasses.asdict(policy.model_config(config))
    except policy.RunError:
        return config



def _progress(run: Run) -> dict:
    """What the progress block shows, for the page and the JSON endpoint alike."""
    counts = progress.run_progress(run)
    # Asked once: a page polled every 2 s must not wait on an unreachable Redis several times.
    redis_up = progress.queue_reachable()
    return {
        **counts,
        "run": run,
        "eta": progress.duration_text(counts["eta_s"]),
        "in_flight": progress.in_flight(run, redis_up=redis_up),
        "workers": progress.worker_count() if redis_up and not run.inline else None,
        "finished": run.status == Run.Status.FINISHED,
        "current_phase": Phase(run.phase).label,
    }


@login_required
def run_detail(request, slug, pk):
    """Template experiments/runs/run_detail.html: live progress, amendments, seal and the analysis.

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
        "offline": policy.offline_roles(protocol),
        "analysis": run.analysis if run.status == Run.Status.FINISHED else None,
        **_protocol_facts(protocol),
        **regrade_context(membership, run),
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
    return render(request, "experiments/runs/run_detail.html", context)


def _providers(protocol) -> list[str]:
    return list(dict.fromkeys([protocol.generator["provider"], protocol.judge["provider"]]))


@login_required
def run_progress_json(request, slug, pk):
    """The progress block as JSON (and its HTML) for static/js/run_progress.js; same access as the page."""
    membership, run = run_for(request, slug, pk)
    shown = _progress(run)
    return JsonResponse({
        "status": run.status,
        "phase": run.phase,
        "circuit_open": run.circuit_open,
        **{key: shown[key] for key in ("finished", "phases", "calls_per_second", "eta_s", "tokens", "attempts",
                                       "in_flight")},
        "html": render_to_string("experiments/runs/run_progress_block.html", {"progress": shown}, request=request),
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
            control.run_pause(run=run, user=request.user, reason=form.cleaned_data["reason"])
        except policy.RunError as exc:
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
                control.run_resume(run=run, user=request.user, reason=form.cleaned_data["reason"])
                jobs.run_enqueue(run.pk)
        except policy.RunError as exc:
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
                amendment = control.run_reissue_unknown(run=run, user=request.user, reason=form.cleaned_data["reason"])
                if needs_queue:
                    jobs.run_enqueue(run.pk)
        except policy.RunError as exc:
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
            control.run_set_concurrency(run=run, user=request.user, provider=data["provider"], cap=data["cap"],
                                       reason=data["reason"])
        except policy.RunError as exc:
            messages.error(request, f"Not changed: {exc}")
        else:
            messages.success(request, f"{data['provider']}: at most {data['cap']} requests in flight from now on.")
    return redirect("run_detail", slug=slug, pk=pk)


def _queue_or_message(request, alternative: str) -> bool:
    if progress.queue_reachable():
        return True
    messages.error(request, NO_QUEUE.format(alternative=alternative))
    return False
