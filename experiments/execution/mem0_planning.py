"""Mem0 in a run (paper App. H): its extraction calls as journaled slots, its memories and ranking at planning.

- Memories phase: one slot per session, `mem0|<session id>`, whose messages are the ones Mem0's
  `add` sends for the session's permitted record (its own prompt builders,
  `mem0_store.extraction_request`). The journal sends it to the protocol's generator like every
  other slot: reserved first, one outcome per reservation, retried only by its rules.
- Base generation: in the planning process, a Mem0 store over embedded Qdrant (a folder of this
  run and process, rebuilt each time) adds each session's record with its extraction answered from
  the journal (`mem0_store.JournalReplay`: nothing is sent again), records what the add left
  (`Mem0Extraction`: memories, or why none), and ranks the memories against each task's question.
  The store's adds and searches run outside the run's lock (`prepare`); only their result is
  written under it, if the journal's extraction answers are still those it was built from.

A session whose extraction call has no usable answer gets missing Mem0 predictions, as a missing
memory does; one whose reply Mem0 could not parse gets none of its memories (Mem0 says nothing
then) and is answered from an empty excerpt: counted and shown on the run page.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from experiments.analysis.journal_reads import settled_calls
from experiments.core.canonical import sha256_text
from experiments.core.conditions import CONDITIONS, MEM0, get_condition
from experiments.core.evidence import RankedMemories
from experiments.core.slot_keys import Mem0Key
from experiments.memory_systems import mem0_store
from experiments.models import Mem0Extraction, ModelCall, Protocol, Run, Slot
from experiments.models.runs import Phase

PROMPT_NAME = "mem0ai ADDITIVE_EXTRACTION_PROMPT"


def uses_mem0(run: Run) -> bool:
    # A survey protocol's conditions are not interview conditions (`core.survey.prompt`).
    return any(key in CONDITIONS and get_condition(key).evidence == MEM0 for key in run.protocol.conditions)


def is_extraction(slot: Slot) -> bool:
    return slot.phase == Phase.MEMORIES and slot.key.startswith(Mem0Key.prefix())


def planning_problem(run: Run) -> str | None:
    """Why this process cannot plan the run's current phase for Mem0, or None (checked before planning)."""
    if run.phase not in (Phase.MEMORIES, Phase.GENERATION) or run.protocol.kind == Protocol.Kind.REGRADE \
            or not uses_mem0(run):
        return None
    return mem0_store.unavailable_reason()


def extraction_slots(run: Run, records: dict[int, str]) -> list[Slot]:
    """One extraction slot per session (`records`: session id -> the permitted record)."""
    slots = []
    for session_id, record in records.items():
        system, user = mem0_store.extraction_request(record)
        slots.append(Slot(
            run=run, phase=Phase.MEMORIES, key=str(Mem0Key(session_id=session_id)), role=Slot.Role.GENERATOR,
            session_id=session_id, system=system, user=user,
            request_sha256=sha256_text(system + "\x00" + user),
            prompt_refs=[[PROMPT_NAME, sha256_text(system)]],
        ))
    return slots


def store_folder(run: Run) -> Path:
    """This run's and this process's own store: an embedded Qdrant folder opens in one process only."""
    return Path(settings.OWNWORDS_MEM0_DIR) / f"run-{run.pk}" / f"{socket.gethostname()}-{os.getpid()}"


def _answers(run: Run) -> dict[int, tuple[Slot, str | None]]:
    """session id -> (its extraction slot, the journal's answer text or None when not usable)."""
    slots = {slot.pk: slot for slot in Slot.objects.filter(run=run, phase=Phase.MEMORIES,
                                                          key__startswith=Mem0Key.prefix())}
    # The settling call of each slot (its last completed attempt), never a late receipt of an earlier one.
    texts = dict(settled_calls(ModelCall.objects.filter(slot_id__in=slots)).values_list("slot_id", "text"))
    return {
        slot.session_id: (slot, texts.get(slot.pk) if slot.status == Slot.Status.OK else None)
        for slot in slots.values()
    }


class OutsideTheLock(Exception):
    """Mem0's store is to be built outside the run's lock first (`prepare`), then planning again."""


@dataclass(frozen=True)
class Prepared:
    """Mem0's memories and rankings of a run, computed outside its lock (`prepare`) from the
    journal's extraction answers as `answers_state` says they were; written by `rankings` under
    the lock only if the journal still says the same."""

    run_id: int
    answers_state: tuple
    rows: tuple  # unsaved Mem0Extraction rows
    by_task: dict


def _answers_state(answers: dict[int, tuple[Slot, str | None]]) -> tuple:
    return tuple(sorted((session_id, slot.pk, slot.status, None if text is None else sha256_text(text))
                        for session_id, (slot, text) in answers.items()))


def prepare(run: Run, tasks, inputs) -> Prepared:
    """Mem0's adds and searches (the slow part: an embedded Qdrant, an embedding per memory and
    question), reading the journal only: run outside the run's lock, so reservations and
    answers of the run are never held up by them (`driver.run_drive`)."""
    answers = _answers(run)
    first_task = {}
    for task in tasks:
        first_task.setdefault(task.session_id, task)
    by_task: dict[int, RankedMemories] = {}
    rows = []
    with mem0_store.Mem0Store(store_folder(run), model=str(run.protocol.generator.get("model", ""))) as store:
        for session_id, task in first_task.items():
            slot, text = answers.get(session_id, (None, None))
            if text is None:
                why = "no extraction slot" if slot is None else f"the extraction slot is {slot.status}"
                rows.append(Mem0Extraction(run=run, session_id=session_id, slot=slot,
                                           outcome=Mem0Extraction.Outcome.NO_ANSWER, note=why))
                continue
            added = store.add(str(session_id), inputs[task.pk].record(), (slot.system, slot.user), text)
            rows.append(Mem0Extraction(run=run, session_id=session_id, slot=slot, outcome=added.outcome,
                                       memories=added.memories, note=added.note))
            position = {memory_id: index for index, memory_id in enumerate(added.ids)}
            for other in (t for t in tasks if t.session_id == session_id):
                ranked = store.rank(str(session_id), inputs[other.pk].question, top_k=len(added.ids))
                by_task[other.pk] = RankedMemories(tuple(added.memories),
                                                   tuple(position[i] for i in ranked if i in position))
    return Prepared(run.pk, _answers_state(answers), tuple(rows), by_task)


def rankings(run: Run, tasks, inputs, prepared: Prepared | None = None, *, outside: bool = False
             ) -> dict[int, RankedMemories]:
    """Mem0's ranked memories per task id; a task of a session without a usable extraction has none.
    The session's outcomes are written (`Mem0Extraction`).

    `prepared` (computed outside the run's lock) is used when the journal's extraction answers are
    still those it was computed from; otherwise, with `outside`, nothing is computed here
    (`OutsideTheLock`: the caller builds it again outside the lock), else here, as before."""
    if prepared is None or prepared.run_id != run.pk or prepared.answers_state != _answers_state(_answers(run)):
        if outside:
            raise OutsideTheLock
        prepared = prepare(run, tasks, inputs)
    Mem0Extraction.objects.filter(run=run).delete()  # a phase planned again starts from the journal again
    Mem0Extraction.objects.bulk_create(list(prepared.rows))
    return prepared.by_task


def extraction_counts(run: Run) -> dict | None:
    """The run page's Mem0 line: sessions per outcome, and the sessions without memories; None
    when the run has no Mem0 condition or its memories are not built yet."""
    rows = list(Mem0Extraction.objects.filter(run=run).select_related("session").order_by("session__external_id"))
    if not rows:
        return None
    labels = dict(Mem0Extraction.Outcome.choices)
    counts = {}
    for row in rows:
        counts[row.outcome] = counts.get(row.outcome, 0) + 1
    return {
        "sessions": len(rows),
        "counts": [(labels[outcome], counts[outcome]) for outcome in labels if outcome in counts],
        "without": [(row.session.external_id, labels[row.outcome], row.note) for row in rows
                    if row.outcome != Mem0Extraction.Outcome.MEMORIES],
    }
