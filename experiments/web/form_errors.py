"""A form's errors as one sentence, for the message of a page that redirects after a refused post."""
from __future__ import annotations


def errors_text(form, *, names: bool = True) -> str:
    """Every error of `form`, joined with "; ".

    With `names`, each field's errors come after its name (`size: Enter a whole number.`) and the
    form's own errors stand alone; without, every message stands alone.
    """
    if not names:
        return "; ".join(message for messages in form.errors.values() for message in messages)
    return "; ".join(" ".join(messages) if name == "__all__" else f"{name}: {' '.join(messages)}"
                     for name, messages in form.errors.items())
