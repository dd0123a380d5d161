"""A dense retriever over one person's own sentences (beyond the paper: the future work it names in
its limitations, "learned or dense retrievers over the person's own sentences"). Pure Python, no Django.

Everything but the ranker is OwnWords's (`evidence.ranked_excerpt`): the permitted record H, the
segmentation, the "record fits" branch, the greedy fill to B in temporal order and the no-fit
fallback. The ranker scores each sentence by the cosine similarity of its embedding to the
question's; ties (equal scores after rounding to SCORE_DIGITS decimals) go to the earlier sentence.

The embedding model is passed in as `embed(texts) -> one vector per text` (the installed one is
`experiments.memory_systems.dense_embedder`), so this module runs and is tested without it.
Rounding makes the ranking insensitive to the last bits of a float32 embedding.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from experiments.core.evidence import ranked_excerpt

SCORE_DIGITS = 6

Embed = Callable[[Sequence[str]], Sequence[Sequence[float]]]


def cosine_scores(vectors: Sequence[Sequence[float]], query: Sequence[float]) -> list[float]:
    """The cosine similarity of each vector to `query`, rounded to SCORE_DIGITS decimals, in
    plain Python floats (math.fsum, so the order of the terms does not matter); a zero vector
    on either side scores 0.0."""
    query = [float(x) for x in query]
    query_norm = math.sqrt(math.fsum(x * x for x in query))
    scores = []
    for vector in vectors:
        vector = [float(x) for x in vector]
        if len(vector) != len(query):
            raise ValueError(f"a vector of {len(vector)} dimensions against a query of {len(query)}")
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if norm == 0.0 or query_norm == 0.0:
            scores.append(0.0)
            continue
        scores.append(round(math.fsum(a * b for a, b in zip(vector, query)) / (norm * query_norm), SCORE_DIGITS))
    return scores


def dense_ranker(embed: Embed) -> Callable[[Sequence[str], str], list[float]]:
    """A ranker for `evidence.ranked_excerpt`: the sentences and the question embedded by `embed`
    (the sentences in one call, in their order; the question in its own), scored by cosine."""
    def rank(pieces: Sequence[str], question: str) -> list[float]:
        vectors = embed(list(pieces))
        if len(vectors) != len(pieces):
            raise ValueError(f"the embedder gave {len(vectors)} vectors for {len(pieces)} sentences")
        return cosine_scores(vectors, embed([question])[0])
    return rank


def dense_excerpt(record: str, question: str, budget: int, embed: Embed) -> str:
    """The dense retriever's excerpt of `record` for `question` at `budget` characters."""
    return ranked_excerpt(record, question, budget, dense_ranker(embed))
