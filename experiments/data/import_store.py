"""Storing imported sessions in batches, fast: the write side of `data.sessions_import`.

A file of 100,000 sessions holds over a million rows (sessions, turns, screener items,
tasks). Building a Django model instance per row costs more than the database's work, so
rows go in as plain tuples, by COPY. The
values were checked by the readers (`experiments.core.interviews`), which is what the ORM
would have checked; everything runs inside the caller's transaction, so a problem found
later in the file still leaves nothing behind.

Tasks are derived per batch from the turns in memory, with the rule and the numbering of
`data.tasks_derive` (`task_rows`), so an import stores exactly the tasks a derivation over
the stored turns would.

Where the time goes (benchmarks/import.py, 100,000 sessions on PostgreSQL): the database's
work is mostly the foreign-key checks at commit (about 830,000 rows, ~3 s of server CPU) and
the full-text index of turns (~2 s; building it afresh after the load costs as much, and
would lock the table against every search meanwhile); the client's is reading the file
(~2 s), and Python's cycle collector, which rests during an import
(`cycle_collector_paused`). Reading the file in a thread while the writer waits on the
database was tried: on a machine whose cores are busy it was no faster (the writer then
waits for the reader's turn at the interpreter lock after every round trip).
"""
from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice

from django.db import connection
from django.utils import timezone

from experiments.core.interviews.records import ParsedSession, Problem
from experiments.core.tasks import TaskRule, derive_targets
from experiments.data.import_store_sql import existing_keys, insert_rows, reserve_ids
from experiments.models import Person, ScreenerItem, Session, Study, Task, TaskSet, Turn

# Sessions per batch: large enough that round trips do not matter, small enough that a
# batch's rows (a few MB) are all the memory the import needs.
BATCH_SESSIONS = 2000


def batches(items: Iterable, size: int = BATCH_SESSIONS) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


@contextmanager
def cycle_collector_paused():
    """Python's cycle collector off for the block (and on again after, if it was on).

    An import allocates millions of short-lived objects (parsed turns, rows), none of them in
    reference cycles, so reference counting frees them all; the collector would only scan
    them over and over, which measured a quarter of the import's own CPU time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def task_rows(targets, session_id: int, task_set_id: int, turn_pk) -> list[tuple]:
    """The Task rows of one session's targets: (task_set, session, question turn, answer turn,
    position, pair number, cut, record cut); the earliest cut bounds the permitted record.
    `turn_pk[index]` is the id of the session's turn at that index."""
    record_cut = targets[0].question_index
    return [(task_set_id, session_id, turn_pk[t.question_index], turn_pk[t.answer_index], position,
             t.pair_number, t.question_index, record_cut) for position, t in enumerate(targets)]


TASK_COLUMNS = ("task_set_id", "session_id", "question_turn_id", "answer_turn_id", "position", "pair_number",
                "cut", "record_cut")


class SessionWriter:
    """Writes the batches of one file into a project; remembers what it wrote and what it refused."""

    def __init__(self, *, project, task_set: TaskSet, rule: TaskRule, source_format: str, source_file: str,
                 user=None, check_taken: bool = True):
        self.project, self.task_set, self.rule = project, task_set, rule
        # False when no session of the project can carry an id of this file (see `sessions_import`).
        self.check_taken = check_taken
        self.source_format, self.source_file = source_format, source_file
        self.user_id = getattr(user, "pk", None)
        self.imported_at = connection.ops.adapt_datetimefield_value(timezone.now())
        self.studies: dict[str, int] = {}
        self.people: dict[str, int] = {}
        self.problems: list[Problem] = []
        self.sessions = self.turns = self.tasks = 0

    def write(self, batch: list[ParsedSession]) -> None:
        """Store one batch; a session id taken in the project is a problem, and after a problem
        nothing more is written (the transaction will be rolled back) but ids are still checked."""
        if self.check_taken:
            taken = existing_keys(Session, "external_id", self.project.pk, [p.session_id for p in batch])
            self.problems.extend(
                Problem(self.source_file, p.location, "session_id",
                        f"session '{p.session_id}' exists already in this project")
                for p in batch if p.session_id in taken)
        if self.problems:
            return
        self._add_keys(Study, "key", self.studies, {p.study_id for p in batch})
        self._add_keys(Person, "label", self.people, {p.person_id for p in batch})
        session_ids = reserve_ids(Session, len(batch))
        insert_rows(Session, ("id", "project_id", "study_id", "person_id", "external_id", "language", "source_format",
                              "source_file", "imported_at", "imported_by_id"),
                    [(pk, self.project.pk, self.studies[p.study_id], self.people[p.person_id], p.session_id,
                      p.language, self.source_format, self.source_file, self.imported_at, self.user_id)
                     for pk, p in zip(session_ids, batch)])
        turn_ids = iter(reserve_ids(Turn, sum(len(p.turns) for p in batch)))
        # Per session: index → turn id, as the tasks need them.
        turn_pks = [[next(turn_ids) for _ in p.turns] for p in batch]
        insert_rows(Turn, ("id", "session_id", "index", "speaker", "text"),
                    [(pks[i], session_pk, i, t.speaker, t.text)
                     for session_pk, pks, p in zip(session_ids, turn_pks, batch) for i, t in enumerate(p.turns)])
        insert_rows(ScreenerItem, ("session_id", "index", "question", "answer"),
                    [(pk, i, q, a) for pk, p in zip(session_ids, batch) for i, (q, a) in enumerate(p.screener)])
        rows = []
        for session_pk, pks, p in zip(session_ids, turn_pks, batch):
            targets = derive_targets([(i, t.speaker, t.text) for i, t in enumerate(p.turns)], self.rule)
            if targets:
                rows.extend(task_rows(targets, session_pk, self.task_set.pk, pks))
        insert_rows(Task, TASK_COLUMNS, rows)
        self.sessions += len(batch)
        self.turns += sum(map(len, turn_pks))
        self.tasks += len(rows)

    def add_labels(self, people: Iterable[str], studies: Iterable[str]) -> None:
        """Create the people and studies of a whole file at once, so they are numbered in label
        order over the file, not batch by batch (`write` creates any it still lacks)."""
        if not self.problems:
            self._add_keys(Study, "key", self.studies, set(studies))
            self._add_keys(Person, "label", self.people, set(people))

    def _add_keys(self, model, field: str, known: dict[str, int], keys: set[str]) -> None:
        """Fill `known` (key → pk) for `keys`, creating the studies or people the project lacks."""
        wanted = sorted(keys - known.keys())
        if not wanted:
            return
        known.update(existing_keys(model, field, self.project.pk, wanted))
        missing = [key for key in wanted if key not in known]  # sorted, so they are numbered in key order
        ids = reserve_ids(model, len(missing))
        insert_rows(model, ("id", "project_id", field), [(pk, self.project.pk, key) for pk, key in zip(ids, missing)])
        known.update(zip(missing, ids))
