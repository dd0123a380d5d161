"""Reading model outputs, strictly, and the candidates' display order. Pure Python, no Django.

Paper App. B.2: a valid selector ID copies the selected answer; extra valid JSON fields are
ignored, but duplicate keys, non-finite values, absent or invalid IDs and malformed JSON give
no usable selection (an operational zero downstream). The judge's score (§3.2) is an integer
0-3 in the required `score` field; anything else is a missing grade, never a guessed one.

A judge asked for structured output (`JUDGE_SCHEMA`) replies with the bare object, which
`parse_judge` reads like any other reply; a reply that breaks the schema anyway is a missing
grade with its reason, as always, never redrawn.

Both parsers accept either the bare JSON object or the whole response as one fenced block
(```json ... ``` or ``` ... ```), because the paper's selector sometimes fenced its JSON
(App. I). Nothing else around the JSON is tolerated: no prose, no second object.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Sequence

from experiments.core.canonical import canonical_json

CANDIDATE_IDS = ("c1", "c2", "c3")
JUDGE_SCORES = (0, 1, 2, 3)
# The judge's reply as JSON Schema, for services that can be held to it (a judge with
# `structured_output`). It asks for exactly what `parse_judge` reads, so a constrained reply
# goes through the same parser as a free one: nothing about grading depends on the option.
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "enum": list(JUDGE_SCORES)},
        "rationale": {"type": "string"},
    },
    "required": ["score", "rationale"],
    "additionalProperties": False,
}

_FENCED = re.compile(r"```(?:json)?(.*)```", re.DOTALL | re.IGNORECASE)


class _Rejected(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _reject_constant(name: str):
    raise _Rejected("non-finite-number")  # NaN, Infinity, -Infinity


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # e.g. 1e999 overflows to inf
        raise _Rejected("non-finite-number")
    return value


def _object_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Rejected("duplicate-key")
    return dict(pairs)


def _strict_json_object(text: str) -> dict:
    """The one JSON object `text` holds (bare or fenced), or _Rejected with the reason."""
    stripped = text.strip()
    if not stripped:
        raise _Rejected("empty")
    fenced = _FENCED.fullmatch(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        value = json.loads(
            stripped,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise _Rejected("malformed-json") from None
    if not isinstance(value, dict):
        raise _Rejected("not-an-object")
    return value


# --- Selection ------------------------------------------------------------------------

@dataclass(frozen=True)
class Selection:
    """A parsed selector response: `candidate_id` (c1..c3) or None with the `error`."""

    candidate_id: str | None
    error: str | None = None

    @property
    def usable(self) -> bool:
        return self.candidate_id is not None


def parse_selection(text: str) -> Selection:
    """The selector's choice: a JSON object whose `candidate_id` is exactly "c1", "c2" or
    "c3" (App. B.2). Extra fields are ignored; anything else gives no usable selection."""
    try:
        value = _strict_json_object(text)
    except _Rejected as rejected:
        return Selection(None, rejected.reason)
    if "candidate_id" not in value:
        return Selection(None, "missing-field")
    candidate_id = value["candidate_id"]
    if not isinstance(candidate_id, str) or candidate_id not in CANDIDATE_IDS:
        return Selection(None, "unknown-id")
    return Selection(candidate_id)


# --- Judge ----------------------------------------------------------------------------

@dataclass(frozen=True)
class JudgeResult:
    """A parsed judge response: the integer `score` 0-3 or None with the `error`; the
    `rationale` when it is a string (informative only, never required)."""

    score: int | None
    rationale: str | None = None
    error: str | None = None

    @property
    def normalized(self) -> float | None:
        """u in {0, 1/3, 2/3, 1} (§3.2), or None when the grade is missing."""
        return None if self.score is None else self.score / 3


def parse_judge(text: str) -> JudgeResult:
    """The judge's grade: `score` must be a JSON integer 0, 1, 2 or 3 (not a bool, not 2.0,
    not "2"); otherwise the grade is missing (§3.2, App. B.2)."""
    try:
        value = _strict_json_object(text)
    except _Rejected as rejected:
        return JudgeResult(None, None, rejected.reason)
    rationale = value.get("rationale")
    rationale = rationale if isinstance(rationale, str) else None
    if "score" not in value:
        return JudgeResult(None, rationale, "missing-field")
    score = value["score"]
    # bool is a subclass of int in Python; JSON true is not a grade.
    if isinstance(score, bool) or not isinstance(score, int):
        return JudgeResult(None, rationale, "wrong-type")
    if score not in JUDGE_SCORES:
        return JudgeResult(None, rationale, "out-of-range")
    return JudgeResult(score, rationale)


# --- Pairwise judge -------------------------------------------------------------------

# What the pairwise judge may prefer: answer A, answer B, or neither (prompts/pairwise_judge_user.txt).
PAIRWISE_VERDICTS = ("a", "b", "tie")


@dataclass(frozen=True)
class PairwiseVerdict:
    """A parsed pairwise-judge response: `preferred` "a", "b" or "tie", or None with the `error`."""

    preferred: str | None
    rationale: str | None = None
    error: str | None = None


def parse_pairwise(text: str) -> PairwiseVerdict:
    """The pairwise judge's verdict: `preferred` must be the string "A", "B" or "tie" (in any
    case, no other text); anything else is a missing verdict with its reason, never guessed."""
    try:
        value = _strict_json_object(text)
    except _Rejected as rejected:
        return PairwiseVerdict(None, None, rejected.reason)
    rationale = value.get("rationale")
    rationale = rationale if isinstance(rationale, str) else None
    if "preferred" not in value:
        return PairwiseVerdict(None, rationale, "missing-field")
    preferred = value["preferred"]
    if not isinstance(preferred, str):
        return PairwiseVerdict(None, rationale, "wrong-type")
    if preferred.lower() not in PAIRWISE_VERDICTS:
        return PairwiseVerdict(None, rationale, "unknown-verdict")
    return PairwiseVerdict(preferred.lower(), rationale)


# --- MemGPT-style archive queries ----------------------------------------------------

MAX_ARCHIVE_QUERIES = 3  # App. H: "up to three archive queries"
MAX_ARCHIVE_QUERY_CHARS = 1_000  # one keyword query; a longer string is not a query


@dataclass(frozen=True)
class ArchiveQueries:
    """A parsed archive-query response: one to three non-empty strings, or () with the `error`."""

    queries: tuple[str, ...]
    error: str | None = None

    @property
    def usable(self) -> bool:
        return bool(self.queries)

    def joined(self) -> str:
        """The one BM25 query the queries become (App. H): joined by single spaces, in order."""
        return " ".join(self.queries)


def parse_archive_queries(text: str) -> ArchiveQueries:
    """The query call's reply: a JSON object whose `queries` is a list of one to three non-empty
    strings (E.12). Extra fields are ignored; anything else — no list, more than three, a
    non-string, an empty or overlong query — is a recorded failure, never repaired or redrawn."""
    try:
        value = _strict_json_object(text)
    except _Rejected as rejected:
        return ArchiveQueries((), rejected.reason)
    if "queries" not in value:
        return ArchiveQueries((), "missing-field")
    queries = value["queries"]
    if not isinstance(queries, list):
        return ArchiveQueries((), "wrong-type")
    if not queries:
        return ArchiveQueries((), "no-queries")
    if len(queries) > MAX_ARCHIVE_QUERIES:
        return ArchiveQueries((), "too-many-queries")
    if not all(isinstance(query, str) for query in queries):
        return ArchiveQueries((), "wrong-type")
    cleaned = tuple(query.strip() for query in queries)
    if not all(cleaned):
        return ArchiveQueries((), "empty-query")
    if any(len(query) > MAX_ARCHIVE_QUERY_CHARS for query in cleaned):
        return ArchiveQueries((), "query-too-long")
    return ArchiveQueries(cleaned)


# --- Candidates shown to fusion and selection ----------------------------------------

def candidate_display_order(task_key: str, candidates: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The candidates in their deterministic hash display order (App. B.2).

    `candidates` are (slot, answer) pairs, e.g. ("b0", text). Each is ranked by the sha256
    hex digest of the UTF-8 bytes of `task_key + "\\n" + slot`, ascending. The order depends
    on the task key and slot names only, never on the answers, so fusion and selection show
    the same order, an empty answer keeps its place, and the order is fixed before any
    candidate is generated. Pass a task key that names the task and the memory row (e.g.
    "task 17|memory(concrete,100w)"), so each pool gets its own permutation.
    """
    slots = [slot for slot, _ in candidates]
    if len(set(slots)) != len(slots):
        raise ValueError(f"candidate slots must be distinct, got {slots}")

    def rank(candidate: tuple[str, str]) -> str:
        return hashlib.sha256(f"{task_key}\n{candidate[0]}".encode("utf-8")).hexdigest()

    return sorted(candidates, key=rank)


def selection_payload(ordered_answers: Sequence[str]) -> str:
    """The [ANONYMOUS CANDIDATES] block: a canonical JSON array of {answer, candidate_id}
    objects, ids c1, c2, c3 in display order, keys sorted, compact separators (as the E.9
    example {"candidate_id":"c1"}) and non-ASCII characters kept as they are."""
    if len(ordered_answers) != len(CANDIDATE_IDS):
        raise ValueError(f"need exactly {len(CANDIDATE_IDS)} candidates, got {len(ordered_answers)}")
    for answer in ordered_answers:
        if not isinstance(answer, str):
            raise ValueError(f"a candidate answer must be a str, got {type(answer).__name__}")
    items = [
        {"answer": answer, "candidate_id": candidate_id}
        for candidate_id, answer in zip(CANDIDATE_IDS, ordered_answers)
    ]
    return canonical_json(items)
