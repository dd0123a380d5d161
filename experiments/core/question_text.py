"""The question a turn asks, for a list's question column. Pure Python, no Django.

An interviewer's turn usually opens with an acknowledgement of the last answer ("That sounds…")
and ends with the question, so its first characters say little. The column shows the last
sentence that ends in "?", else the end of the turn.
"""
from __future__ import annotations

import re

# Sentence ends: white space after . ! ? …, or after one of them and a closing quote or bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[.!?…][\"'”’)\]])\s+")


def question_sentences(text: str, limit: int = 140) -> str:
    """The turn's question sentence (at most `limit` characters, cut with "…")."""
    text = " ".join((text or "").split())
    if not text:
        return ""
    sentences = [s for s in _SENTENCE_END.split(text) if s]
    asked = [i for i, s in enumerate(sentences) if s.rstrip("\"'”’)]").endswith("?")]
    if asked:
        question = sentences[asked[-1]]
    else:
        question = text if len(text) <= limit else "…" + text[-(limit - 1):].lstrip()
    if len(question) > limit:
        question = question[:limit - 1].rstrip() + "…"
    return question
