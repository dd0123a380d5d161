"""Where a condition's evidence came from: its sentences found again in the participant's turns.

OwnWords, recency and question-free evidence are sentences of the permitted record H
(`core.evidence.segments`) joined by single spaces in temporal order, and the whole record is
H itself. So the sentences a condition kept are recovered by walking H's sentences in order and
matching each at the evidence's current position (whitespace between them skipped); composite
evidence (memory + OwnWords) is tried block by block. Each sentence of H is then mapped back
to the turn it came from, so the task page can highlight, inside the transcript, what each
condition showed the model.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from experiments.core import evidence as ev
from experiments.core.assembly import EVIDENCE_PART_SEPARATOR

# The boundary rule of `core.evidence.segments` (App. F), used here with positions.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
_PREFIX = "- "


@dataclass
class Sentence:
    text: str
    kept_by: list[int] = field(default_factory=list)  # indices of the evidence sources that kept it


def record_sentences(turns: list[ev.TurnText], record_cut: int) -> dict[int, list[Sentence]]:
    """Turn index → the sentences of H that come from that participant turn, in order."""
    lines = [(t.index, _PREFIX + t.text) for t in turns if t.speaker == ev.PARTICIPANT and t.index < record_cut]
    record = ev.respondent_record(turns, record_cut)
    starts, offset = [], 0
    for _, line in lines:
        starts.append(offset)
        offset += len(line) + 1
    by_turn: dict[int, list[Sentence]] = {}
    position = 0
    for boundary in [*_BOUNDARY.finditer(record), None]:
        end = boundary.start() if boundary else len(record)
        raw = record[position:end]
        text = raw.strip()
        if text:
            start = position + (len(raw) - len(raw.lstrip()))
            line = max(0, bisect.bisect_right(starts, start) - 1)
            turn_index = lines[line][0]
            if start == starts[line] and text.startswith(_PREFIX):
                text = text[len(_PREFIX):]
            by_turn.setdefault(turn_index, []).append(Sentence(text))
        position = boundary.end() if boundary else len(record)
    return by_turn


def _kept(sentences: list[Sentence], block: str, prefixed: list[str]) -> list[int]:
    """Indices of the sentences found in order at `block`'s successive positions."""
    found, cursor = [], 0
    for i, candidate in enumerate(prefixed):
        while cursor < len(block) and block[cursor].isspace():
            cursor += 1
        if candidate and block.startswith(candidate, cursor):
            found.append(i)
            cursor += len(candidate)
    return found


def mark_evidence(by_turn: dict[int, list[Sentence]], evidences: list[str]) -> list[int]:
    """Mark in `by_turn` the sentences each evidence text kept; returns how many each kept."""
    ordered = [s for index in sorted(by_turn) for s in by_turn[index]]
    # As they stand in H: a turn's first sentence carries the "- " prefix.
    prefixed = []
    for index in sorted(by_turn):
        for j, sentence in enumerate(by_turn[index]):
            prefixed.append(_PREFIX + sentence.text if j == 0 else sentence.text)
    counts = []
    for source, text in enumerate(evidences):
        best: list[int] = []
        for block in text.split(EVIDENCE_PART_SEPARATOR):
            found = _kept(ordered, block, prefixed)
            if len(found) > len(best):
                best = found
        for i in best:
            ordered[i].kept_by.append(source)
        counts.append(len(best))
    return counts
