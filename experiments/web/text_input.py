"""One rule for text that comes in through a form: no NUL character, no lone surrogate.

PostgreSQL refuses NUL in text and no database can store a lone surrogate (it is not a
character), so either would end in a 500 where the user deserves a message. Django's
CharField already refuses NUL; this adds the surrogates, covers JSON fields (whose strings
and keys are checked at any depth), and gives one message everywhere.

Use `StorableTextMixin` first among a form's bases: every CharField (JSONField included)
gets `storable_text_validator`. The same test, without Django, is
`experiments.core.interviews.records.unstorable_text_problem`.
"""
from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from experiments.core.interviews.records import unstorable_text_problem


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def storable_text_validator(value) -> None:
    for text in _strings(value):
        if problem := unstorable_text_problem(text):
            raise ValidationError(f"This text {problem}.", code="unstorable_text")


class StorableTextMixin:
    """A form mixin: each text field of the form refuses NUL characters and lone surrogates."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if isinstance(field, forms.CharField) and storable_text_validator not in field.validators:
                field.validators.append(storable_text_validator)
