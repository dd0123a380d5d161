"""Re-grading a finished run with another judge, or the same one (paper App. H): the owner's form,
and what a run page shows about re-grades.

The form sits on a finished run's page; posting it creates a re-grade-only protocol, seals it and
starts its run through the queue, all or nothing (`control.regrade_create`). A refused post
comes back on a page of its own with the form's errors. Kept apart from `views` so that the
run pages' module stays about watching and amending runs.
"""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters

from experiments.access import OWNERS, config_grant_refusal, run_for
from experiments.analysis.judges import contrasts_side_by_side
from experiments.execution import control, jobs, policy, progress
from experiments.execution.pairwise_judge import all_pairs
from experiments.models import Protocol, Run
from experiments.web.runs.forms import ModelConfigForm, model_initial
from experiments.web.text_input import StorableTextMixin

SAME, OTHER = "same", "other"


class RegradeForm(StorableTextMixin, forms.Form):
    """Which judge re-grades the run: the form of the protocol editor's judge, or the same one."""

    judge_choice = forms.ChoiceField(
        choices=[(OTHER, "Another judge (below)"), (SAME, "The same judge again (a retest)")],
        widget=forms.RadioSelect, initial=OTHER, label="Judge",
    )
    name = forms.CharField(required=False, max_length=100, label="Protocol name",
                           help_text="empty: named after the run")
    pairwise_conditions = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="A pairwise judge instead",
        help_text="two or more conditions: the judge compares their answers two by two (A, B or tie), each "
                  "pair in both orders, instead of grading each answer")

    def __init__(self, data=None, *, source: Run):
        super().__init__(data, prefix="regrade")
        protocol = source.protocol
        self.order = list(protocol.conditions)
        self.fields["pairwise_conditions"].choices = [(c, c) for c in self.order]
        # Bound only when another judge is chosen: a retest posts no judge to check.
        judge_data = data if data is not None and data.get(self.add_prefix("judge_choice")) != SAME else None
        self.judge = ModelConfigForm(judge_data, prefix="judge",
                                     initial=model_initial(protocol.judge, protocol.concurrency))

    def is_valid(self) -> bool:
        valid = super().is_valid()
        if valid and self.cleaned_data["judge_choice"] == OTHER:
            return self.judge.is_valid()
        return valid

    def clean_pairwise_conditions(self):
        chosen = self.cleaned_data["pairwise_conditions"]
        if len(chosen) == 1:
            raise forms.ValidationError("choose two or more conditions to compare, or none for a re-grade")
        return chosen

    def pairs(self) -> list[list[str]] | None:
        """The pairs a pairwise judge compares, or None for a re-grade."""
        chosen = self.cleaned_data["pairwise_conditions"]
        return all_pairs(self.order, chosen) if chosen else None

    def judge_config(self) -> dict | None:
        return None if self.cleaned_data["judge_choice"] == SAME else self.judge.config()

    def cap(self) -> int | None:
        return None if self.cleaned_data["judge_choice"] == SAME else self.judge.cleaned_data["concurrency"]


@login_required
@sensitive_post_parameters("judge-api_key_env")
def run_regrade(request, slug, pk):
    """Template experiments/runs/run_regrade.html: re-grade a finished run (owners only)."""
    membership, run = run_for(request, slug, pk, roles=OWNERS)
    form = RegradeForm(request.POST if request.method == "POST" else None, source=run)
    refusal = _refusal(run)
    if request.method == "POST" and refusal is None and form.is_valid() and _granted(request, form, run):
        try:
            with transaction.atomic():
                protocol = control.regrade_create(source=run, user=request.user, judge=form.judge_config(),
                                                  cap=form.cap(), name=form.cleaned_data["name"], pairs=form.pairs())
                regrade = Run.objects.create(protocol=protocol, created_by=request.user)
                control.run_start(run=regrade)
                jobs.run_enqueue(regrade.pk)  # enqueued when this transaction commits
        except policy.RunError as exc:
            messages.error(request, f"Nothing was created: {exc}")
        else:
            what = "compares the answers of" if protocol.pairwise_pairs else "re-grades"
            messages.success(request, f"Protocol {protocol.name} sealed; run {regrade.pk} {what} run {run.pk} "
                                      "through the queue.")
            return redirect("run_detail", slug=slug, pk=regrade.pk)
    return render(request, "experiments/runs/run_regrade.html",
                  {"membership": membership, "project": membership.project, "run": run, "regrade_form": form,
                   "refusal": refusal})


def _granted(request, form: RegradeForm, run: Run) -> bool:
    """Whether the user holds the administrator's grant for the re-grading judge's paid endpoint;
    when not, the page says why and nothing is created."""
    refusal = config_grant_refusal(request.user, form.judge_config() or run.protocol.judge)
    if refusal:
        messages.error(request, f"Nothing was created: {refusal}.")
    return refusal is None


def _refusal(run: Run) -> str | None:
    """Why no re-grade can start from this page now (nothing is created then), or None."""
    if run.protocol.kind == Protocol.Kind.SURVEY:  # scored against the recorded options: no judge to replace
        return (f"Run {run.pk} is a survey run: its answers are scored against the recorded options, "
                "not graded by a judge, so there is nothing to re-grade and nothing was created.")
    if run.status != Run.Status.FINISHED:
        return (f"Run {run.pk} is {run.get_status_display().lower()}: only a finished run can be re-graded, "
                "so nothing was created.")
    if not progress.queue_reachable():
        return ("No queue is reachable (the Redis server did not answer), so nothing was created: model calls "
                "never run inside a web request. Start Redis and a worker, or re-grade from a shell: "
                f"manage.py regrade_run --run {run.pk} --user … --inline")
    return None


def regrade_context(membership, run: Run) -> dict:
    """What the run page shows about re-grades: the owner's form on a finished run, the runs
    re-grading this one, and for a re-grade run its source and the judge–judge comparison."""
    context = {"regrades": Run.objects.filter(protocol__regrade_of=run).select_related("protocol")}
    if membership.is_owner() and run.status == Run.Status.FINISHED and run.protocol.kind not in (
            Protocol.Kind.SURVEY, Protocol.Kind.PAIRWISE):  # answers scored without a judge, or none
        context["regrade_form"] = RegradeForm(source=run)
    protocol = run.protocol
    if protocol.kind == Protocol.Kind.REGRADE:
        context["source_run"] = protocol.regrade_of
        if run.status == Run.Status.FINISHED:
            context["judges"] = (run.analysis or {}).get("judges")
            context["side_by_side"] = contrasts_side_by_side(run)
    return context
