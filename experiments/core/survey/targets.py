"""The targets of the survey experiments and the seeded respondent samples (App. H). No Django.

Targets are the closed-form single-answer wave-4 items (FORMAT.md §3.5, §5): every MC question
with a single-answer selector and every matrix row (one item per row); sliders, numeric and other
text entries, multi-answer MC and descriptive blocks are not targets. That gives 80 or 84 items per
respondent and 108 distinct items: 43 ordinal (the QuestionIDs of ORDINAL_QIDS) and 65 two-option.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from experiments.core.cohorts import Candidate, draw_cohort
from experiments.core.survey.lines import clean_text
from experiments.core.survey.records import SINGLE_SELECTORS, Question, Respondent

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


def is_target(question: Question) -> bool:
    """A closed-form single-answer question: single-answer MC, or a matrix (one item per row)."""
    return (question.qtype == "MC" and question.selector in SINGLE_SELECTORS) or question.qtype == "Matrix"


def _kind(qid: str, options: tuple[str, ...]) -> str:
    if qid in ORDINAL_QIDS:
        return ORDINAL
    return TWO_OPTION if len(options) == 2 else NOMINAL


def target_items(respondent: Respondent) -> list[TargetItem]:
    """The respondent's closed-form single-answer wave-4 items, in wave-4 order, numbered from 1.

    The earlier answer of an item is read from the waves 1-3 column at the same block and
    question position (the reader checked both columns answer every item; `leaks` checks that
    their questions are the same).
    """
    earlier = {(q.block_index, q.index): q for b in respondent.earlier for q in b.questions}
    items: list[TargetItem] = []
    for block in respondent.wave4:
        for question in block.questions:
            if not is_target(question):
                continue
            before = earlier.get((question.block_index, question.index))
            before_positions = before.positions if before is not None and before.qid == question.qid else ()
            stem = clean_text(question.text)
            if question.qtype == "MC":
                rows = [("", "")]
            else:
                rows = [(row_id, clean_text(row)) for row_id, row in zip(question.row_ids, question.rows)]
            for r, (row_id, row) in enumerate(rows):
                items.append(TargetItem(
                    number=len(items) + 1,
                    key=f"{question.qid}_{row_id}" if row_id else question.qid,
                    qid=question.qid, row_id=row_id, block=block.name, question=stem, row=row,
                    options=tuple(clean_text(option) for option in question.options),
                    kind=_kind(question.qid, question.options),
                    wave4=question.positions[r],
                    earlier=before_positions[r] if r < len(before_positions) else 0,
                ))
    return items


def target_blocks(items: Sequence[TargetItem]) -> list[tuple[str, list[TargetItem]]]:
    """[(block name, its target items)] in wave-4 order; blocks without targets do not appear."""
    blocks: dict[str, list[TargetItem]] = {}
    for item in items:
        blocks.setdefault(item.block, []).append(item)
    return list(blocks.items())


def seeded_order(pids: Sequence[str], *, seed: int) -> list[str]:
    """All pids in the seeded order of a cohort draw (`cohorts.draw_cohort`: one study, each
    respondent their own person, PCG64 shuffle of the pids in sorted order): the order the
    development and reported samples are cut from, whatever order the pids come in."""
    if len(set(pids)) != len(pids):
        raise ValueError("pids must be distinct")
    if not pids:
        return []
    drawn = draw_cohort((Candidate(pid, "twin2k", pid) for pid in pids), size=len(pids), seed=seed)
    return [candidate.session_key for candidate in drawn]


def respondent_samples(pids: Sequence[str], *, seed: int,
                       sizes: Sequence[int] = (DEVELOPMENT_SIZE, REPORTED_SIZE)) -> list[list[str]]:
    """Consecutive, disjoint samples of the seeded order: by default the development 200 and
    the reported 400 (App. H); a further size gives the next respondents (the second sample).
    Fails when the respondents are too few for the sizes asked."""
    if any(size < 1 for size in sizes):
        raise ValueError("every sample needs a size of at least 1")
    if sum(sizes) > len(pids):
        raise ValueError(f"samples of {'+'.join(map(str, sizes))} respondents need {sum(sizes)}, "
                         f"but only {len(pids)} are available")
    order = seeded_order(pids, seed=seed)
    samples, start = [], 0
    for size in sizes:
        samples.append(order[start:start + size])
        start += size
    return samples


def further_sample(pids: Sequence[str], *, seed: int, size: int, exclude: Iterable[str]) -> list[str]:
    """A further sample of new respondents (App. H, Table 23): the first `size` pids of the seeded
    order (`seeded_order`, the order every sample of the study is cut from) that are not in
    `exclude`, the members of earlier samples. Excluding the development and reported samples gives
    "the next positions of the same seeded order". Fails when too few respondents are left."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError("the sample needs a size of at least 1")
    excluded = set(exclude)
    fresh = [pid for pid in seeded_order(pids, seed=seed) if pid not in excluded]
    if len(fresh) < size:
        raise ValueError(f"a sample of {size} new respondents needs {size}, but only {len(fresh)} of the "
                         f"{len(pids)} are in no excluded sample")
    return fresh[:size]
