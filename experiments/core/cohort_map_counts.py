"""Which people and sessions each cohort drew, and what cohorts share (the paper's Fig. 5).
Pure Python, no Django.

A cohort is given as the (person, session) pairs of its draw; keys are whatever identifies them
(ids or labels). `cohort_map` counts each cohort's people and sessions and, for every pair of
cohorts, the people and the sessions both drew; the diagonal of each matrix is the cohort's own
count. Which keys are shared is kept apart (`shared_keys`), for readers allowed to see them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping


@dataclass(frozen=True)
class CohortMap:
    names: tuple[str, ...]
    people: tuple[int, ...]                    # people each cohort drew
    sessions: tuple[int, ...]                  # sessions each cohort drew
    shared_people: tuple[tuple[int, ...], ...]     # [i][j]: people cohorts i and j both drew
    shared_sessions: tuple[tuple[int, ...], ...]   # [i][j]: sessions both drew
    people_in_any: int                         # distinct people over all cohorts
    sessions_in_any: int
    people_in_several: int                     # people drawn by more than one cohort
    sessions_in_several: int

    def pairs(self) -> list[dict]:
        """Every unordered pair of different cohorts with its shared counts, in cohort order."""
        return [{"first": self.names[i], "second": self.names[j], "people": self.shared_people[i][j],
                 "sessions": self.shared_sessions[i][j]}
                for i in range(len(self.names)) for j in range(i + 1, len(self.names))]


def _sets(draws: Mapping[str, Iterable[tuple[Hashable, Hashable]]]):
    people, sessions = {}, {}
    for name, pairs in draws.items():
        people[name], sessions[name] = set(), set()
        for person, session in pairs:
            people[name].add(person)
            if session is not None:
                sessions[name].add(session)
    return people, sessions


def _matrix(names, sets) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(len(sets[a] & sets[b]) for b in names) for a in names)


def _in_several(names, sets) -> int:
    seen: dict = {}
    for name in names:
        for key in sets[name]:
            seen[key] = seen.get(key, 0) + 1
    return sum(1 for n in seen.values() if n > 1)


def cohort_map(draws: Mapping[str, Iterable[tuple[Hashable, Hashable]]]) -> CohortMap:
    """The map of ``draws`` (cohort name → its (person, session) pairs; session None when a
    cohort draws people without sessions, e.g. a survey sample), cohorts in the mapping's order."""
    names = tuple(draws)
    people, sessions = _sets(draws)
    return CohortMap(
        names=names, people=tuple(len(people[n]) for n in names), sessions=tuple(len(sessions[n]) for n in names),
        shared_people=_matrix(names, people), shared_sessions=_matrix(names, sessions),
        people_in_any=len(set().union(*people.values())), sessions_in_any=len(set().union(*sessions.values())),
        people_in_several=_in_several(names, people), sessions_in_several=_in_several(names, sessions),
    )


def shared_keys(draws: Mapping[str, Iterable[tuple[Hashable, Hashable]]], first: str, second: str) -> dict:
    """The people and sessions both ``first`` and ``second`` drew, each sorted."""
    people, sessions = _sets({first: draws[first], second: draws[second]})
    return {"people": sorted(people[first] & people[second], key=str),
            "sessions": sorted(sessions[first] & sessions[second], key=str)}
