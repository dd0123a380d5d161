"""Re-grade-only runs (paper App. H): a finished run's distinct answers judged again, by another
judge or the same one (a retest), with nothing generated.

The answers a re-grade judges are bound into its seal (`answers_digest`). When its judging phase
is planned, the source run's predictions are copied into the re-grade run and the ordinary
`plan_judging` makes the slots: one per distinct (task, answer sha256), an empty answer an
operational zero without a call, exactly as in the source run. Copying, rather than teaching
the analysis to read another run's predictions, keeps every reader of a run — final grades,
dashboard, exports, prediction pages — unchanged: a re-grade run looks like any finished run
whose answers happen to have been written by another run.
"""
from __future__ import annotations


from django.db import transaction

from experiments.core.canonical import canonical_json, sha256_text
from experiments.analysis.grades import store_scores
from experiments.execution.planning import plan_judging
from experiments.models import Prediction, Run
from experiments.models.runs import Phase

# What plan_judging grades: an answer (graded by a call) or an empty one (an operational zero).
GRADED_STATUSES = (Prediction.Status.OK, Prediction.Status.EMPTY)
# The fields a copied prediction keeps; its slot stays empty (no request of this run wrote it).
COPIED_FIELDS = ("task_id", "condition", "label", "status", "text", "answer_sha256", "chosen_label",
                 "evidence", "evidence_chars", "budget")


def source_answers(source: Run) -> list[dict]:
    """The distinct (task, answer sha256) pairs of the source run that a re-grade grades, in a
    database-independent order: the task named as the cohort's task list names it."""
    rows = (Prediction.objects.filter(run=source, status__in=GRADED_STATUSES)
            .values_list("task__session__external_id", "task__position", "answer_sha256", "status")
            .distinct())
    pairs = {(session, position, sha): status == Prediction.Status.EMPTY for session, position, sha, status in rows}
    return [{"session": session, "position": position, "answer_sha256": sha, "empty": empty}
            for (session, position, sha), empty in sorted(pairs.items())]


def answers_digest(source: Run) -> dict:
    """The seal's record of what a re-grade of `source` grades: the sha256 of the answer list
    (one canonical JSON line per pair), how many pairs, and how many are operational zeros."""
    answers = source_answers(source)
    lines = "".join(canonical_json({k: a[k] for k in ("session", "position", "answer_sha256")}) + "\n"
                    for a in answers)
    return {
        "source_run": source.pk,
        "answers_sha256": sha256_text(lines),
        "answers": len(answers),
        "operational_zeros": sum(a["empty"] for a in answers),
    }


def copy_predictions(run: Run) -> None:
    """The source run's predictions, as they are, into the re-grade run (idempotent)."""
    source_id = run.protocol.regrade_of_id
    copies = [Prediction(run=run, **row)
              for row in Prediction.objects.filter(run_id=source_id).values(*COPIED_FIELDS).order_by("pk")]
    Prediction.objects.bulk_create(copies, ignore_conflicts=True)
    # the copies' own stored fields: an invalid selection's 0 and the copied candidates now,
    # the grades as this run's judge gives them
    store_scores(run.pk)


def plan_regrade(run: Run) -> None:
    """The planner of a re-grade run: nothing before judging (run_start skips those phases; a
    run somehow there plans no slots and the driver moves on), then the source's answers."""
    if run.phase != Phase.JUDGING:
        return
    with transaction.atomic():
        copy_predictions(run)
        plan_judging(run)
