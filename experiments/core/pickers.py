"""Picking one existing candidate without a model call (paper App. F, "Picking among the existing candidates").

A picker looks at a pool's candidate texts and returns the index of one of them; the pick
inherits that candidate's stored grade, so no answer and no grade is new. Every function
here is pure: texts in, an index out.

Rules
-----
* consensus by similarity: each pickable candidate's centrality is its mean similarity to
  the other *voters*; the most central is picked. The voters are the pool itself (within
  pool), the pool plus the fused answer (the fused answer votes but is never picked: a
  picker delivers an existing candidate), or both memories' pools together (cross-memory:
  all six candidates vote and may be picked).
* similarity: token F1 (multiset overlap of tokens), ROUGE-L F1 (longest common token
  subsequence), or cosine of character 4-gram counts.
* length: the shortest, median-length or longest candidate, by whitespace word count.

Tokens are the lower-cased runs of word characters (``\\w+``, Unicode); character 4-grams
are taken from the lower-cased text with runs of whitespace made one space; a text shorter
than four characters is its own single gram.

Ties are broken by the lowest index in the order the candidates are given (b0, b1, b2;
in a cross-memory pool the first memory's b0..b2, then the second's): a rule that cannot
tell candidates apart returns the earliest, so every pick is deterministic.

A trained reranker plugs in through `experiments.core.rankers` and is picked the same way
(its top-ranked candidate).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Sequence

import numpy as np

_TOKEN = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
GRAM = 4


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _token_masks(b: Sequence[str]) -> dict[str, int]:
    """For each token of ``b``, the bit set of its positions."""
    masks: dict[str, int] = {}
    for j, token in enumerate(b):
        masks[token] = masks.get(token, 0) | (1 << j)
    return masks


def _lcs_masked(a: Sequence[str], masks: dict[str, int], length_b: int) -> int:
    full = (1 << length_b) - 1
    v = full
    for m in [masks[token] for token in a if token in masks]:   # a token absent from b changes nothing
        v = ((v + (v & m)) | (v & ~m)) & full
    return length_b - bin(v).count("1")


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö 2004): one big-integer
    step per token of ``a``, so a pair of 150-word answers costs microseconds, not a
    150 × 150 table in Python. Tests check it against the textbook dynamic programme."""
    if not a or not b:
        return 0
    return _lcs_masked(a, _token_masks(b), len(b))


def _f1_matrix(overlap: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """F1 = 2·overlap / (|a| + |b|) (the harmonic mean of precision and recall); two empty
    texts agree fully, a text without overlap not at all."""
    total = sizes[:, None] + sizes[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = 2.0 * overlap / total
    f1[total == 0] = 1.0
    return f1


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text.lower()).strip()


def char_grams(text: str, n: int = GRAM) -> Counter:
    """The character n-grams of the lower-cased text with whitespace runs made one space."""
    text = _normal(text)
    if len(text) < n:
        return Counter([text]) if text else Counter()
    return Counter(text[i:i + n] for i in range(len(text) - n + 1))


def _count_rows(ids: list[np.ndarray]) -> np.ndarray:
    """Count matrix (texts × distinct items) of per-text item keys."""
    keys = np.concatenate(ids) if ids else np.zeros(0, np.uint64)
    distinct, inverse = np.unique(keys, return_inverse=True)
    owner = np.repeat(np.arange(len(ids)), [len(i) for i in ids])
    width = max(distinct.size, 1)
    return np.bincount(owner * width + inverse.ravel(), minlength=len(ids) * width).reshape(len(ids), width)


def _gram_keys(texts: Sequence[str]) -> list[np.ndarray]:
    """Each text's 4-gram keys: four UTF-32 code points packed into 64 bits when every code
    point is below 2**16 (all of the Basic Multilingual Plane), else ids from a dictionary."""
    normal = [_normal(text) for text in texts]
    points = [np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64) for text in normal]
    if all(p.size == 0 or int(p.max()) < 2 ** 16 for p in points):
        keys = []
        for p in points:
            if p.size < GRAM:            # a short text is its own single gram (the high bit marks it)
                keys.append(np.array([sum(int(c) << (16 * k) for k, c in enumerate(p)) | (1 << 63)],
                                     dtype=np.uint64) if p.size else np.zeros(0, np.uint64))
            else:
                keys.append((p[:-3] << 48) | (p[1:-2] << 32) | (p[2:-1] << 16) | p[3:])
        return keys
    vocabulary: dict[str, int] = {}
    return [np.array([vocabulary.setdefault(g, len(vocabulary)) for g in char_grams(text).elements()],
                     dtype=np.uint64) for text in texts]


def _token_f1_matrix(texts: Sequence[str]) -> np.ndarray:
    vocabulary: dict[str, int] = {}
    counts = _count_rows([np.array([vocabulary.setdefault(t, len(vocabulary)) for t in tokens(text)],
                                   dtype=np.uint64) for text in texts])
    overlap = np.minimum(counts[:, None, :], counts[None, :, :]).sum(axis=2)
    return _f1_matrix(overlap, counts.sum(axis=1))


def _rouge_l_matrix(texts: Sequence[str]) -> np.ndarray:
    words = [tokens(text) for text in texts]
    overlap = np.zeros((len(texts), len(texts)), dtype=np.int64)
    masks = [_token_masks(w) for w in words]
    for i in range(len(texts)):
        overlap[i, i] = len(words[i])
        for j in range(i + 1, len(texts)):
            overlap[i, j] = overlap[j, i] = _lcs_masked(words[i], masks[j], len(words[j])) if words[j] else 0
    return _f1_matrix(overlap, np.array([len(w) for w in words], dtype=np.int64))


def _cosine_matrix(texts: Sequence[str]) -> np.ndarray:
    counts = _count_rows(_gram_keys(texts)).astype(np.float64)
    dot = counts @ counts.T                      # integer counts: exact in float64
    norms = np.sqrt(np.diag(dot))
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = dot / np.outer(norms, norms)
    empty = norms == 0
    cosine[empty, :] = 0.0
    cosine[:, empty] = 0.0
    cosine[np.ix_(empty, empty)] = 1.0          # two empty texts agree fully, one empty with another none
    return cosine


_MATRICES = {
    "token-f1": _token_f1_matrix,
    "rouge-l": _rouge_l_matrix,
    "char-4gram-cosine": _cosine_matrix,
}


def token_f1(a: str, b: str) -> float:
    """Token F1 of two texts (multiset overlap of tokens)."""
    return float(_token_f1_matrix([a, b])[0, 1])


def rouge_l(a: str, b: str) -> float:
    """ROUGE-L F1 (β = 1) on tokens."""
    return float(_rouge_l_matrix([a, b])[0, 1])


def char_gram_cosine(a: str, b: str) -> float:
    """Cosine of character 4-gram count vectors."""
    return float(_cosine_matrix([a, b])[0, 1])


SIMILARITIES: dict[str, Callable[[str, str], float]] = {  # the same measures on two texts
    "token-f1": token_f1,
    "rouge-l": rouge_l,
    "char-4gram-cosine": char_gram_cosine,
}


def first_best(scores: Sequence[float]) -> int:
    """Index of the largest score, the lowest index among equals (the documented tie rule).

    Scores equal to within 1e-12 count as equal, so a tie never depends on the order in which
    floating point summed them."""
    best = 0
    for i, score in enumerate(scores):
        if score > scores[best] + 1e-12:
            best = i
    return best


def similarity_matrix(texts: Sequence[str], similarity: str) -> np.ndarray:
    """Pairwise similarities of ``texts``, each text prepared once."""
    if similarity not in _MATRICES:
        raise ValueError(f"unknown similarity {similarity!r}; known: {', '.join(_MATRICES)}")
    return _MATRICES[similarity](texts)


def consensus_from_matrix(matrix: Sequence[Sequence[float]], pickable: Sequence[int], voters: Sequence[int]) -> int:
    """Position in ``pickable`` of the candidate with the highest mean similarity to the
    other voters (lowest position among ties)."""
    scores = []
    for i in pickable:
        others = [matrix[i][j] for j in voters if j != i]
        scores.append(sum(others) / len(others) if others else 0.0)
    return first_best(scores)


def consensus_pick(candidates: Sequence[str], similarity: str = "token-f1",
                   extra_voters: Sequence[str] = ()) -> int:
    """The most central candidate among ``candidates`` (lowest index among ties); the
    ``extra_voters`` vote but are never picked."""
    if not candidates:
        raise ValueError("no candidates to pick from")
    texts = [*candidates, *extra_voters]
    return consensus_from_matrix(similarity_matrix(texts, similarity), range(len(candidates)), range(len(texts)))


def word_count(text: str) -> int:
    return len(text.split())


def length_pick(candidates: Sequence[str], which: str) -> int:
    """The shortest, median-length or longest candidate by word count.

    Ties go to the lowest index: the shortest is the lowest index among the fewest words,
    the longest the lowest index among the most; the median is the middle of the candidates
    ordered by (words, index), the lower middle for an even count."""
    if not candidates:
        raise ValueError("no candidates to pick from")
    words = [word_count(text) for text in candidates]
    if which == "shortest":
        return min(range(len(words)), key=lambda i: (words[i], i))
    if which == "longest":
        return min(range(len(words)), key=lambda i: (-words[i], i))
    if which == "median":
        ordered = sorted(range(len(words)), key=lambda i: (words[i], i))
        return ordered[(len(ordered) - 1) // 2]
    raise ValueError("which must be 'shortest', 'median' or 'longest'")


# The rules, by name, in the order a page lists them (App. F: thirteen rules with the
# original selector and fusion, which are conditions of their own here).
WITHIN_POOL = tuple(f"consensus {name}" for name in SIMILARITIES)
WITH_FUSED = ("consensus token-f1 + fused", "consensus char-4gram-cosine + fused")
CROSS_MEMORY = tuple(f"cross-memory consensus {name}" for name in SIMILARITIES)
LENGTH_RULES = ("shortest", "median length", "longest")
POOL_RULES = WITHIN_POOL + WITH_FUSED + LENGTH_RULES


def task_picks(pools: Sequence[Sequence[str] | None], fused: Sequence[str | None]) -> list[dict[str, object]]:
    """Every rule's pick in one task, for each of its memories' pools.

    ``pools[m]`` is memory m's candidate texts (None when the pool is incomplete: no rule
    picks from it), ``fused[m]`` its fused answer or None. Returns, per pool, rule → the
    picked candidate's index (None when the rule cannot run); a cross-memory rule's pick
    is (pool, index), the same for every pool, present only when every pool is complete.
    Each similarity is computed once per pair of texts.
    """
    texts: list[str] = []
    where: list[list[int]] = []
    for pool in pools:
        where.append([] if pool is None else list(range(len(texts), len(texts) + len(pool))))
        texts.extend(pool or ())
    fused_at = []
    for answer in fused:
        fused_at.append(None if answer is None else len(texts))
        texts.extend([] if answer is None else [answer])
    out: list[dict[str, object]] = [{} for _ in pools]
    complete = all(pool is not None for pool in pools) and len(pools) > 1
    for name in SIMILARITIES:
        # ROUGE-L has no "+ fused" rule: its (costly) matrix leaves the fused answers out.
        matrix = similarity_matrix(texts if name != "rouge-l" else texts[:len(texts) - sum(
            a is not None for a in fused)], name) if texts else []
        for m, pool in enumerate(pools):
            if pool is None:
                continue
            out[m][f"consensus {name}"] = consensus_from_matrix(matrix, where[m], where[m])
            rule = f"consensus {name} + fused"
            if rule in WITH_FUSED:
                out[m][rule] = (None if fused_at[m] is None else
                                consensus_from_matrix(matrix, where[m], [*where[m], fused_at[m]]))
        if complete:
            every = [i for indices in where for i in indices]
            flat = every[consensus_from_matrix(matrix, every, every)]
            pick = next((m, indices.index(flat)) for m, indices in enumerate(where) if flat in indices)
            for m in range(len(pools)):
                out[m][f"cross-memory consensus {name}"] = pick
    for m, pool in enumerate(pools):
        if pool is not None:
            out[m].update({rule: length_pick(pool, rule.split()[0]) for rule in LENGTH_RULES})
    return out
