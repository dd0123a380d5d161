"""App. K's wrong-person control: each session is shown the concrete memory of another person of the
same cohort, so own minus wrong person measures what is this person's in a memory (together with the
harm of an irrelevant narrative, as the paper says). Pure Python, no Django.

The assignment is a seeded derangement of the cohort's sessions (`donor_sessions`): every session
gets exactly one other session's memory, every memory is shown exactly once, and no session gets a
memory of its own person (a person with several sessions never sees any of them). It is drawn by
rejection: NumPy PCG64(seed) permutations of the sessions in ascending id order until one has no
session mapped to its own person; the same sessions, people and seed always give the same map.
The seed is part of the condition's key, so a protocol's seal records it.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Hashable, Mapping

import numpy as np

WRONG_PERSON_SEED = 20260917  # App. K's seed
MAX_DRAWS = 10_000
_SEED_IN_KEY = re.compile(r"\+wrong-person\(seed=(\d+)\)$")


def wrong_person_seed(key: str) -> int:
    """The derangement seed a wrong-person condition's key records."""
    found = _SEED_IN_KEY.search(key)
    if found is None:
        raise ValueError(f"{key!r} is not a wrong-person condition key")
    return int(found.group(1))


def donor_sessions(session_person: Mapping[Hashable, Hashable], seed: int) -> dict:
    """session → the session whose memory it is shown: a permutation of the sessions in which no
    session's donor belongs to its own person. Fails when no such permutation exists (one person
    holds more than half of the sessions, e.g. a cohort of one person)."""
    sessions = sorted(session_person)
    if not sessions:
        return {}
    largest = max(Counter(session_person.values()).values())
    if 2 * largest > len(sessions):
        raise ValueError(f"no wrong-person assignment: one person holds {largest} of the cohort's "
                         f"{len(sessions)} sessions")
    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(MAX_DRAWS):
        order = rng.permutation(len(sessions))
        if all(session_person[sessions[i]] != session_person[sessions[j]] for i, j in enumerate(order)):
            return {sessions[i]: sessions[int(j)] for i, j in enumerate(order)}
    raise ValueError(f"no wrong-person assignment found in {MAX_DRAWS} draws of seed {seed}")
