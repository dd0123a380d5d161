"""Planned contrasts chosen from lists on the protocol form: each row is one paired
difference "first − second" of two conditions picked from selects grouped by family, with its
family and criterion boxes. Contrasts of another shape (weights, more terms: written with the
`protocol_create` command's text syntax) are kept or dropped with a box, never retyped."""
from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from experiments.core.candidates import registry_derived_keys
from experiments.core.condition_families import conditions_by_family
from experiments.core.contrasts import INTERVAL_ABOVE_ZERO, format_contrast, format_terms, parse_contrast_line
from experiments.web.text_input import StorableTextMixin

BLANK_ROWS = 3


def condition_choices():
    """Every runnable condition, in optgroups by family; then a pool's candidate-level
    conditions (core.candidates: b0..b2, candidate mean, oracle; valid with its pool's fusion or
    selection among the protocol's conditions)."""
    groups = [(title, [(c.key, c.key) for c in members if c.runnable])
              for (_, title, _), members in conditions_by_family()]
    return [("", "—")] + [(title, choices) for title, choices in groups if choices] + [
        ("A pool's candidates (no call)", [(key, key) for key in registry_derived_keys()])]


class ContrastRowForm(StorableTextMixin, forms.Form):
    name = forms.CharField(required=False, max_length=200, help_text="empty: “first − second”")
    first = forms.ChoiceField(required=False, label="First condition")
    second = forms.ChoiceField(required=False, label="minus second condition")
    family = forms.BooleanField(required=False, label="in the family (Bonferroni intervals)")
    criterion = forms.BooleanField(required=False, label="criterion: interval above zero")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["first"].choices = self.fields["second"].choices = condition_choices()
        # The rows sit in a table under one header: each control says which row it belongs to.
        number = int(self.prefix.rsplit("-", 1)[-1]) + 1 if self.prefix and self.prefix[-1].isdigit() else 1
        for name, label in (("name", "Name"), ("first", "First condition"), ("second", "Second condition"),
                            ("family", "In the family"), ("criterion", "Criterion: interval above zero")):
            self.fields[name].widget.attrs["aria-label"] = f"{label} of contrast {number}"

    def clean(self):
        data = super().clean()
        first, second = data.get("first"), data.get("second")
        if not first and not second:
            if data.get("name") or data.get("family") or data.get("criterion"):
                raise ValidationError("choose the two conditions of this contrast", code="incomplete")
            return data
        if not first or not second:
            raise ValidationError("choose both conditions of this contrast", code="incomplete")
        if first == second:
            raise ValidationError("choose two different conditions: a condition minus itself is zero", code="same")
        return data

    def contrast(self) -> dict | None:
        data = self.cleaned_data
        if not data.get("first"):
            return None
        terms = {data["first"]: 1, data["second"]: -1}
        return {"name": data["name"].strip() or format_terms(terms), "terms": terms, "family": data["family"],
                "criterion": INTERVAL_ABOVE_ZERO if data["criterion"] else None}


# Far above any study's contrasts (the paper's largest family has 8), and a cap on the forms Django
# builds: a posted TOTAL_FORMS of 30 digits otherwise builds thousands of forms (17 s of server time).
MAX_CONTRAST_ROWS = 100
ContrastRows = forms.formset_factory(ContrastRowForm, extra=0, max_num=MAX_CONTRAST_ROWS,
                                     absolute_max=MAX_CONTRAST_ROWS, validate_max=True)


def is_pair(contrast: dict) -> bool:
    return sorted(contrast["terms"].values()) == [-1, 1]


def row_initial(contrast: dict) -> dict:
    first, second = sorted(contrast["terms"], key=lambda key: -contrast["terms"][key])
    expression = format_terms(contrast["terms"])
    return {"name": "" if contrast["name"] == expression else contrast["name"], "first": first, "second": second,
            "family": bool(contrast.get("family")), "criterion": contrast.get("criterion") == INTERVAL_ABOVE_ZERO}


def contrast_rows(data, stored: list[dict]) -> forms.BaseFormSet:
    """The rows: the stored paired contrasts, then BLANK_ROWS empty ones."""
    initial = [row_initial(c) for c in stored if is_pair(c)] + [{}] * BLANK_ROWS
    if data is not None and "contrast-TOTAL_FORMS" not in data:
        # A client that sends no rows (a script posting the other fields) sends no contrasts.
        data = data.copy()
        data.update({"contrast-TOTAL_FORMS": "0", "contrast-INITIAL_FORMS": "0"})
    # Bound rows are read as posted: compared with the stored ones, an unchanged row would count as empty.
    return ContrastRows(data, prefix="contrast", initial=None if data is not None else initial)


class KeptContrastsField(forms.MultipleChoiceField):
    """The stored contrasts that are not a plain pair, each kept unless its box is cleared."""

    widget = forms.CheckboxSelectMultiple

    def __init__(self, stored: list[dict], **kwargs):
        lines = [format_contrast(c) for c in stored if not is_pair(c)]
        super().__init__(choices=[(line, line) for line in lines], required=False, initial=lines,
                         label="Other contrasts (kept while checked)", **kwargs)

    def contrasts(self, lines) -> list[dict]:
        return [parse_contrast_line(line) for line in lines]
