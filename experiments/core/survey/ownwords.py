"""OwnWords for surveys (App. H): the persona's answer lines ranked by BM25 against each target survey
block, filled round-robin across blocks to a character budget B. No Django.

- The collection is the persona's answer lines outside the screener block (`lines.answer_lines`),
  one BM25 document per line, tokenised by `evidence.tok`, scored with the BM25 of
  `evidence.bm25_scores` (k1 = 1.2, b = 0.75, this person's lines as the collection).
- One query per target survey block (wave-4 order, blocks with at least one target): the block's
  target question texts, each question once, followed by its matrix rows.
- Each block's ranking is by descending score, ties by earlier line. The fill visits the blocks in
  turn, each taking its best-ranked line not yet kept that still fits (kept lines joined by "\\n"
  at most B characters; a line that does not fit is passed over, as in Algorithm 1); a block with
  no such line drops out; the fill ends when every block has dropped out.
- The kept lines are returned in persona order, joined by "\\n". When all lines fit, all are
  returned. (The unbudgeted OwnWords∞ of the paper is the whole persona: `whole_persona`, the
  released persona text.)
"""
from __future__ import annotations

from typing import Sequence

from experiments.core.survey.records import Respondent


def block_queries(respondent: Respondent) -> list[tuple[str, str]]:
    """[(target block name, query text)] in wave-4 order."""
    raise NotImplementedError


def evidence_lines(respondent: Respondent) -> list[str]:
    """The persona's answer lines outside the screener, in persona order: OwnWords's collection."""
    raise NotImplementedError


def rankings(lines: Sequence[str], queries: Sequence[str]) -> list[list[int]]:
    """For each query, the line indices by descending BM25 score, ties by earlier line."""
    raise NotImplementedError


def round_robin_fill(lines: Sequence[str], rankings: Sequence[Sequence[int]], budget: int) -> list[int]:
    """The kept line indices (sorted) of the round-robin fill to `budget` characters."""
    raise NotImplementedError


def survey_ownwords(respondent: Respondent, budget: int) -> str:
    """The OwnWords excerpt of a respondent at budget B characters."""
    raise NotImplementedError


def whole_persona(respondent: Respondent) -> str:
    """OwnWords∞: the whole persona, i.e. the released `wave1_3_persona_text` exactly as given
    (about 95,000 characters; the memory is written from the same text)."""
    raise NotImplementedError
