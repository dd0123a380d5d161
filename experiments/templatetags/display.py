"""Template filters for display only (no data, no access decisions)."""
import re

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from experiments.core.condition_names import short_name

register = template.Library()

# After these a condition key may wrap: "memory(concrete,<wbr>100w)+<wbr>one-shot".
_BREAK_AFTER = re.compile(r"([(,+|=/])")


@register.filter
def breakable(value) -> str:
    """The text escaped, with a line-break opportunity (<wbr>) after each ( , + | = /: a narrow
    column header wraps between the parts of a condition key, never inside a word."""
    return mark_safe(_BREAK_AFTER.sub(r"\1<wbr>", str(escape(value))))


@register.filter
def condition_header(key) -> str:
    """A condition as a column header: its short name, wrapping between parts, the full key in a
    tooltip (and for screen readers, which read the title of an abbreviation)."""
    return format_html('<abbr title="{}">{}</abbr>', key, breakable(short_name(str(key))))
