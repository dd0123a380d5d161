"""Readers for interview files: the project's JSONL, the Anthropic Interviewer CSV and
a genagents interview folder. Pure Python (no Django), so a notebook can use them.

Each `parse_*` returns every session of a file or raises `InterviewFileError` (see `records`);
each `stream_*` returns a `SessionStream` that reads a binary file one session at a time
(see `streams`), for files too large to hold whole.
"""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import BinaryIO

from experiments.core.interviews.checks import (
    Collector, check_has_participant_speech, check_id, check_text, load_json_strict,
)
from experiments.core.interviews.records import (
    INTERVIEWER, LANGUAGE_MAX_CHARS, PARTICIPANT, SPEAKERS, TRANSCRIPT_MAX_CHARS, TURN_MAX_CHARS,
    InterviewFileError, ParsedSession, ParsedTurn, Problem, decode_utf8, text_is_plain,
)
from experiments.core.interviews.genagents import GENAGENTS_FILES, parse_genagents  # noqa: F401 (re-exported)
from experiments.core.interviews.streams import (
    FileLabels, SessionStream, csv_lines, decoded_lines, numbered_jsonl_lines,
)

FORMATS = ("jsonl", "anthropic-csv", "genagents")

ANTHROPIC_MARKER = re.compile(r"^(Assistant|AI|User):")
ANTHROPIC_SPEAKER = {"Assistant": INTERVIEWER, "AI": INTERVIEWER, "User": PARTICIPANT}

# --- the project's JSONL --------------------------------------------------------------

JSONL_FIELDS = {"session_id", "person_id", "study_id", "language", "screener", "turns"}
JSONL_REQUIRED = {"session_id", "person_id", "study_id", "turns"}
_TURN_FIELDS = {"speaker", "text"}
_SCREENER_FIELDS = {"question", "answer"}


def parse_jsonl(text: str, filename: str) -> list[ParsedSession]:
    stream = SessionStream(filename, lambda s: _jsonl_sessions(numbered_jsonl_lines(io.StringIO(text, newline="")), s))
    sessions = list(stream)
    stream.raise_if_any()
    return sessions


def _jsonl_from_binary(binary: BinaryIO, stream: SessionStream):
    return _jsonl_sessions(numbered_jsonl_lines(decoded_lines(binary, stream)), stream)


def _jsonl_labels(binary: BinaryIO) -> FileLabels:
    """The labels of every line that is a JSON object naming them. A line the reading will refuse
    is passed over here: the file is then refused whole, whatever its labels."""
    people, studies = set(), set()
    for raw in binary:
        for line in (raw.splitlines() if b"\r" in raw else (raw,)):  # a lone CR ends a line too
            try:
                record = json.loads(line)  # bytes: the decoder takes UTF-8 and drops a BOM
            except (ValueError, RecursionError):
                continue
            if type(record) is dict:
                if type(person := record.get("person_id")) is str:
                    people.add(person)
                if type(study := record.get("study_id")) is str:
                    studies.add(study)
    return FileLabels(frozenset(people), frozenset(studies))


def _jsonl_sessions(lines, stream: SessionStream):
    out = stream.problems
    for number, line in lines:
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = load_json_strict(line)
        except (ValueError, RecursionError) as exc:
            out.add(where, "", f"is not valid JSON ({exc})")
            continue
        session = _session_from_record(record, where, out)
        if session is not None:
            yield session


def _session_from_record(record, where: str, out: Collector) -> ParsedSession | None:
    if not isinstance(record, dict):
        out.add(where, "", f"must be a JSON object, got {type(record).__name__}")
        return None
    before = len(out.problems)
    if not (JSONL_REQUIRED <= record.keys() <= JSONL_FIELDS):
        for name in sorted(set(record) - JSONL_FIELDS):
            out.add(where, name, "is not a known field (expected: " + ", ".join(sorted(JSONL_FIELDS)) + ")")
        for name in sorted(JSONL_REQUIRED - set(record)):
            out.add(where, name, "is missing")
    for name in ("session_id", "person_id", "study_id"):
        if name in record:
            check_id(record[name], where, name, out)
    language = record.get("language", "en")
    if not isinstance(language, str) or not language.strip() or len(language) > LANGUAGE_MAX_CHARS:
        out.add(where, "language", f"must be a short language code such as 'en', got {language!r}")
    else:
        check_text(language, where, "language", out, limit=LANGUAGE_MAX_CHARS)
    screener = _screener_from_record(record.get("screener", []), where, out)
    turns = _turns_from_record(record.get("turns"), where, out) if "turns" in record else ()
    if "turns" in record and isinstance(record["turns"], list) and len(out.problems) == before:
        check_has_participant_speech(turns, where, out)
    if len(out.problems) != before:
        return None
    return ParsedSession(
        session_id=record["session_id"],
        person_id=record["person_id"],
        study_id=record["study_id"],
        language=language,
        screener=screener,
        turns=turns,
        location=where,
    )


def _screener_from_record(items, where: str, out: Collector) -> tuple[tuple[str, str], ...]:
    if not isinstance(items, list):
        out.add(where, "screener", f"must be a list of {{question, answer}} objects, got {type(items).__name__}")
        return ()
    pairs = []
    for i, item in enumerate(items):
        if (type(item) is dict and item.keys() == _SCREENER_FIELDS and type(item["question"]) is str
                and type(item["answer"]) is str and text_is_plain(item["question"], TURN_MAX_CHARS)
                and text_is_plain(item["answer"], TURN_MAX_CHARS)):
            pairs.append((item["question"], item["answer"]))  # the common case, in a few C calls
            continue
        name = f"screener[{i}]"
        if not isinstance(item, dict):
            out.add(where, name, "must be an object with question and answer")
            continue
        if set(item) != {"question", "answer"}:
            out.add(where, name, f"must have exactly the fields question and answer, got {sorted(item)}")
            continue
        for part in ("question", "answer"):
            if not isinstance(item[part], str):
                out.add(where, f"{name}.{part}", f"must be a string, got {type(item[part]).__name__}")
            else:
                check_text(item[part], where, f"{name}.{part}", out, limit=TURN_MAX_CHARS)
        pairs.append((item["question"], item["answer"]))
    return tuple(pairs)


def _turns_from_record(items, where: str, out: Collector) -> tuple[ParsedTurn, ...]:
    if not isinstance(items, list):
        out.add(where, "turns", f"must be a list of {{speaker, text}} objects, got {type(items).__name__}")
        return ()
    turns = []
    for i, item in enumerate(items):
        if (type(item) is dict and item.keys() == _TURN_FIELDS and item["speaker"] in SPEAKERS
                and type(item["text"]) is str and text_is_plain(item["text"], TURN_MAX_CHARS)):
            turns.append(ParsedTurn(item["speaker"], item["text"]))  # the common case, in a few C calls
            continue
        name = f"turns[{i}]"
        if not isinstance(item, dict):
            out.add(where, name, "must be an object with speaker and text")
            continue
        unknown = set(item) - {"speaker", "text"}
        missing = {"speaker", "text"} - set(item)
        for key in sorted(unknown):
            out.add(where, f"{name}.{key}", "is not a known field (expected speaker, text)")
        for key in sorted(missing):
            out.add(where, f"{name}.{key}", "is missing")
        if unknown or missing:
            continue
        speaker, text = item["speaker"], item["text"]
        if speaker not in SPEAKERS:
            out.add(where, f"{name}.speaker", f"unknown speaker {speaker!r} (expected interviewer or participant)")
            continue
        if not isinstance(text, str):
            out.add(where, f"{name}.text", f"must be a string, got {type(text).__name__}")
            continue
        check_text(text, where, f"{name}.text", out, limit=TURN_MAX_CHARS)
        turns.append(ParsedTurn(speaker, text))
    return tuple(turns)


# --- Anthropic Interviewer CSV ---------------------------------------------------------

def split_anthropic_transcript(text: str) -> tuple[str, list[ParsedTurn]]:
    """Split one transcript into turns.

    A turn starts at each line beginning with `Assistant:`, `AI:` or `User:` and runs to
    the next such line; its text is what follows the marker, surrounding whitespace
    stripped. Returns (text before the first marker, turns).
    """
    preamble: list[str] = []
    turns: list[ParsedTurn] = []
    speaker = None
    lines: list[str] = []
    for line in text.split("\n"):
        match = ANTHROPIC_MARKER.match(line)
        if match:
            if speaker is not None:
                turns.append(ParsedTurn(speaker, "\n".join(lines).strip()))
            speaker = ANTHROPIC_SPEAKER[match.group(1)]
            lines = [line[match.end():]]
        elif speaker is None:
            preamble.append(line)
        else:
            lines.append(line)
    if speaker is not None:
        turns.append(ParsedTurn(speaker, "\n".join(lines).strip()))
    return "\n".join(preamble), turns


def parse_anthropic_csv(text: str, filename: str) -> list[ParsedSession]:
    stream = SessionStream(filename, lambda s: _anthropic_sessions(io.StringIO(text, newline=""), s))
    sessions = list(stream)
    stream.raise_if_any()
    return sessions


def _anthropic_from_binary(binary: BinaryIO, stream: SessionStream):
    return _anthropic_sessions(csv_lines(decoded_lines(binary, stream)), stream)


def _anthropic_labels(binary: BinaryIO) -> FileLabels:
    """Each transcript is a person, its id's prefix a study (as `_session_from_anthropic_row`)."""
    people, studies = set(), set()
    lines = (raw.decode("utf-8", "replace") for raw in binary)  # bad UTF-8: the reading says so
    reader = _csv_reader(csv_lines(line.removeprefix("\ufeff") if i == 0 else line for i, line in enumerate(lines)))
    try:
        header = next(reader, None)
        if header is not None and sorted(header) == ["text", "transcript_id"]:
            column = header.index("transcript_id")
            for row in reader:
                if len(row) == 2 and any(cell.strip() for cell in row):  # blank rows are skipped
                    people.add(row[column])
                    studies.add(row[column].rpartition("_")[0])
    except csv.Error:
        pass
    return FileLabels(frozenset(people), frozenset(studies))


def _csv_reader(lines):
    # The csv module's default cell limit (128 KiB) is below a long interview.
    csv.field_size_limit(max(csv.field_size_limit(), TRANSCRIPT_MAX_CHARS))
    return csv.reader(lines, strict=True)


def _anthropic_sessions(lines, stream: SessionStream):
    filename, out = stream.filename, stream.problems
    stream.empty_message = "contains no transcripts"
    reader = _csv_reader(lines)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise InterviewFileError([Problem(filename, "row 1", "", f"is not valid CSV ({exc})")]) from None
    if header is None:
        raise InterviewFileError([Problem(filename, "", "", "is empty")])
    if sorted(header) != ["text", "transcript_id"]:
        raise InterviewFileError(
            [Problem(filename, "row 1", "", f"the columns must be transcript_id,text; got {','.join(header)}")]
        )
    id_col, text_col = header.index("transcript_id"), header.index("text")
    row_number = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            out.add(f"row {row_number + 1}", "", f"is not valid CSV ({exc})")
            break
        row_number += 1
        where = f"row {row_number}"
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != 2:
            out.add(where, "", f"has {len(row)} cells; expected 2 (transcript_id, text)")
            continue
        session = _session_from_anthropic_row(row[id_col], row[text_col], where, out)
        if session is not None:
            yield session


def _session_from_anthropic_row(transcript_id: str, text: str, where: str, out: Collector):
    before = len(out.problems)
    check_id(transcript_id, where, "transcript_id", out)
    prefix, sep, _ = transcript_id.rpartition("_")
    if not sep or not prefix:
        out.add(where, "transcript_id", f"'{transcript_id}' has no split prefix (expected e.g. science_0001)")
    check_text(text, where, "text", out, limit=TRANSCRIPT_MAX_CHARS)
    preamble, turns = split_anthropic_transcript(text)
    if preamble.strip():
        out.add(where, "text", "has text before the first 'Assistant:', 'AI:' or 'User:' line")
    for i, turn in enumerate(turns):
        check_text(turn.text, where, f"text (turn {i})", out, limit=TURN_MAX_CHARS)
    if len(out.problems) == before:
        check_has_participant_speech(turns, where, out)
    if len(out.problems) != before:
        return None
    return ParsedSession(
        session_id=transcript_id,
        person_id=transcript_id,  # each transcript is one person
        study_id=prefix,
        language="en",
        screener=(),
        turns=tuple(turns),
        location=where,
    )


# --- reading from disk ----------------------------------------------------------------

def format_from_name(name: str) -> str | None:
    """The format a file's name says (.jsonl or .ndjson, .csv), or None: for a path and an upload alike."""
    lowered = name.lower()
    if lowered.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if lowered.endswith(".csv"):
        return "anthropic-csv"
    return None


def guess_format(path: Path) -> str:
    if path.is_dir():
        if (path / "nodes.json").exists():
            return "genagents"
        raise InterviewFileError([Problem(str(path), "", "", "is a folder without nodes.json")])
    fmt = format_from_name(path.name)
    if fmt:
        return fmt
    raise InterviewFileError(
        [Problem(str(path), "", "", "cannot tell the format from the name; pass --format " + "|".join(FORMATS))]
    )


def read_interview_path(path: Path, fmt: str | None = None) -> list[ParsedSession]:
    """Parse a file (JSONL, CSV) or a genagents folder from disk."""
    path = Path(path)
    if not path.exists():
        raise InterviewFileError([Problem(str(path), "", "", "does not exist")])
    fmt = fmt or guess_format(path)
    if fmt not in FORMATS:
        raise InterviewFileError([Problem(str(path), "", "", f"unknown format {fmt!r}")])
    if fmt == "genagents":
        folder = path if path.is_dir() else path.parent
        files = {
            name: decode_utf8((folder / name).read_bytes(), name)
            for name in GENAGENTS_FILES
            if (folder / name).exists()
        }
        return parse_genagents(files, str(folder))
    if path.is_dir():
        raise InterviewFileError([Problem(str(path), "", "", f"is a folder; format {fmt} needs a file")])
    return parse_text(decode_utf8(path.read_bytes(), path.name), path.name, fmt)


def stream_interview_path(path: Path, fmt: str | None = None):
    """A file on disk as a `SessionStream` (JSONL, CSV), or a genagents folder as a list (it is small)."""
    path = Path(path)
    if not path.exists():
        raise InterviewFileError([Problem(str(path), "", "", "does not exist")])
    fmt = fmt or guess_format(path)
    if fmt == "genagents" or fmt not in FORMATS or path.is_dir():
        return read_interview_path(path, fmt)
    return stream_binary(path.open, path.name, fmt, path.stat().st_size)


def stream_binary(open_binary, filename: str, fmt: str, bytes_total: int | None = None) -> SessionStream:
    """A `SessionStream` (JSONL, CSV) over the file `open_binary("rb")` opens, closed when read to the end.

    A file that can seek is read twice: a quick pass for its labels (`SessionStream.labels`),
    then the reading proper, sessions one by one.
    """
    readers = {"jsonl": (_jsonl_labels, _jsonl_from_binary), "anthropic-csv": (_anthropic_labels, _anthropic_from_binary)}
    if fmt not in readers:
        raise InterviewFileError([Problem(filename, "", "", f"unknown format {fmt!r}")])
    labels_of, sessions_of = readers[fmt]

    def read(stream):
        with open_binary("rb") as binary:
            if binary.seekable():
                stream.labels = labels_of(binary)
                binary.seek(0)
            yield from sessions_of(binary, stream)
    return SessionStream(filename, read, bytes_total)


def parse_text(text: str, filename: str, fmt: str) -> list[ParsedSession]:
    if fmt == "jsonl":
        return parse_jsonl(text, filename)
    if fmt == "anthropic-csv":
        return parse_anthropic_csv(text, filename)
    raise InterviewFileError([Problem(filename, "", "", f"unknown format {fmt!r}")])
