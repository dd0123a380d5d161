"""What each phase of a run asks and what its answers become (paper App. B.2, G.1).

Planning turns a phase into Slots — one logical request each, with a stable key — and
the Predictions they feed: memories per session, base generation per task and condition
(byte-identical messages within a task share one slot), decisions over a complete pool
of candidates in their hash display order, and one judge call per distinct answer of a
task. `apply_result` turns a slot's terminal outcome into memories, answers and grades.
"""
from __future__ import annotations


from django.db import connection, transaction

from experiments.analysis.grades import store_scores
from experiments.core.canonical import sha256_text
from experiments.core.assembly import TaskInput, assemble, assemble_judge, assemble_memory_request
from experiments.core.conditions import FINAL, FUSION, SELECTION, get_condition, memory_key, prediction_labels
from experiments.core.evidence import TurnText
from experiments.models import Grade, Memory, Prediction, Run, ScreenerItem, Slot, Task, Turn
from experiments.models.runs import Phase
from experiments.core.parsers import candidate_display_order, parse_judge, parse_selection
from experiments.data import cohort_tasks
from experiments.execution.survey import SURVEY_PLANNERS, apply_survey_result, is_survey_protocol, is_survey_slot

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

def _new_slot(run, phase, key, role, assembled, *, task=None, session_id=None) -> Slot:
    return Slot(
        run=run,
        phase=phase,
        key=key,
        role=role,
        task=task,
        session_id=session_id,
        system=assembled.system,
        user=assembled.user,
        request_sha256=sha256_text(assembled.system + "\x00" + assembled.user),
        prompt_refs=[[ref.name, ref.sha256] for ref in assembled.prompt_refs],
    )


def _conditions(run: Run):
    return [get_condition(key) for key in run.protocol.conditions]


def plan_memories(run: Run) -> None:
    specs = sorted({(c.memory_kind, c.memory_words) for c in _conditions(run) if c.needs_memory})
    tasks = cohort_tasks(run.protocol.cohort)
    first_task_of_session = {}
    for task in tasks:
        first_task_of_session.setdefault(task.session_id, task)
    inputs = task_inputs(list(first_task_of_session.values()))
    slots = []
    for session_id, task in first_task_of_session.items():
        for kind, words in specs:
            assembled = assemble_memory_request(kind, words, inputs[task.pk])
            slots.append(_new_slot(run, Phase.MEMORIES, f"memory|{session_id}|{kind}|{words}",
                                   Slot.Role.GENERATOR, assembled, session_id=session_id))
    Slot.objects.bulk_create(slots, ignore_conflicts=True)


def plan_generation(run: Run) -> None:
    """Base calls of every condition; byte-identical messages within a task share a slot (G.1)."""
    tasks = cohort_tasks(run.protocol.cohort)
    inputs = task_inputs(tasks)
    memories = {
        (m.session_id, m.kind, m.words): m.text for m in Memory.objects.filter(run=run)
    }
    slots: dict[str, Slot] = {}
    predictions = []
    for task in tasks:
        for condition in _conditions(run):
            memory = None
            if condition.needs_memory:
                memory = memories.get((task.session_id, condition.memory_kind, condition.memory_words))
                if memory is None:
                    predictions += [
                        Prediction(run=run, task=task, condition=condition.key, label=label,
                                   status=Prediction.Status.MISSING)
                        for label in prediction_labels(condition)
                    ]
                    continue
            assembled = assemble(condition, inputs[task.pk], memory=memory)
            messages_sha = sha256_text(assembled.system + "\x00" + assembled.user)
            for index, label in enumerate(prediction_labels(condition)):
                key = f"gen|{task.pk}|{messages_sha[:32]}|{index}"
                slot = slots.setdefault(key, _new_slot(run, Phase.GENERATION, key, Slot.Role.GENERATOR,
                                                       assembled, task=task))
                predictions.append(
                    Prediction(run=run, task=task, condition=condition.key, label=label, slot=slot,
                               evidence=assembled.evidence, evidence_chars=assembled.evidence_chars,
                               budget=assembled.budget)
                )
    with transaction.atomic():
        Slot.objects.bulk_create(list(slots.values()), ignore_conflicts=True)
        by_key = dict(Slot.objects.filter(run=run, phase=Phase.GENERATION).values_list("key", "pk"))
        for prediction in predictions:
            if prediction.slot is not None:
                prediction.slot_id = by_key[prediction.slot.key]
        Prediction.objects.bulk_create(predictions, ignore_conflicts=True)


def candidate_pool_key(task: Task, condition) -> str:
    """Fusion and selection of the same memory show their pool in the same order (B.2)."""
    return f"task {task.pk}|{memory_key(condition.memory_kind, condition.memory_words)}"


def plan_decisions(run: Run) -> None:
    deciding = [c for c in _conditions(run) if c.workflow in (FUSION, SELECTION)]
    if not deciding:
        return
    tasks = cohort_tasks(run.protocol.cohort)
    inputs = task_inputs(tasks)
    memories = {(m.session_id, m.kind, m.words): m.text for m in Memory.objects.filter(run=run)}
    candidates = {
        (p.task_id, p.condition, p.label): p
        for p in Prediction.objects.filter(run=run, condition__in=[c.key for c in deciding])
    }
    slots, predictions = [], []
    for task in tasks:
        for condition in deciding:
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
            slot = _new_slot(run, Phase.DECISIONS, f"decision|{task.pk}|{condition.key}",
                             Slot.Role.GENERATOR, assembled, task=task)
            slots.append(slot)
            predictions.append(Prediction(run=run, task=task, condition=condition.key, label=FINAL, slot=slot,
                                          evidence=assembled.evidence, evidence_chars=assembled.evidence_chars,
                                          budget=assembled.budget))
    with transaction.atomic():
        Slot.objects.bulk_create(slots, ignore_conflicts=True)
        by_key = dict(Slot.objects.filter(run=run, phase=Phase.DECISIONS).values_list("key", "pk"))
        for prediction in predictions:
            if prediction.slot is not None:
                prediction.slot_id = by_key[prediction.slot.key]
        Prediction.objects.bulk_create(predictions, ignore_conflicts=True)


def plan_judging(run: Run) -> None:
    """One judge call per distinct answer text within a task (B.2); selection inherits its
    candidate's grade and an empty answer is an operational zero, so neither adds a call."""
    answers = (
        Prediction.objects.filter(run=run, status__in=[Prediction.Status.OK, Prediction.Status.EMPTY])
        .select_related("task__question_turn", "task__answer_turn")
        .order_by("task_id", "pk")
    )
    slots, grades, seen = [], [], set()
    for prediction in answers:
        key = (prediction.task_id, prediction.answer_sha256)
        if key in seen:
            continue
        seen.add(key)
        if prediction.status == Prediction.Status.EMPTY:
            grades.append(Grade(run=run, task=prediction.task, answer_sha256=prediction.answer_sha256,
                                status=Grade.Status.OPERATIONAL_ZERO, score=0))
            continue
        assembled = assemble_judge(prediction.task.question_turn.text, prediction.task.answer_turn.text,
                                   prediction.text)
        slots.append(_new_slot(run, Phase.JUDGING, f"judge|{prediction.task_id}|{prediction.answer_sha256}",
                               Slot.Role.JUDGE, assembled, task=prediction.task))
    with transaction.atomic():
        Slot.objects.bulk_create(slots, ignore_conflicts=True)
        Grade.objects.bulk_create(grades, ignore_conflicts=True)
        # empty answers are graded now (operational zeros); every other score comes with its grade
        store_scores(run.pk, status=Prediction.Status.EMPTY)


def _by_kind(phase, interview_planner):
    """The phase's planner for the run's kind: interview tasks, or survey respondents (issue 16)."""
    def plan(run: Run) -> None:
        (SURVEY_PLANNERS[phase] if is_survey_protocol(run.protocol) else interview_planner)(run)
    plan.__name__ = interview_planner.__name__
    return plan


PLANNERS = {
    Phase.MEMORIES: _by_kind(Phase.MEMORIES, plan_memories),
    Phase.GENERATION: _by_kind(Phase.GENERATION, plan_generation),
    Phase.DECISIONS: _by_kind(Phase.DECISIONS, plan_decisions),
    Phase.JUDGING: _by_kind(Phase.JUDGING, plan_judging),
}


# --- outcomes into results --------------------------------------------------------------------

def apply_result(slot: Slot, outcome_text: str | None, usable: bool) -> None:
    """Turn a slot's terminal outcome into memories, predictions or grades."""
    text = outcome_text if usable else None
    if is_survey_slot(slot):
        apply_survey_result(slot, text)
    elif slot.phase == Phase.MEMORIES:
        _, session_id, kind, words = slot.key.split("|")
        Memory.objects.update_or_create(
            run_id=slot.run_id, session_id=int(session_id), kind=kind, words=int(words),
            defaults={"text": text or None, "slot": slot},
        )
    elif slot.phase == Phase.GENERATION:
        _set_slot_answer(slot.pk, text)
        store_scores(slot.run_id, task_id=slot.task_id)
    elif slot.phase == Phase.DECISIONS:
        prediction = Prediction.objects.get(slot=slot)
        condition = get_condition(prediction.condition)
        if condition.workflow == FUSION or text is None:
            _set_answer(Prediction.objects.filter(pk=prediction.pk), text)
        else:
            _apply_selection(prediction, condition, text)
        store_scores(slot.run_id, task_id=prediction.task_id)
    elif slot.phase == Phase.JUDGING:
        _, task_id, answer_sha = slot.key.split("|")
        grade = {**_grade_values(text), "slot_id": slot.pk}
        # One statement (INSERT … ON CONFLICT DO UPDATE) on the path of every judge answer, where
        # update_or_create takes four (a locking read, a savepoint, the write, its release).
        Grade.objects.bulk_create(
            [Grade(run_id=slot.run_id, task_id=int(task_id), answer_sha256=answer_sha, **grade)],
            update_conflicts=True, unique_fields=["run", "task", "answer_sha256"], update_fields=list(grade),
        )
        store_scores(slot.run_id, task_id=int(task_id), answer_sha256=answer_sha)


def result_statements(slot: Slot, outcome_text: str | None) -> list[tuple[str, list]] | None:
    """`apply_result` of a generation or judging slot as SQL statements (sql, params) that the
    journal runs inside its record's one statement, each only when the `moved` CTE has a row
    (the slot did move); None for the phases whose result needs more (PostgreSQL only).

    They keep `Prediction.score` and `copied_label` as `analysis.grades.store_scores` would:
    one statement cannot update a row twice, so the rule is written into the same UPDATE (a
    generation answer) or into a second one over other rows (a grade, onto the predictions
    that gave its answer)."""
    P, G = Prediction._meta.db_table, Grade._meta.db_table
    if is_survey_slot(slot):
        return None  # a survey answer is parsed per item (`survey.apply_survey_result`)
    if slot.phase == Phase.GENERATION:
        status, text, answer_sha = _answer_values(outcome_text)
        graded = status in (Prediction.Status.OK, Prediction.Status.EMPTY)
        # A final answer written here is a one-shot's: the first candidate of its own condition
        # with the same text is what it copied (none exists for one-shot conditions today).
        return [(f"UPDATE {P} p SET status = %s, text = %s, answer_sha256 = %s, "
                 f"score = (SELECT g.score FROM {G} g WHERE %s AND g.run_id = p.run_id "
                 "AND g.task_id = p.task_id AND g.answer_sha256 = %s LIMIT 1), "
                 f"copied_label = CASE WHEN p.label = %s AND %s <> '' THEN COALESCE((SELECT c.label FROM {P} c "
                 "WHERE c.run_id = p.run_id AND c.task_id = p.task_id AND c.condition = p.condition "
                 "AND c.answer_sha256 = %s AND c.label <> %s ORDER BY c.label LIMIT 1), '') ELSE '' END "
                 "WHERE p.slot_id = %s AND EXISTS (SELECT 1 FROM moved)",
                 [status, text, answer_sha, graded, answer_sha, FINAL, answer_sha, answer_sha, FINAL, slot.pk])]
    if slot.phase == Phase.JUDGING:
        _, task_id, answer_sha = slot.key.split("|")
        grade = {**_grade_values(outcome_text), "slot_id": slot.pk}
        columns = ["run_id", "task_id", "answer_sha256", *grade]
        # Typed: with parameters bound on the server a bare NULL in a SELECT list would be text.
        typed = [f"CAST(%s AS {Grade._meta.get_field(name.removesuffix('_id')).db_type(connection)})"
                 for name in columns]
        store = (f"INSERT INTO {G} ({', '.join(columns)}) "
                 f"SELECT {', '.join(typed)} WHERE EXISTS (SELECT 1 FROM moved) "
                 "ON CONFLICT (run_id, task_id, answer_sha256) DO UPDATE SET "
                 + ", ".join(f"{name} = EXCLUDED.{name}" for name in grade),
                 [slot.run_id, int(task_id), answer_sha, *grade.values()])
        scored = (f"UPDATE {P} SET score = CAST(%s AS smallint) WHERE run_id = %s AND task_id = %s "
                  "AND answer_sha256 = %s AND status IN (%s, %s) AND EXISTS (SELECT 1 FROM moved)",
                  [grade["score"], slot.run_id, int(task_id), answer_sha,
                   Prediction.Status.OK, Prediction.Status.EMPTY])
        return [store, scored]
    return None


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
    values = _answer_values(text)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Prediction._meta.db_table} SET status = %s, text = %s, answer_sha256 = %s "
                       "WHERE slot_id = %s", [*values, slot_id])


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
