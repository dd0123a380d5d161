"""Services for interview data, tasks and cohorts: `<entity>_<action>(*, ...)`.

Views, management commands and jobs call these; they hold the logic, the callers
only translate input and output.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from experiments.core.canonical import canonical_json
from experiments.core.cohorts import Candidate, draw_cohort
from experiments.core.interviews.records import InterviewFileError, ParsedSession, Problem
from experiments.models import (
    Cohort,
    CohortTask,
    Person,
    Project,
    ScreenerItem,
    Session,
    Study,
    Task,
    TaskSet,
    Turn,
)
from experiments.core.tasks import PAPER_RULE, TaskRule, derive_targets


@dataclass(frozen=True)
class ImportSummary:
    sessions: int
    turns: int
    new_tasks: int
    task_rule: TaskRule

    def __str__(self):
        return f"imported {self.sessions} sessions, {self.turns} turns; {self.new_tasks} new tasks"


def project_get_or_create(*, slug: str) -> Project:
    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    return project


def project_task_rule(project: Project) -> TaskRule:
    """The thresholds of the project's current task set, or the paper's."""
    task_set = project.current_task_set()
    if task_set is None:
        return PAPER_RULE
    return TaskRule(task_set.min_pairs, task_set.min_targets, task_set.max_targets)


@transaction.atomic
def sessions_import(
    *,
    project: Project,
    parsed: list[ParsedSession],
    source_format: str,
    source_file: str,
    user=None,
    task_rule: TaskRule | None = None,
) -> ImportSummary:
    """Store one file's sessions and derive their tasks; all or nothing.

    `parsed` comes from `experiments.core.interviews`, which already checked the file
    itself; here we check what needs the database (session ids already taken).
    """
    ids = [p.session_id for p in parsed]
    taken = set(Session.objects.filter(project=project, external_id__in=ids).values_list("external_id", flat=True))
    if taken:
        raise InterviewFileError(
            [
                Problem(source_file, p.location, "session_id", f"session '{p.session_id}' exists already in this project")
                for p in parsed
                if p.session_id in taken
            ]
        )

    studies = _get_or_create_by_key(Study, project, "key", {p.study_id for p in parsed})
    people = _get_or_create_by_key(Person, project, "label", {p.person_id for p in parsed})
    sessions = Session.objects.bulk_create(
        [
            Session(
                project=project,
                study=studies[p.study_id],
                person=people[p.person_id],
                external_id=p.session_id,
                language=p.language,
                source_format=source_format,
                source_file=source_file[:255],
                imported_by=user,
            )
            for p in parsed
        ]
    )
    turns = [
        Turn(session=session, index=i, speaker=turn.speaker, text=turn.text)
        for session, p in zip(sessions, parsed)
        for i, turn in enumerate(p.turns)
    ]
    Turn.objects.bulk_create(turns, batch_size=2000)
    ScreenerItem.objects.bulk_create(
        [
            ScreenerItem(session=session, index=i, question=q, answer=a)
            for session, p in zip(sessions, parsed)
            for i, (q, a) in enumerate(p.screener)
        ],
        batch_size=2000,
    )
    rule = task_rule or project_task_rule(project)
    new_tasks = tasks_derive(project=project, rule=rule)
    return ImportSummary(sessions=len(sessions), turns=len(turns), new_tasks=new_tasks, task_rule=rule)


def _get_or_create_by_key(model, project, field, keys):
    existing = {getattr(obj, field): obj for obj in model.objects.filter(project=project, **{f"{field}__in": keys})}
    missing = sorted(set(keys) - set(existing))
    for obj in model.objects.bulk_create([model(project=project, **{field: key}) for key in missing]):
        existing[getattr(obj, field)] = obj
    return existing


@transaction.atomic
def tasks_derive(*, project: Project, rule: TaskRule = PAPER_RULE) -> int:
    """Derive targets for every session of the project not yet in the rule's task set.

    Returns the number of new tasks. The task set records the thresholds, and
    becomes the project's current one.
    """
    task_set, created = TaskSet.objects.get_or_create(
        project=project,
        min_pairs=rule.min_pairs,
        min_targets=rule.min_targets,
        max_targets=rule.max_targets,
        defaults={"derived_at": timezone.now()},
    )
    if not created:
        TaskSet.objects.filter(pk=task_set.pk).update(derived_at=timezone.now())
    done = Task.objects.filter(task_set=task_set).values_list("session_id", flat=True)
    pending = Session.objects.filter(project=project).exclude(pk__in=done).values_list("pk", flat=True)
    turns_by_session: dict[int, list[tuple[int, str, str, int]]] = {}
    for pk, session_id, index, speaker, text in (
        Turn.objects.filter(session_id__in=pending)
        .order_by("session_id", "index")
        .values_list("pk", "session_id", "index", "speaker", "text")
        .iterator(chunk_size=5000)
    ):
        turns_by_session.setdefault(session_id, []).append((index, speaker, text, pk))

    tasks = []
    for session_id, rows in turns_by_session.items():
        targets = derive_targets([(index, speaker, text) for index, speaker, text, _ in rows], rule)
        if not targets:
            continue
        pk_by_index = {index: pk for index, _, _, pk in rows}
        record_cut = targets[0].question_index
        tasks.extend(
            Task(
                task_set=task_set,
                session_id=session_id,
                question_turn_id=pk_by_index[t.question_index],
                answer_turn_id=pk_by_index[t.answer_index],
                position=position,
                pair_number=t.pair_number,
                cut=t.question_index,
                record_cut=record_cut,
            )
            for position, t in enumerate(targets)
        )
    Task.objects.bulk_create(tasks, batch_size=2000)
    return len(tasks)


def canonical_task_list(tasks) -> str:
    """The task file a cohort is hashed by: one JSON object per task, in cohort order.

    Text enters through its sha256, so the hash binds the questions and reference
    answers without the task list itself holding private text.
    """
    lines = []
    for task in tasks:
        lines.append(
            canonical_json(
                {
                    "session": task.session.external_id,
                    "person": task.session.person.label,
                    "study": task.session.study.key,
                    "position": task.position,
                    "question_turn": task.question_turn.index,
                    "answer_turn": task.answer_turn.index,
                    "cut": task.cut,
                    "record_cut": task.record_cut,
                    "question_sha256": _sha256(task.question_turn.text),
                    "answer_sha256": _sha256(task.answer_turn.text),
                }
            )
        )
    return "\n".join(lines) + "\n"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cohort_tasks(cohort: Cohort) -> list[Task]:
    """The cohort's tasks in cohort order, with what the task list needs joined in."""
    entries = (
        CohortTask.objects.filter(cohort=cohort)
        .select_related(
            "task__session__person", "task__session__study", "task__question_turn", "task__answer_turn"
        )
        .order_by("position")
    )
    return [entry.task for entry in entries]


class CohortError(ValueError):
    pass


@transaction.atomic
def cohort_draw(
    *,
    project: Project,
    name: str,
    size: int,
    seed: int,
    task_set: TaskSet | None = None,
    exclude_cohorts=(),
    user=None,
) -> Cohort:
    """Draw a cohort of `size` sessions from the eligible sessions of a task set."""
    task_set = task_set or project.current_task_set()
    if task_set is None:
        raise CohortError("the project has no tasks yet: import sessions or derive tasks first")
    if Cohort.objects.filter(project=project, name=name).exists():
        raise CohortError(f"a cohort named '{name}' exists already")
    if size < 1:
        raise CohortError("the size must be at least 1")
    exclude_cohorts = list(exclude_cohorts)
    if any(c.project_id != project.pk for c in exclude_cohorts):
        raise CohortError("excluded cohorts must belong to the same project")
    excluded_people = set(
        Task.objects.filter(cohorts__in=exclude_cohorts).values_list("session__person__label", flat=True)
    )
    eligible = (
        Session.objects.filter(tasks__task_set=task_set)
        .distinct()
        .values_list("external_id", "study__key", "person__label")
    )
    drawn = draw_cohort(
        [Candidate(*row) for row in eligible], size=size, seed=seed, excluded_people=excluded_people
    )
    rule = {
        "procedure": "studies in sorted order, one session per study per round, seeded PCG64 shuffle "
        "within a study, at most one session per person (paper App. G)",
        "size": size,
        "seed": seed,
        "task_rule": {
            "min_pairs": task_set.min_pairs,
            "min_targets": task_set.min_targets,
            "max_targets": task_set.max_targets,
        },
        "excluded_cohorts": sorted(c.name for c in exclude_cohorts),
        "excluded_people": len(excluded_people),
        "drawn_sessions": len(drawn),
    }
    order = {candidate.session_key: i for i, candidate in enumerate(drawn)}
    tasks = sorted(
        Task.objects.filter(task_set=task_set, session__external_id__in=order).select_related(
            "session__person", "session__study", "question_turn", "answer_turn"
        ),
        key=lambda t: (order[t.session.external_id], t.position),
    )
    cohort = Cohort.objects.create(
        project=project,
        task_set=task_set,
        name=name,
        seed=seed,
        requested_size=size,
        rule=rule,
        task_list_sha256=_sha256(canonical_task_list(tasks)),
        created_by=user,
    )
    cohort.excluded_cohorts.set(exclude_cohorts)
    CohortTask.objects.bulk_create([CohortTask(cohort=cohort, task=t, position=i) for i, t in enumerate(tasks)])
    return cohort
