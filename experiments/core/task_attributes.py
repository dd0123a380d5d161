"""Task attributes a contrast can be split by (paper App. I.2, I.3, I.4, I.7): pure functions, no Django.

* ``is_specific``: I.2's rule for a "specific" reference answer;
* ``target_group``: I.4's first target of a session against its later targets;
* ``log_length_gap``: I.7's difference in log answer length; ``length_ratio``: I.3's word-count ratio.
"""
from __future__ import annotations

import math
import re

FIRST_TARGET, LATER_TARGETS = "first target", "later targets"
SPECIFIC, NOT_SPECIFIC = "specific", "other"

# "a form of I": I, I'm, I've, I'll, I'd (straight or curly apostrophe).
FORMS_OF_I = frozenset({"i", "i'm", "i've", "i'll", "i'd"})
_WORD = re.compile(r"\S+")
# Punctuation around a word that does not change what the word is: quotes, brackets, dashes.
_OPENING = "\"'“‘([{«*_-–—"
_CLOSING = "\"'”’)]}»*_"
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]»]*$")


def is_specific(text: str) -> bool:
    """I.2: the answer contains a digit, or a capitalized word that is neither sentence-initial nor a form of I.

    A word is a whitespace-delimited token with surrounding quotes and brackets stripped; it is
    capitalized when its first letter is upper case.  It is sentence-initial when it opens the
    text or a line, or follows a token ending in ``.``, ``!``, ``?`` or ``…`` (closing quotes allowed).
    """
    if any(ch.isdigit() for ch in text):
        return True
    for line in text.splitlines():
        previous = None
        for match in _WORD.finditer(line):
            token = match.group()
            word = token.lstrip(_OPENING).rstrip(_CLOSING).rstrip(".,;:!?…").rstrip(_CLOSING)
            initial = previous is None or bool(_SENTENCE_END.search(previous))
            previous = token
            if not word or not word[0].isalpha() or not word[0].isupper() or initial:
                continue
            if word.replace("’", "'").lower() in FORMS_OF_I:
                continue
            return True
    return False


def target_group(position: int) -> str:
    """I.4: a session's first target (position 0, where its cut is the memory's) or a later one."""
    return FIRST_TARGET if position == 0 else LATER_TARGETS


def log_length_gap(words_a: int, words_b: int) -> float:
    """I.7's covariate: log(1 + words of a) − log(1 + words of b); the 1 keeps an empty answer finite."""
    return math.log1p(words_a) - math.log1p(words_b)


def length_ratio(words_a: int, words_b: int) -> float:
    """I.3's covariate: (1 + words of a) / (1 + words of b); exactly 1 when the lengths are equal."""
    return (1 + words_a) / (1 + words_b)
