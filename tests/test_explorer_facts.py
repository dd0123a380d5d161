"""The facts the explorer sorts and filters on, copied onto a cohort's tasks: a sort by
person or study and the question-text filter list exactly what ordering by the labels and keys
(code point order, ties in cohort order) and matching the questions give, whether the cohort was
drawn (facts copied then) or stored by a script without them (copied on the explorer's first look),
and the task page's previous/next follow the same list."""
from urllib.parse import urlencode

import pytest
from django.http import QueryDict

from experiments.analysis.explorer import ExplorerQuery, explorer_neighbours, explorer_page
from experiments.models import CohortTask
from tests.explorer_helpers import grade_by_hand

pytestmark = pytest.mark.django_db


@pytest.fixture
def hand_run(rated_run):
    grade_by_hand(rated_run)
    return rated_run


def listed(run, **params):
    query = ExplorerQuery.from_params(QueryDict(urlencode(params)), run.protocol.conditions)
    assert not query.errors, query.errors
    page = explorer_page(run, query, size=100)
    assert page.total == len(page.rows)
    return [row["position"] - 1 for row in page.rows]


def cohort_rows(run):
    return list(CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position").values_list(
        "position", "task__session__person__label", "task__session__study__key", "task__question_turn__text",
        "person_rank", "study_rank", "question_lowercase"))


def expected(run, sort: str, q: str = "") -> list[int]:
    """The list by hand: labels or keys in code point order (descending: reversed), ties in cohort order."""
    rows = [r for r in cohort_rows(run) if q.lower() in r[3].lower()]
    column = {"person": 1, "study": 2}[sort.lstrip("-")]
    ordered = sorted(rows, key=lambda r: r[0])  # cohort order first, then a stable sort by the label
    ordered.sort(key=lambda r: r[column], reverse=sort.startswith("-"))
    return [r[0] for r in ordered]


def forget_facts(run):
    CohortTask.objects.filter(cohort=run.protocol.cohort).update(person_rank=None, study_rank=None,
                                                                 question_lowercase=None)


def test_a_drawn_cohort_has_its_facts(hand_run):
    rows = cohort_rows(hand_run)
    people = sorted({r[1] for r in rows})
    studies = sorted({r[2] for r in rows})
    assert len(people) > 1 and len(studies) > 1
    for position, person, study, question, person_rank, study_rank, lowercase in rows:
        assert person_rank == people.index(person) + 1
        assert study_rank == studies.index(study) + 1
        assert lowercase == question.lower()


@pytest.mark.parametrize("copied", [True, False], ids=["drawn", "stored-by-a-script"])
def test_sorts_by_person_and_study_and_the_question_filter_list_what_the_labels_give(hand_run, copied):
    if not copied:
        forget_facts(hand_run)
    question = cohort_rows(hand_run)[3][3]
    words = " ".join(question.split()[4:7]).upper()  # a piece of one question ("part 2 of"), in other case
    for sort in ("person", "-person", "study", "-study"):
        assert listed(hand_run, sort=sort) == expected(hand_run, sort)
        assert listed(hand_run, sort=sort, q=words) == expected(hand_run, sort, q=words)
    assert 0 < len(listed(hand_run, q=words)) < len(cohort_rows(hand_run))
    assert listed(hand_run, q="no question says this") == []
    # the facts are there now, as a draw would have copied them
    assert all(r[4] is not None and r[6] is not None for r in cohort_rows(hand_run))


def test_previous_and_next_follow_the_person_sort_even_before_the_facts_are_copied(hand_run):
    order = expected(hand_run, "-person")
    tasks = dict(CohortTask.objects.filter(cohort=hand_run.protocol.cohort).values_list("position", "task_id"))
    query = ExplorerQuery.from_params(QueryDict("sort=-person"), hand_run.protocol.conditions)
    forget_facts(hand_run)
    middle = len(order) // 2
    around = explorer_neighbours(hand_run, query, tasks[order[middle]])
    assert around == {"previous": tasks[order[middle - 1]], "next": tasks[order[middle + 1]],
                      "place": middle + 1, "total": len(order)}
    first = explorer_neighbours(hand_run, query, tasks[order[0]])
    assert first["previous"] is None and first["place"] == 1
    # a task the filter leaves out has no place in the list
    outside = ExplorerQuery.from_params(QueryDict("q=no+question+says+this&sort=person"), hand_run.protocol.conditions)
    assert explorer_neighbours(hand_run, outside, tasks[order[0]]) == {
        "previous": None, "next": None, "place": None, "total": None}


def test_ranks_follow_code_point_order_not_the_locale(hand_run):
    """Upper case before lower case, as Python orders text (COLLATE "C")."""
    from experiments.data.cohort_facts import cohort_facts_copy
    from experiments.models import Person
    rows = cohort_rows(hand_run)
    people = sorted({r[1] for r in rows})
    Person.objects.filter(project=hand_run.protocol.project, label=people[-1]).update(label="Zed")
    Person.objects.filter(project=hand_run.protocol.project, label=people[0]).update(label="alice")
    cohort_facts_copy(hand_run.protocol.cohort_id)
    assert listed(hand_run, sort="person") == expected(hand_run, "person")
    ranks = {r[1]: r[4] for r in cohort_rows(hand_run)}
    # "Zed" < "alice" < "person-…" by code point; a locale's collation would put "Zed" last
    assert ranks == {label: i + 1 for i, label in enumerate(sorted(ranks))}
    assert ranks["Zed"] == 1 < ranks["alice"]
