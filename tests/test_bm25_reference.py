"""Our BM25 against an independent implementation, on real transcripts.

The reference is bm25s with method="lucene", k1=1.2, b=0.75, indexing the same token lists
(our `tok` on our `segments`) and queried with the same query tokens. Lucene's BM25 has the
same idf, ln(1 + (n - n_v + 0.5) / (n_v + 0.5)), but its term lacks the constant factor
k1 + 1, so its scores are ours divided by 2.2; the ranking is the same. bm25s runs in float64
here (dtype="float64") so that rankings can be compared exactly, ties included.

(rank_bm25's Okapi idf differs and goes negative on one person's few sentences, so it is not
a valid reference for this procedure.)
"""
import csv
import re
from pathlib import Path

import bm25s
import numpy as np
import pytest

from experiments.core.evidence import (
    INTERVIEWER, PARTICIPANT, TurnText, bm25_scores, ownwords, respondent_record, segments, tok,
)

DATA_DIR = Path("/work/shared/data/anthropic-interviewer")
INTERVIEWS_PER_FILE = 12  # 24 interviews in all
K1 = 1.2

# A local reading of the shared CSV (the project's importer is tested on its own): a turn
# starts at each line beginning with "Assistant:", "AI:" or "User:".
_MARKER = re.compile(r"^(Assistant|AI|User):", re.MULTILINE)


def split_turns(text):
    matches = list(_MARKER.finditer(text))
    turns = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        speaker = PARTICIPANT if match.group(1) == "User" else INTERVIEWER
        turns.append(TurnText(i, speaker, text[match.end():end].strip()))
    return turns


def load_interviews():
    csv.field_size_limit(10_000_000)
    interviews = []
    for path in sorted(DATA_DIR.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        interviews += [(row["transcript_id"], split_turns(row["text"])) for row in rows[:INTERVIEWS_PER_FILE]]
    return interviews


INTERVIEWS = load_interviews() if DATA_DIR.is_dir() else []
pytestmark = pytest.mark.skipif(not INTERVIEWS, reason=f"shared data not found in {DATA_DIR}")


def questions_of(turns):
    """Every interviewer turn with a question mark: several queries per interview."""
    return [turn.text for turn in turns if turn.speaker == INTERVIEWER and "?" in turn.text]


def reference_retriever(segment_tokens):
    retriever = bm25s.BM25(method="lucene", k1=K1, b=0.75, dtype="float64")
    retriever.index(segment_tokens, show_progress=False)
    return retriever


def ranking(scores):
    """Descending score, ties by earlier position (Algorithm 1)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def greedy_fill(pieces, order, budget):
    """Algorithm 1's fill, written again here from the paper's text."""
    kept = []
    for i in order:
        if len(" ".join(pieces[j] for j in sorted(kept + [i]))) <= budget:
            kept.append(i)
    if not kept:
        return pieces[order[0]][:budget]
    return " ".join(pieces[j] for j in sorted(kept))


def test_the_shared_data_gives_enough_interviews_and_questions():
    assert len(INTERVIEWS) >= 20
    assert sum(len(questions_of(turns)) for _, turns in INTERVIEWS) >= 100


@pytest.mark.parametrize("transcript_id, turns", INTERVIEWS, ids=[tid for tid, _ in INTERVIEWS])
def test_bm25_agrees_with_bm25s_lucene_on_a_real_transcript(transcript_id, turns):
    record = respondent_record(turns)
    pieces = segments(record)
    segment_tokens = [tok(piece) for piece in pieces]
    retriever = reference_retriever(segment_tokens)
    questions = questions_of(turns)
    assert len(questions) >= 3, transcript_id
    compared = 0
    for question in questions:
        query = tok(question)
        if not query:
            continue
        ours = bm25_scores(segment_tokens, query)
        theirs = retriever.get_scores(query).astype(np.float64).tolist()
        assert [score / (K1 + 1) for score in ours] == pytest.approx(theirs, rel=1e-12, abs=1e-12)
        assert ranking(ours) == ranking(theirs), question
        for budget in (200, 700):
            assert ownwords(record, question, budget) == (
                record if budget >= len(record) else greedy_fill(pieces, ranking(theirs), budget)
            )
        compared += 1
    assert compared >= 3, transcript_id
