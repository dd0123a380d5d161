"""What an interview file becomes before it is stored: sessions, turns and problems.

Every reader (`readers`) either returns all sessions of a file or raises `InterviewFileError`
listing what is wrong, each problem naming the file, the line/row and the field.
Nothing is half-read: the caller imports a file whole or not at all. Imports no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

INTERVIEWER = "interviewer"
PARTICIPANT = "participant"
SPEAKERS = (INTERVIEWER, PARTICIPANT)


# Longest turn in the shared data is about 6,700 characters; a turn far beyond
# that is almost certainly a whole transcript pasted into one field.
TURN_MAX_CHARS = 20_000
TRANSCRIPT_MAX_CHARS = 1_000_000
ID_MAX_CHARS = 200
LANGUAGE_MAX_CHARS = 16
# A malformed file can produce thousands of identical complaints; the first
# ones say enough.
MAX_REPORTED_PROBLEMS = 50

# What no text column can hold: PostgreSQL refuses NUL in text, and a lone surrogate (from a
# JSON escape such as "\ud800", or an undecodable file name) is not a character and cannot
# be encoded as UTF-8 at all. A valid surrogate pair in JSON arrives as one character.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_text_problem(text: str) -> str | None:
    """Why `text` cannot be stored (NUL, lone surrogate), or None when it can."""
    if storable_quickly(text):
        return None
    match = _UNSTORABLE.search(text)
    if match is None:
        return None
    if match.group() == "\x00":
        return "contains a NUL character, which cannot be stored"
    return (f"contains a lone surrogate (\\u{ord(match.group()):04x}) at character {match.start() + 1}, "
            "which is not a character and cannot be stored")


def storable_quickly(text: str) -> bool:
    """True when `text` certainly holds no NUL and no lone surrogate, checked in C at memory speed:
    the regular expression takes ~0.5 ms on a 95,000-character persona, this a few microseconds.
    (An ASCII text cannot hold a surrogate; any other encodes as UTF-8 only without one.)"""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """`text` with NUL and lone surrogates spelled as escapes, so a message about them can be shown."""
    if _UNSTORABLE.search(text) is None:
        return text
    return _UNSTORABLE.sub(lambda m: "\\x00" if m.group() == "\x00" else f"\\u{ord(m.group()):04x}", text)


@dataclass(frozen=True)
class ParsedTurn:
    speaker: str
    text: str


@dataclass(frozen=True)
class ParsedSession:
    session_id: str
    person_id: str
    study_id: str
    language: str
    screener: tuple[tuple[str, str], ...]
    turns: tuple[ParsedTurn, ...]
    location: str  # where it came from, e.g. "line 3", for later messages


@dataclass(frozen=True)
class Problem:
    file: str
    location: str  # "line 3", "row 7", "node 12" or "" for the whole file
    field: str
    message: str

    def __post_init__(self):
        # A problem quotes what it found (a field name, an id); hostile characters are escaped
        # so that the message itself can be printed, logged and put on a page.
        for name in ("file", "location", "field", "message"):
            object.__setattr__(self, name, printable(str(getattr(self, name))))

    def __str__(self) -> str:
        where = ", ".join(part for part in (self.file, self.location) if part)
        field_part = f", field '{self.field}'" if self.field else ""
        return f"{where}{field_part}: {self.message}"


class InterviewFileError(Exception):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def text_is_plain(text: str, limit: int) -> bool:
    """The fast test of a text: within the limit and storable (`checks.check_text` says what is wrong)."""
    return len(text) <= limit and _UNSTORABLE.search(text) is None


def decode_utf8(data: bytes, filename: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InterviewFileError(
            [Problem(filename, "", "", f"is not valid UTF-8 (byte {exc.start})")]
        ) from None
    return text[1:] if text.startswith("\ufeff") else text
