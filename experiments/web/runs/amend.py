"""The run page's amendments (paper App. B.2): pause, resume with a continuation allowance,
re-issue or accept missing the slots that wait for a decision, raise an HTTP ceiling, change concurrency.
Their forms, and their views on one skeleton (`_amend`).

Who may: `access.may_spend` — owners, and analysts for runs that call no paid provider or in a
project that delegates spending to them — for everything that spends money or stops it (whoever
may start a run may pause it); owners only for a concurrency change. Each view checks it first,
through `run_for` and `require_spending`, and changes nothing when refused.
"""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from experiments.access import OWNERS, TEXT_READERS, require_spending, run_for
from experiments.execution import control, jobs, policy, progress
from experiments.execution.jobs import WORKER_COMMAND
from experiments.models import Run
from experiments.web.bounded_input import BoundedIntegerField
from experiments.web.form_errors import errors_text
from experiments.web.text_input import StorableTextMixin

NO_QUEUE = (
    "No queue is reachable (the Redis server did not answer), so nothing changed: model calls never run "
    f"inside a web request. Start Redis and a worker ({WORKER_COMMAND}), or {{alternative}}."
)


# --- the forms --------------------------------------------------------------------------------

class ReasonForm(StorableTextMixin, forms.Form):
    """Every amendment carries a reason (paper App. B.2)."""

    reason = forms.CharField(max_length=2000, widget=forms.TextInput(attrs={"size": 60}),
                             error_messages={"required": "give a reason: amendments are recorded with it"})


class ResumeForm(ReasonForm):
    """Resume: the continuation amendment gives each held slot this many identical requests (App. B.2)."""

    allowance = BoundedIntegerField(
        required=False, min_value=1, max_value=10, initial=1, label="Identical requests per held slot",
        help_text="the paper's continuation allowed one; each is sent only if the one before it failed without output",
    )

    field_order = ["allowance", "reason"]

    def clean_allowance(self):
        return self.cleaned_data["allowance"] or 1  # empty: the paper's one request


class CeilingForm(ReasonForm):
    """Raise the run's HTTP ceilings (an amendment; empty: that ceiling stays)."""

    phase_ceiling = BoundedIntegerField(required=False, min_value=1, max_value=10_000_000,
                                       label="New ceiling for this phase (HTTP attempts)")
    run_ceiling = BoundedIntegerField(required=False, min_value=1, max_value=10_000_000,
                                     label="New ceiling for the whole run (HTTP attempts)")

    field_order = ["phase_ceiling", "run_ceiling", "reason"]

    def clean(self):
        data = super().clean()
        if data.get("phase_ceiling") is None and data.get("run_ceiling") is None:
            raise forms.ValidationError("give a new ceiling for the phase, for the run, or both")
        return data


class ConcurrencyForm(ReasonForm):
    provider = forms.ChoiceField()
    cap = BoundedIntegerField(min_value=1, max_value=1000, label="In-flight cap")

    field_order = ["provider", "cap", "reason"]

    def __init__(self, *args, providers, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [(p, p) for p in providers]


def providers(protocol) -> list[str]:
    return list(dict.fromkeys([protocol.generator["provider"], protocol.judge["provider"]]))


# --- the views --------------------------------------------------------------------------------

def _spender_run(request, slug, pk) -> Run:
    """The run, when the user may spend on its protocol; 404/403 otherwise."""
    membership, run = run_for(request, slug, pk, roles=TEXT_READERS)
    require_spending(membership, run.protocol)
    return run


def _amend(request, run: Run, form, act, *, refused: str, without_queue: str | None = None):
    """What every amendment view does once access is checked: the posted `form` validated (its
    errors on the page); when the change needs the queue, the queue reached (`without_queue`: what
    to do instead); then `act(data)` in one transaction, which returns the success message (a
    RunError is shown after `refused`); and back to the run page. Nothing changes unless all succeeds."""
    if not form.is_valid():
        messages.error(request, f"Nothing changed: {errors_text(form, names=False)}")
    elif without_queue and not progress.queue_reachable():
        messages.error(request, NO_QUEUE.format(alternative=without_queue))
    else:
        try:
            with transaction.atomic():
                done = act(form.cleaned_data)
        except policy.RunError as exc:
            messages.error(request, f"{refused}: {exc}")
        else:
            messages.success(request, done)
    return redirect("run_detail", slug=run.protocol.project.slug, pk=run.pk)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


@login_required
@require_POST
def run_pause_view(request, slug, pk):
    """Pause a running run: nothing more is sent; queued requests become no-ops."""
    run = _spender_run(request, slug, pk)

    def pause(data):
        control.run_pause(run=run, user=request.user, reason=data["reason"])
        return "Paused. Nothing more is sent until it is resumed."
    return _amend(request, run, ReasonForm(request.POST), pause, refused="Not paused")


@login_required
@require_POST
def run_resume_view(request, slug, pk):
    """Resume a paused or stopped run: an amendment with each held slot's allowance, then the queue."""
    run = _spender_run(request, slug, pk)

    def resume(data):
        amendment = control.run_resume(run=run, user=request.user, reason=data["reason"],
                                       allowance=data["allowance"])
        jobs.run_enqueue(run.pk)
        held = len(amendment.payload["held_slots_released"])
        return (f"Resumed: recorded as an amendment; {_plural(held, 'held slot')} "
                f"may send {_plural(data['allowance'], 'identical request')} each.")
    return _amend(request, run, ResumeForm(request.POST), resume, refused="Not resumed", without_queue=(
        f"resume it from a shell in one process: manage.py run_resume {run.pk} --reason '…' --inline"))


@login_required
@require_POST
def run_reissue_view(request, slug, pk):
    """Allow one more identical request for each slot of the current phase awaiting a decision."""
    run = _spender_run(request, slug, pk)
    # A run paused by the owner sends the released slots when it is resumed; a running one, or
    # one paused for this very decision, needs the queue now.
    needs_queue = run.status == Run.Status.RUNNING or progress.run_next(run)["decision_due"]

    def reissue(data):
        amendment = control.run_reissue_unknown(run=run, user=request.user, reason=data["reason"])
        if needs_queue:
            jobs.run_enqueue(run.pk)
        return f"{len(amendment.payload['slots'])} slots may be sent once more."
    return _amend(request, run, ReasonForm(request.POST), reissue, refused="Nothing re-issued", without_queue=(
        "re-issue them and continue from a shell in one process: "
        f"manage.py run_reissue {run.pk} --reason '…' --inline") if needs_queue else None)


@login_required
@require_POST
def run_accept_missing_view(request, slug, pk):
    """Continue with the slots awaiting a decision missing (as the paper); the next phase starts."""
    run = _spender_run(request, slug, pk)

    def accept_missing(data):
        amendment = control.run_accept_missing(run=run, user=request.user, reason=data["reason"])
        jobs.run_enqueue(run.pk)
        return f"Continued with {len(amendment.payload['slots'])} slots missing: recorded as an amendment."
    return _amend(request, run, ReasonForm(request.POST), accept_missing, refused="Nothing changed", without_queue=(
        f"continue from a shell in one process: manage.py run_accept_missing {run.pk} --reason '…' --inline"))


@login_required
@require_POST
def run_ceiling_view(request, slug, pk):
    """Raise the run's HTTP ceilings (a paid amendment); a run a ceiling stopped resumes."""
    run = _spender_run(request, slug, pk)

    def raise_ceiling(data):
        amendment = control.run_raise_ceiling(run=run, user=request.user, reason=data["reason"],
                                              phase_ceiling=data["phase_ceiling"], run_ceiling=data["run_ceiling"])
        resumed = Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
        if resumed:
            jobs.run_enqueue(run.pk)
        return (f"Ceiling raised: up to {_plural(amendment.payload['extra_requests'], 'more request')}"
                f"{'; the run resumes' if resumed else ''}.")
    return _amend(request, run, CeilingForm(request.POST), raise_ceiling, refused="Not raised", without_queue=(
        f"raise it from a shell in one process: manage.py run_raise_ceiling {run.pk} --phase-ceiling N "
        "--reason '…' --inline"))


@login_required
@require_POST
def run_concurrency_view(request, slug, pk):
    """Change a provider's in-flight cap for this run (owners); recorded as an amendment."""
    _, run = run_for(request, slug, pk, roles=OWNERS)

    def set_concurrency(data):
        control.run_set_concurrency(run=run, user=request.user, provider=data["provider"], cap=data["cap"],
                                    reason=data["reason"])
        return f"{data['provider']}: at most {data['cap']} requests in flight from now on."
    form = ConcurrencyForm(request.POST, providers=providers(run.protocol))
    return _amend(request, run, form, set_concurrency, refused="Not changed")
