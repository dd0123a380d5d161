"""The seeded cohort draw of the paper (App. G, "First new cohort"). Pure Python + NumPy.

Studies are visited in sorted order, one session per study per round; inside a
study, sessions are ordered by a seeded shuffle (NumPy PCG64); at most one session
per person; people of excluded cohorts are left out; the draw stops at the size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np


@dataclass(frozen=True)
class Candidate:
    session_key: str  # a stable, unique session identifier (the session id)
    study_key: str
    person_key: str


def draw_cohort(
    candidates: Iterable[Candidate], *, size: int, seed: int, excluded_people: Iterable[str] = ()
) -> list[Candidate]:
    """Return the drawn sessions in draw order (at most `size`)."""
    if size < 1:
        raise ValueError("a cohort needs a size of at least 1")
    excluded = set(excluded_people)
    by_study: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.person_key not in excluded:
            by_study.setdefault(candidate.study_key, []).append(candidate)

    # One generator for the whole draw, consumed in sorted study order, so the
    # order of the input rows never changes the result.
    rng = np.random.Generator(np.random.PCG64(seed))
    queues = []
    for study in sorted(by_study):
        sessions = sorted(by_study[study], key=lambda c: c.session_key)
        queues.append([sessions[i] for i in rng.permutation(len(sessions))])

    drawn: list[Candidate] = []
    taken_people: set[str] = set()
    positions = [0] * len(queues)
    while len(drawn) < size:
        took_any = False
        for q, queue in enumerate(queues):
            # Next session of this study whose person is not in the cohort yet.
            while positions[q] < len(queue) and queue[positions[q]].person_key in taken_people:
                positions[q] += 1
            if positions[q] == len(queue):
                continue
            chosen = queue[positions[q]]
            positions[q] += 1
            drawn.append(chosen)
            taken_people.add(chosen.person_key)
            took_any = True
            if len(drawn) == size:
                break
        if not took_any:
            break
    return drawn
