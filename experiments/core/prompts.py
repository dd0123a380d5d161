"""Prompt files: loading, hashing and filling. Pure Python, no Django.

Every prompt is `prompts/<name>.txt` at the repository root (paper App. E); prompts/README.md
describes the file format. A prompt is identified by its name and the sha256 of the whole
file (comment header included), which is what a protocol seal records (docs/design.md §4).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"

_NAME = re.compile(r"[a-z0-9_]+")
_FIELD = re.compile(r"\{([a-z_]+)\}")


class PromptError(ValueError):
    """A prompt name that does not exist or a fill with missing or unknown fields."""


@dataclass(frozen=True)
class PromptRef:
    """A prompt as used: its name and the sha256 hex digest of its file."""

    name: str
    sha256: str


def _named_path(name: str) -> Path:
    # Names are plain identifiers, so a name can never reach outside PROMPTS_DIR.
    if not _NAME.fullmatch(name):
        raise PromptError(f"invalid prompt name {name!r}: use lowercase letters, digits and _")
    return PROMPTS_DIR / f"{name}.txt"


def _missing(name: str, path: Path) -> PromptError:
    return PromptError(f"no prompt named {name!r} (looked for {path})")


def prompt_path(name: str) -> Path:
    path = _named_path(name)
    if not path.is_file():
        raise _missing(name, path)
    return path


def prompt_sha256(name: str) -> str:
    """sha256 hex digest of the prompt file's bytes, comments included."""
    return hashlib.sha256(prompt_path(name).read_bytes()).hexdigest()


def prompt_ref(name: str) -> PromptRef:
    return PromptRef(name, prompt_sha256(name))


def all_prompt_names() -> list[str]:
    """Names of every prompt file, sorted."""
    return sorted(path.stem for path in PROMPTS_DIR.glob("*.txt"))


def strip_comments(file_text: str) -> str:
    """The prompt text of a file: without the leading "#" lines, one empty line right after
    them, and the one line break that ends the file (prompts/README.md)."""
    lines = file_text.split("\n")
    start = 0
    while start < len(lines) and lines[start].startswith("#"):
        start += 1
    if 0 < start < len(lines) and lines[start] == "":
        start += 1
    body = "\n".join(lines[start:])
    return body[:-1] if body.endswith("\n") else body


def load_prompt(name: str) -> str:
    """The text sent for prompt `name` (fields still unfilled)."""
    return strip_comments(prompt_path(name).read_bytes().decode("utf-8"))


def prompt_fields(template: str) -> set[str]:
    """The `{field}` names a template needs."""
    return set(_FIELD.findall(template))


def fill_prompt(template: str, **values: str) -> str:
    """Substitute each `{field}` of `template` by its value, once, in one pass.

    Fails on a missing field, an unknown one or a value that is not a str. str.format is
    not used: participant text may contain braces, and inserted text is never re-scanned.
    """
    needed = prompt_fields(template)
    missing = needed - values.keys()
    unknown = values.keys() - needed
    if missing or unknown:
        raise PromptError(
            f"prompt fields do not match: missing {sorted(missing)}, unknown {sorted(unknown)}"
        )
    for field, value in values.items():
        if not isinstance(value, str):
            raise PromptError(f"field {field!r} must be a str, got {type(value).__name__}")
    return _FIELD.sub(lambda match: values[match.group(1)], template)


# a prompt file's path → (its stat signature, (template, reference)) at its last read.
_LOADED: dict[str, tuple[tuple[int, int, int], tuple[str, PromptRef]]] = {}


def loaded_prompt(name: str) -> tuple[str, PromptRef]:
    """Prompt `name`'s template (fields unfilled) and its reference, from one read of its file.

    Planning fills the same few prompts for every call of a phase: the file is read and hashed
    again only when its modification time, size or inode changed since the last read (a stat
    instead of a read, a decode and a sha256 per call). Template and reference always come from
    the same bytes."""
    path = _named_path(name)
    try:
        stat = path.stat()  # the one stat per call: it also says whether the prompt exists
    except (FileNotFoundError, NotADirectoryError):  # what `Path.is_file` reads as no file
        raise _missing(name, path) from None
    if not S_ISREG(stat.st_mode):
        raise _missing(name, path)
    signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    cached = _LOADED.get(str(path))
    if cached is not None and cached[0] == signature:
        return cached[1]
    data = path.read_bytes()
    loaded = strip_comments(data.decode("utf-8")), PromptRef(name, hashlib.sha256(data).hexdigest())
    _LOADED[str(path)] = (signature, loaded)
    return loaded


def render_prompt(name: str, **values: str) -> tuple[str, PromptRef]:
    """Load, fill and identify prompt `name` in one step.

    The hash is of the same bytes that were loaded, so the text and its reference always
    agree even if the file changes on disk meanwhile.
    """
    template, ref = loaded_prompt(name)
    return fill_prompt(template, **values), ref
