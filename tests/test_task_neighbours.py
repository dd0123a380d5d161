"""The task page's previous/next and "k of n" in one query: the same tasks and places
as the list counted by hand, whether the grades are read from the `TaskGrades` rows (a finished
run) or from the final predictions (a run whose answers may not all exist yet), with ties in the
difference and missing grades; a sort by one grade alone reads the rows, and a cohort task
without its row sends it back to the predictions with the same answer."""
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from experiments.analysis.explorer import ExplorerQuery, explorer_neighbours, explorer_page
from experiments.core.conditions import FINAL
from experiments.models import CohortTask, TaskGrades
from experiments.models.runs import Phase
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY
from tests.explorer_helpers import grade_by_hand, hand_scores, set_answer

pytestmark = pytest.mark.django_db
NONE = {"previous": None, "next": None, "place": None, "total": None}


def hand_grades(i: int) -> dict:
    """`hand_scores`, with question-only also missing at task 4 and OwnWords missing at task 9."""
    grades = hand_scores(i)
    if i == 4:
        grades[QUESTION_ONLY] = None
    if i == 9:
        grades[OWNWORDS] = None
    return grades


@pytest.fixture
def ids(rated_run):
    ids = grade_by_hand(rated_run)
    set_answer(rated_run, ids[4], QUESTION_ONLY, FINAL, None, None)
    set_answer(rated_run, ids[9], OWNWORDS, FINAL, None, None)
    return ids


def rank_down(grade):  # a descending sort's rank of a grade, missing last
    return 4 if grade is None else 3 - grade


# (query string, which tasks i the list keeps, each task's sort key), counted by hand
CASES = [
    # OwnWords − memory = 3 − 2(i % 4), descending: five tasks tied at each difference; where they
    # differ (not task 9, OwnWords missing)
    ({"a": OWNWORDS, "b": MEMORY, "sort": "-diff"},
     lambda g: g[OWNWORDS] is not None and g[OWNWORDS] != g[MEMORY],
     lambda g, i: (3 - (g[OWNWORDS] - g[MEMORY]), i)),
    # OwnWords 3 against question-only, ascending difference: task 4 (question-only missing) last
    ({"a": OWNWORDS, "ga": "3", "b": QUESTION_ONLY, "sort": "diff"},
     lambda g: g[OWNWORDS] == 3,
     lambda g, i: (7 if g[QUESTION_ONLY] is None else g[OWNWORDS] - g[QUESTION_ONLY] + 3, i)),
    # every task by question-only's grade, descending (all 0: cohort order; tasks 4, 5 missing last)
    ({"sort": f"-grade:{QUESTION_ONLY}"}, lambda g: True, lambda g, i: (rank_down(g[QUESTION_ONLY]), i)),
    # every task by OwnWords' grade, ascending (task 9 missing last)
    ({"sort": f"grade:{OWNWORDS}"}, lambda g: True,
     lambda g, i: (4 if g[OWNWORDS] is None else g[OWNWORDS], i)),
    # memory 1, by OwnWords descending
    ({"condition": MEMORY, "grade": "1", "sort": f"-grade:{OWNWORDS}"}, lambda g: g[MEMORY] == 1,
     lambda g, i: (rank_down(g[OWNWORDS]), i)),
    # a missing grade somewhere, by the cohort order descending
    ({"missing": "1", "sort": "-task"}, lambda g: None in g.values(), lambda g, i: (-i,)),
]


def expected(ids, keeps, key) -> dict[int, dict]:
    listed = sorted((i for i in range(len(ids)) if keeps(hand_grades(i))), key=lambda i: key(hand_grades(i), i))
    out = {task_id: NONE for task_id in ids}
    for place, i in enumerate(listed):
        out[ids[i]] = {"previous": ids[listed[place - 1]] if place else None,
                       "next": ids[listed[place + 1]] if place + 1 < len(listed) else None,
                       "place": place + 1, "total": len(listed)}
    return out


def neighbours(run, params, ids, *, queries: int) -> dict[int, dict]:
    query = ExplorerQuery.from_params(QueryDict(urlencode(params, doseq=True)), run.protocol.conditions)
    assert not query.errors, query.errors
    out = {}
    for position, task_id in enumerate(ids):
        with CaptureQueriesContext(connection) as captured:
            out[task_id] = explorer_neighbours(run, query, task_id, position)
        assert len(captured) == queries, (params, task_id, [q["sql"] for q in captured.captured_queries])
        assert explorer_neighbours(run, query, task_id) == out[task_id]  # the same without the position
    # and the explorer's own list, page by page, agrees
    listed = [row["task_id"] for row in explorer_page(run, query, size=100).rows]
    assert listed == sorted((t for t in ids if out[t]["place"]), key=lambda t: out[t]["place"])
    return out


def test_neighbours_and_places_as_counted_by_hand(rated_run, ids):
    run = rated_run
    assert len(ids) == 20
    for params, keeps, key in CASES:
        hand = expected(ids, keeps, key)
        assert any(v["place"] for v in hand.values()), params  # each case lists tasks
        assert neighbours(run, params, ids, queries=1) == hand, params  # the TaskGrades rows
        run.phase, run.planned_phase = Phase.DECISIONS, Phase.DECISIONS  # in memory only: the predictions
        try:
            assert neighbours(run, params, ids, queries=1) == hand, params
        finally:
            run.refresh_from_db()
    # spot checks of the hand count: the first tie group of OwnWords − memory is i % 4 = 0
    by_diff = expected(ids, *CASES[0][1:])
    assert by_diff[ids[4]] == {"previous": ids[0], "next": ids[8], "place": 2, "total": 19}
    assert by_diff[ids[16]]["next"] == ids[1] and by_diff[ids[9]] == NONE
    assert expected(ids, *CASES[1][1:])[ids[4]] == {"previous": ids[16], "next": None, "place": 5, "total": 5}


def test_a_sort_by_one_grade_reads_the_rows_and_a_missing_row_the_predictions(rated_run, ids):
    run = rated_run
    params, keeps, key = CASES[3]
    hand = expected(ids, keeps, key)
    query = ExplorerQuery.from_params(QueryDict(urlencode(params)), run.protocol.conditions)
    with CaptureQueriesContext(connection) as captured:
        assert explorer_neighbours(run, query, ids[7], 7) == hand[ids[7]]
    assert len(captured) == 1 and TaskGrades._meta.db_table in captured[0]["sql"]
    # a cohort task without its row (as a script might leave it): the count tells, the predictions answer
    TaskGrades.objects.filter(run=run, task_id=ids[12]).delete()
    for position in (7, 12):
        with CaptureQueriesContext(connection) as captured:
            assert explorer_neighbours(run, query, ids[position], position) == hand[ids[position]]
        assert len(captured) == 2 and TaskGrades._meta.db_table not in captured[1]["sql"]
    assert CohortTask.objects.filter(cohort=run.protocol.cohort).count() == len(ids)
