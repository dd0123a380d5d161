"""`TaskGrades`: one row per run × task holding each condition's final grade as one
character, kept equal to the final predictions' stored scores wherever they are written — the
engine's one-statement journal results, `store_scores` of a task, of an answer text (a regrade of
one answer) and of a whole run (a re-grade's copies), missing grades — and the explorer lists the
same tasks in the same order reading it as reading the predictions, on a case counted by hand.
"""
import threading
from urllib.parse import urlencode

import pytest
from django.db import connection, connections, transaction
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from experiments.analysis.explorer import ExplorerQuery, explorer_neighbours, explorer_page
from experiments.analysis.grades import final_grades, store_scores
from experiments.analysis.task_grade_store import refresh_task_grades, task_grades_statement
from experiments.core.conditions import FINAL
from experiments.execution import control
from experiments.execution.driver import run_inline
from experiments.models import CohortTask, Grade, Prediction, Run, TaskGrades
from experiments.models.runs import Phase
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY
from tests.engine_helpers import Sleeps, gemini_model
from tests.explorer_helpers import grade_by_hand, hand_scores, set_answer
from tests.test_prediction_score import roles, source  # noqa: F401 - a real run and its LLM roles

pytestmark = pytest.mark.django_db
# the journal's one-statement results and concurrent row locks are PostgreSQL's (CI runs these there)


def rows(run) -> dict[int, str]:
    return dict(TaskGrades.objects.filter(run=run).values_list("task_id", "grades"))


def expected_rows(run) -> dict[int, str]:
    """What the rows must say: `final_grades`' grade of each condition, in the protocol's order."""
    table = final_grades(run)
    tasks = CohortTask.objects.filter(cohort=run.protocol.cohort).values_list("task_id", flat=True)
    return {t: "".join("-" if table[key].get(t) is None else str(table[key][t]) for key in run.protocol.conditions)
            for t in tasks}


def assert_rows_right(run):
    stored, expected = rows(run), expected_rows(run)
    # a task without a row has no grade at all
    assert {t: stored.get(t, "-" * len(run.protocol.conditions)) for t in expected} == expected


@pytest.fixture
def hand_run(rated_run):
    grade_by_hand(rated_run)
    return rated_run


def test_the_engine_keeps_the_rows_through_its_journal_a_regrade_and_the_backfill(
        source, cast, server, http):  # noqa: F811
    # every answer and grade of this run came through the journal's one-statement result path
    stored = rows(source)
    assert_rows_right(source)
    assert any("-" in g for g in stored.values()) and any(set(g) <= set("0123") for g in stored.values())
    # a re-grade run: its copies stored at once (`store_scores` of the run), its grades by the journal
    protocol = control.regrade_create(source=source, user=cast["owner"], judge=gemini_model(server))
    regrade = Run.objects.create(protocol=protocol)
    control.run_start(run=regrade)
    regrade = run_inline(regrade.pk, client=http, sleep=Sleeps())
    assert regrade.status == Run.Status.FINISHED
    assert_rows_right(regrade)
    assert rows(regrade) != stored  # another judge: Alpha is 2 now, not 3
    # the migration's backfill (the same statement over the whole run) writes the same rows
    TaskGrades.objects.filter(run=source).delete()
    refresh_task_grades(source.pk, source.protocol.cohort_id, source.protocol.conditions)
    assert rows(source) == stored


def test_store_scores_keeps_the_row_of_a_task_an_answer_and_a_whole_run(hand_run):
    run = hand_run
    conditions = run.protocol.conditions
    ids = list(CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")
               .values_list("task_id", flat=True))
    assert_rows_right(run)
    order = [conditions.index(k) for k in (MEMORY, OWNWORDS, QUESTION_ONLY)]
    for i in (0, 5, 6):  # checked by hand: memory i % 4, OwnWords 3 − i % 4, question-only 0, missing at 5
        row = rows(run)[ids[i]]
        assert [row[j] for j in order] == [str(i % 4), str(3 - i % 4), "-" if i == 5 else "0"]
    # a regrade of one answer text: its grade changes, the row with it
    memory = Prediction.objects.get(run=run, task_id=ids[6], condition=MEMORY, label=FINAL)
    Grade.objects.filter(run=run, task_id=ids[6], answer_sha256=memory.answer_sha256).update(score=0)
    with CaptureQueriesContext(connection) as captured:
        store_scores(run.pk, task_id=ids[6], answer_sha256=memory.answer_sha256)
    # the scores, the protocol, the row's lock and the row (and a savepoint around them), whatever
    # the number of conditions
    assert len([q for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]) == 4
    assert rows(run)[ids[6]][order[0]] == "0"
    # a grade that goes missing, and an answer that becomes missing
    Grade.objects.filter(run=run, task_id=ids[6], answer_sha256=memory.answer_sha256).update(score=None)
    store_scores(run.pk, answer_sha256=memory.answer_sha256)
    set_answer(run, ids[7], OWNWORDS, FINAL, None, None)
    assert rows(run)[ids[6]][order[0]] == "-" and rows(run)[ids[7]][order[1]] == "-"
    assert_rows_right(run)
    # a whole run (a re-grade's copies) rewrites stale rows
    TaskGrades.objects.filter(run=run, task_id__in=ids[:3]).update(grades="333")
    store_scores(run.pk)
    assert_rows_right(run)


def journal_statement(sql, params):
    """Run a result statement as the journal does: inside a WITH whose `moved` has a row."""
    with connection.cursor() as cursor:
        cursor.execute(f"WITH moved AS (SELECT 1 AS id), result AS ({sql}) SELECT 1", params)


def test_the_journal_statement_writes_a_new_row_and_changes_only_its_conditions_in_an_old_one(hand_run):
    run = hand_run
    conditions = run.protocol.conditions
    task = CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")[1].task_id  # memory 1, OwnWords 2
    own = Prediction.objects.get(run=run, task_id=task, condition=OWNWORDS, label=FINAL)
    graded_own = ("p.answer_sha256 = %s AND p.status IN (%s, %s)", [own.answer_sha256, "ok", "empty"])
    statement = task_grades_statement(run.pk, task, run.protocol.cohort_id, conditions, *graded_own,
                                      "NULLIF(CAST(%s AS CHAR(1)), '-')", ["0"])
    TaskGrades.objects.filter(run=run, task_id=task).delete()
    journal_statement(*statement)
    expected = ["-"] * len(conditions)
    expected[conditions.index(MEMORY)], expected[conditions.index(OWNWORDS)] = "1", "0"
    expected[conditions.index(QUESTION_ONLY)] = "0"
    assert rows(run)[task] == "".join(expected)  # a new row: the others' grades as the predictions hold them
    # an existing row: only OwnWords' character changes (another worker may have written the others)
    TaskGrades.objects.filter(run=run, task_id=task).update(grades="9" * len(conditions))
    journal_statement(*statement)
    expected = ["9"] * len(conditions)
    expected[conditions.index(OWNWORDS)] = "0"
    assert rows(run)[task] == "".join(expected)
    # a missing grade (the judge's reply had none) is '-'
    journal_statement(*task_grades_statement(run.pk, task, run.protocol.cohort_id, conditions, *graded_own, "NULL", []))
    assert rows(run)[task][conditions.index(OWNWORDS)] == "-"


@pytest.mark.django_db(transaction=True)
def test_two_graders_of_one_task_at_once_lose_neither_grade(hand_run):
    """The first holds its transaction open after writing its grade; the second, writing another
    condition's grade of the same task, waits for it and then sees it."""
    run = hand_run
    task = CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")[1].task_id
    answers = {c: Prediction.objects.get(run=run, task_id=task, condition=c, label=FINAL).answer_sha256
               for c in (MEMORY, OWNWORDS)}
    first_wrote, release = threading.Event(), threading.Event()

    def grade(condition, score, hold):
        try:
            with transaction.atomic():
                Grade.objects.filter(run=run, task_id=task, answer_sha256=answers[condition]).update(score=score)
                store_scores(run.pk, task_id=task, answer_sha256=answers[condition])
                if hold:
                    first_wrote.set()
                    release.wait(10)
        finally:
            connections.close_all()

    first = threading.Thread(target=grade, args=(MEMORY, 3, True))
    first.start()
    assert first_wrote.wait(10)
    second = threading.Thread(target=grade, args=(OWNWORDS, 0, False))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # waiting for the first's row lock
    release.set()
    first.join(10)
    second.join(10)
    conditions = run.protocol.conditions
    row = rows(run)[task]
    assert (row[conditions.index(MEMORY)], row[conditions.index(OWNWORDS)]) == ("3", "0")
    assert_rows_right(run)


def listed(run, params, *, use_rows: bool):
    """The explorer's whole filtered, sorted list (task ids in order) and its count, reading the
    TaskGrades rows or (a run whose final answers may not all exist yet) the predictions."""
    if not use_rows:
        run.phase, run.planned_phase = Phase.DECISIONS, Phase.DECISIONS  # in memory only
    query = ExplorerQuery.from_params(QueryDict(urlencode(params, doseq=True)), run.protocol.conditions)
    assert not query.errors, query.errors
    with CaptureQueriesContext(connection) as captured:
        page = explorer_page(run, query, size=100)
    sql = " ".join(q["sql"] for q in captured.captured_queries)
    filters_grades = bool(query.grades) or bool(query.a and query.b) or query.ga is not None or query.gb is not None
    assert (TaskGrades._meta.db_table in sql) == (use_rows and filters_grades)
    ids = [row["task_id"] for row in page.rows]
    neighbours = [explorer_neighbours(run, query, t) for t in ids[:3]]
    run.refresh_from_db()
    return ids, page.total, neighbours, len(captured)


QUERIES = [
    {"condition": OWNWORDS, "grade": "3"},
    {"condition": [OWNWORDS, MEMORY], "grade": ["2", "1"]},
    {"a": OWNWORDS, "ga": "3", "b": MEMORY, "gb": "0"},
    {"a": OWNWORDS, "b": MEMORY},
    {"a": OWNWORDS, "b": MEMORY, "sort": "-diff"},
    {"a": OWNWORDS, "b": QUESTION_ONLY, "sort": "diff"},
    {"sort": f"-grade:{MEMORY}"},
    {"sort": f"grade:{QUESTION_ONLY}"},
    {"condition": QUESTION_ONLY, "grade": "0", "sort": f"-grade:{OWNWORDS}"},
    {"missing": "1", "a": MEMORY, "b": OWNWORDS, "sort": "-diff"},
]


def test_the_explorer_lists_the_same_tasks_in_the_same_order_with_and_without_the_rows(hand_run):
    run = hand_run
    ids = list(CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")
               .values_list("task_id", flat=True))
    for params in QUERIES:
        with_rows, without = listed(run, params, use_rows=True), listed(run, params, use_rows=False)
        assert with_rows[:3] == without[:3], params
        assert with_rows[3] == without[3] == 3, params  # the page, its count, its facts and its cells
    # counted by hand: OwnWords − memory = 3 − 2(i % 4), descending, ties in cohort order
    by_diff = listed(run, QUERIES[4], use_rows=True)[0]
    assert by_diff == [ids[i] for k in range(4) for i in range(20) if i % 4 == k]
    # OwnWords − question-only = 3 − i % 4, ascending, where they differ (not i % 4 = 3, not the
    # missing question-only grade of task 5)
    by_diff = listed(run, QUERIES[5], use_rows=True)[0]
    assert by_diff == [ids[i] for k in (2, 1, 0) for i in range(20) if i % 4 == k and i != 5]
    # by question-only's grade: the missing one (task 5) last
    assert listed(run, QUERIES[7], use_rows=True)[0] == [ids[i] for i in range(20) if i != 5] + [ids[5]]
    assert listed(run, QUERIES[2], use_rows=True)[0] == [ids[i] for i in range(0, 20, 4)]
    # and they follow a change of grade at once
    set_answer(run, ids[1], OWNWORDS, FINAL, "a better answer", 3)
    assert listed(run, QUERIES[0], use_rows=True)[0] == [ids[i] for i in (0, 1, 4, 8, 12, 16)]
    assert hand_scores(1)[OWNWORDS] == 2  # it was 2 before
