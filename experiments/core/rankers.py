"""The plug-in point for a trained reranker (paper App. F; PairRM in §7 and App. H).

A ranker is any object with

    name: str          # recorded with every result it produced
    version: str       # likewise: a new checkpoint or rule is a new version
    rank(question: str, candidates: Sequence[str], context: Mapping[str, str]) -> Sequence[int]

``rank`` returns the candidates' indices, best first (a permutation of 0..n-1); the pick is
the first and inherits that candidate's grade. ``context`` holds what else a ranker may
use: ``memory`` (the pool's memory text) and ``screener`` (the screener answers, one
"question: answer" line each). A ranker reads nothing else and sends nothing anywhere.

Rankers are named by where they live, one of
  * ``package.module:attribute`` or ``package.module.attribute`` (an importable dotted path), or
  * the name of an entry point in the group ``ownwords.rankers`` of an installed package;
the attribute is a ranker object, or a class or factory called without arguments that
returns one. `load_ranker` checks the shape; `ranked_pick` checks every ranking.

`QuestionOverlapRanker` is a tested example that needs no download. `PairRMRanker` wraps
llm-blender's PairRM from a local checkpoint (README: "Pickers and pool diagnostics").
Pure Python; imports no Django (llm-blender only when PairRM is used).
"""
from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points
from typing import Mapping, Sequence

from experiments.core.pickers import tokens

ENTRY_POINT_GROUP = "ownwords.rankers"


class RankerError(ValueError):
    """A ranker that cannot be loaded, or whose answer is not a ranking."""


def _resolve(spec: str):
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
    elif "." in spec:
        module_name, _, attribute = spec.rpartition(".")
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == spec]
        if not found:
            raise RankerError(f"no ranker {spec!r}: not a dotted path and no entry point of that name "
                              f"in the group {ENTRY_POINT_GROUP!r}")
        return found[0].load()
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise RankerError(f"ranker {spec!r}: cannot import {module_name!r} ({error})") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise RankerError(f"ranker {spec!r}: {module_name!r} has no {attribute!r}") from None


def load_ranker(spec: str):
    """The ranker named by ``spec`` (see the module docstring), its name and version checked."""
    if not isinstance(spec, str) or not spec.strip():
        raise RankerError("a ranker is named by a dotted path or an entry-point name")
    target = _resolve(spec.strip())
    ranker = target if callable(getattr(target, "rank", None)) and not isinstance(target, type) else target()
    if not callable(getattr(ranker, "rank", None)):
        raise RankerError(f"ranker {spec!r} has no rank(question, candidates, context) method")
    for field in ("name", "version"):
        value = getattr(ranker, field, None)
        if not isinstance(value, str) or not value.strip():
            raise RankerError(f"ranker {spec!r} needs a non-empty string {field!r}")
    return ranker


def ranked_pick(ranker, question: str, candidates: Sequence[str], context: Mapping[str, str] | None = None) -> int:
    """The index of the ranker's top candidate; RankerError unless it returned a permutation."""
    try:
        ranking = [int(i) for i in ranker.rank(question, list(candidates), dict(context or {}))]
    except Exception as error:    # a plug-in's own failure, named without its message (it may quote text)
        raise RankerError(f"ranker {ranker.name} {ranker.version} failed ({type(error).__name__})") from error
    if sorted(ranking) != list(range(len(candidates))):
        raise RankerError(f"ranker {ranker.name} {ranker.version} returned {ranking}, not an ordering of "
                          f"the {len(candidates)} candidates' indices")
    return ranking[0]


def describe(ranker) -> dict:
    """What a result records about the ranker that produced it."""
    return {"name": ranker.name, "version": ranker.version}


class QuestionOverlapRanker:
    """Example ranker: candidates that repeat more of the question's distinct tokens rank higher.

    A deterministic rule, not a trained model: it shows the plug-in's shape and is tested.
    Ties keep the lower index first.
    """

    name = "question-overlap"
    version = "1"

    def rank(self, question: str, candidates: Sequence[str], context: Mapping[str, str]) -> list[int]:
        asked = set(tokens(question))
        overlap = [len(asked & set(tokens(text))) for text in candidates]
        return sorted(range(len(candidates)), key=lambda i: (-overlap[i], i))


# The paper's PairRM instruction (App. E): the question first, so truncation cannot drop it.
PAIRRM_INSTRUCTION = ("Question asked to a specific research-interview participant: {question}\n\n"
                      "What is known about this participant: {profile}\n\n"
                      "Screener answers: {screener}\n\n"
                      "Which reply is most likely the one this participant actually gave?")


class PairRMRanker:
    """llm-blender's PairRM from a local checkpoint folder (weights are not bundled).

    ``OWNWORDS_PAIRRM_PATH`` names the folder (e.g. a download of llm-blender/PairRM);
    ``pip install llm-blender`` provides the code. Nothing is fetched from the network here.
    """

    name = "pairrm"

    def __init__(self, path: str | None = None):
        self.path = path or os.environ.get("OWNWORDS_PAIRRM_PATH", "")
        if not self.path or not os.path.isdir(self.path):
            raise RankerError("PairRM needs OWNWORDS_PAIRRM_PATH: a local folder with the PairRM checkpoint")
        try:
            import llm_blender
        except ImportError:
            raise RankerError("PairRM needs the llm-blender package (pip install llm-blender)") from None
        self.version = f"llm-blender {getattr(llm_blender, '__version__', '?')}, {os.path.basename(self.path.rstrip('/'))}"
        self._blender = llm_blender.Blender()
        self._blender.loadranker(self.path)

    def rank(self, question: str, candidates: Sequence[str], context: Mapping[str, str]) -> list[int]:
        instruction = PAIRRM_INSTRUCTION.format(question=question, profile=context.get("memory", ""),
                                                screener=context.get("screener", ""))
        ranks = self._blender.rank([instruction], [list(candidates)], return_scores=False, batch_size=1)[0]
        # ranks[j] is candidate j's rank, 1 the best.
        return sorted(range(len(candidates)), key=lambda j: (int(ranks[j]), j))
