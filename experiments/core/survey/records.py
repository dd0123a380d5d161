"""What a Twin-2K-500 respondent is once read, and the error a bad file raises. No Django.

The release (FORMAT.md §2-3) has one row per respondent with three JSON columns, each a list of
Qualtrics-style blocks of questions. `reader` turns a row into a `Respondent` of `Block`s of
`Question`s, keeping every field the experiments use and each question's position, since
QuestionIDs repeat inside a persona (FORMAT.md §3.2). Answers are kept per type:

- MC single answer (SAVR/SAHR): `positions` holds the one chosen 1-based position;
- MC multiple answers (MAVR/MAHR): `positions` holds the chosen positions, in file order;
- Matrix: `positions` holds one column position per row, in row order (in a persona the list
  may be shorter than `rows`: the missing rows have no answer, FORMAT.md §3.3);
- TE single/multi line: `text_answer`; TE FORM: `form_answers` ((label, text) of filled boxes);
- Slider: `values` (numeric strings, one per statement);
- DB: nothing.

Bad input never gives a partial result: the reader collects `SurveyProblem`s (each naming the
source, respondent, column and question) and raises `SurveyImportError` with all of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

PERSONA_COLUMN = "wave1_3_persona_json"
PERSONA_TEXT_COLUMN = "wave1_3_persona_text"
EARLIER_COLUMN = "wave4_Q_wave1_3_A"  # the targets with the respondent's waves 1-3 answers (test-retest)
WAVE4_COLUMN = "wave4_Q_wave4_A"  # the targets with the wave-4 answers (what is predicted)
COLUMNS = ("pid", PERSONA_TEXT_COLUMN, PERSONA_COLUMN, EARLIER_COLUMN, WAVE4_COLUMN)

SINGLE_SELECTORS = ("SAVR", "SAHR")
MULTI_SELECTORS = ("MAVR", "MAHR")
QUESTION_TYPES = ("MC", "Matrix", "TE", "DB", "Slider")

# A long list of identical complaints says no more than its first ones.
MAX_REPORTED_PROBLEMS = 50


class Question(NamedTuple):
    """One question object of a block, with its answers (see the module docstring).

    A named tuple rather than a dataclass: an import builds hundreds of thousands of them, and a
    tuple is built several times faster; it is as immutable, and fields read the same way."""

    block_index: int  # position of its block in the column, 0-based
    block: str  # BlockName with surrounding spaces stripped (real names end in a space)
    index: int  # position inside the block, 0-based
    qid: str  # QuestionID; not unique inside a persona
    qtype: str  # one of QUESTION_TYPES
    selector: str  # Settings.Selector ("" when absent)
    text: str  # QuestionText as given (may hold HTML, may be empty)
    options: tuple[str, ...] = ()  # MC Options; Matrix Columns
    rows: tuple[str, ...] = ()  # Matrix Rows; TE FORM Rows; Slider Statements
    row_ids: tuple[str, ...] = ()  # RowsID / StatementsID, else "1", "2", ... by position
    numeric: bool = False  # TE with Settings.ContentType "ValidNumber"
    slider_range: tuple[str, str] = ("", "")  # Slider Range Min and Max, as text
    positions: tuple[int, ...] = ()
    text_answer: str | None = None
    form_answers: tuple[tuple[str, str], ...] = ()
    values: tuple[str, ...] = ()

    @property
    def multi(self) -> bool:
        return self.qtype == "MC" and self.selector in MULTI_SELECTORS

    def shape(self) -> tuple:
        """Every field but the answers, for comparing instruments."""
        return self[:12]


@dataclass(frozen=True)
class Block:
    index: int
    name: str  # stripped
    raw_name: str  # as in the file
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class Respondent:
    """One row of the wave_split release, validated."""

    pid: str  # as text: an int64 in parquet, a number or a string in JSON
    persona_text: str  # wave1_3_persona_text, exactly as given
    persona: tuple[Block, ...]  # wave1_3_persona_json: the model's input
    earlier: tuple[Block, ...]  # wave4_Q_wave1_3_A: targets with the waves 1-3 answers
    wave4: tuple[Block, ...]  # wave4_Q_wave4_A: targets with the wave-4 answers
    location: str  # where it came from, e.g. "wave_persona_chunk_001.parquet row 3"


@dataclass(frozen=True)
class SurveyProblem:
    """One thing wrong with an input file: where (source, respondent, column, question) and what."""

    source: str  # file name
    location: str  # "row 3", "line 7" or "" for the whole file
    pid: str  # "" when the respondent is unknown
    where: str  # column and question, e.g. "wave4_Q_wave4_A block 14 'Allais Form 1' question QID192"
    message: str

    def __str__(self) -> str:
        parts = [self.source]
        if self.location:
            parts.append(self.location)
        if self.pid:
            parts.append(f"respondent {self.pid}")
        if self.where:
            parts.append(self.where)
        return ", ".join(parts) + ": " + self.message


class SurveyImportError(ValueError):
    """A survey file that cannot be imported; `problems` lists every problem found (capped)."""

    def __init__(self, problems: list[SurveyProblem]):
        self.problems = list(problems)
        shown = "\n".join(str(problem) for problem in self.problems[:MAX_REPORTED_PROBLEMS])
        more = len(self.problems) - MAX_REPORTED_PROBLEMS
        if more > 0:
            shown += f"\n... and {more} more problem(s)"
        super().__init__(f"{len(self.problems)} problem(s); nothing was imported:\n{shown}")
