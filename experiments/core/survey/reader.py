"""Reading the Twin-2K-500 `wave_split` release: parquet chunks, or the same rows as JSON/JSONL. No Django.

Accepted input (FORMAT.md §2, §7):
- `wave_split/chunks/wave_persona_chunk_00N.parquet` (pyarrow), a folder of such chunks (read in
  name order), or any parquet file with the columns of `records.COLUMNS`;
- a `.jsonl` file with one row object per line, or a `.json` file holding a list of row objects.
The three JSON columns are strings holding a JSON array of blocks (a string holding a JSON string
of the array is unwrapped once, as one public loader does).

Refused: rows of the `full_persona` configuration (`persona_text`, `persona_json`,
`persona_summary`), which contain the wave-4 answers; missing or unknown columns; invalid JSON;
a block or question missing a field; an unknown question type; an answer outside its options;
a wave-4 matrix answer list that does not match its rows; a repeated pid; a repeated QuestionID
in a wave-4 column. Every problem names the source, the respondent and the question, and the
whole input is refused (`SurveyImportError`): nothing is returned partially. Question parsing
itself is in `questions`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from experiments.core.interviews.records import unstorable_text_problem
from experiments.core.survey.questions import forget_shared, parse_blocks
from experiments.core.survey.records import (
    COLUMNS, EARLIER_COLUMN, PERSONA_COLUMN, PERSONA_TEXT_COLUMN, WAVE4_COLUMN, Respondent,
    SurveyImportError, SurveyProblem,
)

FULL_PERSONA_COLUMNS = ("persona_text", "persona_json", "persona_summary")
FULL_PERSONA_MESSAGE = (
    "this is the full_persona configuration of Twin-2K-500, whose persona contains the wave-4 "
    "answers that are to be predicted; import the wave_split configuration "
    "(wave_split/chunks/wave_persona_chunk_00N.parquet) instead"
)
PID_MAX_CHARS = 200
JSON_COLUMNS = (PERSONA_COLUMN, EARLIER_COLUMN, WAVE4_COLUMN)
# A JSON escape that decodes to what no text column can hold: NUL, or a surrogate (checked after
# decoding, and only when an escape of one is there, since a valid pair of escapes is one character).
_NUL_ESCAPE = "\\u0000"
_SURROGATE_ESCAPES = ("\\ud", "\\uD")


def read_survey_path(path: Path) -> list[Respondent]:
    """Every respondent of a parquet file, a folder of parquet chunks, a .jsonl or a .json file.

    Raises SurveyImportError listing every problem; never returns a partial list.
    """
    return list(iter_survey_path(path))


def iter_survey_path(path: Path) -> Iterator[Respondent]:
    """The respondents of `read_survey_path` one at a time, as they are read and validated.

    After the last row, raises SurveyImportError with every problem found if there was any (so a
    consumer writing as it goes must do so in a transaction it can roll back); a file that is
    unreadable as a whole, or of the full_persona configuration, raises at once.
    """
    path = Path(path)
    source, rows = survey_rows(path)
    return iter_rows(rows, source)


def survey_rows(path: Path) -> tuple[str, Iterable[tuple[str, Mapping]]]:
    """(source name, its rows as (location, row mapping or Unreadable)) of a survey input path.

    Raises SurveyImportError for a folder without parquet, an unknown type or a text that is not UTF-8.
    """
    path = Path(path)
    if path.is_dir():
        chunks = sorted(path.glob("*.parquet"))
        if not chunks:
            raise SurveyImportError([SurveyProblem(path.name, "", "", "", "the folder holds no .parquet file")])
        return path.name, _parquet_rows(chunks)
    name = path.name.lower()
    if name.endswith(".parquet"):
        return path.name, _parquet_rows([path])
    if name.endswith((".jsonl", ".json")):
        text = decode_utf8(path.read_bytes(), path.name)
        if name.endswith(".jsonl"):
            return path.name, jsonl_rows(text)
        return path.name, json_rows(text, path.name)
    raise SurveyImportError([SurveyProblem(
        path.name, "", "", "", "unknown file type: give a .parquet file, a folder of them, a .jsonl or a .json file")])


def decode_utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SurveyImportError([SurveyProblem(source, "", "", "", f"not valid UTF-8 at byte {error.start}")]) from None


def _parquet_rows(paths: list[Path]) -> Iterator[tuple[str, Mapping]]:
    """(location, row) of each parquet file in turn; a file that is no parquet is one problem."""
    for path in paths:
        for batch in parquet_batches(path, PARQUET_BATCH_ROWS):
            if isinstance(batch, Unreadable):
                yield batch.location, batch
            else:
                yield from arrow_rows(batch[1], path.name, batch[0])


# Batch by batch is several times faster than reading the whole table at once (measured on the
# full-size chunks: ~0.25 s against ~1.4 s per chunk of 294 respondents).
PARQUET_BATCH_ROWS = 300


def parquet_batches(path: Path, size: int) -> Iterator:
    """(first row number, record batch) of a parquet file; an Unreadable (with its `location`)
    where the file cannot be read any further."""
    import pyarrow.parquet as pq  # only the parquet path needs pyarrow

    first = 1
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=size, use_threads=False):
            yield first, batch
            first += batch.num_rows
    except Exception as error:  # pyarrow raises several types for a damaged or foreign file
        yield Unreadable(f"not a readable parquet file ({type(error).__name__}: {error})",
                         path.name if first == 1 else f"{path.name} row {first}")


def arrow_rows(table, name: str, first: int) -> Iterator[tuple[str, dict]]:
    """(location, row) of a pyarrow table or record batch whose first row is row `first` of file `name`."""
    # Column by column is several times faster than row dictionaries from pyarrow.
    columns = {column: table.column(column).to_pylist() for column in table.column_names}
    names = list(columns)
    for number, values in enumerate(zip(*columns.values()), first):
        yield f"{name} row {number}", dict(zip(names, values))


class Unreadable:
    """Stands in for a row (or file) that could not be read: carries the reason (and, for a
    file, where reading stopped)."""

    def __init__(self, reason: str, location: str = ""):
        self.reason, self.location = reason, location


def parse_jsonl_text(text: str, source: str) -> list[Respondent]:
    """Rows as JSON Lines (one object per line; blank lines ignored)."""
    return parse_rows(jsonl_rows(text), source)


def jsonl_rows(text: str) -> Iterator[tuple[str, object]]:
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield f"line {number}", decode_row(line)


def parse_json_text(text: str, source: str) -> list[Respondent]:
    """Rows as one JSON list of objects."""
    return parse_rows(json_rows(text, source), source)


def json_rows(text: str, source: str) -> list[tuple[str, object]]:
    value = decode_row(text)
    if isinstance(value, Unreadable):
        raise SurveyImportError([SurveyProblem(source, "", "", "", value.reason)])
    if not isinstance(value, list):
        raise SurveyImportError([SurveyProblem(source, "", "", "", "a .json file must hold a list of row objects")])
    return [(f"row {number}", row) for number, row in enumerate(value, 1)]


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def decode_row(text: str):
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        return Unreadable(f"not valid JSON ({error})")


def parse_rows(rows: Iterable[tuple[str, Mapping]], source: str) -> list[Respondent]:
    """Validate rows given as (location, row mapping) pairs, e.g. ("row 3", {...}).

    The building block of every reader; raises SurveyImportError with all problems.
    """
    return list(iter_rows(rows, source))


def iter_rows(rows: Iterable[tuple[str, Mapping]], source: str) -> Iterator[Respondent]:
    """`parse_rows` one respondent at a time; the problems are raised after the last row."""
    try:
        problems: list[SurveyProblem] = []
        seen: dict[str, str] = {}
        for location, row in rows:
            respondent = respondent_of_row(row, source, location, problems)
            if respondent is None:
                continue
            if respondent.pid in seen:
                problems.append(SurveyProblem(source, location, respondent.pid, "pid",
                                              f"the pid appears twice (first at {seen[respondent.pid]})"))
                continue
            seen[respondent.pid] = location
            if not problems:  # after a problem nothing is used: only the rest of the problems count
                yield respondent
        if not seen and not problems:
            problems.append(SurveyProblem(source, "", "", "", "the input holds no respondent"))
        if problems:
            raise SurveyImportError(problems)
    finally:
        forget_shared()  # the shared copies live as long as the respondents that use them


def _pid(value) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip() == value and 0 < len(value) <= PID_MAX_CHARS:
        return value
    return None


def respondent_of_row(row, source: str, location: str, problems: list[SurveyProblem]) -> Respondent | None:
    """The respondent of one row, or None with its problems added to `problems`.

    Raises SurveyImportError at once for a row of the full_persona configuration."""
    if isinstance(row, Unreadable):
        problems.append(SurveyProblem(source, location, "", "", row.reason))
        return None
    if not isinstance(row, Mapping):
        problems.append(SurveyProblem(source, location, "", "", "a row must be a JSON object"))
        return None
    if any(column in row for column in FULL_PERSONA_COLUMNS):
        # One message says it all: every row of such a file is the same mistake.
        raise SurveyImportError([SurveyProblem(source, location, "", "", FULL_PERSONA_MESSAGE)])
    missing = [column for column in COLUMNS if column not in row]
    unknown = sorted(str(column) for column in row if column not in COLUMNS)
    pid = _pid(row.get("pid"))
    label = pid or ""
    before = len(problems)
    if missing:
        problems.append(SurveyProblem(source, location, label, "", f"missing column(s) {', '.join(missing)}"))
    if unknown:
        problems.append(SurveyProblem(source, location, label, "", f"unknown column(s) {', '.join(unknown)}"))
    if "pid" in row and pid is None:
        problems.append(SurveyProblem(source, location, "", "pid",
                                      f"a pid must be an integer or a non-empty string without surrounding "
                                      f"spaces (at most {PID_MAX_CHARS} characters), got {row.get('pid')!r:.80}"))
    if len(problems) > before:
        return None

    def report(where: str, message: str) -> None:
        problems.append(SurveyProblem(source, location, label, where, message))

    persona_text = row[PERSONA_TEXT_COLUMN]
    if not isinstance(persona_text, str) or not persona_text.strip():
        report(PERSONA_TEXT_COLUMN, "must be a non-empty string")
    else:
        why = unstorable_text_problem(persona_text)
        if why:
            report(PERSONA_TEXT_COLUMN, why)
    decoded = {}
    for column in JSON_COLUMNS:
        decoded[column] = _json_column(row[column], column, report)
    if len(problems) > before:
        return None
    persona = parse_blocks(decoded[PERSONA_COLUMN], PERSONA_COLUMN, report, wave4=False)
    earlier = parse_blocks(decoded[EARLIER_COLUMN], EARLIER_COLUMN, report, wave4=True)
    wave4 = parse_blocks(decoded[WAVE4_COLUMN], WAVE4_COLUMN, report, wave4=True)
    if len(problems) > before:
        return None
    return Respondent(pid, persona_text, persona, earlier, wave4, f"{source} {location}")


def _json_column(value, column: str, report) -> list | None:
    if not isinstance(value, str):
        report(column, f"must be a string holding a JSON array, got {type(value).__name__}")
        return None
    if _NUL_ESCAPE in value:
        report(column, "contains a NUL character (\\u0000), which cannot be stored")
        return None
    try:
        decoded = json.loads(value, parse_constant=_reject_constant)
        if isinstance(decoded, str):  # an array written as a JSON string of it (FORMAT.md §2)
            decoded = json.loads(decoded, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        report(column, f"is not valid JSON ({error})")
        return None
    if not isinstance(decoded, list):
        report(column, f"must hold a JSON array of blocks, got {type(decoded).__name__}")
        return None
    if any(escape in value for escape in _SURROGATE_ESCAPES):
        why = _unstorable_inside(decoded)
        if why:
            report(column, why)
            return None
    return decoded


def _unstorable_inside(value) -> str | None:
    """The first string in a decoded JSON value that cannot be stored, as a reason."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            why = unstorable_text_problem(item)
            if why:
                return why
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return None
