"""The rating form: what the rater's page posts (the plain form and rating.js alike), read into
the typed values `annotations.rating.rating_record` takes. Each refusal is one message for the rater."""
from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from annotations.rating import GRADES, PREFERENCES, SAME_CONTENT, note_problem, rating_problem
from experiments.web.bounded_input import BIG_INTEGER_COLUMN_MAX, INTEGER_COLUMN_MAX, BoundedIntegerField

NOT_IN_QUEUE = "no such item in your queue"


class NoteField(forms.CharField):
    """Optional text, stripped, at most MAX_NOTE_CHARS, storable (no NUL, no lone surrogate):
    `rating.note_problem`'s rule, reported on the field."""

    def __init__(self):
        super().__init__(required=False)

    def validate(self, value):
        # Before CharField's own validators, whose NUL message is not the rater's.
        super().validate(value)
        if problem := note_problem(value):
            raise ValidationError(problem, code="invalid_note")


class RatingForm(forms.Form):
    assignment = BoundedIntegerField(min_value=1, max_value=BIG_INTEGER_COLUMN_MAX)
    grade = forms.Field(required=False)
    # A pair item's choice as shown: a, b or tie (the keys A, B, T).
    preference = forms.Field(required=False)
    # A content-check item's answer: yes, partly or no (the keys Y, P, N).
    same_content = forms.Field(required=False)
    note = NoteField()
    flagged = forms.BooleanField(required=False)
    flag_reason = NoteField()
    # The guidelines version the page showed (absent: the latest), recorded with the rating.
    guidelines_version = BoundedIntegerField(required=False, min_value=1, max_value=INTEGER_COLUMN_MAX)
    # The browser's clock; anything unreadable is no error: the server's clock stands in.
    seconds = forms.Field(required=False)

    def __init__(self, *args, pairwise: bool = False, content_check: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.pairwise = pairwise
        self.content_check = content_check

    def clean_same_content(self) -> str:
        text = (self.cleaned_data["same_content"] or "").strip().lower()
        if text and text not in SAME_CONTENT:
            raise ValidationError(f"{text!r} is not a choice; choose Y (yes), P (partly) or N (no)", code="invalid")
        return text

    def clean_preference(self) -> str:
        text = (self.cleaned_data["preference"] or "").strip().lower()
        if text and text not in PREFERENCES:
            raise ValidationError(f"{text!r} is not a choice; choose A, B or T (a tie)", code="invalid")
        return text

    def clean_grade(self) -> int | None:
        text = (self.cleaned_data["grade"] or "").strip()
        if not text:
            return None
        if text not in {str(g) for g in GRADES}:
            raise ValidationError(f"{text!r} is not a grade; grades are 0, 1, 2 or 3", code="invalid")
        return int(text)

    def clean_seconds(self) -> float | None:
        try:
            return float(self.cleaned_data["seconds"])
        except (TypeError, ValueError):
            return None

    def clean(self):
        data = super().clean()
        if ("grade" in data and "flag_reason" in data and "preference" in data and "same_content" in data
                and (problem := rating_problem(
                    grade=data["grade"], flagged=data["flagged"], flag_reason=data["flag_reason"],
                    preference=data["preference"], pairwise=self.pairwise, same_content=data["same_content"],
                    content_check=self.content_check))):
            raise ValidationError(problem)
        return data

    def rating(self) -> dict:
        """The valid form's values as `rating_record` takes them (besides campaign and user)."""
        values = dict(self.cleaned_data)
        values["assignment_id"] = values.pop("assignment")
        return values

    def problem(self) -> str:
        """The one message a refused submission answers with: the texts, the rule, the grade, the item."""
        for name in ("note", "flag_reason", NON_FIELD_ERRORS, "grade", "preference", "same_content"):
            if name in self.errors:
                return self.errors[name][0]
        return NOT_IN_QUEUE
