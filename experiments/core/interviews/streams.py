"""Interview files read as a stream: bytes → lines → sessions, one session at a time.

A large file (100,000 sessions, tens of megabytes) is never held whole: the
binary file is read line by line, each line decoded on its own, each session checked as it
comes. Problems are gathered on the way; the file is still imported whole or not at all,
because the caller stores the sessions inside one transaction and, after the last one,
calls `SessionStream.raise_if_any()`, which raises `InterviewFileError` with every problem
(and so rolls the transaction back). Invalid UTF-8 stops the stream at once, naming the
byte, as the whole-file reader did. Pure Python (no Django).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from experiments.core.interviews.checks import Collector
from experiments.core.interviews.records import InterviewFileError, ParsedSession, Problem

# A line of a binary file ends at b"\n"; a lone CR (old Mac files) ends one too, as in
# universal newlines. Other Unicode separators (U+2028 …) are text, which a JSON string may hold.
_CR_SPLIT = re.compile(r"\r(?!\n)")
_CSV_PIECES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")


@dataclass(frozen=True)
class FileLabels:
    """The person and study labels a file names."""
    people: frozenset[str]
    studies: frozenset[str]


class SessionStream:
    """The sessions of one file in file order, read as they are iterated (once).

    `bytes_read` / `bytes_total` tell how far the reading is (for a progress page);
    `raise_if_any()` after the last session raises every problem found. `labels`, once the
    first session was read, holds every person and study label the file names (a quick
    first pass over the file, see `stream_binary`), so that the people and studies of a
    file can be numbered in label order before any session is stored; None when the file
    could not be read twice.
    """

    def __init__(self, filename: str, read: Callable[["SessionStream"], Iterator[ParsedSession]],
                 bytes_total: int | None = None):
        self.filename = filename
        self.problems = Collector(filename)
        self.bytes_read = 0
        self.bytes_total = bytes_total
        self.sessions_read = 0
        self.labels: FileLabels | None = None
        self._read = read
        self._first_seen: dict[str, str] = {}

    def __iter__(self) -> Iterator[ParsedSession]:
        for session in self._read(self):
            # A session id may appear once per file; the first one named wins the message.
            if session.session_id in self._first_seen:
                self.problems.add(session.location, "session_id",
                                  f"'{session.session_id}' repeats the session of {self._first_seen[session.session_id]}")
                continue
            self._first_seen[session.session_id] = session.location
            self.sessions_read += 1
            yield session
        if not self.sessions_read and not self.problems.problems:
            self.problems.add("", "", self.empty_message)

    empty_message = "contains no sessions"

    def raise_if_any(self) -> None:
        self.problems.raise_if_any()


def decoded_lines(binary: BinaryIO, stream: SessionStream) -> Iterator[str]:
    """The file's lines as text, line endings kept; invalid UTF-8 raises at once (file, byte)."""
    offset = 0
    for raw in binary:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InterviewFileError(
                [Problem(stream.filename, "", "", f"is not valid UTF-8 (byte {offset + exc.start})")]
            ) from None
        if offset == 0 and line.startswith("\ufeff"):
            line = line[1:]
        offset += len(raw)
        stream.bytes_read = offset
        yield line


def numbered_jsonl_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number, line without its ending), counting a lone CR as a line end too."""
    number = 0
    for line in lines:
        line = line[:-1] if line.endswith("\n") else line
        line = line[:-1] if line.endswith("\r") else line
        for piece in (_CR_SPLIT.split(line) if "\r" in line else (line,)):
            number += 1
            yield number, piece


def csv_lines(lines: Iterable[str]) -> Iterator[str]:
    """Lines for `csv.reader`, endings kept, a lone CR ending a line as in universal newlines."""
    for line in lines:
        if "\r" in line[:-2]:
            yield from (piece for piece in _CSV_PIECES.findall(line) if piece)
        else:
            yield line
