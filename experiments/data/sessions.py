"""Services for interview data, tasks and cohorts: `<entity>_<action>(*, ...)`.

Views, management commands and jobs call these; they hold the logic, the callers
only translate input and output.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Avg, Count, F, OuterRef, Subquery, Sum
from django.db.models.functions import Length
from django.utils import timezone

from experiments.data.cohort_facts import cohort_facts_copy
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.cohorts import Candidate, draw_cohort
from experiments.core.estimate import CohortShape
from experiments.core.interviews.records import InterviewFileError, ParsedSession, printable, unstorable_text_problem
from experiments.core.interviews.streams import FileLabels
from experiments.data.import_store import (
    BATCH_SESSIONS, TASK_COLUMNS, SessionWriter, batches, cycle_collector_paused, task_rows,
)
from experiments.data.import_store_sql import lock_project_imports
from experiments.models import (
    Cohort,
    CohortTask,
    Project,
    ScreenerItem,
    Session,
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
    parsed: Iterable[ParsedSession],
    source_format: str,
    source_file: str,
    user=None,
    task_rule: TaskRule | None = None,
    on_batch: Callable[[int], None] | None = None,
    batch_size: int = BATCH_SESSIONS,
) -> ImportSummary:
    """Store one file's sessions and derive their tasks; all or nothing.

    `parsed` comes from `experiments.core.interviews`: a list the reader already checked,
    or a `SessionStream` read here batch by batch (so a large file is never held whole),
    whose problems are raised after its last session, rolling everything back. Here we
    check what needs the database (session ids already taken). `on_batch(sessions stored)`
    is called after each batch, for a progress page.

    The file's people and studies are numbered in label order over the whole file, whether
    it comes as a list or as a stream (which knows its labels from a first pass), so a file
    gets the same numbering however it is read.
    """
    lock_project_imports(project)
    # Within a file a session id appears once (the readers see to it); so as imports take
    # turns, when the project had no sessions as this one began, no id of the file is taken.
    check_taken = Session.objects.filter(project=project).exists()
    rule = task_rule or project_task_rule(project)
    # Sessions stored earlier but not yet under this rule come first, as a derivation after
    # the import would number them (by session).
    task_set = _task_set_touch(project, rule)
    new_tasks = _derive_pending(project, task_set, rule)
    writer = SessionWriter(project=project, task_set=task_set, rule=rule, source_format=source_format,
                           source_file=printable(source_file)[:255], user=user, check_taken=check_taken)
    with cycle_collector_paused():
        for number, batch in enumerate(batches(parsed, batch_size)):
            if number == 0 and (labels := _file_labels(parsed)) is not None:
                writer.add_labels(labels.people, labels.studies)
            writer.write(batch)
            if on_batch is not None:
                on_batch(writer.sessions)
    if hasattr(parsed, "raise_if_any"):
        parsed.raise_if_any()
    if writer.problems:
        raise InterviewFileError(writer.problems)
    return ImportSummary(sessions=writer.sessions, turns=writer.turns, new_tasks=new_tasks + writer.tasks,
                         task_rule=rule)


def _file_labels(parsed) -> FileLabels | None:
    """The labels of the whole file: a list names them, a stream read them in its first pass."""
    if isinstance(parsed, (list, tuple)):
        return FileLabels(frozenset(p.person_id for p in parsed), frozenset(p.study_id for p in parsed))
    return getattr(parsed, "labels", None)


@transaction.atomic
def tasks_derive(*, project: Project, rule: TaskRule = PAPER_RULE) -> int:
    """Derive targets for every session of the project not yet in the rule's task set.

    Returns the number of new tasks. The task set records the thresholds, and
    becomes the project's current one.
    """
    return _derive_pending(project, _task_set_touch(project, rule), rule)


def _task_set_touch(project: Project, rule: TaskRule) -> TaskSet:
    """The rule's task set, created or marked as derived now (which makes it the current one)."""
    task_set, created = TaskSet.objects.get_or_create(
        project=project,
        min_pairs=rule.min_pairs,
        min_targets=rule.min_targets,
        max_targets=rule.max_targets,
        defaults={"derived_at": timezone.now()},
    )
    if not created:
        TaskSet.objects.filter(pk=task_set.pk).update(derived_at=timezone.now())
    return task_set


def _derive_pending(project: Project, task_set: TaskSet, rule: TaskRule) -> int:
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

    rows = []
    for session_id, turns in turns_by_session.items():
        targets = derive_targets([(index, speaker, text) for index, speaker, text, _ in turns], rule)
        if targets:
            rows.extend(task_rows(targets, session_id, task_set.pk, {index: pk for index, _, _, pk in turns}))
    Task.objects.bulk_create([Task(**dict(zip(TASK_COLUMNS, row))) for row in rows], batch_size=2000)
    return len(rows)


def canonical_task_list(tasks) -> str:
    """The task file a cohort is hashed by: one JSON object per task, in cohort order.

    Text enters through its sha256, so the hash binds the questions and reference
    answers without the task list itself holding private text.
    """
    return canonical_task_lines(
        (task.session.external_id, task.session.person.label, task.session.study.key, task.position,
         task.question_turn.index, task.answer_turn.index, task.cut, task.record_cut,
         sha256_text(task.question_turn.text), sha256_text(task.answer_turn.text))
        for task in tasks)


def canonical_task_lines(rows) -> str:
    """`canonical_task_list` from plain rows: (session, person, study, position, question turn,
    answer turn, cut, record cut, question sha256, answer sha256), in cohort order."""
    lines = []
    for (session, person, study, position, question_turn, answer_turn, cut, record_cut,
         question_sha256, answer_sha256) in rows:
        lines.append(
            canonical_json(
                {
                    "session": session,
                    "person": person,
                    "study": study,
                    "position": position,
                    "question_turn": question_turn,
                    "answer_turn": answer_turn,
                    "cut": cut,
                    "record_cut": record_cut,
                    "question_sha256": question_sha256,
                    "answer_sha256": answer_sha256,
                }
            )
        )
    return "\n".join(lines) + "\n"


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


def cohort_shape(cohort: Cohort) -> CohortShape:
    """Counts and mean text lengths of a cohort, for the protocol's call and token estimate
    (`core.estimate`): five aggregate queries, whatever the cohort's size."""
    tasks = Task.objects.filter(cohort_entries__cohort=cohort)
    counts = tasks.aggregate(tasks=Count("pk"), sessions=Count("session", distinct=True),
                             question=Avg(Length("question_turn__text")), reference=Avg(Length("answer_turn__text")))
    sessions = counts["sessions"] or 0
    if not sessions:
        return CohortShape(sessions=0, tasks=0)
    session_ids = tasks.values("session")
    earliest_cut = Subquery(tasks.filter(session=OuterRef("session")).order_by("record_cut").values("record_cut")[:1])
    # The record: "- " + each permitted participant turn, joined by line breaks (evidence.respondent_record).
    record = (Turn.objects.filter(session__in=session_ids, speaker=Turn.Speaker.PARTICIPANT, index__lt=earliest_cut)
              .aggregate(chars=Sum(Length("text") + 3))["chars"] or 0)
    dialogue = (Turn.objects.filter(session__tasks__cohort_entries__cohort=cohort, index__lt=F("session__tasks__cut"))
                .aggregate(chars=Sum(Length("text")))["chars"] or 0)
    screener = (ScreenerItem.objects.filter(session__in=session_ids)
                .aggregate(chars=Sum(Length("question") + Length("answer")))["chars"] or 0)
    return CohortShape(sessions=sessions, tasks=counts["tasks"], record_chars=record / sessions,
                       dialogue_chars=dialogue / counts["tasks"], question_chars=counts["question"] or 0,
                       reference_chars=counts["reference"] or 0, screener_chars=screener / sessions)


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
    excluded_person_labels=(),
    excluded_list: dict | None = None,
    user=None,
) -> Cohort:
    """Draw a cohort of `size` sessions from the eligible sessions of a task set. People of
    `exclude_cohorts` and the person ids `excluded_person_labels` (an exclusion list, described
    for the rule by `excluded_list`: see `fixed_inputs.cohort_draw_excluding`) are left out, with
    all their sessions."""
    if problem := unstorable_text_problem(name):
        raise CohortError(f"the name {problem}")
    task_set = task_set or project.current_task_set()
    if task_set is None:
        raise CohortError("the project has no tasks yet: import sessions or derive tasks first")
    if task_set.project_id != project.pk:
        # A cohort, its tasks, their sessions and people are one project's (the seal checks' epochs
        # are the project's: `execution.kind_table.checked_sha256`).
        raise CohortError(f"task set {task_set.pk} belongs to another project: draw from one of this project's")
    if Cohort.objects.filter(project=project, name=name).exists():
        raise CohortError(f"a cohort named '{name}' exists already")
    if size < 1:
        raise CohortError("the size must be at least 1")
    exclude_cohorts = list(exclude_cohorts)
    if any(c.project_id != project.pk for c in exclude_cohorts):
        raise CohortError("excluded cohorts must belong to the same project")
    excluded_people = set(
        Task.objects.filter(cohorts__in=exclude_cohorts).values_list("session__person__label", flat=True)
    ) | set(excluded_person_labels)
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
    if excluded_list is not None:  # only then, so earlier rules read as they were
        rule["excluded_people_list"] = excluded_list
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
        task_list_sha256=sha256_text(canonical_task_list(tasks)),
        created_by=user,
    )
    cohort.excluded_cohorts.set(exclude_cohorts)
    CohortTask.objects.bulk_create([CohortTask(cohort=cohort, task=t, position=i) for i, t in enumerate(tasks)])
    cohort_facts_copy(cohort.pk)  # what the run explorer sorts and filters on
    return cohort
