"""The task page: cards, the chosen candidate, identical answers, j/k within a filter,
the evidence found again inside the transcript, and a constant number of queries."""
import re
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experiments.core import evidence as ev
from experiments.web.predictions.transcript import mark_evidence, record_sentences
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY
from tests.explorer_helpers import add_pools, grade_by_hand, set_answer

pytestmark = pytest.mark.django_db


def page(client, run, task_id, params=None):
    url = reverse("prediction_detail", args=[run.protocol.project.slug, run.pk, task_id])
    response = client.get(url, params or {})
    assert response.status_code == 200
    return response.content.decode()


def test_cards_chosen_candidate_copied_and_identical_answers(client, rated_run, cast):
    ids = grade_by_hand(rated_run)
    add_pools(rated_run, ids)
    set_answer(rated_run, ids[0], QUESTION_ONLY, "final", f"{MEMORY} answer for task 0", 0)  # same text as memory's
    client.force_login(cast["owner"])
    body = page(client, rated_run, ids[0])
    # one card per condition and slot: 3 one-shot answers + 2 pools of b0..b2 and their final
    assert body.count('<article class="card') == 3 + 2 * 4
    # selection chose b2: exactly that candidate is marked, and the final says what it copies
    chosen = re.findall(r'<article class="card chosen" data-label="(b\d)"', body)
    assert chosen == ["b2"] and "copies candidate b2" in body
    assert body.count("copied by fusion") == 1  # task 0's fusion copied b1
    assert body.count("identical to 1 other") >= 2  # memory's and question-only's answers
    assert body.count("offline stand-in</strong>") == 1  # the label once per page
    assert "hand grade 3" in body  # the judge's rationale on the card (OwnWords 3 at task 0)


def test_j_and_k_walk_the_filtered_list(client, rated_run, cast):
    ids = grade_by_hand(rated_run)
    client.force_login(cast["analyst"])
    params = {"condition": OWNWORDS, "grade": "3"}  # tasks 0, 4, 8, 12, 16
    body = page(client, rated_run, ids[4], params)
    carried = "?" + urlencode(params).replace("&", "&amp;")
    base = f"/p/{rated_run.protocol.project.slug}/runs/{rated_run.pk}/predictions"
    assert f'data-previous="{base}/{ids[0]}/{carried}"' in body
    assert f'data-next="{base}/{ids[8]}/{carried}"' in body
    assert "task 2 of 5 in the filtered list" in body
    first = page(client, rated_run, ids[0], params)
    assert 'data-previous=""' in first and 'id="task-previous"' not in first
    unfiltered = page(client, rated_run, ids[4])
    assert f'data-next="{base}/{ids[5]}/"' in unfiltered and "task 5 of 20" in unfiltered
    assert 'id="keys-help"' in body and "js/explorer.js" in body


def test_evidence_sentences_found_inside_the_transcript():
    turns = [
        ev.TurnText(0, "interviewer", "What do you do?"),
        ev.TurnText(1, "participant", "I compose music for films. It pays badly! But I love it."),
        ev.TurnText(2, "interviewer", "And weekends?"),
        ev.TurnText(3, "participant", "Gardening, mostly.\nTomatoes and beans."),
        ev.TurnText(4, "interviewer", "What music do you compose for films?"),
    ]
    by_turn = record_sentences(turns, record_cut=4)
    assert [s.text for s in by_turn[1]] == ["I compose music for films.", "It pays badly!", "But I love it."]
    assert [s.text for s in by_turn[3]] == ["Gardening, mostly.", "Tomatoes and beans."]
    record = ev.respondent_record(turns, 4)
    own = ev.ownwords(record, "What music do you compose for films?", 40)
    recent = ev.recency(record, 40)
    whole = ev.whole_record(turns, 4)
    counts = mark_evidence(by_turn, [own, recent, f"a memory first\n\n{own}", whole])
    kept = {(i, s.text): s.kept_by for i in by_turn for s in by_turn[i]}
    # by hand: OwnWords keeps the film sentence (its "- " prefix included, 29 chars), recency the last two
    assert own == "- I compose music for films."
    assert recent == "Gardening, mostly. Tomatoes and beans." or recent == "- Gardening, mostly. Tomatoes and beans."
    assert kept[(1, "I compose music for films.")] == [0, 2, 3]
    assert kept[(3, "Tomatoes and beans.")] == [1, 3]
    assert kept[(1, "It pays badly!")] == [3]
    assert counts == [1, 2, 1, 5]


def test_transcript_marks_on_the_page(client, rated_run, cast):
    from experiments.models import CohortTask
    client.force_login(cast["owner"])
    task_id = CohortTask.objects.filter(cohort=rated_run.protocol.cohort).order_by("position").first().task_id
    body = page(client, rated_run, task_id)
    assert re.search(r'<option value="e\d">ownwords\(B=\|memory\|\) \(\d+ sentences?\)</option>', body)
    assert 'class="sentence kept"' in body and "full session" in body


def test_task_page_queries_are_constant(client, rated_run, cast):
    ids = grade_by_hand(rated_run)
    client.force_login(cast["owner"])
    assert rated_run.protocol.project.slug  # cached before counting: the page's own queries only
    counts = []
    for params in ({}, {"condition": OWNWORDS, "grade": "3", "sort": "-diff", "a": OWNWORDS, "b": MEMORY}):
        with CaptureQueriesContext(connection) as captured:
            page(client, rated_run, ids[4], params)
        counts.append(len(captured))
    add_pools(rated_run, ids)  # five conditions, eight more cards
    assert rated_run.protocol.project.slug
    with CaptureQueriesContext(connection) as captured:
        page(client, rated_run, ids[0])
    counts.append(len(captured))
    assert counts[0] == counts[1] == counts[2] <= 10, counts


def test_neighbours_in_cohort_order_agree_with_the_numbered_list(rated_run):
    """The index path (unfiltered, cohort order) gives what the window-function path gives."""
    from experiments.analysis.explorer import ExplorerQuery, explorer_neighbours
    ids = grade_by_hand(rated_run)
    for sort in ("task", "-task"):
        query = ExplorerQuery(sort=sort)
        for position in (0, 7, 19):
            fast = explorer_neighbours(rated_run, query, ids[position], position)
            assert fast == explorer_neighbours(rated_run, query, ids[position]), (sort, position)


def test_neighbours_of_a_numeric_sort_agree_with_the_numbered_list(rated_run):
    """The one-pass path (grade, a − b, filtered cohort order) gives what numbering the whole
    sorted list gives (the window path, which `explorer_page`'s ORDER BY also follows)."""
    from experiments.analysis.explorer import ExplorerQuery, explorer_neighbours, explorer_page
    ids = grade_by_hand(rated_run)
    queries = [ExplorerQuery(sort=f"-grade:{MEMORY}"), ExplorerQuery(sort=f"grade:{QUESTION_ONLY}"),
               ExplorerQuery(a=OWNWORDS, b=MEMORY, sort="-diff"), ExplorerQuery(a=OWNWORDS, b=MEMORY, sort="diff"),
               ExplorerQuery(grades=((QUESTION_ONLY, 0),), sort="-task"), ExplorerQuery(missing=True)]
    for query in queries:
        listed = [row["task_id"] for row in explorer_page(rated_run, query, size=100).rows]
        for task_id in ids:
            expected = {"previous": None, "next": None, "place": None, "total": None}
            if task_id in listed:
                i = listed.index(task_id)
                expected = {"previous": listed[i - 1] if i else None,
                            "next": listed[i + 1] if i + 1 < len(listed) else None,
                            "place": i + 1, "total": len(listed)}
            assert explorer_neighbours(rated_run, query, task_id) == expected, (query.sort, task_id)
