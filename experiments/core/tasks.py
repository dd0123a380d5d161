"""Prediction targets of a session (paper App. G, "First new cohort"). Pure Python.

A *substantive pair* is an interviewer turn that contains "?" and has at least 20
characters, immediately followed by a participant turn of at least 5
whitespace-delimited words (the reference answer). With a session's pairs numbered
0..P-1, the *second half* is the pairs numbered floor(P/2) and later. A session is
eligible when P >= min_pairs and its second half holds at least min_targets pairs;
its targets are the first max_targets second-half pairs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from experiments.core.interviews.records import INTERVIEWER, PARTICIPANT

QUESTION_MIN_CHARS = 20
ANSWER_MIN_WORDS = 5


@dataclass(frozen=True)
class TaskRule:
    """Eligibility thresholds; the defaults are the paper's."""

    min_pairs: int = 12
    min_targets: int = 5
    max_targets: int = 5

    def __post_init__(self):
        if self.min_pairs < 1 or self.min_targets < 1 or self.max_targets < 1:
            raise ValueError("task thresholds must be positive integers")
        if self.max_targets < self.min_targets:
            raise ValueError("max_targets must be at least min_targets")


PAPER_RULE = TaskRule()


@dataclass(frozen=True)
class Target:
    pair_number: int  # position among the session's substantive pairs
    question_index: int  # turn index of the question; also the cut
    answer_index: int  # turn index of the reference answer


def is_substantive_question(speaker: str, text: str) -> bool:
    return speaker == INTERVIEWER and "?" in text and len(text) >= QUESTION_MIN_CHARS


def is_substantive_answer(speaker: str, text: str) -> bool:
    return speaker == PARTICIPANT and len(text.split()) >= ANSWER_MIN_WORDS


def substantive_pairs(turns: Sequence[tuple[int, str, str]]) -> list[tuple[int, int]]:
    """(question index, answer index) of each substantive pair; turns are (index, speaker, text)."""
    pairs = []
    for (q_index, q_speaker, q_text), (a_index, a_speaker, a_text) in zip(turns, turns[1:]):
        if is_substantive_question(q_speaker, q_text) and is_substantive_answer(a_speaker, a_text):
            pairs.append((q_index, a_index))
    return pairs


def derive_targets(turns: Sequence[tuple[int, str, str]], rule: TaskRule = PAPER_RULE) -> list[Target]:
    """The session's targets under `rule`, or [] when it is not eligible."""
    pairs = substantive_pairs(turns)
    second_half_start = len(pairs) // 2
    second_half = pairs[second_half_start:]
    if len(pairs) < rule.min_pairs or len(second_half) < rule.min_targets:
        return []
    return [
        Target(pair_number=second_half_start + offset, question_index=q, answer_index=a)
        for offset, (q, a) in enumerate(second_half[: rule.max_targets])
    ]
