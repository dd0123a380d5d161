"""Reading a JSON object that a command was pointed at, with a CommandError that names the file."""
import json
from pathlib import Path

from django.core.management.base import CommandError


def read_json_object(path: str, expected: str) -> dict:
    """The JSON object in the UTF-8 file at `path`; `expected` says what it should hold, for the message."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"{path} is not UTF-8 JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CommandError(f"{path}: {expected}")
    return value
