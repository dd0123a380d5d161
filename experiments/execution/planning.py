"""What each phase of a run asks and what its answers become (paper App. B.2, G.1).

Planning turns a phase into Slots — one logical request each, with a stable key — and
the Predictions they feed: memories per session, base generation per task and condition
(byte-identical messages within a task share one slot), decisions over a complete pool
of candidates in their hash display order, and one judge call per distinct answer of a
task. What their answers become is `outcomes`.
"""
from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone

from experiments.analysis.grades import store_scores
from experiments.analysis.journal_reads import settled_calls
from experiments.core.assembly import TaskInput, assemble, assemble_archive_queries, assemble_memory_request, judge_assembler
from experiments.core.candidates import display_key
from experiments.core.canonical import sha256_text
from experiments.core.conditions import (DENSE, FINAL, FUSION, MEM0, MEMGPT_STYLE, SELECTION, WRONG_PERSON,
                                          get_condition, memory_key, prediction_labels)
from experiments.core.evidence import TurnText
from experiments.core.parsers import candidate_display_order, parse_archive_queries
from experiments.core.wrong_person import donor_sessions, wrong_person_seed
from experiments.core.slot_keys import ArchiveKey, DecisionKey, GenerationKey, JudgeKey, MemoryKey
from experiments.data.sessions import cohort_tasks
from experiments.execution import mem0_planning, workflow_planning
from experiments.execution.memory_imports import imported_memories
from experiments.execution.planning_sql import insert_prediction_json, insert_slot_json, share_the_run_row
from experiments.memory_systems import dense_embedder
from experiments.models import Grade, Memory, ModelCall, Prediction, Run, ScreenerItem, Slot, Task, Turn
from experiments.models.runs import Phase

# --- task inputs ------------------------------------------------------------------------------

def task_inputs(tasks: list[Task]) -> dict[int, TaskInput]:
    """TaskInput per task id, loading each session's turns and screener once."""
    session_ids = {t.session_id for t in tasks}
    turns: dict[int, list[TurnText]] = {}
    for session_id, index, speaker, text in (
        Turn.objects.filter(session_id__in=session_ids).order_by("session_id", "index")
        .values_list("session_id", "index", "speaker", "text")
    ):
        turns.setdefault(session_id, []).append(TurnText(index, speaker, text))
    screeners: dict[int, list[tuple[str, str]]] = {}
    for session_id, question, answer in (
        ScreenerItem.objects.filter(session_id__in=session_ids).order_by("session_id", "index")
        .values_list("session_id", "question", "answer")
    ):
        screeners.setdefault(session_id, []).append((question, answer))
    return {
        task.pk: TaskInput(
            question=task.question_turn.text,
            turns=tuple(turns.get(task.session_id, ())),
            cut=task.cut,
            record_cut=task.record_cut,
            screener=tuple(screeners.get(task.session_id, ())),
        )
        for task in tasks
    }


# --- planning ---------------------------------------------------------------------------------

def _new_slot(run, phase, key, role, assembled, *, task=None, task_id=None, session_id=None) -> Slot:
    return Slot(
        run=run,
        phase=phase,
        key=key,
        role=role,
        task_id=task.pk if task is not None else task_id,
        session_id=session_id,
        system=assembled.system,
        user=assembled.user,
        request_sha256=sha256_text(assembled.system + "\x00" + assembled.user),
        prompt_refs=[[ref.name, ref.sha256] for ref in assembled.prompt_refs],
    )


def insert_slots(slots: list[Slot]) -> None:
    """`Slot.objects.bulk_create(slots, ignore_conflicts=True)` for slots of one run, phase and
    role (as each planner makes them), as one statement (`insert_slot_rows`): the ORM's
    per-field preparation and client-side quoting of thousands of prompts cost most of a
    phase's planning, between the last answer of one phase and the first request of the next."""
    groups = {(slot.run_id, slot.phase, slot.role) for slot in slots}
    if len(groups) != 1:
        Slot.objects.bulk_create(slots, ignore_conflicts=True)
        return
    (run_id, phase, role), = groups
    insert_slot_rows(run_id, phase, role, [
        (slot.key, slot.task_id, slot.session_id, slot.system, slot.user, slot.request_sha256, slot.prompt_refs)
        for slot in slots])


def insert_slot_rows(run_id: int, phase: str, role: str, rows: list[tuple]) -> None:
    """New slots of one run, phase and role as plain rows (key, task id, session id, system,
    user, request sha256, prompt refs), those whose key is planned already left alone. The rows
    travel as one JSON document, encoded in C and unpacked by the server (binding thousands of
    prompts as arrays dumps every element in Python)."""
    insert_slot_json([run_id, phase, role, Slot.Status.PENDING, timezone.now(), json.dumps(rows, ensure_ascii=False)])


def insert_prediction_rows(run_id: int, rows: list[list]) -> None:
    """`Prediction.objects.bulk_create(..., ignore_conflicts=True)` for one run's planned predictions
    as plain rows (task id, condition, label, status, slot id, evidence, evidence characters,
    budget), one JSON document (`insert_prediction_json`): a model instance per prediction and the
    ORM's per-field preparation cost a generation part more than assembling its prompts."""
    if rows:
        insert_prediction_json([run_id, json.dumps(rows, ensure_ascii=False)])


def _conditions(run: Run):
    return [get_condition(key) for key in run.protocol.conditions]


def plan_memories(run: Run) -> None:
    specs = sorted({(c.memory_kind, c.memory_words) for c in _conditions(run) if c.needs_memory})
    if not specs and not mem0_planning.uses_mem0(run) and not (run.protocol.seal or {}).get("memory_imports"):
        return  # nothing to plan or import: the cohort is not read (a large one would take seconds)
    tasks = cohort_tasks(run.protocol.cohort)
    first_task_of_session = {}
    for task in tasks:
        first_task_of_session.setdefault(task.session_id, task)
    inputs = task_inputs(list(first_task_of_session.values()))
    imported = imported_memories(run)  # sealed memories of earlier runs: no call (memory_imports)
    covered = {(m.session_id, m.kind, m.words) for m in imported}
    slots = []
    for session_id, task in first_task_of_session.items():
        for kind, words in specs:
            if (session_id, kind, words) in covered:
                continue
            assembled = assemble_memory_request(kind, words, inputs[task.pk])
            key = str(MemoryKey(session_id=session_id, memory_kind=kind, words=words))
            slots.append(_new_slot(run, Phase.MEMORIES, key, Slot.Role.GENERATOR, assembled, session_id=session_id))
    if mem0_planning.uses_mem0(run):
        slots += mem0_planning.extraction_slots(
            run, {session_id: inputs[task.pk].record() for session_id, task in first_task_of_session.items()})
    with transaction.atomic():
        Memory.objects.bulk_create(imported, ignore_conflicts=True)
        insert_slots(slots)


def plan_generation(run: Run, *, mem0: mem0_planning.Prepared | None = None, mem0_outside: bool = False,
                    part: list[Task] | None = None) -> None:
    """Base calls of every condition; byte-identical messages within a task share a slot (G.1).

    `mem0`: Mem0's memories and rankings built outside the run's lock (`mem0_planning.prepare`);
    `mem0_outside`: never build them here (`mem0_planning.OutsideTheLock` instead).
    `part`: plan only these tasks of the cohort (in cohort order; `driver.run_plan_part`): the
    same slots, keys and predictions as the whole phase planned at once (a key shared by tasks
    of two parts, a session's tag choice, is inserted once). Not with Mem0 (its store is built
    for the whole cohort)."""
    tasks = cohort_tasks(run.protocol.cohort) if part is None else part
    inputs = task_inputs(tasks)
    wrong_person = any(c.evidence == WRONG_PERSON for c in _conditions(run))
    donors = wrong_person_donors(run, tasks if part is None or not wrong_person
                                 else cohort_tasks(run.protocol.cohort))  # a part's donors: anywhere
    sessions = {t.session_id for t in tasks}  # a part reads its sessions' memories, and their donors'
    sessions |= {by_session[s] for by_session in donors.values() for s in sessions if s in by_session}
    memories = {
        (m.session_id, m.kind, m.words): m.text
        for m in Memory.objects.filter(run=run, **({} if part is None else {"session_id__in": sessions}))
    }
    mem0_ranked = (mem0_planning.rankings(run, tasks, inputs, mem0, outside=mem0_outside)
                   if mem0_planning.uses_mem0(run) else {})
    embed = dense_embedder.embed if any(c.evidence == DENSE for c in _conditions(run)) else None
    slots: dict[str, Slot] = {}
    predictions = []
    vocabulary = workflow_planning.tag_vocabulary(run) if workflow_planning.uses_tags(run) else []
    for task in tasks:
        for condition in _conditions(run):
            memory = None
            if condition.needs_memory:
                session = donors.get(condition.key, {}).get(task.session_id, task.session_id)
                memory = memories.get((session, condition.memory_kind, condition.memory_words))
                if memory is None or (condition.evidence == MEM0 and task.pk not in mem0_ranked):
                    predictions += [[task.pk, condition.key, label, Prediction.Status.MISSING, None, "", 0, None]
                                    for label in prediction_labels(condition)]
                    continue
            if condition.evidence == MEMGPT_STYLE:
                # Its base call writes the archive queries; the answer comes in the decisions phase.
                assembled = assemble_archive_queries(condition, inputs[task.pk], memory=memory)
                key = archive_slot_key(task, assembled)
                slots.setdefault(key, _new_slot(run, Phase.GENERATION, key, Slot.Role.GENERATOR, assembled, task=task))
                continue
            if condition.workflow in workflow_planning.FIRST_CALL_WORKFLOWS:  # notes or paraphrase; answer: decisions
                slot = workflow_planning.notes_slot(run, task, condition, inputs[task.pk], memory)
                slots.setdefault(slot.key, slot)
                continue
            if condition.workflow == workflow_planning.TAGS:  # the session's tag choice (App. K), shared by its tasks
                slot = workflow_planning.tags_slot(run, task, inputs[task.pk], vocabulary)
                slots.setdefault(slot.key, slot)
                continue
            assembled = assemble(condition, inputs[task.pk], memory=memory, ranked_memories=mem0_ranked.get(task.pk),
                                 embed=embed)
            messages_sha = sha256_text(assembled.system + "\x00" + assembled.user)
            for index, label in enumerate(prediction_labels(condition)):
                key = str(GenerationKey(task_id=task.pk, messages_sha=messages_sha[:32], index=index))
                slot = slots.setdefault(key, _new_slot(run, Phase.GENERATION, key, Slot.Role.GENERATOR,
                                                       assembled, task=task))
                # (its slot's key until the slots are in: `insert_prediction_rows` takes their ids)
                predictions.append([task.pk, condition.key, label, Prediction.Status.PENDING, slot.key,
                                    assembled.evidence, assembled.evidence_chars, assembled.budget])
    with transaction.atomic():
        if part is not None:
            _share_the_run(run)  # planned without the run's lock: as a judging part
        insert_slots(list(slots.values()))
        planned = Slot.objects.filter(run=run, phase=Phase.GENERATION)
        if part is not None:
            planned = planned.filter(key__in=list(slots))  # this part's, not the phase's
        by_key = dict(planned.values_list("key", "pk"))
        for row in predictions:
            if row[4] is not None:
                row[4] = by_key[row[4]]
        insert_prediction_rows(run.pk, predictions)


def wrong_person_donors(run: Run, tasks) -> dict[str, dict[int, int]]:
    """condition key → session → the session whose memory it is shown (App. K's control: a seeded
    derangement of the cohort's sessions across people, `core.wrong_person`; the seed is in the key)."""
    people = {task.session_id: task.session.person_id for task in tasks}
    return {c.key: donor_sessions(people, wrong_person_seed(c.key))
            for c in _conditions(run) if c.evidence == WRONG_PERSON}


def archive_slot_key(task: Task, assembled) -> str:
    """Identical query messages within a task share one query call, as answers do."""
    return str(ArchiveKey(task_id=task.pk, messages_sha=sha256_text(assembled.system + chr(0) + assembled.user)[:32]))


def candidate_pool_key(task: Task, condition) -> str:
    """Fusion and selection of the same memory show their pool in the same order (B.2)."""
    return display_key(task.pk, memory_key(condition.memory_kind, condition.memory_words))


def plan_decisions(run: Run) -> None:
    deciding = [c for c in _conditions(run) if c.workflow in (FUSION, SELECTION, *workflow_planning.DECIDING_WORKFLOWS)
                or c.evidence == MEMGPT_STYLE]
    if not deciding:
        return
    tasks = cohort_tasks(run.protocol.cohort)
    inputs = task_inputs(tasks)
    memories = {(m.session_id, m.kind, m.words): m.text for m in Memory.objects.filter(run=run)}
    replies = _archive_replies(run)
    notes = {**workflow_planning.notes_replies(run), **workflow_planning.tags_replies(run)}
    vocabulary = workflow_planning.tag_vocabulary(run) if workflow_planning.uses_tags(run) else []
    targets = workflow_planning.length_targets(run, deciding)  # once per run: every task's rewrite the same
    candidates = {
        (p.task_id, p.condition, p.label): p
        for p in Prediction.objects.filter(run=run, condition__in=[c.key for c in deciding])
    }
    slots, predictions = [], []
    for task in tasks:
        for condition in deciding:
            if condition.workflow in workflow_planning.DECIDING_WORKFLOWS:  # App. F: notes or pruning
                memory = memories.get((task.session_id, condition.memory_kind, condition.memory_words))
                slot, prediction = workflow_planning.decision(run, task, condition, inputs[task.pk], memory,
                                                              drafts=candidates, replies=notes, vocabulary_labels=vocabulary,
                                                              targets=targets)
                slots += [slot] if slot is not None else []
                predictions += [prediction] if prediction is not None else []
                continue
            if condition.evidence == MEMGPT_STYLE:
                memory = memories.get((task.session_id, condition.memory_kind, condition.memory_words))
                if memory is None:
                    continue  # generation planning recorded it missing
                query_call = assemble_archive_queries(condition, inputs[task.pk], memory=memory)
                reply = replies.get(archive_slot_key(task, query_call))
                queries = parse_archive_queries(reply) if reply is not None else None
                if queries is None or not queries.usable:
                    # No reply, or one that does not parse: recorded as such, never redrawn (App. H).
                    status = Prediction.Status.MISSING if queries is None else Prediction.Status.UNPARSED_QUERIES
                    predictions.append(Prediction(run=run, task=task, condition=condition.key, label=FINAL,
                                                  status=status))
                    continue
                assembled = assemble(condition, inputs[task.pk], memory=memory, archive_queries=queries.queries)
                slot = _new_slot(run, Phase.DECISIONS, str(DecisionKey(task_id=task.pk, condition=condition.key)),
                                 Slot.Role.GENERATOR, assembled, task=task)
                slots.append(slot)
                predictions.append(Prediction(run=run, task=task, condition=condition.key, label=FINAL, slot=slot,
                                              evidence=assembled.evidence, evidence_chars=assembled.evidence_chars,
                                              budget=assembled.budget))
                continue
            pool = [candidates.get((task.pk, condition.key, label)) for label in prediction_labels(condition)]
            usable = {Prediction.Status.OK, Prediction.Status.EMPTY}
            if any(p is None or p.status not in usable for p in pool):
                # A missing candidate blocks the decision: missing, never a smaller pool (B.2).
                predictions.append(Prediction(run=run, task=task, condition=condition.key, label=FINAL,
                                              status=Prediction.Status.MISSING))
                continue
            ordered = candidate_display_order(candidate_pool_key(task, condition),
                                              [(p.label, p.text) for p in pool])
            memory = memories[(task.session_id, condition.memory_kind, condition.memory_words)]
            assembled = assemble(condition, inputs[task.pk], memory=memory,
                                 candidates=[text for _, text in ordered])
            slot = _new_slot(run, Phase.DECISIONS, str(DecisionKey(task_id=task.pk, condition=condition.key)),
                             Slot.Role.GENERATOR, assembled, task=task)
            slots.append(slot)
            predictions.append(Prediction(run=run, task=task, condition=condition.key, label=FINAL, slot=slot,
                                          evidence=assembled.evidence, evidence_chars=assembled.evidence_chars,
                                          budget=assembled.budget))
    with transaction.atomic():
        insert_slots(slots)
        by_key = dict(Slot.objects.filter(run=run, phase=Phase.DECISIONS).values_list("key", "pk"))
        for prediction in predictions:
            if prediction.slot is not None:
                prediction.slot_id = by_key[prediction.slot.key]
        Prediction.objects.bulk_create(predictions, ignore_conflicts=True)


def _archive_replies(run: Run) -> dict[str, str]:
    """Slot key → the reply of the archive-query call that settled it (`journal_reads.settled_calls`:
    its last completed attempt, never a late receipt of an earlier one)."""
    return dict(settled_calls(ModelCall.objects.filter(slot__run=run, slot__phase=Phase.GENERATION,
                                                       slot__key__startswith=ArchiveKey.prefix()))
                .values_list("slot__key", "text"))


def plan_judging(run: Run, *, first: int | None = None) -> bool:
    """One judge call per distinct answer text within a task (B.2); selection inherits its
    candidate's grade and an empty answer is an operational zero, so neither adds a call.

    Planned from one plain query (no model instances): it runs between the last answer of
    generation and the first judge call, where every idle in-flight place waits for it.
    `first`: plan only the next so many calls (in task order; slots planned before are kept)
    and return False if more are due."""
    answers = (
        Prediction.objects.filter(run=run, status__in=[Prediction.Status.OK, Prediction.Status.EMPTY])
        .order_by("task_id", "pk")
        .values_list("task_id", "answer_sha256", "status", "text", "task__question_turn__text",
                     "task__answer_turn__text")
    )
    planned = set(Slot.objects.filter(run=run, phase=Phase.JUDGING).values_list("key", flat=True))
    assemble_one = judge_assembler()  # the prompt files read once per part, not twice per call
    rows, grades, seen = [], [], set()
    # A part fetches about what it plans: the first part, planned while every place is empty,
    # need not wait for 2,000 answers with their texts.
    chunk_size = 2000 if first is None else min(2000, max(100, 2 * first))
    for task_id, answer_sha, status, text, question, reference in answers.iterator(chunk_size=chunk_size):
        key = (task_id, answer_sha)
        if key in seen:
            continue
        seen.add(key)
        slot_key = str(JudgeKey(task_id=task_id, answer_sha=answer_sha))
        if slot_key in planned:
            continue  # planned by an earlier part
        if status == Prediction.Status.EMPTY:
            grades.append(Grade(run=run, task_id=task_id, answer_sha256=answer_sha,
                                status=Grade.Status.OPERATIONAL_ZERO, score=0))
            continue
        if first is not None and len(rows) == first:
            complete = False
            break
        assembled = assemble_one(question, reference, text)
        # The row `_new_slot` would make, without a model instance per call.
        rows.append((slot_key, task_id, None, assembled.system, assembled.user,
                     sha256_text(assembled.system + "\x00" + assembled.user),
                     [[ref.name, ref.sha256] for ref in assembled.prompt_refs]))
    else:
        complete = True
    with transaction.atomic():
        _share_the_run(run)
        insert_slot_rows(run.pk, Phase.JUDGING, Slot.Role.JUDGE, rows)
        if grades:
            Grade.objects.bulk_create(grades, ignore_conflicts=True)
            # empty answers are graded now (operational zeros); every other score comes with its grade
            store_scores(run.pk, status=Prediction.Status.EMPTY)
    return complete


def _share_the_run(run: Run) -> None:
    """Take the run's row FOR KEY SHARE before inserting anything that refers to it.

    A part planned without the run's lock (`driver.run_plan_part`) would otherwise take that lock
    only in its foreign-key checks (deferred to its commit), after its new slots' keys are in the
    unique index: a drive holding the run FOR UPDATE and planning the same keys then waits for
    the part while the part waits for the drive (a deadlock, seen at 128 in flight). Taken first, the part
    waits for the drive before it holds anything the drive needs. Under the drive's own lock
    (a whole phase planned by `run_drive`) it is a no-op."""
    share_the_run_row(run.pk)


# An interview protocol's planners (`execution.kind_table` gives every kind its own).
PLANNERS = {
    Phase.MEMORIES: plan_memories,
    Phase.GENERATION: plan_generation,
    Phase.DECISIONS: plan_decisions,
    Phase.JUDGING: plan_judging,
}
