"""The targets of the survey experiments and the seeded respondent samples (App. H). No Django.

Targets are the closed-form single-answer wave-4 items (FORMAT.md §3.5, §5): every MC question
with a single-answer selector and every matrix row (one item per row); sliders, numeric and other
text entries, multi-answer MC and descriptive blocks are not targets. That gives 80 or 84 items per
respondent and 108 distinct items: 43 ordinal (the QuestionIDs of ORDINAL_QIDS) and 65 two-option.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from experiments.core.survey.records import Respondent

# Ordered options: normalized deviation applies (FORMAT.md §5).
ORDINAL_QIDS = frozenset(f"QID{n}" for n in (157, 158, 159, 160, 161, 162, 171, 172, 173, 174, 175, 176,
                                             177, 178, 179, 189, 190, 191, 194, 195, 287, 288, 289, 291))
ORDINAL = "ordinal"
TWO_OPTION = "two-option"
NOMINAL = "nominal"  # more than two unordered options: scored by accuracy only (none in the release)

DEVELOPMENT_SIZE = 200  # the paper's development sample
REPORTED_SIZE = 400  # the reported sample: the next respondents of the same seeded order


@dataclass(frozen=True)
class TargetItem:
    """One closed-form item of one respondent, numbered as the prompt shows it."""

    number: int  # 1..n in wave-4 order: the prompt's item number
    key: str  # "QID192" or "QID287_10" (QuestionID, "_" and row id for a matrix row)
    qid: str
    row_id: str  # "" for an MC question
    block: str  # stripped block name
    question: str  # QuestionText, HTML removed
    row: str  # the matrix row's text, "" for an MC question
    options: tuple[str, ...]
    kind: str  # ORDINAL, TWO_OPTION or NOMINAL
    wave4: int  # the recorded wave-4 option (1-based): the truth
    earlier: int  # the same item's waves 1-3 answer: the human test-retest reference

    @property
    def ordinal(self) -> bool:
        return self.kind == ORDINAL


def target_items(respondent: Respondent) -> list[TargetItem]:
    """The respondent's closed-form single-answer wave-4 items, in wave-4 order, numbered from 1."""
    raise NotImplementedError


def target_blocks(respondent: Respondent) -> list[tuple[str, list[TargetItem]]]:
    """[(block name, its target items)] in wave-4 order, blocks without targets left out."""
    raise NotImplementedError


def seeded_order(pids: Sequence[str], *, seed: int) -> list[str]:
    """All pids in the seeded order of a cohort draw (cohorts.draw_cohort, one study, one
    respondent per person): the order the development and reported samples are cut from."""
    raise NotImplementedError


def respondent_samples(pids: Sequence[str], *, seed: int,
                       sizes: Sequence[int] = (DEVELOPMENT_SIZE, REPORTED_SIZE)) -> list[list[str]]:
    """Consecutive, disjoint samples of the seeded order: by default the development 200 and
    the reported 400 (App. H); a further size gives the next respondents (the second sample)."""
    raise NotImplementedError
