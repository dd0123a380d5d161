"""Pages for protocols and runs (docs/design.md §2): define, edit, seal, start, watch and amend.

Each view starts with one access helper (`membership_for`, `protocol_for`, `run_for`), which is
the whole access check. Who may do what:

- owners and analysts define, edit (while unsealed), seal and run protocols, and read predictions
  (participant text);
- viewers see protocols and runs: settings, counts and aggregate results, never text;
- raters see none of it: they are blinded to condition names and grades;
- sealing, starting, pausing, resuming and deciding about slots without an answer spend (or stop
  spending) money: `access.may_spend` decides — owners, and analysts for protocols that call no
  paid provider or when the project delegates it (the amendment views are in `amend`);
- only owners change a run's concurrency.

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

from experiments.access import (
    TEXT_READERS, may_spend, membership_for, protocol_for, require_spending, run_for, spending_refusal,
)
from experiments.core.conditions import CONDITIONS
from experiments.core.contrasts import format_terms
from experiments.core.estimate import estimate_run, with_imported_memories
from experiments.core.llm import wire
from experiments.data.sessions import cohort_shape
from experiments.core.llm.offline import OFFLINE_LABEL
from experiments.execution import control, jobs, mem0_planning, policy, progress
from experiments.execution.memory_imports import memory_facts
from experiments.execution.sealing import protocol_memory_imports, protocol_problems, protocol_seal
from experiments.execution.survey_planning import survey_estimate
from experiments.models import Run, Slot
from experiments.models.runs import Phase
from experiments.web.runs.amend import NO_QUEUE, CeilingForm, ConcurrencyForm, ReasonForm, ResumeForm, providers
from experiments.web.runs.forms import ProtocolEditor
from experiments.web.runs.regrade_page import regrade_context
# The keys sent with a protocol form: Django's error reports must never show them.
KEY_FIELDS = ("generator-api_key_env", "judge-api_key_env")

def _spend_refusal(membership, protocol) -> str | None:
    """Why the page shows this member no spending buttons (None when it does): a missing button
    is explained, never silently absent."""
    return None if may_spend(membership, protocol) else spending_refusal(membership, protocol)


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
                   "offline_label": OFFLINE_LABEL, "estimate": _editor_estimate(editor, None)})


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
                   "offline_label": OFFLINE_LABEL, "estimate": _editor_estimate(editor, protocol)})


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
        "can_spend": may_spend(membership, protocol),
        "spend_refusal": _spend_refusal(membership, protocol),
        "offline": policy.offline_roles(protocol),
        # A re-grade (or a pairwise judge) sends only judge calls over its source's answers: not this estimate.
        "estimate": None if protocol.kind in (protocol.Kind.REGRADE, protocol.Kind.PAIRWISE) else (
            survey_estimate(protocol, protocol.generator.get("max_output_tokens") or DEFAULT_OUTPUT_CAP)
            if protocol.kind == protocol.Kind.SURVEY else
            _estimate(protocol.cohort, protocol.conditions, protocol.generator, protocol.judge)),
        **_protocol_facts(protocol),
    }
    imports = protocol_memory_imports(protocol) if protocol.memory_import_runs else None
    if imports and context["estimate"] is not None:
        context["estimate"] = with_imported_memories(context["estimate"], imports["imported"])
    if not protocol.is_sealed():
        context["problems"] = protocol_problems(protocol)
    elif may_spend(membership, protocol):
        context["queue_reachable"] = progress.queue_reachable()
    return render(request, "experiments/runs/protocol_detail.html", context)


@login_required
@require_POST
def protocol_seal_view(request, slug, pk):
    """Seal the protocol (whoever may spend on it); redirects to its page, which shows the seal.
    Sealing cannot be undone: only a POST whose confirm box is ticked (confirm=yes) seals."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    require_spending(membership, protocol)
    if request.POST.get("confirm") != "yes":
        messages.error(request, "Not sealed: tick the box that confirms you checked the settings, then Seal.")
        return redirect("protocol_detail", slug=slug, pk=pk)
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
    """Create a run of a sealed protocol and start it through the queue (whoever may spend on it)."""
    membership, protocol = protocol_for(request, slug, pk, roles=TEXT_READERS)
    require_spending(membership, protocol)
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


DEFAULT_OUTPUT_CAP = wire.ModelConfig(provider="offline", base_url="", model="").max_output_tokens


def _estimate(cohort, conditions, generator: dict, judge: dict):
    """The expected calls and tokens of a run (core.estimate), or None when there is nothing to count."""
    chosen = [CONDITIONS[key] for key in conditions or () if key in CONDITIONS and CONDITIONS[key].runnable]
    if cohort is None or not chosen:
        return None
    default_cap = wire.ModelConfig(provider="offline", base_url="", model="").max_output_tokens
    caps = [c.get("max_output_tokens") if isinstance(c, dict) else None for c in (generator, judge)]
    return estimate_run(chosen, cohort_shape(cohort), generator_cap=caps[0] or default_cap,
                        judge_cap=caps[1] or default_cap)


def _editor_estimate(editor: ProtocolEditor, protocol):
    """The estimate for what the form holds: the posted choice once it validates, else the stored one."""
    main = editor.main
    if main.is_bound and hasattr(main, "cleaned_data") and "cohort" in main.cleaned_data \
            and "conditions" in main.cleaned_data:
        configs = [form.cleaned_data if hasattr(form, "cleaned_data") else {} for form in (editor.generator, editor.judge)]
        return _estimate(main.cleaned_data["cohort"], main.cleaned_data["conditions"], *configs)
    if protocol is not None:
        return _estimate(protocol.cohort, protocol.conditions, protocol.generator, protocol.judge)
    return None


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
        "eta": progress.pace_text(counts["pace"]),
        "in_flight": progress.in_flight(run, redis_up=redis_up),
        "workers": progress.worker_count() if redis_up and not run.inline else None,
        "finished": run.status == Run.Status.FINISHED,
        "current_phase": Phase(run.phase).label,
        "next": progress.run_next(run, counts["slot_counts"]),
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
        "amendments": [(a, progress.amendment_text(a)) for a in run.amendments.select_related("created_by")],
        "offline": policy.offline_roles(protocol),
        "analysis": run.analysis if run.status == Run.Status.FINISHED else None,
        "mem0": mem0_planning.extraction_counts(run),
        "survey": protocol.kind == protocol.Kind.SURVEY,
        "pairwise": protocol.kind == protocol.Kind.PAIRWISE,
        **_protocol_facts(protocol),
        **regrade_context(membership, run),
        "memory_facts": memory_facts(run),
    }
    context["can_spend"] = may_spend(membership, protocol) and run.status != Run.Status.FINISHED
    if run.status != Run.Status.FINISHED:
        context["spend_refusal"] = _spend_refusal(membership, protocol)
    if context["can_spend"]:
        # Unknown slots of earlier phases were settled when their phase ended (older runs advanced
        # over them): say so rather than hide them.
        context["unknown_earlier"] = sum(by_status.get(Slot.Status.UNKNOWN, 0) for phase, by_status
                                         in context["progress"]["slot_counts"].items() if phase != run.phase)
        # One form per action; distinct ids keep the page's labels pointing at the right box.
        for action in ("pause", "reissue", "accept"):
            context[f"{action}_form"] = ReasonForm(auto_id=f"{action}_%s")
        context["resume_form"] = ResumeForm(auto_id="resume_%s")
        if run.status in (Run.Status.PAUSED, Run.Status.STOPPED):
            context["ceiling"] = control.ceiling_state(run)
            context["ceiling_form"] = CeilingForm(auto_id="ceiling_%s") if context["ceiling"] else None
    if membership.is_owner() and run.status != Run.Status.FINISHED:
        context["concurrency_form"] = ConcurrencyForm(providers=providers(protocol))
    return render(request, "experiments/runs/run_detail.html", context)


@login_required
def run_progress_json(request, slug, pk):
    """The progress block as JSON (and its HTML) for static/js/run_progress.js; same access as the page."""
    membership, run = run_for(request, slug, pk)
    shown = _progress(run)
    return JsonResponse({
        "status": run.status,
        "phase": run.phase,
        "circuit_open": run.circuit_open,
        **{key: shown[key] for key in ("finished", "phases", "calls_per_second", "eta_s", "pace", "tokens",
                                       "attempts", "in_flight", "next")},
        "html": render_to_string("experiments/runs/run_progress_block.html", {"progress": shown}, request=request),
    })
