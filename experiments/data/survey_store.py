"""Writing a survey study's respondents batch by batch: the write side of `survey_data.survey_import`.

The core prepares each respondent (`core.survey.prepare`: validated, leak-checked, its target
items and stored JSON formatted); this writes the batches as they come, with COPY and ids
reserved up front (as interview imports do: Django's bulk_create quotes ~95,000-character
personas into array literals, several times slower), inside the caller's transaction, so a
problem found late in the input still leaves nothing behind.

Where the time goes (2,058 full-size respondents, ~270 KB of text each, already prepared): the
server compresses every large value it stores (TOAST), and with its default method, pglz, writing
them took 15.5-18.6 s; with lz4 (PostgreSQL 14+, when built with it) 8.6-8.8 s, the client's own
CPU under 1 s either way (a machine with load 4-7). `survey_store_sql.use_fast_compression` chooses lz4 for this
transaction only; values so written read back exactly the same, and the columns' settings are
untouched.
"""
from __future__ import annotations

from experiments.core.survey.prepare import PreparedRespondent
from experiments.core.survey.records import SurveyProblem
from experiments.data.import_store_sql import insert_rows, reserve_ids
from experiments.models import SurveyItem, SurveyRespondent

RESPONDENT_COLUMNS = ("id", "study_id", "pid", "persona_text", "persona_json", "earlier_json", "wave4_json",
                      "location")
ITEM_COLUMNS = ("respondent_id", "number", "key", "qid", "row_id", "block", "question", "row", "options", "kind",
                "wave4", "earlier")


class SurveyWriter:
    """Stores the batches of one study; remembers what it stored, excluded and refused.

    Respondents whose screener cannot be built are problems (the import is refused: after the
    first, nothing more is written, but every one is still collected); respondents with leak
    violations are excluded, their violations kept for the study's exclusions."""

    def __init__(self, study):
        self.study = study
        self.read = 0
        self.kept: list[tuple[int, str, str, str]] = []  # (id, pid, persona sha256, wave-4 sha256), in order
        self.violations = []
        self.problems: list[SurveyProblem] = []

    def write(self, batch: list[PreparedRespondent]) -> None:
        self.read += len(batch)
        self.problems.extend(r.screener_problem for r in batch if r.screener_problem is not None)
        if self.problems:
            return
        clean = [r for r in batch if not r.violations]
        self.violations.extend(v for r in batch for v in r.violations)
        ids = reserve_ids(SurveyRespondent, len(clean))
        study_id = self.study.pk
        insert_rows(SurveyRespondent, RESPONDENT_COLUMNS, [
            (pk, study_id, r.pid, r.persona_text, r.persona_json, r.earlier_json, r.wave4_json, r.location[:255])
            for pk, r in zip(ids, clean)])
        insert_rows(SurveyItem, ITEM_COLUMNS, [(pk, *item) for pk, r in zip(ids, clean) for item in r.items])
        self.kept.extend((pk, r.pid, r.persona_sha256, r.wave4_sha256) for pk, r in zip(ids, clean))
