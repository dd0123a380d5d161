"""Readers for interview files: the project's JSONL, the Anthropic Interviewer CSV and
a genagents interview folder. Pure Python (no Django), so a notebook can use them.

Each returns every session of a file or raises `InterviewFileError` (see `records`).
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

from experiments.core.interviews.records import (
    INTERVIEWER, LANGUAGE_MAX_CHARS, PARTICIPANT, SPEAKERS, TRANSCRIPT_MAX_CHARS, TURN_MAX_CHARS,
    InterviewFileError, ParsedSession, ParsedTurn, Problem, _check_has_participant_speech, _check_id,
    _check_text, _check_unique_ids, _Collector, decode_utf8,
)

FORMATS = ("jsonl", "anthropic-csv", "genagents")

ANTHROPIC_MARKER = re.compile(r"^(Assistant|AI|User):")
ANTHROPIC_SPEAKER = {"Assistant": INTERVIEWER, "AI": INTERVIEWER, "User": PARTICIPANT}
GENAGENTS_FILES = ("nodes.json", "scratch_demographics.json", "meta.json")

# --- the project's JSONL --------------------------------------------------------------

JSONL_FIELDS = {"session_id", "person_id", "study_id", "language", "screener", "turns"}
JSONL_REQUIRED = {"session_id", "person_id", "study_id", "turns"}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a valid JSON number")


def _no_duplicate_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key '{key}'")
        seen[key] = value
    return seen


def _load_json_strict(text: str):
    """json.loads that refuses NaN/Infinity and duplicate keys instead of guessing."""
    return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)


def parse_jsonl(text: str, filename: str) -> list[ParsedSession]:
    out = _Collector(filename)
    sessions = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = _load_json_strict(line)
        except (ValueError, RecursionError) as exc:
            out.add(where, "", f"is not valid JSON ({exc})")
            continue
        session = _session_from_record(record, where, out)
        if session is not None:
            sessions.append(session)
    if not sessions and not out.problems:
        out.add("", "", "contains no sessions")
    _check_unique_ids(sessions, out)
    out.raise_if_any()
    return sessions


def _session_from_record(record, where: str, out: _Collector) -> ParsedSession | None:
    if not isinstance(record, dict):
        out.add(where, "", f"must be a JSON object, got {type(record).__name__}")
        return None
    before = len(out.problems)
    for name in sorted(set(record) - JSONL_FIELDS):
        out.add(where, name, "is not a known field (expected: " + ", ".join(sorted(JSONL_FIELDS)) + ")")
    for name in sorted(JSONL_REQUIRED - set(record)):
        out.add(where, name, "is missing")
    for name in ("session_id", "person_id", "study_id"):
        if name in record:
            _check_id(record[name], where, name, out)
    language = record.get("language", "en")
    if not isinstance(language, str) or not language.strip() or len(language) > LANGUAGE_MAX_CHARS:
        out.add(where, "language", f"must be a short language code such as 'en', got {language!r}")
    screener = _screener_from_record(record.get("screener", []), where, out)
    turns = _turns_from_record(record.get("turns"), where, out) if "turns" in record else ()
    if "turns" in record and isinstance(record["turns"], list) and len(out.problems) == before:
        _check_has_participant_speech(turns, where, out)
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


def _screener_from_record(items, where: str, out: _Collector) -> tuple[tuple[str, str], ...]:
    if not isinstance(items, list):
        out.add(where, "screener", f"must be a list of {{question, answer}} objects, got {type(items).__name__}")
        return ()
    pairs = []
    for i, item in enumerate(items):
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
                _check_text(item[part], where, f"{name}.{part}", out, limit=TURN_MAX_CHARS)
        pairs.append((item["question"], item["answer"]))
    return tuple(pairs)


def _turns_from_record(items, where: str, out: _Collector) -> tuple[ParsedTurn, ...]:
    if not isinstance(items, list):
        out.add(where, "turns", f"must be a list of {{speaker, text}} objects, got {type(items).__name__}")
        return ()
    turns = []
    for i, item in enumerate(items):
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
        _check_text(text, where, f"{name}.text", out, limit=TURN_MAX_CHARS)
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
    out = _Collector(filename)
    # The csv module's default cell limit (128 KiB) is below a long interview.
    csv.field_size_limit(max(csv.field_size_limit(), TRANSCRIPT_MAX_CHARS))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
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
    sessions = []
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
            sessions.append(session)
    if not sessions and not out.problems:
        out.add("", "", "contains no transcripts")
    _check_unique_ids(sessions, out)
    out.raise_if_any()
    return sessions


def _session_from_anthropic_row(transcript_id: str, text: str, where: str, out: _Collector):
    before = len(out.problems)
    _check_id(transcript_id, where, "transcript_id", out)
    prefix, sep, _ = transcript_id.rpartition("_")
    if not sep or not prefix:
        out.add(where, "transcript_id", f"'{transcript_id}' has no split prefix (expected e.g. science_0001)")
    _check_text(text, where, "text", out, limit=TRANSCRIPT_MAX_CHARS)
    preamble, turns = split_anthropic_transcript(text)
    if preamble.strip():
        out.add(where, "text", "has text before the first 'Assistant:', 'AI:' or 'User:' line")
    for i, turn in enumerate(turns):
        _check_text(turn.text, where, f"text (turn {i})", out, limit=TURN_MAX_CHARS)
    if len(out.problems) == before:
        _check_has_participant_speech(turns, where, out)
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


# --- genagents interview folder --------------------------------------------------------

def parse_genagents(files: dict[str, str], dirname: str) -> list[ParsedSession]:
    """Read a genagents agent folder: `nodes.json` in order, the demographics as screener.

    Each node's content is ``"Interviewer: <question>\\n\\n<first name>: <answer>"``; the
    answer part may be absent (a closing remark) and node 0 is empty.
    """
    out = _Collector(dirname)
    for name in GENAGENTS_FILES:
        if name not in files:
            out.add(name, "", "is missing from the genagents folder")
    out.raise_if_any()
    loaded = {}
    for name in GENAGENTS_FILES:
        try:
            loaded[name] = _load_json_strict(files[name])
        except (ValueError, RecursionError) as exc:
            out.add(name, "", f"is not valid JSON ({exc})")
    out.raise_if_any()
    meta, demographics, nodes = loaded["meta.json"], loaded["scratch_demographics.json"], loaded["nodes.json"]

    if not isinstance(meta, dict) or "id" not in meta:
        out.add("meta.json", "id", "is missing")
    else:
        _check_id(meta["id"], "meta.json", "id", out)
    if not isinstance(demographics, dict):
        out.add("scratch_demographics.json", "", "must be a JSON object")
        demographics = {}
    first_name = demographics.get("first_name")
    if not isinstance(first_name, str) or not first_name.strip():
        out.add("scratch_demographics.json", "first_name", "is missing; it names the participant's turns")
    screener = []
    for key, value in demographics.items():
        if isinstance(value, (dict, list)) or (isinstance(value, float) and not math.isfinite(value)):
            out.add("scratch_demographics.json", key, "must be a plain value")
            continue
        screener.append((key.replace("_", " "), "" if value is None else str(value)))
    if not isinstance(nodes, list):
        out.add("nodes.json", "", "must be a JSON list of nodes")
    out.raise_if_any()

    turns: list[ParsedTurn] = []
    answer_marker = f"\n\n{first_name}:"
    for position, node in enumerate(nodes):
        where = f"node {position}"
        if not isinstance(node, dict) or not isinstance(node.get("content"), str):
            out.add(f"nodes.json {where}", "content", "must be a string")
            continue
        content = node["content"]
        if not content.startswith("Interviewer:"):
            out.add(f"nodes.json {where}", "content", "must start with 'Interviewer:'")
            continue
        question, _, answer = content[len("Interviewer:"):].partition(answer_marker)
        for speaker, text in ((INTERVIEWER, question.strip()), (PARTICIPANT, answer.strip())):
            if text:
                _check_text(text, f"nodes.json {where}", "content", out, limit=TURN_MAX_CHARS)
                turns.append(ParsedTurn(speaker, text))
    _check_has_participant_speech(turns, "nodes.json", out)
    out.raise_if_any()
    return [
        ParsedSession(
            session_id=meta["id"],
            person_id=meta["id"],
            study_id="genagents",
            language="en",
            screener=tuple(screener),
            turns=tuple(turns),
            location="nodes.json",
        )
    ]


# --- reading from disk ----------------------------------------------------------------

def guess_format(path: Path) -> str:
    if path.is_dir():
        if (path / "nodes.json").exists():
            return "genagents"
        raise InterviewFileError([Problem(str(path), "", "", "is a folder without nodes.json")])
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "anthropic-csv"
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


def parse_text(text: str, filename: str, fmt: str) -> list[ParsedSession]:
    if fmt == "jsonl":
        return parse_jsonl(text, filename)
    if fmt == "anthropic-csv":
        return parse_anthropic_csv(text, filename)
    raise InterviewFileError([Problem(filename, "", "", f"unknown format {fmt!r}")])
