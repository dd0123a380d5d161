"""Reading a JSON object that a command was pointed at, with a CommandError that names the file.

The file is bounded like a form's JSON (`core.bounded_json`): a size and a nesting limit checked
before parsing, so a file of deeply nested brackets is refused with a message, not a RecursionError.
"""
from pathlib import Path

from django.core.management.base import CommandError

from experiments.core.bounded_json import JSONInputError, bounded_json

MAX_FILE_CHARS = 5_000_000  # a protocol with its contrasts and criteria is a few kilobytes


def read_json_object(path: str, expected: str) -> dict:
    """The JSON object in the UTF-8 file at `path`; `expected` says what it should hold, for the message."""
    try:
        value = bounded_json(Path(path).read_text(encoding="utf-8"), max_chars=MAX_FILE_CHARS)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path} is not UTF-8 JSON: {exc}") from None
    except JSONInputError as exc:
        raise CommandError(f"{path} is not UTF-8 JSON the command takes: {exc}") from None
    if not isinstance(value, dict):
        raise CommandError(f"{path}: {expected}")
    return value
