"""Forms of the project pages: uploading interview files, the task rule, a cohort draw."""
from django import forms

from experiments.core.interviews.readers import FORMATS
from experiments.core.tasks import PAPER_RULE

FORMAT_CHOICES = [("", "Guess from the file name")] + [(f, f) for f in FORMATS]


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)) and data:
            return [single(item, initial) for item in data]
        # No file at all: the single-file clean raises "This field is required".
        return [single(data or None, initial)]


class ImportForm(forms.Form):
    files = MultipleFileField(
        help_text="JSONL or Anthropic Interviewer CSV files (each imported on its own), "
        "or the three files of a genagents folder together."
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False)


class TaskRuleForm(forms.Form):
    min_pairs = forms.IntegerField(min_value=1, max_value=1000, initial=PAPER_RULE.min_pairs)
    min_targets = forms.IntegerField(min_value=1, max_value=1000, initial=PAPER_RULE.min_targets)
    max_targets = forms.IntegerField(min_value=1, max_value=1000, initial=PAPER_RULE.max_targets)

    def clean(self):
        data = super().clean()
        if data.get("max_targets") is not None and data.get("min_targets") is not None:
            if data["max_targets"] < data["min_targets"]:
                raise forms.ValidationError("max targets must be at least min targets", code="max_below_min")
        return data


class CohortForm(forms.Form):
    name = forms.CharField(max_length=100)
    size = forms.IntegerField(min_value=1, max_value=100_000, help_text="number of sessions")
    seed = forms.IntegerField(min_value=0, max_value=2**63 - 1)
    exclude = forms.ModelMultipleChoiceField(queryset=None, required=False, label="Exclude the people of")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["exclude"].queryset = project.cohorts.all()
