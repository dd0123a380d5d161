"""The protocol editor's forms (the amendment forms are beside their views, in `amend`).

A protocol is edited with three forms validated together (`ProtocolEditor`): the protocol's own
fields and one `ModelConfigForm` each for the generator and the judge. The sealing rules
(`sealing.protocol_problems`) run on the assembled, unsaved protocol, so the page shows exactly
the problems that would stop the seal.
"""
from __future__ import annotations

import json

from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction

from experiments.core.condition_families import conditions_by_family
from experiments.core.conditions import CONDITIONS
from experiments.core.kinds import inferred_kind
from experiments.core.survey.prompt import SURVEY_CONDITIONS
from experiments.core.contrasts import contrast_problems
from experiments.core.criteria import criteria_problems
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.memory_systems.availability import condition_unavailable
from experiments.execution.policy import DEFAULT_RETRY, RunError
from experiments.models import Protocol
from experiments.execution.sealing import protocol_problems
from experiments.web.bounded_input import BoundedIntegerField, BoundedJSONField
from experiments.web.runs.contrast_rows import KeptContrastsField, contrast_rows
from experiments.web.runs.model_form import OFFLINE_CONFIG, ModelConfigForm, model_initial
from experiments.web.text_input import StorableTextMixin

__all__ = ["ModelConfigForm", "model_initial", "ProtocolEditor", "ProtocolForm"]

# --- the forms --------------------------------------------------------------------------------

class ProtocolForm(StorableTextMixin, forms.Form):
    name = forms.CharField(max_length=100)
    cohort = forms.ModelChoiceField(queryset=None, empty_label=None)
    conditions = forms.MultipleChoiceField(
        # Callable: read when a form is made, so a condition registered later is a valid choice.
        choices=lambda: [(key, key) for key in [*CONDITIONS, *SURVEY_CONDITIONS]], widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "choose at least one condition"},
    )
    survey_no_screener = forms.BooleanField(
        required=False, label="No screener",
        help_text="survey only: no condition shows the screener, as in the paper's earlier runs (Table 21); sealed")
    max_recoveries_per_slot = BoundedIntegerField(min_value=0, max_value=10, label="Max recoveries per slot")
    cooldown_s = forms.FloatField(min_value=0, max_value=3600, label="Cooldown (s)")
    phase_allowance = BoundedIntegerField(min_value=0, max_value=1_000_000, label="Recovery allowance per phase")
    bootstrap_seed = BoundedIntegerField(min_value=0, max_value=2**63 - 1, label="Bootstrap seed")
    bootstrap_draws = BoundedIntegerField(min_value=100, max_value=10_000_000, label="Bootstrap draws")
    criteria = BoundedJSONField(
        required=False, max_length=20_000, empty_value=[], label="Prespecified criteria (JSON)",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text='Optional, sealed with the protocol; the dashboard says met or not met. Example: '
                  '[{"name": "fusion beats the one-shot", "contrast": "fusion minus one-shot", '
                  '"interval": "family", "above": 0}]; combine tests with {"all": [...]} or {"any": [...]}.')

    def __init__(self, *args, project, protocol=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.protocol = protocol
        self.fields["cohort"].queryset = project.cohorts.all()
        # Contrasts of another shape than a pair, from the protocol_create command: kept or dropped.
        self.fields["kept_contrasts"] = KeptContrastsField(protocol.contrasts if protocol else [])

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        others = Protocol.objects.filter(project=self.project, name=name)
        if self.protocol is not None:
            others = others.exclude(pk=self.protocol.pk)
        if others.exists():
            raise ValidationError("another protocol of this project has this name", code="duplicate_name")
        return name

    def clean_conditions(self):
        keys = self.cleaned_data["conditions"]
        if any(key in SURVEY_CONDITIONS for key in keys):  # all runnable; the paper's order (App. H)
            if any(key not in SURVEY_CONDITIONS for key in keys):
                raise ValidationError("a protocol is about interviews or about a survey, never both", code="mixed")
            return [key for key in SURVEY_CONDITIONS if key in keys]
        not_runnable = [key for key in keys if not CONDITIONS[key].runnable]
        if not_runnable:
            raise ValidationError(
                [f"{key} is not runnable yet: {CONDITIONS[key].note}" for key in not_runnable], code="not_runnable"
            )
        unavailable = [(key, condition_unavailable(CONDITIONS[key])) for key in keys]
        if any(reason for _, reason in unavailable):
            raise ValidationError([f"{key} cannot run here: {reason}" for key, reason in unavailable if reason],
                                  code="unavailable")
        # Registry order, so the same choice always gives the same protocol (and seal).
        return [key for key in CONDITIONS if key in keys]

    def clean_kept_contrasts(self):
        return self.fields["kept_contrasts"].contrasts(self.cleaned_data["kept_contrasts"])


def protocol_initial(protocol: Protocol | None, project) -> dict:
    if protocol is None:
        return {
            "cohort": project.cohorts.first(),
            **DEFAULT_RETRY,
            "bootstrap_seed": DEFAULT_SEED,
            "bootstrap_draws": DEFAULT_DRAWS,
        }
    retry = {**DEFAULT_RETRY, **protocol.retry_policy}
    return {
        "name": protocol.name,
        "cohort": protocol.cohort,
        "conditions": protocol.conditions,
        **retry,
        "bootstrap_seed": protocol.bootstrap.get("seed", DEFAULT_SEED),
        "bootstrap_draws": protocol.bootstrap.get("draws", DEFAULT_DRAWS),
        "criteria": json.dumps(protocol.criteria, indent=1, ensure_ascii=False) if protocol.criteria else "",
        "survey_no_screener": not protocol.survey_screener,
    }


class ProtocolEditor:
    """The protocol form and its two model forms, validated and saved together."""

    def __init__(self, data=None, *, project, protocol: Protocol | None = None):
        self.project = project
        self.protocol = protocol
        concurrency = protocol.concurrency if protocol else {}
        self.main = ProtocolForm(data, project=project, protocol=protocol,
                                 initial=protocol_initial(protocol, project))
        self.generator = ModelConfigForm(data, prefix="generator", initial=model_initial(
            protocol.generator if protocol else OFFLINE_CONFIG, concurrency))
        del self.generator.fields["structured_output"]  # a judge's option: it asks for a grade
        del self.generator.fields["structured_format"]
        self.judge = ModelConfigForm(data, prefix="judge", initial=model_initial(
            protocol.judge if protocol else OFFLINE_CONFIG, concurrency))
        self.contrast_rows = contrast_rows(data, protocol.contrasts if protocol else [])
        self.contrasts: list[dict] = []

    def is_valid(self) -> bool:
        valid = [form.is_valid() for form in (self.main, self.generator, self.judge, self.contrast_rows)]  # all
        chosen = self.main.cleaned_data
        if valid[3] and "conditions" in chosen and "kept_contrasts" in chosen:  # shown with the other errors
            self.contrasts = [c for c in (row.contrast() for row in self.contrast_rows) if c is not None]
            self.contrasts += chosen["kept_contrasts"]
            for problem in contrast_problems(self.contrasts, chosen["conditions"]):
                self.main.add_error(None, ValidationError(f"planned contrasts: {problem}", code="bad_contrast"))
                valid.append(False)
            if "criteria" in chosen:
                for problem in criteria_problems(chosen["criteria"], self.contrasts):
                    self.main.add_error("criteria", ValidationError(problem, code="bad_criteria"))
                    valid.append(False)
        if not all(valid):
            return False
        generator, judge = self.generator.cleaned_data, self.judge.cleaned_data
        if generator["provider"] == judge["provider"] and generator["concurrency"] != judge["concurrency"]:
            self.main.add_error(None, ValidationError(
                f"generator and judge both use {generator['provider']}: the in-flight cap is per provider, "
                "so give them the same cap", code="cap_conflict"))
            return False
        for problem in protocol_problems(Protocol(**self.values())):
            self.main.add_error(None, ValidationError(problem, code="cannot_seal"))
        return not self.main.errors

    def values(self) -> dict:
        """The protocol's fields from the cleaned forms."""
        data = self.main.cleaned_data
        return {
            "name": data["name"],
            "cohort": data["cohort"],
            "kind": inferred_kind(data["conditions"], regrade=False),  # the editor never makes a re-grade
            "conditions": data["conditions"],
            "generator": self.generator.config(),
            "judge": self.judge.config(),
            "concurrency": {
                self.generator.cleaned_data["provider"]: self.generator.cleaned_data["concurrency"],
                self.judge.cleaned_data["provider"]: self.judge.cleaned_data["concurrency"],
            },
            "retry_policy": {key: data[key] for key in DEFAULT_RETRY},
            "contrasts": self.contrasts,
            "bootstrap": {"seed": data["bootstrap_seed"], "draws": data["bootstrap_draws"]},
            "criteria": data.get("criteria", []),
            "survey_screener": not data.get("survey_no_screener", False),
        }

    def save(self, *, user) -> Protocol:
        """Create the protocol, or update it while it is unsealed (RunError once sealed)."""
        if self.protocol is None:
            return Protocol.objects.create(project=self.project, created_by=user, **self.values())
        with transaction.atomic():
            protocol = Protocol.objects.select_for_update().get(pk=self.protocol.pk)
            if protocol.is_sealed():
                raise RunError("the protocol was sealed meanwhile; it is read-only now")
            for field, value in self.values().items():
                setattr(protocol, field, value)
            protocol.save()
            return protocol

    def condition_groups(self) -> list[dict]:
        """Every registry condition for the checkboxes, grouped by family; those not runnable disabled."""
        chosen = set(self.main["conditions"].value() or ())
        unavailable = {c.key: condition_unavailable(c) for c in CONDITIONS.values()}
        return [
            {"key": key, "title": title, "about": about,
             "rows": [{"key": c.key, "runnable": c.runnable and not unavailable[c.key],
                       "note": f"CANNOT RUN HERE: {unavailable[c.key]}" if unavailable[c.key] else c.note,
                       "checked": c.key in chosen}
                      for c in members]}
            for (key, title, about), members in conditions_by_family()
        ] + [{"key": "survey", "title": "Survey (Twin-2K-500)",
              "about": "for a survey sample only: answers scored against the recorded options, no judge (App. H)",
              "rows": [{"key": c.key, "runnable": True, "note": c.label, "checked": c.key in chosen}
                       for c in SURVEY_CONDITIONS.values()]}]
