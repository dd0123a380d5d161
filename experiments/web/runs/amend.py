"""The run page's amendments (paper App. B.2): pause, resume with a continuation allowance,
re-issue or accept missing the slots that wait for a decision, raise an HTTP ceiling, change concurrency.

Who may: `access.may_spend` — owners, and analysts for runs that call no paid provider or in a
project that delegates spending to them — for everything that spends money or stops it (whoever
may start a run may pause it); owners only for a concurrency change. Each view checks it first,
through `run_for` and `require_spending`, and changes nothing when refused.
"""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from experiments.access import OWNERS, TEXT_READERS, require_spending, run_for
from experiments.execution import control, jobs, policy, progress
from experiments.execution.jobs import WORKER_COMMAND
from experiments.models import Run
from experiments.web.runs.forms import CeilingForm, ConcurrencyForm, ReasonForm, ResumeForm

NO_QUEUE = (
    "No queue is reachable (the Redis server did not answer), so nothing changed: model calls never run "
    f"inside a web request. Start Redis and a worker ({WORKER_COMMAND}), or {{alternative}}."
)


def _spender_run(request, slug, pk):
    """(membership, run) when the user may spend on this run's protocol; 404/403 otherwise."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    require_spending(membership, run.protocol)
    return membership, run


def _reason(request, form_class=ReasonForm, **kwargs):
    """The bound amendment form, or None after putting its errors on the page."""
    form = form_class(request.POST, **kwargs)
    if form.is_valid():
        return form
    messages.error(request, "Nothing changed: " + "; ".join(m for ms in form.errors.values() for m in ms))
    return None


def _queue_or_message(request, alternative: str) -> bool:
    if progress.queue_reachable():
        return True
    messages.error(request, NO_QUEUE.format(alternative=alternative))
    return False


@login_required
@require_POST
def run_pause_view(request, slug, pk):
    """Pause a running run: nothing more is sent; queued requests become no-ops."""
    membership, run = _spender_run(request, slug, pk)
    form = _reason(request)
    if form:
        try:
            control.run_pause(run=run, user=request.user, reason=form.cleaned_data["reason"])
        except policy.RunError as exc:
            messages.error(request, f"Not paused: {exc}")
        else:
            messages.success(request, "Paused. Nothing more is sent until it is resumed.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_resume_view(request, slug, pk):
    """Resume a paused or stopped run: an amendment with each held slot's allowance, then the queue."""
    membership, run = _spender_run(request, slug, pk)
    form = _reason(request, ResumeForm)
    if form and _queue_or_message(
        request, f"resume it from a shell in one process: manage.py run_resume {run.pk} --reason '…' --inline"
    ):
        allowance = form.cleaned_data["allowance"]
        try:
            with transaction.atomic():
                amendment = control.run_resume(run=run, user=request.user, reason=form.cleaned_data["reason"],
                                               allowance=allowance)
                jobs.run_enqueue(run.pk)
        except policy.RunError as exc:
            messages.error(request, f"Not resumed: {exc}")
        else:
            held = len(amendment.payload["held_slots_released"])
            messages.success(request, f"Resumed: recorded as an amendment; {held} held slot{'s' * (held != 1)} "
                                      f"may send {allowance} identical request{'s' * (allowance != 1)} each.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_reissue_view(request, slug, pk):
    """Allow one more identical request for each slot of the current phase awaiting a decision."""
    membership, run = _spender_run(request, slug, pk)
    form = _reason(request)
    # A run paused by the owner sends the released slots when it is resumed; a running one, or
    # one paused for this very decision, needs the queue now.
    needs_queue = run.status == Run.Status.RUNNING or progress.run_next(run)["decision_due"]
    if form and (not needs_queue or _queue_or_message(
        request, "re-issue them and continue from a shell in one process: "
        f"manage.py run_reissue {run.pk} --reason '…' --inline"
    )):
        try:
            with transaction.atomic():
                amendment = control.run_reissue_unknown(run=run, user=request.user,
                                                        reason=form.cleaned_data["reason"])
                if needs_queue:
                    jobs.run_enqueue(run.pk)
        except policy.RunError as exc:
            messages.error(request, f"Nothing re-issued: {exc}")
        else:
            messages.success(request, f"{len(amendment.payload['slots'])} slots may be sent once more.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_accept_missing_view(request, slug, pk):
    """Continue with the slots awaiting a decision missing (as the paper); the next phase starts."""
    membership, run = _spender_run(request, slug, pk)
    form = _reason(request)
    if form and _queue_or_message(
        request, f"continue from a shell in one process: manage.py run_accept_missing {run.pk} --reason '…' --inline"
    ):
        try:
            with transaction.atomic():
                amendment = control.run_accept_missing(run=run, user=request.user,
                                                       reason=form.cleaned_data["reason"])
                jobs.run_enqueue(run.pk)
        except policy.RunError as exc:
            messages.error(request, f"Nothing changed: {exc}")
        else:
            messages.success(request, f"Continued with {len(amendment.payload['slots'])} slots missing: "
                                      "recorded as an amendment.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_ceiling_view(request, slug, pk):
    """Raise the run's HTTP ceilings (a paid amendment); a run a ceiling stopped resumes."""
    membership, run = _spender_run(request, slug, pk)
    form = _reason(request, CeilingForm)
    if form and _queue_or_message(
        request, f"raise it from a shell in one process: manage.py run_raise_ceiling {run.pk} --phase-ceiling N "
                 "--reason '…' --inline"
    ):
        data = form.cleaned_data
        try:
            with transaction.atomic():
                amendment = control.run_raise_ceiling(
                    run=run, user=request.user, reason=data["reason"], phase_ceiling=data["phase_ceiling"],
                    run_ceiling=data["run_ceiling"])
                resumed = Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
                if resumed:
                    jobs.run_enqueue(run.pk)
        except policy.RunError as exc:
            messages.error(request, f"Not raised: {exc}")
        else:
            messages.success(request, f"Ceiling raised: up to {amendment.payload['extra_requests']} more "
                                      f"request{'s' if amendment.payload['extra_requests'] != 1 else ''}"
                                      f"{'; the run resumes' if resumed else ''}.")
    return redirect("run_detail", slug=slug, pk=pk)


@login_required
@require_POST
def run_concurrency_view(request, slug, pk):
    """Change a provider's in-flight cap for this run (owners); recorded as an amendment."""
    membership, run = run_for(request, slug, pk, roles=OWNERS)
    form = _reason(request, ConcurrencyForm, providers=providers(run.protocol))
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


def providers(protocol) -> list[str]:
    return list(dict.fromkeys([protocol.generator["provider"], protocol.judge["provider"]]))
