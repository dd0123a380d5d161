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
whole input is refused (`SurveyImportError`): nothing is returned partially.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from experiments.core.survey.records import Respondent, SurveyImportError, SurveyProblem  # noqa: F401

FULL_PERSONA_COLUMNS = ("persona_text", "persona_json", "persona_summary")
FULL_PERSONA_MESSAGE = (
    "this is the full_persona configuration of Twin-2K-500, whose persona contains the wave-4 "
    "answers that are to be predicted; import the wave_split configuration "
    "(wave_split/chunks/wave_persona_chunk_00N.parquet) instead"
)


def read_survey_path(path: Path) -> list[Respondent]:
    """Every respondent of a parquet file, a folder of parquet chunks, a .jsonl or a .json file.

    Raises SurveyImportError listing every problem; never returns a partial list.
    """
    raise NotImplementedError


def parse_rows(rows: Iterable[tuple[str, Mapping]], source: str) -> list[Respondent]:
    """Validate rows given as (location, row mapping) pairs, e.g. ("row 3", {...}).

    The building block of every reader; raises SurveyImportError with all problems.
    """
    raise NotImplementedError


def parse_jsonl_text(text: str, source: str) -> list[Respondent]:
    """Rows as JSON Lines (one object per line; blank lines ignored)."""
    raise NotImplementedError


def parse_json_text(text: str, source: str) -> list[Respondent]:
    """Rows as one JSON list of objects."""
    raise NotImplementedError
