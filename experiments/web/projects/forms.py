"""Forms of the project pages: uploading interview files, the task rule, a cohort draw."""
from django import forms

from experiments.core.interviews.readers import FORMATS
from experiments.core.tasks import PAPER_RULE
from experiments.data.import_jobs import megabytes, upload_limit_bytes
from experiments.web.bounded_input import BoundedIntegerField
from experiments.web.text_input import StorableTextMixin

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


class ImportForm(StorableTextMixin, forms.Form):
    files = MultipleFileField(
        help_text="JSONL or Anthropic Interviewer CSV files (each imported on its own), "
        "or the three files of a genagents folder together."
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False)

    def clean_files(self):
        files = self.cleaned_data["files"]
        limit = upload_limit_bytes()
        too_large = [f for f in files if f.size > limit]
        if too_large:
            raise forms.ValidationError(
                [upload_too_large_message(f.name, f.size) for f in too_large], code="upload_too_large")
        return files


def upload_too_large_message(name: str | None, size: int) -> str:
    what = f"{name} is" if name else "The upload is"
    return (f"{what} {megabytes(size)} MB; this server takes files of at most {megabytes(upload_limit_bytes())} MB. "
            "Split the file (a JSONL file can be cut at any line) or import it with manage.py import_sessions.")


# Room for the form's other fields and the multipart boundaries around the files.
UPLOAD_OVERHEAD_BYTES = 64 * 1024


def declared_upload_over(request, limit_bytes: int) -> int | None:
    """The Content-Length a POST declares, when its files cannot fit in `limit_bytes`; else None.

    Read before the body (and so before the CSRF check, which reads it): the views that call
    this run CSRF-exempt and hand over to a CSRF-protected inner view."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if request.method == "POST" and declared.isdigit() and int(declared) > limit_bytes + UPLOAD_OVERHEAD_BYTES:
        return int(declared)
    return None


class TaskRuleForm(StorableTextMixin, forms.Form):
    min_pairs = BoundedIntegerField(min_value=1, max_value=1000, initial=PAPER_RULE.min_pairs)
    min_targets = BoundedIntegerField(min_value=1, max_value=1000, initial=PAPER_RULE.min_targets)
    max_targets = BoundedIntegerField(min_value=1, max_value=1000, initial=PAPER_RULE.max_targets)

    def clean(self):
        data = super().clean()
        if data.get("max_targets") is not None and data.get("min_targets") is not None:
            if data["max_targets"] < data["min_targets"]:
                raise forms.ValidationError("max targets must be at least min targets", code="max_below_min")
        return data


class CohortForm(StorableTextMixin, forms.Form):
    name = forms.CharField(max_length=100)
    size = BoundedIntegerField(min_value=1, max_value=100_000, help_text="number of sessions")
    seed = BoundedIntegerField(min_value=0, max_value=2**63 - 1)
    exclude = forms.ModelMultipleChoiceField(queryset=None, required=False, label="Exclude the people of")
    exclusion_list = forms.FileField(required=False, label="Person-exclusion list",
                                     help_text="optional: one person id per line (# comments); all their sessions are left out")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["exclude"].queryset = project.cohorts.all()


FIXED_INPUT_MAX_BYTES = 20 * 1024 * 1024  # a task or exclusion list; far above a million rows' worth of ids


class TaskListForm(StorableTextMixin, forms.Form):
    """A cohort from a fixed task list (the paper's fixed inputs): CSV session_id,question_turn."""

    def __init__(self, *args, **kwargs):
        # Its own ids: the project page shows it beside the cohort form, whose `name` is id_name.
        kwargs.setdefault("auto_id", "id_task_list_%s")
        super().__init__(*args, **kwargs)

    name = forms.CharField(max_length=100, label="Cohort name")
    task_list = forms.FileField(label="Fixed task list", help_text="CSV with the header session_id,question_turn; "
                                "rows in cohort order; the next turn is the reference answer")
