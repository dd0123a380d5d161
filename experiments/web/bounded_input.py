"""Bounded form input: one JSON field and one integer field for every form.

Unbounded input ended in a 500: criteria of 5,000 nested brackets (RecursionError) and a 30-digit
number (out of its column's range at INSERT). Every JSON field of the app's forms is a
`BoundedJSONField` (a size and a nesting limit, checked before parsing) and every integer field a
`BoundedIntegerField` (a range that must fit the column it is stored in); each refuses with a
clear form error and nothing is changed.
"""
from __future__ import annotations

import copy

from django import forms
from django.core.exceptions import ImproperlyConfigured, ValidationError

from experiments.core.bounded_json import DEFAULT_MAX_DEPTH, JSONInputError, bounded_json

# The columns' ranges on PostgreSQL: a form's integer must fit the column it ends up in.
INTEGER_COLUMN_MAX = 2**31 - 1  # IntegerField, PositiveIntegerField
BIG_INTEGER_COLUMN_MAX = 2**63 - 1  # BigIntegerField, and integers inside a jsonb document
# More digits than any column holds: refused before int() is asked to read them.
MAX_DIGITS = len(str(BIG_INTEGER_COLUMN_MAX)) + 1


class BoundedIntegerField(forms.IntegerField):
    """An IntegerField that always has a range, within `column_max` (a BigIntegerField's by default)."""

    def __init__(self, *, min_value: int, max_value: int, column_max: int = BIG_INTEGER_COLUMN_MAX, **kwargs):
        if min_value is None or max_value is None or not -column_max - 1 <= min_value <= max_value <= column_max:
            raise ImproperlyConfigured(f"an integer field needs a range within its column's (±{column_max})")
        super().__init__(min_value=min_value, max_value=max_value, **kwargs)
        self.error_messages.update({
            "max_value": "at most %(limit_value)s",
            "min_value": "at least %(limit_value)s",
            "invalid": f"a whole number from {min_value} to {max_value}",
        })

    def to_python(self, value):
        if isinstance(value, str) and len(value.strip().lstrip("+-").lstrip("0")) > MAX_DIGITS:
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class BoundedJSONField(forms.CharField):
    """JSON typed into a text box: at most `max_length` characters nested at most `max_depth`
    deep, parsed into its value (the empty text is `empty_value`)."""

    def __init__(self, *, max_length: int, max_depth: int = DEFAULT_MAX_DEPTH, empty_value=None, **kwargs):
        self.max_depth = max_depth
        self.empty_json = empty_value
        super().__init__(max_length=max_length, **kwargs)

    def to_python(self, value):
        text = super().to_python(value)
        if not text:
            return copy.deepcopy(self.empty_json)  # never one shared list for every form
        try:
            return bounded_json(text, max_chars=self.max_length, max_depth=self.max_depth)
        except JSONInputError as exc:
            raise ValidationError(str(exc), code="bad_json") from None

    def run_validators(self, value):
        # CharField's length validators measure text; the text was measured before it was parsed.
        if isinstance(value, str) or value in self.empty_values:
            return super().run_validators(value)
        errors = []
        for validator in self.validators:
            if getattr(validator, "code", "") in ("max_length", "min_length"):
                continue
            try:
                validator(value)
            except ValidationError as exc:
                errors.extend(exc.error_list)
        if errors:
            raise ValidationError(errors)
