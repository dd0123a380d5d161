"""What the analysis starts from: each condition's grade per task (paper App. B.3). `dashboard` computes the statistics from it.

`final_grades` is a mapping for pages of a few tasks; `grade_matrix` the same grades as arrays, by aggregate SQL, for the dashboard of a run of any size.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from django.db import transaction
from django.db.models import CharField, Case, OuterRef, PositiveSmallIntegerField, Q, Subquery, Value, When
from django.db.models.functions import Coalesce

from experiments.core.candidates import CANDIDATE_LABELS, derive_column, is_derived, parse_derived, pool_sources
from experiments.core.canonical import canonical_json
from experiments.core.conditions import FINAL
from experiments.models import CohortTask, Grade, Prediction, Protocol, Run
from experiments.analysis.grades_sql import packed_grade_rows
from experiments.analysis.task_grade_store import lock_task_rows, refresh_task_grades


def final_grades(run: Run) -> dict[str, dict[int, int | None]]:
    """condition → {task id → raw grade 0..3, or None when missing}.

    An invalid selection and an empty answer are operational zeros; a selection carries
    the grade of the answer it copied (same text, same grade within a task).
    """
    grades = {
        (task_id, sha): score
        for task_id, sha, score in Grade.objects.filter(run=run).values_list("task_id", "answer_sha256", "score")
    }
    table: dict[str, dict[int, int | None]] = {key: {} for key in run.protocol.conditions}
    for condition, task_id, status, sha in Prediction.objects.filter(run=run, label=FINAL).values_list(
        "condition", "task_id", "status", "answer_sha256"
    ):
        if status == Prediction.Status.INVALID_SELECTION:
            score = 0
        elif status in (Prediction.Status.OK, Prediction.Status.EMPTY):
            score = grades.get((task_id, sha))
        else:
            score = None
        table.setdefault(condition, {})[task_id] = score
    return table


@dataclass(frozen=True)
class GradeMatrix:
    """`final_grades` as arrays in cohort order, for the statistics of many tasks.

    ``grades[i, t]`` is the raw grade of ``conditions[i]`` on the t-th cohort task, NaN when
    missing; ``person`` and ``study`` label each task.  The same grades as `final_grades`.
    """

    conditions: tuple[str, ...]
    task_ids: np.ndarray
    person: np.ndarray
    study: np.ndarray
    grades: np.ndarray

    def row(self, condition: str) -> np.ndarray:
        return self.grades[self.conditions.index(condition)]

    def sha256(self) -> str:
        """Fingerprint of the tasks, their people and studies, and every grade."""
        digest = hashlib.sha256()
        digest.update(canonical_json(list(self.conditions)).encode())
        for array in (self.task_ids, self.person, self.study, self.grades):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


def grade_matrix(run: Run, conditions: Iterable[str]) -> GradeMatrix:
    """The final grades of ``conditions`` on the run's cohort, by one aggregate query.

    A candidate-level key (`core.candidates`, e.g. ``memory(concrete,100w)+oracle``) is derived
    from its pool's candidate grades, read the same way.

    The database joins each final prediction to its grade and returns one packed string
    per condition: for every task a fixed-width cohort position and one grade character
    ('-' missing), so that no prediction travels as a row and the string's order does not
    matter.  The rules are `final_grades`' (operational zeros, shared grades).
    """
    conditions = tuple(dict.fromkeys(conditions))
    cohort_id = run.protocol.cohort_id
    tasks = np.array(
        CohortTask.objects.filter(cohort_id=cohort_id).order_by("position")
        .values_list("position", "task_id", "task__session__person_id", "task__session__study_id"),
        dtype=np.int64).reshape(-1, 4)
    positions = tasks[:, 0]
    grades = np.full((len(conditions), len(positions)), np.nan)
    plain = [c for c in conditions if not is_derived(c)]
    for condition, row in _packed_grades(run, cohort_id, positions, plain, FINAL).items():
        grades[conditions.index(condition)] = row
    # Candidate-level conditions (core.candidates): computed here, in one place, from the
    # candidates' grades by the same rule, so every contrast can name them.
    pools: dict[str, np.ndarray] = {}
    for index, key in enumerate(conditions):
        parsed = parse_derived(key)
        if parsed is None:
            continue
        pool, rule = parsed
        sources = pool_sources(pool, run.protocol.conditions)
        if not sources:
            continue                      # no such pool in the run: the column stays missing
        if pool not in pools:
            pools[pool] = np.vstack([
                _packed_grades(run, cohort_id, positions, [sources[0]], label).get(
                    sources[0], np.full(len(positions), np.nan)) for label in CANDIDATE_LABELS])
        grades[index] = derive_column(rule, pools[pool])
    return GradeMatrix(conditions, tasks[:, 1], tasks[:, 2], tasks[:, 3], grades)


def _packed_grades(run: Run, cohort_id: int, positions: np.ndarray, conditions, label: str) -> dict[str, np.ndarray]:
    """condition → raw grades of its ``label`` answers in cohort order (NaN missing), by one query."""
    out: dict[str, np.ndarray] = {}
    if positions.size and conditions:
        width = len(str(int(positions.max())))
        packed_rows = packed_grade_rows(run.pk, cohort_id, width, conditions, label)
        for condition, packed in packed_rows:
            cells = np.frombuffer(packed.encode("ascii"), dtype=np.uint8).reshape(-1, width + 1)
            digits = cells[:, :width].astype(np.int64) - ord("0")
            where = np.searchsorted(positions, digits @ (10 ** np.arange(width - 1, -1, -1)))
            marks = cells[:, width]
            if (marks == ord("X")).any():
                raise ValueError(f"{condition}: a grade outside 0..9 in the database")
            row = np.full(len(positions), np.nan)
            observed = marks != ord("-")
            row[where[observed]] = marks[observed] - ord("0")
            out[condition] = row
    return out


def store_scores(run_id: int, *, task_id: int | None = None, answer_sha256: str | None = None,
                 status: str | None = None, locked: bool = False) -> int:
    """Write `Prediction.score` (the rule of `final_grades`, for every label) and `copied_label`
    for a run's predictions, or those of one task, of one answer text in it, or of one status;
    one UPDATE, and then, in the same transaction, the `TaskGrades` rows of the tasks it touched
    (`analysis.task_grade_store`), whose locks it takes before the UPDATE (concurrent receipts of one
    task then queue at its row instead of deadlocking on its predictions), unless the caller
    holds them already (`locked`: `execution.outcomes.apply_result` takes them before its own writes).
    Called wherever an answer or a grade is written (planning, re-grade copies); returns the
    number of rows written."""
    predictions = Prediction.objects.filter(run_id=run_id)
    if task_id is not None:
        predictions = predictions.filter(task_id=task_id)
    if answer_sha256 is not None:
        predictions = predictions.filter(answer_sha256=answer_sha256)
    if status is not None:
        predictions = predictions.filter(status=status)
    grade = Grade.objects.filter(run_id=OuterRef("run_id"), task_id=OuterRef("task_id"),
                                 answer_sha256=OuterRef("answer_sha256")).values("score")[:1]
    candidate = (Prediction.objects.filter(run_id=OuterRef("run_id"), task_id=OuterRef("task_id"),
                                           condition=OuterRef("condition"), answer_sha256=OuterRef("answer_sha256"))
                 .exclude(label=FINAL).order_by("label").values("label")[:1])
    cohort_id, conditions = Protocol.objects.filter(runs=run_id).values_list("cohort_id", "conditions").get()
    which = dict(task_id=task_id, answer_sha256=answer_sha256, status=status)
    with transaction.atomic():
        if not locked:
            lock_task_rows(run_id, cohort_id, conditions, **which)
        written = predictions.update(
            score=Case(
                When(status=Prediction.Status.INVALID_SELECTION, then=Value(0)),
                When(status__in=(Prediction.Status.OK, Prediction.Status.EMPTY), then=Subquery(grade)),
                default=None, output_field=PositiveSmallIntegerField()),
            copied_label=Case(
                When(Q(label=FINAL) & ~Q(answer_sha256=""), then=Coalesce(Subquery(candidate), Value(""))),
                default=Value(""), output_field=CharField()))
        refresh_task_grades(run_id, cohort_id, conditions, locked=True, **which)
    return written
