"""Evidence builders: what the answering model sees about the person. Pure Python, no Django.

This is the paper's procedure, byte for byte (§8 "OwnWords", App. F "Retriever details",
App. G.1 "Budget sweep"):

- the *record* H is the respondent-only extraction, one line per participant turn prefixed
  "- ", head-capped at 12,000 characters (`respondent_record`);
- H is split into sentence *segments* (`segments`), tokenised by `tok` (64 stop words),
  and the segments are scored by BM25 against the question, the collection being this one
  person's segments (`bm25_scores`);
- OwnWords (Algorithm 1) fills a character budget B greedily in score order and returns the
  kept segments in temporal order (`ownwords`); `recency` keeps the most recent whole
  segments instead; `question_free` is OwnWords with the record's 12 most frequent tokens as
  the query.

Every length is in characters (`len` of a Python str), as |.| in the paper. Sums use
Python's built-in `sum`, so scores and ties are exact and reproducible. (On Python 3.12 and
later, `sum` of floats is compensated, which can change the last bit of a score and so
the order of near-ties; this project runs on 3.11.)

The other evidence of docs/design.md §6: the whole record, the current dialogue (both speakers,
tail-capped at 16,000 characters), the screener block (capped at 4,000), and the two
memory-plus-record combinations (App. H).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

INTERVIEWER = "interviewer"
PARTICIPANT = "participant"

RECORD_CAP = 12_000  # head cap of the respondent-only record (App. F)
DIALOGUE_CAP = 16_000  # tail cap of the current dialogue ("stored history", §3.1)
SCREENER_CAP = 4_000  # head cap of the screener block (§3.1)
DIALOGUE_TRUNCATION_MARKER = "[... earlier dialogue truncated ...]"
SCREENER_TRUNCATION_MARKER = "[... screener truncated ...]"
NO_SCREENER = "(none)"

BM25_K1 = 1.2
BM25_B = 0.75
QUESTION_FREE_TERMS = 12

# App. F, verbatim and in the paper's order.
STOP_WORDS = frozenset(
    "a about an and are as at be but by can could did do does for from had has have how "
    "i if in is it its just like me my not of on or really so some than that the their "
    "them then there these they this those to very was we were what when which who why "
    "will with would you your".split()
)

# Split at whitespace that follows ".", "!" or "?", and at runs of line breaks (App. F).
# "\r" left over from "\r\n" ends up at a piece's edge and is removed by strip().
_SEGMENT_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
_TOKEN = re.compile(r"[a-z0-9']+")


@dataclass(frozen=True)
class TurnText:
    """One turn of a session as the builders need it; the Django layer converts its rows."""

    index: int
    speaker: str  # INTERVIEWER or PARTICIPANT
    text: str


# --- The record and its segments ----------------------------------------------------------

def respondent_record(turns: Iterable[TurnText], cut: int | None = None) -> str:
    """The permitted record H: the participant's turns, "- " + text each, joined by "\\n",
    cut to its first 12,000 characters (App. F).

    With `cut`, only turns whose index is below it count (the cut is the index of the
    earliest target question of the session, so the question itself is excluded); without
    it, the turns given are taken to be already limited to the permitted ones.

    A turn's text is used exactly as stored: a multi-paragraph answer keeps its line breaks,
    which `segments` then also splits at.
    """
    lines = [
        "- " + turn.text
        for turn in turns
        if turn.speaker == PARTICIPANT and (cut is None or turn.index < cut)
    ]
    return "\n".join(lines)[:RECORD_CAP]


def whole_record(turns: Iterable[TurnText], cut: int | None = None) -> str:
    """The whole-record evidence: the memories' verbatim source, i.e. OwnWords without a
    budget (§7, §8). Identical to `respondent_record`; named for the condition."""
    return respondent_record(turns, cut)


def segments(record: str) -> list[str]:
    """H split into sentences: at whitespace after ".", "!" or "?" and at runs of line
    breaks; each piece stripped, empty ones dropped (App. F). The "- " turn prefix stays on
    the turn's first sentence."""
    pieces = (piece.strip() for piece in _SEGMENT_BOUNDARY.split(record))
    return [piece for piece in pieces if piece]


def tok(text: str) -> list[str]:
    """Lowercase, take the tokens matching [a-z0-9']+, drop one-character tokens and the
    64 stop words (App. F)."""
    return [
        token
        for token in _TOKEN.findall(text.lower())
        if len(token) > 1 and token not in STOP_WORDS
    ]


# --- BM25 over one person's segments ---------------------------------------------------

def bm25_scores(segment_tokens: Sequence[Sequence[str]], query_tokens: Sequence[str]) -> list[float]:
    """BM25 score of each segment for the query (App. F).

    The collection is this person's segments, not a corpus: n = number of segments,
    n_v = segments containing v, idf(v) = ln(1 + (n - n_v + 0.5) / (n_v + 0.5)), a segment's
    length is its token count and the average runs over all segments, including those
    without tokens (an average of 0 makes the length ratio 0). A segment's score is the sum,
    in query order with repeated query tokens counted each time, of
    idf(v) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average)), k1 = 1.2, b = 0.75.
    """
    n = len(segment_tokens)
    if n == 0:
        return []
    lengths = [len(tokens) for tokens in segment_tokens]
    average = sum(lengths) / n
    counts = [Counter(tokens) for tokens in segment_tokens]
    document_frequency = Counter(v for c in counts for v in c)
    idf = {
        v: math.log(1 + (n - document_frequency[v] + 0.5) / (document_frequency[v] + 0.5))
        for v in set(query_tokens)
    }

    scores = []
    for count, length in zip(counts, lengths):
        length_ratio = length / average if average > 0 else 0.0
        length_norm = BM25_K1 * (1 - BM25_B + BM25_B * length_ratio)
        # A query token absent from the segment has the term 0.0, and adding 0.0 changes no
        # bit of a sum of positive terms, so those are left out (for speed only).
        scores.append(sum(
            (idf[v] * count[v] * (BM25_K1 + 1) / (count[v] + length_norm) for v in query_tokens if v in count),
            0.0,
        ))
    return scores


# --- Budgeted builders: OwnWords, recency, question-free ------------------------------

def _check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget must be a non-negative integer of characters, got {budget!r}")


def ownwords(record: str, question: str, budget: int) -> str:
    """OwnWords (Algorithm 1 with App. F and the App. G.1 branch) at a budget of `budget`
    characters.

    - If the record fits (budget >= |record|), it is returned unchanged.
    - Else segments are ranked by descending BM25 score for tok(question), ties by earlier
      position; walking that ranking, a segment is kept if the kept segments joined by single
      spaces still fit in the budget; one that does not fit is skipped and the walk goes on.
    - The kept segments are returned in temporal order joined by single spaces.
    - If none fits, the top-ranked segment cut to `budget` characters; no segments, "".
    """
    return ranked_excerpt(record, question, budget, bm25_ranker)


def bm25_ranker(pieces: Sequence[str], question: str) -> list[float]:
    """OwnWords's ranker: the BM25 score of each segment for tok(question)."""
    return bm25_scores([tok(piece) for piece in pieces], tok(question))


def ranked_excerpt(record: str, question: str, budget: int,
                   ranker: Callable[[Sequence[str], str], Sequence[float]]) -> str:
    """OwnWords's path for any ranker (`ranker(segments, question)` gives one score per segment,
    higher first): the "record fits" branch, the segmentation, the ranking with ties by earlier
    position, `greedy_fill` and its no-fit fallback. The ranker is called only when the record
    does not fit. OwnWords ranks by BM25 (`bm25_ranker`); the dense retriever by embeddings."""
    _check_budget(budget)
    if budget >= len(record):
        return record
    pieces = segments(record)
    if not pieces:
        return ""
    scores = ranker(pieces, question)
    ranking = sorted(range(len(pieces)), key=lambda i: (-scores[i], i))
    return greedy_fill(pieces, ranking, budget)


def greedy_fill(pieces: Sequence[str], ranking: Sequence[int], budget: int, separator: str = " ") -> str:
    """Algorithm 1's fill, for any ranking: walking `ranking` (indices into `pieces`), a piece is
    kept if the kept pieces joined by `separator` still fit in `budget` characters; one that does
    not fit is skipped and the walk goes on. The kept pieces come back in their own order (the
    order of `pieces`) joined by `separator`; if none fits, the top-ranked piece cut to `budget`;
    an empty ranking gives "". OwnWords ranks by BM25; Mem0 (App. H) by its own search."""
    _check_budget(budget)
    kept: list[int] = []
    joined_length = 0  # length of the kept pieces joined by the separator
    for i in ranking:
        length_with_i = joined_length + (len(separator) if kept else 0) + len(pieces[i])
        if length_with_i <= budget:
            kept.append(i)
            joined_length = length_with_i
    if not ranking:
        return ""
    if not kept:
        return pieces[ranking[0]][:budget]
    return separator.join(pieces[i] for i in sorted(kept))


def recency(record: str, budget: int) -> str:
    """The most recent whole segments that fit (App. G.1), in temporal order, single spaces.

    Same unchanged-record branch as `ownwords`. Walking back from the last segment, it
    stops at the first that does not fit (no skipping, unlike OwnWords). If the last segment
    alone does not fit, its final `budget` characters.
    """
    _check_budget(budget)
    if budget >= len(record):
        return record
    pieces = segments(record)
    if not pieces:
        return ""
    kept: list[str] = []
    joined_length = 0
    for piece in reversed(pieces):
        length_with_piece = joined_length + (1 if kept else 0) + len(piece)
        if length_with_piece > budget:
            break
        kept.append(piece)
        joined_length = length_with_piece
    if not kept:
        last = pieces[-1]
        return last[len(last) - budget:]  # not last[-budget:], which is all of it at 0
    return " ".join(reversed(kept))


def question_free_query(record: str) -> str:
    """The record's 12 most frequent tokens of tok(record), ties by first occurrence, joined
    by single spaces (App. F, the development factorial's question-free excerpts)."""
    tokens = tok(record)
    counts = Counter(tokens)
    first_position: dict[str, int] = {}
    for position, token in enumerate(tokens):
        first_position.setdefault(token, position)
    ranked = sorted(counts, key=lambda v: (-counts[v], first_position[v]))
    return " ".join(ranked[:QUESTION_FREE_TERMS])


def question_free(record: str, budget: int) -> str:
    """OwnWords with `question_free_query(record)` in place of the question."""
    return ownwords(record, question_free_query(record), budget)


@dataclass(frozen=True)
class RankedMemories:
    """A memory system's memories of one session in their own order (Mem0's: extraction order)
    and its ranking of them for one question (indices into `memories`, best first; memories
    its search left out are not in it)."""

    memories: tuple[str, ...]
    ranking: tuple[int, ...]


MEMORY_ITEM_PREFIX = "- "
MEMORY_ITEM_SEPARATOR = "\n"


def ranked_memories_excerpt(ranked: RankedMemories, budget: int) -> str:
    """Mem0 as deployed (App. H): its ranked memories fill B greedily as OwnWords fills sentences
    (`greedy_fill`), kept ones in their own order, one "- " line each."""
    pieces = [MEMORY_ITEM_PREFIX + memory for memory in ranked.memories]
    return greedy_fill(pieces, ranked.ranking, budget, separator=MEMORY_ITEM_SEPARATOR)


# --- The other evidence -----------------------------------------------------------------

_SPEAKER_LABEL = {INTERVIEWER: "Interviewer", PARTICIPANT: "Participant"}


def current_dialogue(turns: Iterable[TurnText], cut: int) -> str:
    """Both speakers' turns before the current question (index < cut; the question itself is
    shown in its own block), each "Interviewer: " or "Participant: " + text, separated by a
    blank line, keeping the last 16,000 characters (§3.1, §7). When anything was cut, the
    truncation marker and a line break precede the kept tail."""
    dialogue = "\n\n".join(
        f"{_SPEAKER_LABEL[turn.speaker]}: {turn.text}" for turn in turns if turn.index < cut
    )
    if len(dialogue) <= DIALOGUE_CAP:
        return dialogue
    return DIALOGUE_TRUNCATION_MARKER + "\n" + dialogue[-DIALOGUE_CAP:]


def screener_block(screener: Iterable[tuple[str, str]]) -> str:
    """The screener's question/answer pairs as "Q: ...\\nA: ..." lines, keeping the first
    4,000 characters (§3.1); when anything was cut, a line break and the truncation marker
    follow. No screener gives "(none)", so the prompt never shows an empty block."""
    block = "\n".join(f"Q: {question}\nA: {answer}" for question, answer in screener)
    if not block:
        return NO_SCREENER
    if len(block) <= SCREENER_CAP:
        return block
    return block[:SCREENER_CAP] + "\n" + SCREENER_TRUNCATION_MARKER


def memory_plus_ownwords(memory: str, record: str, question: str) -> dict[str, str]:
    """The written memory and OwnWords's excerpts, each at most B = |memory| (App. H): about
    twice the context of either alone. Keys are the answering prompt's fields."""
    return {"memory": memory, "excerpts": ownwords(record, question, len(memory))}


def memory_plus_whole_record(memory: str, record: str) -> dict[str, str]:
    """The written memory and the whole record, no budget (App. H)."""
    return {"memory": memory, "record": record}


def memgpt_style(memory: str, record: str, archive_query: str) -> dict[str, str]:
    """The MemGPT-style evidence (App. H): the written memory as core memory, and OwnWords's
    builder run with the model-written archive query (the queries joined by single spaces) in
    place of the question, at B = |memory|. It differs from `memory_plus_ownwords` only in who
    writes the query. Keys are the answering prompt's fields."""
    return {"memory": memory, "excerpts": ownwords(record, archive_query, len(memory))}
