"""The run explorer, the project search and the cross-run comparison.

A finished offline run (4 people × 5 tasks, 3 conditions) whose final answers are rewritten by
hand (tests/explorer_helpers.py: memory i % 4, OwnWords 3 − i % 4, question-only 0 but missing
at task 5), so every filter's answer can be counted on one's fingers.
"""
import re
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experiments.analysis.explorer import ExplorerQuery, explorer_page
from experiments.models import CohortTask, Prediction
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY
from experiments.core.conditions import FINAL
from tests.explorer_helpers import FUSION, SELECTION, add_pools, cohort_task_ids, grade_by_hand, set_answer

pytestmark = pytest.mark.django_db


def querydict(params: dict) -> QueryDict:
    return QueryDict(urlencode(params, doseq=True))


def positions(run, **params):
    """The 0-based cohort positions the explorer lists for `params`, all on one page."""
    query = ExplorerQuery.from_params(querydict(params), run.protocol.conditions)
    assert not query.errors, query.errors
    page = explorer_page(run, query, size=100)
    assert page.total == len(page.rows)
    return [row["position"] - 1 for row in page.rows]


@pytest.fixture
def hand_run(rated_run):
    grade_by_hand(rated_run)
    return rated_run


def test_filters_on_a_case_counted_by_hand(hand_run):
    run = hand_run
    assert positions(run) == list(range(20))
    assert positions(run, condition=OWNWORDS, grade="3") == [0, 4, 8, 12, 16]
    assert positions(run, condition=[OWNWORDS, MEMORY], grade=["2", "1"]) == [1, 5, 9, 13, 17]
    assert positions(run, condition=[OWNWORDS, MEMORY], grade=["2", "2"]) == []
    # "OwnWords 3, memory 0" and its impossible twin
    assert positions(run, a=OWNWORDS, ga="3", b=MEMORY, gb="0") == [0, 4, 8, 12, 16]
    assert positions(run, a=OWNWORDS, ga="3", b=MEMORY, gb="3") == []
    # a and b without grades: graded differently (never equal here: 3 − k ≠ k)
    assert positions(run, a=OWNWORDS, b=MEMORY) == list(range(20))
    assert positions(run, missing="1") == [5]
    assert positions(run, condition=QUESTION_ONLY, grade="0") == [i for i in range(20) if i != 5]
    ids = list(CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")
               .values_list("task__session__person__label", "task__session__study__key", "task__question_turn__text"))
    person = ids[7][0]
    assert positions(run, person=person) == [i for i, row in enumerate(ids) if row[0] == person]
    assert positions(run, study="s1") == [i for i, row in enumerate(ids) if row[1] == "s1"]
    needle = ids[3][2][-5:].upper()  # e.g. "? (9)" in capitals: case-insensitive
    assert positions(run, q=needle) == [i for i, row in enumerate(ids) if needle.lower() in row[2].lower()]
    assert positions(run, q="100% not there_") == []


def test_copied_and_chosen_filters(hand_run):
    ids = [t for t in CohortTask.objects.filter(cohort=hand_run.protocol.cohort).order_by("position")
           .values_list("task_id", flat=True)]
    add_pools(hand_run, ids)
    assert positions(hand_run, copied="1") == [0]
    assert positions(hand_run, chosen="b2") == [0]
    assert positions(hand_run, chosen="b0") == [1]
    assert positions(hand_run, condition=FUSION, grade="2") == [1]
    assert positions(hand_run, condition=SELECTION, grade="2") == [0]


def test_sort_by_person_grade_and_difference(hand_run):
    run = hand_run
    assert positions(run, sort="-task") == list(range(19, -1, -1))
    by_memory = positions(run, sort=f"-grade:{MEMORY}")
    assert [i % 4 for i in by_memory] == [3] * 5 + [2] * 5 + [1] * 5 + [0] * 5
    assert by_memory[:5] == [3, 7, 11, 15, 19]  # ties in cohort order
    # question-only's missing grade sorts last either way
    assert positions(run, sort=f"grade:{QUESTION_ONLY}")[-1] == 5
    assert positions(run, sort=f"-grade:{QUESTION_ONLY}")[-1] == 5
    diff = positions(run, a=OWNWORDS, b=MEMORY, sort="-diff")  # 3 − 2(i % 4): 3, 1, −1, −3
    assert [3 - 2 * (i % 4) for i in diff] == [3] * 5 + [1] * 5 + [-1] * 5 + [-3] * 5
    labels = list(CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")
                  .values_list("task__session__person__label", flat=True))
    by_person = positions(run, sort="person")
    assert [labels[i] for i in by_person] == sorted(labels)


def test_answered_lists_exactly_the_answers_the_dashboards_answer_lengths_count(hand_run):
    from experiments.analysis.dashboard import _answer_lengths
    run = hand_run
    assert positions(run, answered=QUESTION_ONLY) == [i for i in range(20) if i != 5]  # no answer at task 5
    assert positions(run, answered=MEMORY, condition=MEMORY, grade="3") == [3, 7, 11, 15, 19]
    set_answer(run, cohort_task_ids(run)[2], MEMORY, FINAL, "", None)  # an empty answer is an answer (0 words)
    for row in _answer_lengths(run):
        assert len(positions(run, answered=row["condition"])) == row["answers"], row["condition"]
    assert len(positions(run, answered=MEMORY)) == 20
    query = ExplorerQuery.from_params(querydict({"answered": "nope"}), run.protocol.conditions)
    assert query.answered == "" and query.errors == ("unknown condition 'nope'",)


def test_bad_parameters_are_dropped_and_explained(hand_run):
    query = ExplorerQuery.from_params(querydict({"condition": "nope", "grade": "3", "ga": "7", "a": OWNWORDS,
                                                 "sort": "diff", "page": "x"}), hand_run.protocol.conditions)
    assert query.grades == () and query.ga is None and query.sort == "task" and query.page == 1
    assert len(query.errors) == 3


def test_pages_cover_every_task_once_and_keep_the_filters(client, hand_run, cast):
    run = hand_run
    seen = []
    for number in (1, 2, 3, 4):
        page = explorer_page(run, ExplorerQuery(sort="-task", page=number), size=6)
        assert page.total == 20 and page.pages == 4
        seen += [row["task_id"] for row in page.rows]
    assert len(seen) == len(set(seen)) == 20
    client.force_login(cast["analyst"])
    url = reverse("run_explorer", args=[run.protocol.project.slug, run.pk])
    response = client.get(url, {"condition": OWNWORDS, "grade": "3", "sort": "-task"})
    assert response.status_code == 200
    body = response.content.decode()
    assert "<strong>5</strong> tasks match" in body
    # each row's link to the task page carries the filters (j/k walk the same list)
    carried = urlencode([("condition", OWNWORDS), ("grade", "3"), ("sort", "-task")])
    assert body.count(f"?{carried}".replace("&", "&amp;")) == 5


def test_explorer_queries_do_not_grow_with_filters_or_conditions(client, hand_run, cast):
    client.force_login(cast["owner"])
    url = reverse("run_explorer", args=[hand_run.protocol.project.slug, hand_run.pk])
    counts = []
    for params in ({}, {"condition": [OWNWORDS, MEMORY], "grade": ["3", "0"], "a": OWNWORDS, "ga": "3",
                        "b": MEMORY, "gb": "0", "person": "person-0", "q": "PART", "sort": "-diff"}):
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url, params).status_code == 200
        counts.append(len(captured))
    ids = list(CohortTask.objects.filter(cohort=hand_run.protocol.cohort).order_by("position")
               .values_list("task_id", flat=True))
    add_pools(hand_run, ids)  # two more conditions
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, {"copied": "1", "chosen": "b2"}).status_code == 200
    counts.append(len(captured))
    assert counts[0] == counts[1] == counts[2] <= 9, counts


def test_search_questions_references_and_predictions(client, hand_run, cast):
    run = hand_run
    project = run.protocol.project
    Prediction.objects.filter(run=run, condition=OWNWORDS, label="final",
                              task_id=CohortTask.objects.get(cohort=run.protocol.cohort, position=2).task_id
                              ).update(text="The zebra sleeps under the hive")
    client.force_login(cast["analyst"])
    url = reverse("project_search", args=[project.slug])
    body = client.get(url, {"q": "zebra"}).content.decode()
    assert body.count("The zebra sleeps") == 1 and "No task question or reference answer matches" in body
    people = list(CohortTask.objects.filter(cohort=run.protocol.cohort)
                  .values_list("task__session__person__label", flat=True).distinct())
    number = sorted(people)[1].split("-")[1]  # "person-1" → "1"
    body = client.get(url, {"q": f"part {number} of"}).content.decode()
    # the five tasks of that person (their questions), nothing in the references
    assert body.count('class="hit"') == 5, body
    body = client.get(url, {"q": "bees"}).content.decode()
    assert body.count("<tr><td><a href=") == 20  # every reference answer mentions bees


def test_compare_two_runs_on_one_cohort(client, hand_run, cast):
    from experiments.models import Run
    from experiments.analysis.run_comparison import compare_runs
    rerun = Run.objects.create(protocol=hand_run.protocol, status=Run.Status.FINISHED)
    ids = list(CohortTask.objects.filter(cohort=hand_run.protocol.cohort).order_by("position")
               .values_list("task_id", flat=True))
    from tests.explorer_helpers import set_answer
    for i, task_id in enumerate(ids):  # the rerun: OwnWords one grade better wherever it can be
        set_answer(rerun, task_id, OWNWORDS, "final", f"rerun answer {i}", min(3, 4 - i % 4))
    result = compare_runs([hand_run, rerun], OWNWORDS)
    contrast = result["contrasts"][0]
    # per task: +1 where OwnWords was 0..2 (i % 4 = 1, 2, 3), 0 where it was 3: mean 15/20 · 1/3
    assert contrast["n_tasks"] == 20 and (contrast["wins"], contrast["ties"], contrast["losses"]) == (15, 5, 0)
    assert contrast["estimate"] == pytest.approx(0.75 / 3)
    assert contrast["lo"] <= contrast["estimate"] <= contrast["hi"]
    client.force_login(cast["viewer"])  # numbers only: viewers may compare
    response = client.get(reverse("run_compare", args=[hand_run.protocol.project.slug]),
                          {"run": [hand_run.pk, rerun.pk], "condition": OWNWORDS})
    assert response.status_code == 200 and b"0.250" in response.content


def test_run_comparison_intervals_are_paired_bootstrap_to_the_bit(hand_run):
    """The comparison draws once for all its statistics (shared_bootstraps); each interval is
    still paired_bootstrap of that statistic alone, to the last bit."""
    from experiments.models import Run
    from experiments.analysis.grades import final_grades
    from experiments.analysis.run_comparison import compare_runs
    from experiments.core import stats
    from experiments.data.sessions import cohort_tasks
    from tests.explorer_helpers import set_answer
    rerun = Run.objects.create(protocol=hand_run.protocol, status=Run.Status.FINISHED)
    tasks = cohort_tasks(hand_run.protocol.cohort)
    for i, task in enumerate(tasks):
        if i % 5:  # one task in five left ungraded in the rerun: another set of people and tasks
            set_answer(rerun, task.pk, OWNWORDS, "final", f"rerun {i}", (i * 7) % 4)
    seed, draws = 11, 3_000
    hand_run.protocol.bootstrap = {"seed": seed, "draws": draws}
    result = compare_runs([hand_run, rerun], OWNWORDS)
    person = {t.pk: t.session.person_id for t in tasks}
    tables = [final_grades(hand_run), final_grades(rerun)]
    checked = 0
    for row in result["means"]:
        for table, cell in zip(tables, row["cells"]):
            graded = [t.pk for t in tasks if table.get(row["condition"], {}).get(t.pk) is not None]
            if graded:
                alone = stats.paired_bootstrap([person[t] for t in graded],
                                               stats.normalize([table[row["condition"]][t] for t in graded]),
                                               seed=seed, draws=draws)
                assert (cell["mean"], cell["lo"], cell["hi"]) == (alone.estimate, alone.lo, alone.hi)
                checked += 1
    paired = stats.paired_set({t.pk: tables[1][OWNWORDS].get(t.pk) for t in tasks},
                              {t.pk: tables[0][OWNWORDS].get(t.pk) for t in tasks}, person=person)
    alone = stats.paired_bootstrap(paired.person, paired.diff((1, -1)), seed=seed, draws=draws)
    contrast = result["contrasts"][0]
    assert (contrast["estimate"], contrast["lo"], contrast["hi"]) == (alone.estimate, alone.lo, alone.hi)
    assert contrast["n_tasks"] == 16 and checked >= 3


TEXT_PAGES = ("run_explorer", "prediction_detail", "project_search")
EXPECTED = {"owner": 200, "analyst": 200, "viewer": 403, "rater": 403, "outsider": 404}


@pytest.mark.parametrize("page", [*TEXT_PAGES, "run_compare"])
def test_role_matrix_of_every_new_page(client, rated_run, cast, page):
    project = rated_run.protocol.project
    task_id = CohortTask.objects.filter(cohort=rated_run.protocol.cohort).first().task_id
    args = {"run_explorer": [project.slug, rated_run.pk], "prediction_detail": [project.slug, rated_run.pk, task_id],
            "project_search": [project.slug], "run_compare": [project.slug]}[page]
    query = {"run": [rated_run.pk, rated_run.pk], "q": "bees"}
    for who, status in EXPECTED.items():
        if page == "run_compare" and who == "viewer":
            status = 200
        client.force_login(cast[who])
        response = client.get(reverse(page, args=args), query)
        assert response.status_code == status, (page, who, response.status_code)
        if who == "viewer" and status == 200:
            assert b"keeps bees" not in response.content and b"your week" not in response.content
    # the outsider owns project "other": guessing this run's ids under it finds nothing
    client.force_login(cast["outsider"])
    other = {"run_explorer": ["other", rated_run.pk], "prediction_detail": ["other", rated_run.pk, task_id],
             "project_search": ["other"], "run_compare": ["other"]}[page]
    response = client.get(reverse(page, args=other), query)
    if page == "project_search":
        assert response.status_code == 200 and b"keeps bees" not in response.content
    else:
        assert response.status_code == 404


def test_judge_human_disagreement_filter_once_ratings_exist(client, hand_run, cast, django_assert_max_num_queries):
    """Consensus: an owner's adjudicated grade, else the raters' mean rounded half up; a task is
    listed when one of its rated items' consensus differs from the judge's grade."""
    rated_run = hand_run  # judge grades 0–3 by hand
    from annotations.adjudication import adjudicate
    from annotations.campaigns import campaign_create
    from annotations.models import Assignment, RatingItem
    from annotations.rating import rating_record
    from tests.annotations_helpers import CONDITIONS, RATERS
    url = reverse("run_explorer", args=[rated_run.protocol.project.slug, rated_run.pk])
    client.force_login(cast["analyst"])
    assert 'name="filter" value="judge-human"' not in client.get(url).content.decode()  # no campaign yet
    assert positions(rated_run, filter="judge-human") == []
    campaign = campaign_create(run=rated_run, name="first", conditions=CONDITIONS, raters=RATERS[:2],
                               user=cast["owner"], seed=11)
    items = list(RatingItem.objects.filter(campaign=campaign).order_by("number"))
    users = {u.username: u for u in get_user_model().objects.filter(username__in=RATERS[:2])}

    def rate(item, a, b):
        for name, grade in zip(RATERS[:2], (a, b)):
            assignment = Assignment.objects.get(item=item, rater=users[name])
            rating_record(campaign=campaign, user=users[name], assignment_id=assignment.pk, grade=grade)

    def pick(test):
        item = next(i for i in items if test(i.judge_score) and i.task_id not in used)
        used.add(item.task_id)
        return item

    used = set()
    agree = pick(lambda j: True)
    rate(agree, agree.judge_score, agree.judge_score)
    both_other = pick(lambda j: True)
    rate(both_other, (both_other.judge_score + 1) % 4, (both_other.judge_score + 1) % 4)
    half_up = pick(lambda j: j <= 2)  # j and j + 1: mean j + ½ rounds up to j + 1, not the judge
    rate(half_up, half_up.judge_score, half_up.judge_score + 1)
    half_down = pick(lambda j: j >= 1)  # j − 1 and j: mean j − ½ rounds up to j, the judge
    rate(half_down, half_down.judge_score - 1, half_down.judge_score)
    decided = pick(lambda j: True)  # raters 2 apart, mean ≠ judge; the owner decides the judge's grade
    low = 0 if decided.judge_score != 1 else 1
    rate(decided, low, low + 2)
    adjudicate(campaign=campaign, number=decided.number, grade=decided.judge_score, user=cast["owner"])

    expected = {both_other.task_id, half_up.task_id}
    ids = list(CohortTask.objects.filter(cohort=rated_run.protocol.cohort).order_by("position")
               .values_list("task_id", flat=True))
    assert positions(rated_run, filter="judge-human") == sorted(ids.index(t) for t in expected)
    with django_assert_max_num_queries(10):
        body = client.get(url, {"filter": "judge-human", "condition": OWNWORDS, "grade": ["1"], "sort": "-task"}
                          ).content.decode()
    with django_assert_max_num_queries(10):
        body = client.get(url, {"filter": "judge-human"}).content.decode()
    assert 'name="filter" value="judge-human" checked' in body
    assert f"<strong>{len(expected)}</strong> tasks match" in body
    assert sorted(int(t) for t in re.findall(r'<tr data-task="(\d+)"', body)) == sorted(expected)
    assert "Ignored: unknown filter &#x27;nope&#x27;" in client.get(url, {"filter": "nope"}).content.decode()


def test_explorer_and_task_page_queries_stay_at_most_ten_with_every_filter(
        client, hand_run, cast, django_assert_max_num_queries):
    ids = list(CohortTask.objects.filter(cohort=hand_run.protocol.cohort).order_by("position")
               .values_list("task_id", flat=True))
    add_pools(hand_run, ids)  # five conditions
    client.force_login(cast["owner"])
    slug = hand_run.protocol.project.slug
    explorer = reverse("run_explorer", args=[slug, hand_run.pk])
    every = {"condition": [OWNWORDS, MEMORY], "grade": ["3", "0"], "a": OWNWORDS, "ga": "3", "b": MEMORY, "gb": "0",
             "study": "s0", "person": "person-0", "q": "part", "missing": "1", "copied": "1", "chosen": "b2",
             "sort": "-diff", "page": "2"}
    for params in ({}, every, {"sort": "person"}, {"sort": f"-grade:{FUSION}", "page": "9"}):
        with django_assert_max_num_queries(10):
            assert client.get(explorer, params).status_code == 200
        with django_assert_max_num_queries(10):
            detail = reverse("prediction_detail", args=[slug, hand_run.pk, ids[0]])
            assert client.get(detail, params).status_code == 200


def test_a_page_past_the_end_shows_the_last_page_and_a_equal_to_b_is_refused(client, rated_run, cast):
    project = rated_run.protocol.project
    conditions = rated_run.protocol.conditions
    client.force_login(cast["owner"])
    url = reverse("run_explorer", args=[project.slug, rated_run.pk])
    past = client.get(url + "?page=999")
    page = past.context["page"]
    assert not page.rows and page.total > 0
    body = past.content.decode()
    assert "past the end of the list" in body and "No task matches" not in body
    assert f'href="?page={page.pages}"' in body or (page.pages == 1 and 'href="?"' in body)
    response = client.get(url, {"a": conditions[0], "b": conditions[0]})
    query = response.context["query"]
    assert query.b == "" and any("same condition" in error for error in query.errors)
    assert response.context["page"].total == client.get(url).context["page"].total  # no filter applied


def test_search_and_comparison_name_the_offline_runs_once(client, hand_run, cast):
    """The stand-in's predictions and numbers never pass for a model's: the search and the
    comparison name the offline runs once per page, and say nothing when no run is offline."""
    from experiments.models import Protocol, Run
    run = hand_run
    project = run.protocol.project
    Prediction.objects.filter(run=run, condition=OWNWORDS, label="final",
                              task_id=CohortTask.objects.get(cohort=run.protocol.cohort, position=2).task_id
                              ).update(text="The zebra sleeps under the hive")
    rerun = Run.objects.create(protocol=run.protocol, status=Run.Status.FINISHED)
    client.force_login(cast["analyst"])
    search = reverse("project_search", args=[project.slug])
    compare = reverse("run_compare", args=[project.slug])
    body = client.get(search, {"q": "zebra"}).content.decode()
    assert body.count('id="offline-notice"') == 1 and f"run {run.pk} come from the offline stand-in" in body
    assert 'id="offline-notice"' not in client.get(search, {"q": "no-such-word-anywhere"}).content.decode()
    body = client.get(compare, {"run": [run.pk, rerun.pk], "condition": OWNWORDS}).content.decode()
    assert body.count('id="offline-notice"') == 1 and f"runs {run.pk}, {rerun.pk} come from" in body
    # the same protocol with a model as generator and judge: no notice on either page
    Protocol.objects.filter(pk=run.protocol_id).update(generator={"provider": "openai", "model": "m"},
                                                       judge={"provider": "openai", "model": "m"})
    assert 'id="offline-notice"' not in client.get(search, {"q": "zebra"}).content.decode()
    body = client.get(compare, {"run": [run.pk, rerun.pk], "condition": OWNWORDS}).content.decode()
    assert 'id="compare-means"' in body and 'id="offline-notice"' not in body


def test_the_explorer_marks_the_column_it_sorts_by(client, hand_run, cast):
    """The sorted column carries aria-sort and an arrow; sorted by a − b, the count line says so
    and offers the reverse order instead of the same link again."""
    client.force_login(cast["analyst"])
    url = reverse("run_explorer", args=[hand_run.protocol.project.slug, hand_run.pk])

    def sorted_headers(body):
        return re.findall(r'<th[^>]*aria-sort="(\w+)"[^>]*>(.*?)</th>', body)

    body = client.get(url, {"sort": f"-grade:{OWNWORDS}"}).content.decode()
    [(direction, cell)] = sorted_headers(body)
    assert direction == "descending" and "▼" in cell and "ownwords" in cell
    body = client.get(url, {"sort": "person"}).content.decode()
    [(direction, cell)] = sorted_headers(body)
    assert direction == "ascending" and re.search(r"person</a><span[^>]*>▲", cell)
    body = client.get(url, {"a": OWNWORDS, "b": MEMORY, "sort": "diff"}).content.decode()
    assert sorted_headers(body) == [] and "sorted by a − b, ascending" in body
    assert re.search(r'<a href="\?[^"]*sort=-diff">reverse</a>', body), body
    body = client.get(url, {"a": OWNWORDS, "b": MEMORY}).content.decode()
    assert 'id="diff-sorted"' not in body and re.search(r'<a href="\?[^"]*sort=diff">sort by a − b</a>', body)
    [(direction, cell)] = sorted_headers(body)  # cohort order, the default: the # column, no arrow
    assert direction == "ascending" and ">#</a>" in cell and "sort-arrow" not in cell


def test_back_to_the_list_opens_the_page_holding_the_task(client, hand_run, cast, monkeypatch):
    """With 20 tasks and pages of 8, the 10th task of the list is on page 2: "back to the list"
    and the crumb open page 2 with the filters and sort kept; a task on page 1 gets no page."""
    import experiments.web.predictions.views as task_views
    monkeypatch.setattr(task_views, "PAGE_SIZE", 8)  # the page size the task page counts with
    client.force_login(cast["analyst"])
    slug = hand_run.protocol.project.slug
    ids = list(CohortTask.objects.filter(cohort=hand_run.protocol.cohort).order_by("-position")
               .values_list("task_id", flat=True))
    explorer_url = reverse("run_explorer", args=[slug, hand_run.pk])
    body = client.get(reverse("prediction_detail", args=[slug, hand_run.pk, ids[9]]), {"sort": "-task"}).content.decode()
    assert "task 10 of 20" in body
    assert f'<a id="task-list" href="{explorer_url}?sort=-task&amp;page=2">' in body
    assert f'<a href="{explorer_url}?sort=-task&amp;page=2">explorer</a>' in body
    body = client.get(reverse("prediction_detail", args=[slug, hand_run.pk, ids[7]]), {"sort": "-task"}).content.decode()
    assert "task 8 of 20" in body and f'<a id="task-list" href="{explorer_url}?sort=-task">' in body
