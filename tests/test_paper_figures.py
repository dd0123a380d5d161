"""The grade distributions per condition (Fig. 6), the cohort map (Fig. 5) and the budget sweep by
share of the source (App. G.1, beside Table 18): each on a small case counted by hand, then on
pages, by role (viewers see counts, never labels)."""
import csv
import io
import math

import numpy as np
import pytest
from django.urls import reverse

from experiments.core.cohort_map_counts import cohort_map, shared_keys
from experiments.core.grade_distribution import csv_rows, distribution
from experiments.core.share_group_stats import CONTRASTS, SweepLength, pivot, share_groups
from experiments.core.stats import BUDGET_SHARE_GROUPS

NAN = math.nan
BELOW, QUARTER, HALF, ALL = BUDGET_SHARE_GROUPS


# --- Fig. 6, by hand ---------------------------------------------------------------------------

def test_a_condition_s_grades_are_counted_with_missing_ones_apart():
    row = distribution("c", [0, 3, 3, None, 1, NAN, np.float64(3)])
    assert row["planned"] == 7
    assert row["counts"] == [1, 1, 0, 3] and row["missing"] == 2
    assert row["shares"] == [1 / 7, 1 / 7, 0, 3 / 7] and row["missing_share"] == 2 / 7
    assert [c[0] for c in row["cells"]] == ["0", "1", "2", "3", "missing"]
    flat = csv_rows([row])[0]
    assert (flat["grade_3"], flat["share_3"], flat["missing"]) == (3, 3 / 7, 2)
    assert distribution("empty", [])["shares"] == [None] * 4
    with pytest.raises(ValueError):
        distribution("c", [4])


# --- Fig. 5, by hand ---------------------------------------------------------------------------

DRAWS = {
    "first": [("p1", "s1"), ("p2", "s2"), ("p3", "s3")],
    "second": [("p2", "s2"), ("p3", "s4"), ("p4", "s5"), ("p4", "s6")],
    "sample": [("r1", None), ("p1", None)],
}


def test_the_cohort_map_counts_people_sessions_and_what_cohorts_share():
    found = cohort_map(DRAWS)
    assert found.names == ("first", "second", "sample")
    assert found.people == (3, 3, 2) and found.sessions == (3, 4, 0)   # p4 came twice: s5, s6
    # first ∩ second: people p2, p3; sessions s2 only (p3 came with another session).
    assert found.shared_people == ((3, 2, 1), (2, 3, 0), (1, 0, 2))
    assert found.shared_sessions == ((3, 1, 0), (1, 4, 0), (0, 0, 0))
    assert (found.people_in_any, found.sessions_in_any) == (5, 6)       # p1..p4, r1; s1..s6
    assert (found.people_in_several, found.sessions_in_several) == (3, 1)  # p1, p2, p3; s2
    assert found.pairs()[0] == {"first": "first", "second": "second", "people": 2, "sessions": 1}
    assert shared_keys(DRAWS, "first", "second") == {"people": ["p2", "p3"], "sessions": ["s2"]}


# --- App. G.1 share groups, by hand --------------------------------------------------------------

def _by_hand_sweep():
    """Three tasks of three people; sources 400, 400 and 100 characters; two memory lengths."""
    w100 = SweepLength(100, np.array([50, 150, 200.0]),       # shares 1/8, 3/8, 2: below, quarter, all
                       {"OwnWords": np.array([1, 2, 1.0]), "memory": np.array([0, 1, 0.0]),
                        "most recent sentences": np.array([2, 2, 1.0])})
    w200 = SweepLength(200, np.array([100, 300, 400.0]),      # shares 1/4, 3/4, 4: quarter, half, all
                       {"OwnWords": np.array([2, 3, 0.0]), "memory": np.array([1, 1, NAN]),
                        "most recent sentences": np.array([NAN, 3, 1.0])})
    return share_groups([10, 11, 12], [1, 2, 3], [400, 400, 100], np.array([3, 2, 1.0]), [w100, w200],
                        seed=5, draws=2_000)


def test_share_groups_average_a_task_s_budgets_within_a_group_and_use_jointly_scored_pairs():
    rows = {(r["group"], r["contrast"]): r for r in _by_hand_sweep()}
    whole_own, whole_mem, whole_rec, own_mem = (c for c, _, _ in CONTRASTS)
    expected = {  # (estimate, tasks), counted by hand from the grades above; differences / 3
        (BELOW, whole_own): (2 / 3, 1), (QUARTER, whole_own): ((0 + 1 / 3) / 2, 2),
        (HALF, whole_own): (-1 / 3, 1), (ALL, whole_own): ((0 + 1 / 3) / 2, 1),   # task 12's two budgets averaged
        (BELOW, whole_mem): (1, 1), (QUARTER, whole_mem): ((1 / 3 + 2 / 3) / 2, 2),
        (HALF, whole_mem): (1 / 3, 1), (ALL, whole_mem): (1 / 3, 1),               # its memory at 200 failed
        (BELOW, whole_rec): (1 / 3, 1), (QUARTER, whole_rec): (0, 1),              # task 10's recency at 200 failed
        (HALF, whole_rec): (-1 / 3, 1), (ALL, whole_rec): (0, 1),
        (BELOW, own_mem): (1 / 3, 1), (QUARTER, own_mem): (1 / 3, 2),
        (HALF, own_mem): (2 / 3, 1), (ALL, own_mem): (1 / 3, 1),
    }
    assert set(rows) == set(expected)
    for key, (estimate, tasks) in expected.items():
        assert rows[key]["estimate"] == pytest.approx(estimate), key
        assert rows[key]["n_tasks"] == tasks, key
        assert rows[key]["draws"] == 2_000 and rows[key]["seed"] == 5
    # One task of one person: the interval is the point.
    assert rows[(BELOW, own_mem)]["lo"] == pytest.approx(1 / 3) == rows[(BELOW, own_mem)]["hi"]
    table = pivot(list(rows.values()))
    assert [g["group"] for g in table] == list(BUDGET_SHARE_GROUPS)
    assert [c["contrast"] for c in table[0]["cells"]] == [c for c, _, _ in CONTRASTS]


# --- pages ---------------------------------------------------------------------------------------

MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
RECENCY = "recency(B=|memory|)"
WHOLE = "whole-record"


@pytest.fixture
def sweep_run(imported):
    from experiments.data.sessions import cohort_draw
    from experiments.execution.control import run_start
    from experiments.execution.driver import run_inline
    from experiments.execution.sealing import protocol_seal
    from experiments.models import Protocol, Run
    offline = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
    cohort = cohort_draw(project=imported, name="c", size=5, seed=3)
    protocol = Protocol.objects.create(
        project=imported, name="p", cohort=cohort, conditions=[MEMORY, OWNWORDS, RECENCY, WHOLE],
        generator=offline, judge=offline,
        contrasts=[{"name": "OwnWords minus memory", "terms": {OWNWORDS: 1, MEMORY: -1}}],
        bootstrap={"seed": 7, "draws": 500})
    run = Run.objects.create(protocol=protocol_seal(protocol=protocol, user=None))
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED
    return run


def _csv(response):
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_dashboard_shows_each_condition_s_grades_with_missing_ones_as_their_own_bar(client, cast, sweep_run):
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.models import Grade, Prediction
    memory = list(Prediction.objects.filter(run=sweep_run, condition=MEMORY, label="final").order_by("task_id"))
    tasks = len(memory)
    # By hand: every memory answer graded 1, but one a 3 and one without its grade.
    for prediction in memory:
        Grade.objects.filter(run=sweep_run, task=prediction.task, answer_sha256=prediction.answer_sha256).update(score=1)
    Grade.objects.filter(run=sweep_run, task=memory[0].task, answer_sha256=memory[0].answer_sha256).update(score=3)
    Grade.objects.filter(run=sweep_run, task=memory[1].task, answer_sha256=memory[1].answer_sha256).update(
        score=None, status=Grade.Status.MISSING)
    dashboard_refresh(sweep_run)
    url = reverse("run_dashboard", args=["alpha", sweep_run.pk])
    for role in ("viewer", "analyst"):
        client.force_login(cast[role])
        context = client.get(url).context
        row = next(r for r in context["grades"] if r["condition"] == MEMORY)
        assert (row["counts"], row["missing"], row["planned"]) == ([0, tasks - 2, 0, 1], 1, tasks)
        assert all(sum(r["counts"]) + r["missing"] == r["planned"] == tasks for r in context["grades"])
        figure = context["grades_figure"]
        assert [t["name"] for t in figure["data"]] == ["grade 0", "grade 1", "grade 2", "grade 3", "missing"]
        links = [c[-1] for t in figure["data"][:4] for c in t["customdata"]]
        assert all(link is None for link in links) if role == "viewer" else all(
            link.startswith(reverse("run_explorer", args=["alpha", sweep_run.pk])) for link in links)
    rows = _csv(client.get(reverse("run_dashboard_csv", args=["alpha", sweep_run.pk, "grades"])))
    memory_row = next(r for r in rows if r["condition"] == MEMORY)
    assert (memory_row["grade_1"], memory_row["grade_3"], memory_row["missing"]) == (str(tasks - 2), "1", "1")
    assert float(memory_row["share_missing"]) == pytest.approx(1 / tasks)


def test_the_tables_page_shows_the_share_of_source_groups_with_the_paper_s_columns(client, cast, sweep_run):
    from experiments.analysis.tables import tables_refresh
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.analysis.grades import final_grades
    from experiments.core.stats import budget_share_group
    from experiments.models import Prediction
    dashboard_refresh(sweep_run)
    tables_refresh(sweep_run)
    final = Prediction.objects.filter(run=sweep_run, label="final")
    source = dict(final.filter(condition=WHOLE).values_list("task_id", "evidence_chars"))
    budget = dict(final.filter(condition=OWNWORDS).values_list("task_id", "budget"))
    expected = {}
    for task, chars in source.items():   # one memory length: each task in exactly one group
        group = budget_share_group(budget[task], chars)
        expected[group] = expected.get(group, 0) + 1
    client.force_login(cast["viewer"])
    context = client.get(reverse("run_tables", args=["alpha", sweep_run.pk])).context
    assert context["share_columns"] == ["whole record − OwnWords", "whole record − memory",
                                        "whole record − most recent sentences", "OwnWords − memory"]
    assert {g["group"]: g["tasks"] for g in context["share_groups"]} == expected
    grades = final_grades(sweep_run)
    for g in context["share_groups"]:   # one budget per task: each cell is a plain mean over its tasks
        tasks = [t for t in source if budget_share_group(budget[t], source[t]) == g["group"]]
        for cell, (_, first, second) in zip(g["cells"], ((0, WHOLE, OWNWORDS), (0, WHOLE, MEMORY),
                                                         (0, WHOLE, RECENCY), (0, OWNWORDS, MEMORY))):
            by_hand = [(grades[first][t] - grades[second][t]) / 3 for t in tasks]
            assert cell["n_tasks"] == len(tasks) and cell["estimate"] == pytest.approx(sum(by_hand) / len(tasks))
    rows = _csv(client.get(reverse("run_share_groups_csv", args=["alpha", sweep_run.pk])))
    assert len(rows) == 4 * len(expected) and rows[0]["draws"] == "20000" and rows[0]["seed"] == "7"
    client.force_login(cast["rater"])
    assert client.get(reverse("run_share_groups_csv", args=["alpha", sweep_run.pk])).status_code == 403


def test_the_cohort_map_gives_viewers_counts_and_text_readers_labels(client, cast, imported):
    from experiments.data.sessions import cohort_draw
    first = cohort_draw(project=imported, name="first", size=1, seed=3)
    cohort_draw(project=imported, name="both", size=2, seed=4)   # every eligible session: sess-a, sess-b
    one = first.cohort_tasks.first().task.session
    url = reverse("cohort_map", args=["alpha"])
    client.force_login(cast["viewer"])
    response = client.get(url)
    text = response.content.decode()
    rows = {r["name"]: r for r in response.context["rows"]}
    assert (rows["first"]["people"], rows["first"]["sessions"]) == (1, 1)
    assert (rows["both"]["people"], rows["both"]["sessions"]) == (2, 2)
    assert rows["first"]["cells"][1] == {"people": 1, "sessions": 1}
    assert response.context["overlap_figure"]["data"][0]["z"] == [[1, 1], [1, 2]]
    assert "labelled" not in response.context
    assert "sess-a" not in text and "sess-b" not in text and "p-sess-a" not in text
    client.force_login(cast["analyst"])
    labelled = client.get(url).context["labelled"]
    assert labelled["pairs"] == [{"first": "first", "second": "both", "people": [one.person.label],
                                  "sessions": [one.external_id]}]
    assert [c["sessions"] for c in labelled["cohorts"]] == [[one.external_id], ["sess-a", "sess-b"]]
    client.force_login(cast["rater"])
    assert client.get(url).status_code == 403
    client.force_login(cast["outsider"])
    assert client.get(url).status_code == 404
