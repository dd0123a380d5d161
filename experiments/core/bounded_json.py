"""JSON text with a size and a nesting limit, checked before it is parsed.

Python's JSON decoder recurses once per bracket, so 5,000 nested brackets end in RecursionError
(and whatever walks the value afterwards recurses as deep). `bounded_json` counts the nesting
in one flat pass first and refuses, with a message for a person, text that is too long or too
deep; only then is it parsed. Imports no Django: forms and management commands share it.
"""
from __future__ import annotations

import json

# Generous for every JSON the app takes (criteria nest {"all": [...]} a few levels, a protocol
# file about five), far below the interpreter's recursion limit.
DEFAULT_MAX_DEPTH = 32


class JSONInputError(ValueError):
    """The text is not JSON the app takes; the message says why, never quoting the text."""


def nesting_depth(text: str) -> int:
    """How deep brackets and braces nest in `text`, outside strings (the text need not be valid)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def bounded_json(text: str, *, max_chars: int, max_depth: int = DEFAULT_MAX_DEPTH):
    """The value `text` holds; JSONInputError when it is longer than `max_chars` characters,
    nests deeper than `max_depth`, or is not JSON."""
    if len(text) > max_chars:
        raise JSONInputError(f"too long: at most {max_chars:,} characters, this is {len(text):,}")
    depth = nesting_depth(text)
    if depth > max_depth:
        raise JSONInputError(f"nested too deeply: at most {max_depth} levels of [ ] and {{ }}, this has {depth}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONInputError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
