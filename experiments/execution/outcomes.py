"""What a slot's terminal outcome becomes (paper App. B.2): memories, answers, the decisions of
fusion and selection, grades, and each prediction's stored grade (`analysis.grades.store_scores`).

`apply_result` does it with the ORM; `result_statements` gives the same writes as plain SQL
statements, so that the journal records an answer and its results in one round trip.
"""
from __future__ import annotations

import functools

from django.db import connection

from experiments.analysis.grades import store_scores
from experiments.analysis.task_grade_store import lock_task_rows, task_grades_statement
from experiments.core.canonical import sha256_text
from experiments.core.conditions import FINAL, SELECTION, get_condition, prediction_labels
from experiments.core.parsers import candidate_display_order, parse_judge, parse_selection
from experiments.core.slot_keys import PairwiseJudgeKey, parse_slot_key
from experiments.execution import mem0_planning
from experiments.execution.outcomes_sql import set_slot_answer
from experiments.execution.survey_planning import apply_survey_result, is_survey_slot
from experiments.execution.planning import candidate_pool_key
from experiments.models import Grade, Memory, Prediction, Slot
from experiments.models.runs import Phase


def apply_result(slot: Slot, outcome_text: str | None, usable: bool) -> None:
    """Turn a slot's terminal outcome into memories, predictions or grades.

    A result of a task takes the task's `TaskGrades` row first (`task_grade_store.lock_task_rows`),
    before any prediction: concurrent receipts of one task then wait at that row in turn, where
    two decisions writing their own prediction and then the task's (`store_scores`) deadlocked."""
    text = outcome_text if usable else None
    if is_survey_slot(slot):
        apply_survey_result(slot, text)  # parsed per item (`execution.survey_planning`)
    elif mem0_planning.is_extraction(slot):
        return  # its answer stays in the journal, where Mem0's add reads it (`mem0_planning.rankings`)
    elif slot.phase == Phase.MEMORIES:
        key = parse_slot_key(slot.key)
        Memory.objects.update_or_create(
            run_id=slot.run_id, session_id=key.session_id, kind=key.memory_kind, words=key.words,
            defaults={"text": text or None, "slot": slot},
        )
    elif slot.phase == Phase.GENERATION:
        locked = _lock_task(slot, slot.task_id)
        _set_slot_answer(slot.pk, text)
        store_scores(slot.run_id, task_id=slot.task_id, locked=locked)
    elif slot.phase == Phase.DECISIONS:
        prediction = Prediction.objects.get(slot=slot)
        _lock_task(slot, prediction.task_id)
        condition = get_condition(prediction.condition)
        if condition.workflow != SELECTION or text is None:  # fusion and the MemGPT-style answer
            _set_answer(Prediction.objects.filter(pk=prediction.pk), text)
        else:
            _apply_selection(prediction, condition, text)
        store_scores(slot.run_id, task_id=prediction.task_id, locked=True)
    elif slot.phase == Phase.JUDGING:
        key = parse_slot_key(slot.key)
        if isinstance(key, PairwiseJudgeKey):
            return  # a pairwise verdict stays in the journal, where its analysis reads it (`analysis.pairwise_verdicts`)
        task_id, answer_sha = key.task_id, key.answer_sha
        _lock_task(slot, task_id)
        grade = {**_grade_values(text), "slot_id": slot.pk}
        # One statement (INSERT … ON CONFLICT DO UPDATE) on the path of every judge answer, where
        # update_or_create takes four (a locking read, a savepoint, the write, its release).
        Grade.objects.bulk_create(
            [Grade(run_id=slot.run_id, task_id=task_id, answer_sha256=answer_sha, **grade)],
            update_conflicts=True, unique_fields=["run", "task", "answer_sha256"], update_fields=list(grade),
        )
        store_scores(slot.run_id, task_id=task_id, answer_sha256=answer_sha, locked=True)


def _lock_task(slot: Slot, task_id: int | None) -> bool:
    """Take the task's `TaskGrades` row (in the caller's transaction); False without a task."""
    if task_id is None:
        return False
    protocol = slot.run.protocol
    lock_task_rows(slot.run_id, protocol.cohort_id, protocol.conditions, task_id=task_id)
    return True


# The journal's statement names its i-th result statement `result{i}` (`receipt_sql`): the
# others read the first, the task's `TaskGrades` row, so that they run after its upsert has
# locked the row (the order of `apply_result`; unread CTEs run in no promised order).
_AFTER_TASK_ROW = "(SELECT count(*) FROM result0) >= 0"


def result_statements(slot: Slot, outcome_text: str | None) -> list[tuple[str, list]] | None:
    """`apply_result` of a generation or judging slot as SQL statements (sql, params) that the
    journal runs inside its record's one statement, each only when the `moved` CTE has a row
    (the slot did move); None for the phases whose result needs more.

    The first is the task's `TaskGrades` row (`analysis.task_grade_store`), whose upsert locks it;
    the others wait for it (`_AFTER_TASK_ROW`), as `apply_result` locks the row first. They keep
    `Prediction.score` and `copied_label` as `analysis.grades.store_scores` would: one statement
    cannot update a row twice, so the rule is written into the same UPDATE (a generation answer)
    or into a second one over other rows (a grade, onto the predictions that gave its answer)."""
    P, G = Prediction._meta.db_table, Grade._meta.db_table
    if is_survey_slot(slot):
        return None  # a survey answer is parsed per item (`survey_planning.apply_survey_result`)
    if slot.phase == Phase.GENERATION:
        if slot.task_id is None:
            return None  # its task's TaskGrades row needs the task: `apply_result` refreshes the run's
        status, text, answer_sha = _answer_values(outcome_text)
        graded = status in (Prediction.Status.OK, Prediction.Status.EMPTY)
        # its task's TaskGrades: the answer's grade, if its text was graded already
        grades = task_grades_statement(
            slot.run_id, slot.task_id, slot.run.protocol.cohort_id, slot.run.protocol.conditions,
            "p.slot_id = %s", [slot.pk],
            *((f"(SELECT CAST(g.score AS CHAR(1)) FROM {G} g WHERE g.run_id = %s AND g.task_id = %s "
               "AND g.answer_sha256 = %s AND g.score BETWEEN 0 AND 9 LIMIT 1)",
               [slot.run_id, slot.task_id, answer_sha]) if graded else ("NULL", [])))
        # A final answer written here is a one-shot's: the first candidate of its own condition
        # with the same text is what it copied (none exists for one-shot conditions today).
        answer = (f"UPDATE {P} p SET status = %s, text = %s, answer_sha256 = %s, "
                  f"score = (SELECT g.score FROM {G} g WHERE %s AND g.run_id = p.run_id "
                  "AND g.task_id = p.task_id AND g.answer_sha256 = %s LIMIT 1), "
                  f"copied_label = CASE WHEN p.label = %s AND %s <> '' THEN COALESCE((SELECT c.label FROM {P} c "
                  "WHERE c.run_id = p.run_id AND c.task_id = p.task_id AND c.condition = p.condition "
                  "AND c.answer_sha256 = %s AND c.label <> %s ORDER BY c.label LIMIT 1), '') ELSE '' END "
                  f"WHERE p.slot_id = %s AND EXISTS (SELECT 1 FROM moved) AND {_AFTER_TASK_ROW}",
                  [status, text, answer_sha, graded, answer_sha, FINAL, answer_sha, answer_sha, FINAL, slot.pk])
        return [grades, answer]
    if slot.phase == Phase.JUDGING:
        key = parse_slot_key(slot.key)
        if isinstance(key, PairwiseJudgeKey):
            return []  # nothing but the receipt: the verdict is the journal's answer
        task_id, answer_sha = key.task_id, key.answer_sha
        grade = {**_grade_values(outcome_text), "slot_id": slot.pk}
        columns = ["run_id", "task_id", "answer_sha256", *grade]
        store = (_grade_store_sql(tuple(columns)), [slot.run_id, task_id, answer_sha, *grade.values()])
        scored = (f"UPDATE {P} SET score = CAST(%s AS smallint) WHERE run_id = %s AND task_id = %s "
                  f"AND answer_sha256 = %s AND status IN (%s, %s) AND EXISTS (SELECT 1 FROM moved) "
                  f"AND {_AFTER_TASK_ROW}",
                  [grade["score"], slot.run_id, task_id, answer_sha,
                   Prediction.Status.OK, Prediction.Status.EMPTY])
        digit = "-" if grade["score"] is None or not 0 <= grade["score"] <= 9 else str(grade["score"])
        grades = task_grades_statement(
            slot.run_id, task_id, slot.run.protocol.cohort_id, slot.run.protocol.conditions,
            "p.answer_sha256 = %s AND p.status IN (%s, %s)",
            [answer_sha, Prediction.Status.OK, Prediction.Status.EMPTY],
            "NULLIF(CAST(%s AS CHAR(1)), '-')", [digit])
        return [grades, store, scored]
    return None


@functools.lru_cache(maxsize=8)
def _grade_store_sql(columns: tuple[str, ...]) -> str:
    """The grade's upsert for these columns: the same text for every judge answer, whose column
    types Django would otherwise work out again per answer (a fifth of a judge receipt's CPU)."""
    G = Grade._meta.db_table
    # Typed: with parameters bound on the server a bare NULL in a SELECT list would be text.
    typed = [f"CAST(%s AS {Grade._meta.get_field(name.removesuffix('_id')).db_type(connection)})"
             for name in columns]
    updated = [name for name in columns if name not in ("run_id", "task_id", "answer_sha256")]
    return (f"INSERT INTO {G} ({', '.join(columns)}) "
            f"SELECT {', '.join(typed)} WHERE EXISTS (SELECT 1 FROM moved) AND {_AFTER_TASK_ROW} "
            "ON CONFLICT (run_id, task_id, answer_sha256) DO UPDATE SET "
            + ", ".join(f"{name} = EXCLUDED.{name}" for name in updated))


def _answer_values(text: str | None) -> list:
    if text is None:
        return [Prediction.Status.MISSING, None, ""]
    return [Prediction.Status.OK if text else Prediction.Status.EMPTY, text, sha256_text(text)]


def _grade_values(text: str | None) -> dict:
    parsed = parse_judge(text) if text is not None else None
    return dict(
        status=Grade.Status.OK if parsed and parsed.score is not None else Grade.Status.MISSING,
        score=parsed.score if parsed else None,
        rationale=(parsed.rationale or "") if parsed else "",
        parse_error=(parsed.error or "") if parsed else "no usable judge response",
    )


def _set_slot_answer(slot_id: int, text: str | None) -> None:
    """`_set_answer` for the predictions of one generation slot, as one plain statement: it is on
    the path of every answer, where building the ORM's update costs more than running it."""
    set_slot_answer(slot_id, _answer_values(text))


def _set_answer(predictions, text: str | None) -> None:
    if text is None:
        predictions.update(status=Prediction.Status.MISSING, text=None, answer_sha256="")
    else:
        status = Prediction.Status.OK if text else Prediction.Status.EMPTY
        predictions.update(status=status, text=text, answer_sha256=sha256_text(text))


def _apply_selection(prediction: Prediction, condition, response: str) -> None:
    """A valid id copies the whole selected answer; anything else is an operational zero."""
    selection = parse_selection(response)
    if not selection.usable:
        prediction.status = Prediction.Status.INVALID_SELECTION
        prediction.text = None
        prediction.answer_sha256 = ""
        prediction.save(update_fields=["status", "text", "answer_sha256"])
        return
    pool = {
        p.label: p
        for p in Prediction.objects.filter(run_id=prediction.run_id, task_id=prediction.task_id,
                                           condition=condition.key, label__in=prediction_labels(condition))
    }
    ordered = candidate_display_order(candidate_pool_key(prediction.task, condition),
                                      [(label, pool[label].text) for label in prediction_labels(condition)])
    chosen_label = ordered[int(selection.candidate_id[1:]) - 1][0]
    chosen = pool[chosen_label]
    prediction.status = chosen.status
    prediction.text = chosen.text
    prediction.answer_sha256 = chosen.answer_sha256
    prediction.chosen_label = chosen_label
    prediction.save(update_fields=["status", "text", "answer_sha256", "chosen_label"])
