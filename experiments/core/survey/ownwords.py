"""OwnWords for surveys (App. H): the persona's answer lines ranked by BM25 against each target survey
block, filled round-robin across blocks to a character budget B. No Django.

- The collection is the persona's answer lines outside the screener block (`lines.answer_lines`),
  one BM25 document per line, tokenised by `evidence.tok`, scored with the BM25 of
  `evidence.bm25_scores` (k1 = 1.2, b = 0.75, this person's lines as the collection). The scores
  are those of `evidence.bm25_scores` bit for bit (tests check it): each term is computed with the
  same operations in the same order, and a line's terms are added one by one in query order
  (`np.cumsum` adds sequentially; a term of a token the line lacks is 0.0, which changes no bit).
- One query per target survey block (wave-4 order, blocks with at least one target): the block's
  target question texts, each question once, each followed by its matrix rows, joined by "\\n".
- Each block's ranking is by descending score, ties by earlier line. The fill visits the blocks in
  turn, each taking its best-ranked line not yet kept that still fits (kept lines joined by "\\n"
  at most B characters; a line that does not fit is passed over, as in Algorithm 1); a block with
  no such line drops out; the fill ends when every block has dropped out.
- The kept lines are returned in persona order, joined by "\\n". When all lines fit, all are
  returned; when none fits, the first block's best line cut to B characters (Algorithm 1's rule).
  (The unbudgeted OwnWords∞ of the paper is the whole persona: `whole_persona`, the released
  persona text.)
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

from experiments.core.evidence import BM25_B, BM25_K1, tok
from experiments.core.survey.lines import answer_lines
from experiments.core.survey.records import Respondent
from experiments.core.survey.screener import screener_block_index
from experiments.core.survey.targets import TargetItem, target_blocks, target_items

LINE_SEPARATOR = "\n"

# Token ids shared by every respondent: the same question texts recur in every persona, so a
# line's tokens are computed once (the cache is bounded; an id is only a dictionary key).
_VOCABULARY: dict[str, int] = {}


@lru_cache(maxsize=262_144)
def _token_ids(text: str) -> np.ndarray:
    ids = [_VOCABULARY.setdefault(token, len(_VOCABULARY)) for token in tok(text)]
    return np.array(ids, dtype=np.int64)


def block_queries(items: Sequence[TargetItem]) -> list[tuple[str, str]]:
    """[(target block name, query text)] in wave-4 order, from a respondent's target items."""
    queries = []
    for block, block_items in target_blocks(items):
        parts: list[str] = []
        seen_questions: set[str] = set()
        for item in block_items:
            if item.qid not in seen_questions:
                seen_questions.add(item.qid)
                parts.append(item.question)
            if item.row:
                parts.append(item.row)
        queries.append((block, LINE_SEPARATOR.join(parts)))
    return queries


def evidence_lines(respondent: Respondent) -> list[str]:
    """The persona's answer lines outside the screener, in persona order: OwnWords's collection."""
    skip = (screener_block_index(respondent),)
    return [line.text for line in answer_lines(respondent.persona, skip_blocks=skip)]


def rankings(lines: Sequence[str], queries: Sequence[str]) -> list[list[int]]:
    """For each query, the line indices by descending BM25 score, ties by earlier line."""
    # A stable sort of the negated scores keeps equal scores in line order.
    return [np.argsort(-scores, kind="stable").tolist() for scores in bm25_matrix(lines, queries)]


def bm25_matrix(lines: Sequence[str], queries: Sequence[str]) -> list[np.ndarray]:
    """For each query, every line's BM25 score: `evidence.bm25_scores` of the lines' tokens, bit for bit."""
    n = len(lines)
    if n == 0:
        return [np.zeros(0) for _ in queries]
    per_line = [_token_ids(line) for line in lines]
    lengths = np.array([ids.size for ids in per_line], dtype=np.int64)
    average = int(lengths.sum()) / n
    # length_norm exactly as evidence.bm25_scores computes it, one line at a time.
    length_norm = np.array([BM25_K1 * (1 - BM25_B + BM25_B * (int(length) / average if average > 0 else 0.0))
                            for length in lengths])
    query_ids = [_token_ids(query).tolist() for query in queries]  # block texts recur too: cached
    width = len(_VOCABULARY) + 1  # after every id of this call was given
    all_ids = np.concatenate(per_line) if lengths.sum() else np.zeros(0, dtype=np.int64)
    line_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
    pairs, tf = np.unique(line_of * width + all_ids, return_counts=True)
    pair_line, pair_token = pairs // width, pairs % width
    document_frequency = np.bincount(pair_token, minlength=width)

    wanted = sorted({i for ids in query_ids for i in ids if document_frequency[i] > 0})
    column = {token: c for c, token in enumerate(wanted)}
    # One row per query token, one column per line: a query's rows are gathered in query order and
    # added row after row (a reduction over the first axis of a C-ordered array adds sequentially,
    # as Python's sum does). The last row stays 0.0: the score of an empty query.
    terms = np.zeros((len(wanted) + 1, n))
    if wanted:
        idf = np.array([math.log(1 + (n - int(document_frequency[v]) + 0.5) / (int(document_frequency[v]) + 0.5))
                        for v in wanted])
        column_of = np.full(width, -1, dtype=np.int64)
        column_of[wanted] = np.arange(len(wanted))
        keep = column_of[pair_token] >= 0
        rows, cols, counts = pair_line[keep], column_of[pair_token[keep]], tf[keep].astype(float)
        terms[cols, rows] = idf[cols] * counts * (BM25_K1 + 1) / (counts + length_norm[rows])
    out = []
    for ids in query_ids:
        picked = [column[i] for i in ids if i in column] or [len(wanted)]
        out.append(np.add.reduce(terms[picked], axis=0))
    return out


def round_robin_fill(lines: Sequence[str], rankings: Sequence[Sequence[int]], budget: int) -> list[int]:
    """The kept line indices (sorted) of the round-robin fill to `budget` characters."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget must be a non-negative integer of characters, got {budget!r}")
    separator = len(LINE_SEPARATOR)
    # What keeping a line costs: its length and one separator (the first kept line needs none,
    # hence the separator added to the budget).
    costs = np.array([len(line) + separator for line in lines], dtype=np.int64)
    ranked = [np.asarray(ranking, dtype=np.int64) for ranking in rankings]
    ranked_costs = [costs[ranking] for ranking in ranked]
    kept: set[int] = set()
    left = budget + separator
    positions = [0] * len(rankings)
    active = list(range(len(rankings)))
    while active:
        still_active = []
        for b in active:
            # The block's next line that still fits and is not kept yet; a line passed over no
            # longer fits (what is left only shrinks) or was kept by another block, for good.
            start = positions[b]
            for offset in np.flatnonzero(ranked_costs[b][start:] <= left).tolist():
                i = int(ranked[b][start + offset])
                if i not in kept:
                    kept.add(i)
                    left -= int(costs[i])
                    positions[b] = start + offset + 1
                    still_active.append(b)
                    break
        active = still_active
    return sorted(kept)


def ownwords_lines(lines: Sequence[str], queries: Sequence[str], budget: int) -> str:
    """The excerpt of `lines` for `queries` at `budget` characters (see the module docstring)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget must be a non-negative integer of characters, got {budget!r}")
    whole = LINE_SEPARATOR.join(lines)
    if budget >= len(whole):
        return whole
    ranked = rankings(lines, queries)
    kept = round_robin_fill(lines, ranked, budget)
    if not kept:
        return lines[ranked[0][0]][:budget] if ranked and ranked[0] else ""
    return LINE_SEPARATOR.join(lines[i] for i in kept)


def survey_ownwords(respondent: Respondent, budget: int, items: Sequence[TargetItem] | None = None) -> str:
    """The OwnWords excerpt of a respondent at budget B characters (`items`: their target items,
    computed when not given)."""
    items = target_items(respondent) if items is None else items
    queries = [query for _block, query in block_queries(items)]
    return ownwords_lines(evidence_lines(respondent), queries, budget)


def whole_persona(respondent: Respondent) -> str:
    """OwnWords∞: the whole persona, i.e. the released `wave1_3_persona_text` exactly as given
    (about 95,000 characters; the memory is written from the same text)."""
    return respondent.persona_text
