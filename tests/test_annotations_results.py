"""A campaign's results: agreement figures, contrasts under human grades, per-rater figures, pages by role.

Expected numbers come from the project's statistics called directly on tables gathered here
from the database (not through annotations.campaign_agreement), or by hand in the comments.
"""
import ast
import csv
import io
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse
from django.utils import timezone

from annotations.campaign_agreement import campaign_results, campaign_table, rater_labels
from annotations.core.rater_agreement import Rating, RatingTable
from annotations.core.human_contrasts import human_contrasts
from annotations.models import Adjudication, Assignment, RatingItem
from annotations.rating import rating_record
from experiments.core.conditions import FINAL
from experiments.core.stats.agreement_stats import agreement_bootstrap, alpha_bootstrap, mean_vs_judge
from experiments.core.stats.paired import paired_bootstrap
from experiments.models import Prediction, Protocol, Task
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY

REPO = Path(__file__).resolve().parent.parent
SEED, DRAWS = 7, 300   # the fixture run's protocol.bootstrap


def grade_of(number: int, username: str) -> int:
    """A deterministic, imperfectly agreeing pattern: rater-b is one step off on every third item."""
    base = (number * 5) % 4
    if username == "rater-b" and number % 3 == 0:
        return min(3, base + 1) if base < 2 else base - 1
    return base


def rate_everything(campaign, *, grade=grade_of, seconds=lambda n, u: 10.0 + n % 4, note=""):
    rows = (Assignment.objects.filter(campaign=campaign, status=Assignment.Status.OPEN)
            .select_related("item", "rater").order_by("rater_id", "position"))
    for a in rows:
        g = grade(a.item.number, a.rater.username)
        rating_record(campaign=campaign, user=a.rater, assignment_id=a.pk, grade=g, flagged=g is None,
                      flag_reason="cannot tell" if g is None else "", note=note,
                      seconds=seconds(a.item.number, a.rater.username))


def vary_judge(campaign):
    """The offline judge gives 0 everywhere; spread the items' judge grades so κ is defined."""
    for item in RatingItem.objects.filter(campaign=campaign):
        item.judge_score = (item.number * 3) % 4
        item.save(update_fields=["judge_score"])


def by_hand_tables(campaign):
    """Items by number with their person and each rater's grade, straight from the rows."""
    items = list(RatingItem.objects.filter(campaign=campaign).select_related("task__session").order_by("number"))
    grades = {}
    for a in Assignment.objects.filter(campaign=campaign, rating__isnull=False).select_related("rating", "rater"):
        grades[(a.item_id, a.rater.username)] = a.rating.grade
    return items, grades


# --- the core is pure -------------------------------------------------------------------------

def test_the_core_imports_no_django():
    for path in sorted((REPO / "annotations" / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                assert not name.startswith("django"), f"{path.name} imports {name}"
                if name.startswith(("annotations", "experiments")):
                    assert name.startswith(("annotations.core", "experiments.core")), f"{path.name} imports {name}"


# --- agreement equals the stats on the gathered tables ------------------------------------------

def test_gathered_table_is_the_database(campaign):
    vary_judge(campaign)
    rate_everything(campaign)
    first = RatingItem.objects.get(campaign=campaign, number=1)
    Adjudication.objects.create(item=first, grade=2, decided_at=timezone.now())
    table, keys = campaign_table(campaign)
    items, grades = by_hand_tables(campaign)
    labels = rater_labels(campaign)
    assert table.raters == tuple(labels.values()) and list(labels) == sorted(labels)
    assert table.numbers == tuple(i.number for i in items)
    assert table.person == tuple(i.task.session.person_id for i in items)
    assert table.judge == tuple(i.judge_score for i in items)
    assert table.conditions == tuple(tuple(i.conditions) for i in items)
    assert table.adjudicated == (2,) + (None,) * (len(items) - 1)
    assert [k["pk"] for k in keys] == [i.pk for i in items]
    username = {label: u for u, label in zip(["rater-a", "rater-b"], ["R1", "R2"])}
    matrix = table.grades()
    for i, item in enumerate(items):
        for j, label in enumerate(table.raters):
            assert matrix[i, j] == grades[(item.pk, username[label])]


def test_agreement_figures_equal_the_pure_stats(campaign):
    vary_judge(campaign)
    rate_everything(campaign)
    payload = campaign_results(campaign, use_cache=False)
    items, grades = by_hand_tables(campaign)
    a = [grades[(i.pk, "rater-a")] for i in items]
    b = [grades[(i.pk, "rater-b")] for i in items]
    judge = [i.judge_score for i in items]
    persons = [i.task.session.person_id for i in items]
    boot = dict(seed=SEED, draws=DRAWS)

    assert payload["seed"] == SEED and payload["draws"] == DRAWS
    # k = 2, two raters on every item: the pairs are (rater-a, rater-b), one per item
    assert payload["between"]["pairs"] == agreement_bootstrap(a, b, persons, **boot).as_dict()
    assert payload["between"]["alpha"] == alpha_bootstrap(np.column_stack([a, b]), persons, **boot).as_dict()
    pooled = agreement_bootstrap(a + b, judge + judge, persons + persons, **boot).as_dict()
    assert payload["vs_judge"]["pooled"]["confusion"] == pooled["confusion"]
    assert payload["vs_judge"]["pooled"]["exact"] == pooled["exact"]
    assert payload["vs_judge"]["mean"] == mean_vs_judge(np.column_stack([a, b]), judge, persons, **boot).as_dict()
    r1, r2 = payload["per_rater"]
    assert r1["vs_judge"] == agreement_bootstrap(a, judge, persons, **boot).as_dict()
    assert r2["vs_judge"] == agreement_bootstrap(b, judge, persons, **boot).as_dict()
    assert r1["vs_others"] == agreement_bootstrap(a, b, persons, **boot).as_dict()
    assert r2["vs_others"] == agreement_bootstrap(b, a, persons, **boot).as_dict()
    # per condition: an item counts for every condition that produced it
    for entry in payload["conditions"]:
        keep = [k for k, i in enumerate(items) if entry["condition"] in i.conditions]
        assert entry["items"] == len(keep) > 0
        expected = agreement_bootstrap([a[k] for k in keep], [b[k] for k in keep], [persons[k] for k in keep],
                                       **boot).as_dict()
        assert entry["between"]["pairs"] == expected
        human = [(a[k] + b[k]) / 2 / 3 for k in keep]
        level = paired_bootstrap([persons[k] for k in keep], human, **boot)
        assert entry["levels"]["raters_mean"]["estimate"] == pytest.approx(level.estimate)
        assert entry["levels"]["raters_mean"]["lo"] == pytest.approx(level.lo)
    memory = next(e for e in payload["conditions"] if e["condition"] == MEMORY)
    ownwords = next(e for e in payload["conditions"] if e["condition"] == OWNWORDS)
    assert memory["items"] == ownwords["items"]  # the offline stand-in gives both one text
    assert payload["counts"]["items"] == len(items) and payload["counts"]["complete_items"] == len(items)


def test_the_payload_is_cached_by_its_inputs(campaign):
    rate_everything(campaign)
    first = campaign_results(campaign)
    assert campaign_results(campaign) is not None
    assert campaign_results(campaign)["computed_at"] == first["computed_at"]
    item = RatingItem.objects.get(campaign=campaign, number=2)
    item.gold_grade = 3
    item.save(update_fields=["gold_grade"])
    assert campaign_results(campaign)["inputs_sha256"] != first["inputs_sha256"]


# --- per rater ------------------------------------------------------------------------------------

def test_per_rater_figures_and_gold_accuracy(campaign):
    # gold: item 1 → 1, item 2 → 1, item 3 → 3. grade_of gives rater-a 1, 2, 3 on items 1, 2, 3
    # ((n·5) mod 4 = 1, 2, 3), so exact 2 of 3 (items 1, 3), within one 3 of 3.
    # rater-b: items 1, 2 the same as rater-a; item 3 (n % 3 == 0, base 3 ≥ 2) → 2: exact 1 (item 1),
    # within one 3 of 3.
    for number, gold in ((1, 1), (2, 1), (3, 3)):
        RatingItem.objects.filter(campaign=campaign, number=number).update(gold_grade=gold)

    def grade(number, username):
        return None if (username == "rater-b" and number == 4) else grade_of(number, username)

    rate_everything(campaign, grade=grade, seconds=lambda n, u: 10.0 if u == "rater-a" else 20.0 + n)
    payload = campaign_results(campaign, use_cache=False)
    r1, r2 = payload["per_rater"]
    n = campaign.items.count()
    assert (r1["rater"], r2["rater"]) == ("R1", "R2")
    assert r1["gold"] == {"items": 3, "exact": 2, "within_one": 3, "exact_share": 2 / 3, "within_one_share": 1.0}
    assert r2["gold"] == {"items": 3, "exact": 1, "within_one": 3, "exact_share": 1 / 3, "within_one_share": 1.0}
    assert r1["ratings"] == r2["ratings"] == n
    assert (r1["flagged"], r2["flagged"], r2["flag_only"], r2["graded"]) == (0, 1, 1, n - 1)
    assert r1["median_seconds"] == 10.0
    assert r2["median_seconds"] == float(np.median([20.0 + k for k in range(1, n + 1)]))
    expected = [sum(grade_of(k, "rater-a") == g for k in range(1, n + 1)) for g in range(4)]
    assert r1["distribution"] == expected
    # the flag-only rating leaves item 4 with one grade: no pair, not in α
    assert payload["between"]["pairs"]["n_pairs"] == n - 1
    assert payload["between"]["items"] == n - 1
    assert payload["counts"]["flag_only"] == 1 and payload["counts"]["gold_items"] == 3


# --- contrasts under human grades -----------------------------------------------------------------

def small_case():
    """Conditions A, B; tasks 1–5; people P1 (tasks 1, 2), P2 (3, 4), P3 (5)."""
    items = [  # (task, condition, person, judge, R1, R2, adjudicated)
        (1, "A", "P1", 3, 3, 1, 3), (1, "B", "P1", 1, 1, 1, None),
        (2, "A", "P1", 2, 2, 2, None), (2, "B", "P1", 2, 2, 3, None),
        (3, "A", "P2", 0, 1, 0, None), (3, "B", "P2", 0, 0, 0, None),
        (4, "A", "P2", 3, 3, 3, None), (4, "B", "P2", 0, "flag", None, None),   # no human grade for 4B
        (5, "A", "P3", 1, 2, 2, None),                                           # 5B is not an item
    ]
    ratings = []
    for i, row in enumerate(items):
        for j, g in enumerate(row[4:6]):
            if g == "flag":
                ratings.append(Rating(i, j, None, flagged=True))
            elif g is not None:
                ratings.append(Rating(i, j, g))
    table = RatingTable(numbers=tuple(range(1, len(items) + 1)), person=tuple(r[2] for r in items),
                        conditions=tuple((r[1],) for r in items), judge=tuple(r[3] for r in items),
                        gold=(None,) * len(items), adjudicated=tuple(r[6] for r in items), raters=("R1", "R2"),
                        ratings=tuple(ratings))
    task_items = {"A": {}, "B": {}}
    for i, row in enumerate(items):
        task_items[row[1]][row[0]] = i
    return table, task_items


def test_contrasts_under_human_grades_by_hand():
    table, task_items = small_case()
    planned = [{"name": "A minus B", "terms": {"A": 1, "B": -1}},
               {"name": "A minus C", "terms": {"A": 1, "C": -1}}]
    result = human_contrasts(planned, table, task_items, planned_tasks=6, seed=11, draws=4000)
    entry, unrated = result
    assert unrated["rated"] is False and "C" in unrated["reason"] and unrated["rows"] == []
    # Common set: tasks 1, 2, 3 (4B has only a flag, 5B is no item), people P1 (1, 2) and P2 (3).
    assert (entry["n_tasks"], entry["people"], entry["tasks_with_items"], entry["planned"]) == (3, 2, 5, 6)
    rows = {r["source"]: r for r in entry["rows"]}
    # Per-task normalized differences (A − B) / 3:
    #   judge:       t1 (3−1)/3 = 2/3, t2 (2−2)/3 = 0, t3 (0−0)/3 = 0                     → mean 2/9
    #   raters' mean: t1 (2−1)/3 = 1/3, t2 (2−2.5)/3 = −1/6, t3 (0.5−0)/3 = 1/6           → mean 1/9
    #   adjudicated:  t1 (3−1)/3 = 2/3 (A adjudicated 3), t2 −1/6, t3 1/6                  → mean 2/9
    assert rows["judge"]["estimate"] == pytest.approx(2 / 9)
    assert rows["raters_mean"]["estimate"] == pytest.approx(1 / 9)
    assert rows["adjudicated"]["estimate"] == pytest.approx(2 / 9)
    # Two people, so a draw takes P1 twice, P2 twice (1/4 each) or one of each (1/2); with 4,000
    # draws the 2.5 and 97.5 percentiles are the smallest and largest of the three values
    # (sampled sum / sampled tasks; P1 has 2 tasks, P2 one):
    #   raters' mean: P1 sum 1/3 − 1/6 = 1/6, P2 1/6 → P1P1 (1/3)/4 = 1/12, P2P2 1/6, mixed (1/3)/3 = 1/9
    #   judge:        P1 2/3, P2 0              → P1P1 1/3, P2P2 0, mixed 2/9
    #   adjudicated:  P1 2/3 − 1/6 = 1/2, P2 1/6 → P1P1 1/4, P2P2 1/6, mixed 2/9
    assert (rows["raters_mean"]["lo"], rows["raters_mean"]["hi"]) == pytest.approx((1 / 12, 1 / 6))
    assert (rows["judge"]["lo"], rows["judge"]["hi"]) == pytest.approx((0, 1 / 3))
    assert (rows["adjudicated"]["lo"], rows["adjudicated"]["hi"]) == pytest.approx((1 / 6, 1 / 4))
    # wins / ties / losses of the raters' mean: +1/3, −1/6, +1/6
    assert (rows["raters_mean"]["wins"], rows["raters_mean"]["ties"], rows["raters_mean"]["losses"]) == (2, 0, 1)
    # and the same as the project's bootstrap on those differences, fractional as they are
    direct = paired_bootstrap(["P1", "P1", "P2"], [1 / 3, -1 / 6, 1 / 6], seed=11, draws=4000)
    assert (rows["raters_mean"]["lo"], rows["raters_mean"]["hi"]) == (direct.lo, direct.hi)


def test_contrasts_on_the_run_use_the_items_final_answers_map_to(campaign):
    protocol = campaign.run.protocol
    planned = [{"name": "question-only minus memory", "terms": {QUESTION_ONLY: 1, MEMORY: -1}, "family": True},
               {"name": "OwnWords minus memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": True}]
    Protocol.objects.filter(pk=protocol.pk).update(contrasts=planned)   # sealed: bypass save() in a test
    vary_judge(campaign)
    rate_everything(campaign)
    campaign.run.protocol.refresh_from_db()
    payload = campaign_results(campaign, use_cache=False)
    items = {(i.task_id, i.answer_sha256): i for i in RatingItem.objects.filter(campaign=campaign)}
    _, grades = by_hand_tables(campaign)

    def human(item):
        return (grades[(item.pk, "rater-a")] + grades[(item.pk, "rater-b")]) / 2

    final = {(p.task_id, p.condition): items[(p.task_id, p.answer_sha256)]
             for p in Prediction.objects.filter(run=campaign.run, label=FINAL, status=Prediction.Status.OK)}
    tasks = sorted({t for t, _ in final})
    person = dict(Task.objects.filter(pk__in=tasks).values_list("pk", "session__person_id"))
    q_minus_m = [(human(final[(t, QUESTION_ONLY)]) - human(final[(t, MEMORY)])) / 3 for t in tasks]
    judge = [(final[(t, QUESTION_ONLY)].judge_score - final[(t, MEMORY)].judge_score) / 3 for t in tasks]
    entry, same_text = payload["contrasts"]
    rows = {r["source"]: r for r in entry["rows"]}
    for source, diffs in (("raters_mean", q_minus_m), ("judge", judge), ("adjudicated", q_minus_m)):
        expected = paired_bootstrap([person[t] for t in tasks], diffs, seed=SEED, draws=DRAWS)
        assert (rows[source]["estimate"], rows[source]["lo"], rows[source]["hi"]) == pytest.approx(
            (expected.estimate, expected.lo, expected.hi))
        assert rows[source]["family_lo"] is not None
    assert entry["n_tasks"] == len(tasks) and entry["people"] == len(set(person.values()))
    # memory and OwnWords share every text here, so one item serves both: the difference is 0
    assert all(r["estimate"] == 0 and r["ties"] == len(tasks) for r in same_text["rows"])


# --- pages ----------------------------------------------------------------------------------------

def url(campaign, name="campaign_results", *args):
    return reverse(name, args=[campaign.project.slug, campaign.pk, *args])


def participant_texts(run):
    texts = set()
    for task in Task.objects.filter(pk__in=Prediction.objects.filter(run=run).values("task_id")).select_related(
            "question_turn", "answer_turn"):
        texts |= {task.question_turn.text, task.answer_turn.text}
    texts |= {t for t in Prediction.objects.filter(run=run).values_list("text", flat=True) if t}
    return texts


@pytest.mark.parametrize("role, status", [("owner", 200), ("analyst", 200), ("viewer", 200), ("rater", 403),
                                          ("outsider", 404)])
def test_results_page_by_role(client, campaign, cast, role, status):
    rate_everything(campaign, note="the participant said they keep bees")
    client.force_login(cast[role])
    response = client.get(url(campaign))
    assert response.status_code == status
    if status != 200:
        return
    html = response.content.decode()
    for section in ("agreement-table", "conditions-table", "levels-table", "contrasts-table", "raters-table"):
        assert f'id="{section}"' in html
    assert "plotly-custom.min.js" in html and "R1" in html and "R2" in html
    leaks = [t for t in participant_texts(campaign.run) if t in html]
    assert not leaks, leaks[:2]
    assert "keeps bees" not in html and "part 0 of your week" not in html and "cannot tell" not in html
    assert ("rater-a" in html) == (role == "owner")
    assert ("export.csv" in html) == (role == "owner")


@pytest.mark.parametrize("table", ["agreement", "confusion", "levels", "raters", "contrasts"])
def test_every_table_downloads_as_csv(client, campaign, cast, table):
    vary_judge(campaign)
    rate_everything(campaign)
    for role in ("owner", "viewer"):
        client.force_login(cast[role])
        response = client.get(url(campaign, "campaign_results_csv", table))
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        assert rows, table
        if table == "raters":
            assert [r["rater"] for r in rows] == ["R1", "R2"]
            assert ("username" in rows[0]) == (role == "owner")
            if role == "owner":
                assert [r["username"] for r in rows] == ["rater-a", "rater-b"]
        if table == "agreement":
            first = rows[0]
            assert first["comparison"].startswith("rater vs rater") and float(first["kappa"]) <= 1
    client.force_login(cast["rater"])
    assert client.get(url(campaign, "campaign_results_csv", table)).status_code == 403
    client.force_login(cast["outsider"])
    assert client.get(url(campaign, "campaign_results_csv", table)).status_code == 404


def test_unknown_table_and_an_empty_campaign(client, campaign, cast):
    client.force_login(cast["owner"])
    assert client.get(url(campaign, "campaign_results_csv", "nothing")).status_code == 404
    # before any rating: the page says there is nothing to compare, and every CSV still downloads
    response = client.get(url(campaign))
    assert response.status_code == 200 and "nothing to compare yet" in response.content.decode()
    assert client.get(url(campaign, "campaign_results_csv", "contrasts")).status_code == 200


def test_the_header_counts_the_raters_who_rated(client, campaign, cast):
    client.force_login(cast["owner"])
    assert "0 ratings by 0 raters" in client.get(url(campaign)).content.decode()
    rater = campaign.raters.order_by("user__username").first().user
    pending = Assignment.objects.filter(campaign=campaign, rater=rater).order_by("position")[:3]
    for assignment in pending:
        rating_record(campaign=campaign, user=rater, assignment_id=assignment.pk, grade=2)
    assert "3 ratings by 1 rater (" in client.get(url(campaign)).content.decode()
