"""The paper's fixed inputs, stored: a cohort from a fixed task list instead of derived tasks,
and the person-exclusion list a cohort draw leaves out (file formats: `core.fixed_inputs`).

A fixed task list becomes a task set of its own (`TaskSet.fixed_list_sha256`, thresholds 0, never
the project's current set) holding exactly the listed targets, and a cohort of all of them in file
order. Each target's question must be an interviewer turn whose next turn is the participant's
reply (the reference answer); a session's record cut is the earliest of its listed cuts (§3.1), as
for derived tasks. A person with several listed sessions keeps them all: the analysis clusters by
person, so they travel together in every bootstrap draw (App. B.3).
"""
from __future__ import annotations

import hashlib

from django.db import transaction
from django.utils import timezone

from experiments.core.canonical import sha256_text
from experiments.core.fixed_input_lists import FixedInputError, parse_person_list, parse_task_list
from experiments.core.interviews.records import printable, unstorable_text_problem
from experiments.core.tasks import substantive_pairs
from experiments.data.sessions import CohortError, canonical_task_list, cohort_draw
from experiments.models import Cohort, CohortTask, Person, Project, Session, Task, TaskSet, Turn


def _bytes_sha(data: bytes | str) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()


@transaction.atomic
def cohort_from_task_list(*, project: Project, name: str, data: bytes | str, label: str = "task list",
                          user=None) -> Cohort:
    """A frozen cohort of exactly the listed targets; FixedInputError or CohortError, nothing stored."""
    if problem := unstorable_text_problem(name):
        raise CohortError(f"the name {problem}")
    if not name.strip() or len(name) > 100:
        raise CohortError("a cohort name is 1 to 100 characters")
    if Cohort.objects.filter(project=project, name=name).exists():
        raise CohortError(f"a cohort named '{name}' exists already")
    targets = parse_task_list(data, label)
    file_sha = _bytes_sha(data)
    sessions = {s.external_id: s for s in Session.objects.filter(
        project=project, external_id__in={t.session_id for t in targets}).select_related("person", "study")}
    turns: dict[int, dict[int, Turn]] = {}
    for turn in Turn.objects.filter(session__in=sessions.values()).order_by("session_id", "index"):
        turns.setdefault(turn.session_id, {})[turn.index] = turn
    problems = []
    for target in targets:
        session = sessions.get(target.session_id)
        where = f"line {target.line}"
        if session is None:
            problems.append(f"{where}: no session {printable(target.session_id)!r} in this project")
            continue
        question = turns.get(session.pk, {}).get(target.question_turn)
        reply = turns.get(session.pk, {}).get(target.question_turn + 1)
        if question is None or question.speaker != Turn.Speaker.INTERVIEWER:
            problems.append(f"{where}: turn {target.question_turn} of {target.session_id} is not an interviewer turn")
        elif reply is None or reply.speaker != Turn.Speaker.PARTICIPANT:
            problems.append(f"{where}: turn {target.question_turn} of {target.session_id} is not followed by the "
                            "participant's reply")
    if problems:
        raise FixedInputError(f"{label}: nothing imported:\n" + "\n".join(problems[:50])
                              + (f"\n… and {len(problems) - 50} more" if len(problems) > 50 else ""))

    task_set, _ = TaskSet.objects.get_or_create(
        project=project, fixed_list_sha256=file_sha,
        defaults={"min_pairs": 0, "min_targets": 0, "max_targets": 0, "derived_at": timezone.now()})
    by_session: dict[int, list[int]] = {}
    for target in targets:
        by_session.setdefault(sessions[target.session_id].pk, []).append(target.question_turn)
    existing = {(t.session_id, t.cut): t for t in Task.objects.filter(task_set=task_set)}
    new_tasks = []
    for session_id, cuts in by_session.items():
        ordered = sorted(cuts)
        session_turns = turns[session_id]
        pairs = substantive_pairs([(t.index, t.speaker, t.text) for t in session_turns.values()])
        for position, cut in enumerate(ordered):
            if (session_id, cut) in existing:
                continue
            new_tasks.append(Task(
                task_set=task_set, session_id=session_id, question_turn=session_turns[cut],
                answer_turn=session_turns[cut + 1], position=position,
                pair_number=sum(1 for q, _ in pairs if q < cut), cut=cut, record_cut=ordered[0]))
    Task.objects.bulk_create(new_tasks)
    found = {(t.session_id, t.cut): t for t in Task.objects.filter(task_set=task_set).select_related(
        "session__person", "session__study", "question_turn", "answer_turn")}
    tasks = [found[(sessions[t.session_id].pk, t.question_turn)] for t in targets]
    rule = {
        "procedure": "fixed task list imported from a file, in file order (no derivation, no draw)",
        "file": printable(label)[:200],
        "file_sha256": file_sha,
        "targets": len(tasks),
        "drawn_sessions": len(by_session),
        "people": len({s.person_id for s in sessions.values()}),
    }
    cohort = Cohort.objects.create(project=project, task_set=task_set, name=name, seed=0,
                                   requested_size=len(by_session), rule=rule,
                                   task_list_sha256=sha256_text(canonical_task_list(tasks)), created_by=user)
    CohortTask.objects.bulk_create([CohortTask(cohort=cohort, task=t, position=i) for i, t in enumerate(tasks)])
    return cohort


def cohort_draw_excluding(*, project: Project, name: str, size: int, seed: int, exclusion_list: bytes | str,
                          label: str = "exclusion list", **draw) -> Cohort:
    """`data.cohort_draw` leaving out the people an exclusion list names (with any excluded cohorts');
    the cohort's rule records the list's sha256, its length and how many of its people exist here."""
    people = parse_person_list(exclusion_list, label)
    known = set(Person.objects.filter(project=project, label__in=people).values_list("label", flat=True))
    return cohort_draw(project=project, name=name, size=size, seed=seed, excluded_person_labels=people,
                       excluded_list={"file": printable(label)[:200], "sha256": _bytes_sha(exclusion_list),
                                      "people": len(people), "people_in_project": len(known)}, **draw)
