"""Dashboards and numeric exports of a run: numbers that match the statistics, roles, no text."""
import csv
import io

import numpy as np
import pytest

from experiments.models.runs import PHASE_ORDER
from django.urls import reverse

from experiments.core import stats
from experiments.analysis.grades import final_grades
from experiments.analysis.dashboard import dashboard_cached, dashboard_refresh
from experiments.execution.driver import run_inline
from experiments.execution.control import run_start
from experiments.models import Grade, Prediction, Protocol, Run, Turn
from experiments.execution.sealing import protocol_seal
from experiments.data.sessions import cohort_draw

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
WHOLE = "whole-record"


@pytest.fixture
def finished_run(imported):
    cohort = cohort_draw(project=imported, name="c", size=5, seed=3)
    protocol = Protocol.objects.create(
        project=imported, name="p", cohort=cohort, conditions=[MEMORY, OWNWORDS, WHOLE],
        generator=OFFLINE, judge=OFFLINE,
        contrasts=[
            {"name": "OwnWords minus memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": True,
             "criterion": "interval_above_zero"},
            {"name": "Whole minus memory", "terms": {WHOLE: 1, MEMORY: -1}, "family": True},
        ],
        bootstrap={"seed": 7, "draws": 500},
    )
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED
    return run


def test_the_dashboard_numbers_are_the_statistics_of_the_grades(finished_run):
    payload = dashboard_refresh(finished_run).payload
    table = final_grades(finished_run)
    tasks = sorted(table[MEMORY])
    assert payload["planned_tasks"] == len(tasks) == 10
    person = {t: t_person for t, t_person in finished_run.protocol.cohort.tasks.values_list("pk", "session__person_id")}
    diff = stats.normalize([table[OWNWORDS][t] for t in tasks]) - stats.normalize([table[MEMORY][t] for t in tasks])
    expected = stats.paired_bootstrap([person[t] for t in tasks], diff, seed=7, draws=500)
    contrast = payload["contrasts"][0]
    assert contrast["estimate"] == pytest.approx(float(np.mean(diff)))
    assert (contrast["lo"], contrast["hi"]) == pytest.approx((expected.lo, expected.hi))
    assert contrast["n_tasks"] == 10 and contrast["lost"] == 0
    assert sum(contrast["delta_at_least"]) / 3 == pytest.approx(contrast["estimate"])
    assert contrast["criterion_met"] == (expected.lo > 0)
    family = stats.paired_bootstrap([person[t] for t in tasks], diff, seed=7, draws=500, tails=stats.family_tails(2))
    assert (contrast["family_lo"], contrast["family_hi"]) == pytest.approx((family.lo, family.hi))
    means = {m["condition"]: m["mean"] for m in payload["means"]}
    assert means[WHOLE] == pytest.approx(np.mean(stats.normalize([table[WHOLE][t] for t in tasks])))
    assert payload["cost"]["per_phase"]  # the journal has attempts
    assert sum(r["attempts"] for r in payload["cost"]["per_phase"]) == finished_run.slots.count()
    phases = [r["phase"] for r in payload["cost"]["per_phase"]]
    assert phases[0] == "memories" and phases == sorted(phases, key=PHASE_ORDER.index)  # pipeline order


def test_a_missing_grade_shrinks_the_paired_set_and_invalidates_the_cache(finished_run):
    dashboard_refresh(finished_run)
    assert dashboard_cached(finished_run) is not None
    prediction = Prediction.objects.filter(run=finished_run, condition=OWNWORDS, label="final").first()
    Grade.objects.filter(run=finished_run, task=prediction.task, answer_sha256=prediction.answer_sha256).update(
        status=Grade.Status.MISSING, score=None
    )
    assert dashboard_cached(finished_run) is None  # its inputs changed
    contrast = dashboard_refresh(finished_run).payload["contrasts"][0]
    assert (contrast["n_tasks"], contrast["lost"], contrast["planned"]) == (9, 1, 10)
    # The deterministic bounds keep all 10 planned tasks, each missing grade free in [0, 3].
    # Byte-identical answers share a grade, so one missing grade can alias several terms.
    table = final_grades(finished_run)
    missing_terms = sum(table[c][prediction.task_id] is None for c in (OWNWORDS, MEMORY))
    assert missing_terms >= 1
    assert contrast["bound_hi"] - contrast["bound_lo"] == pytest.approx(missing_terms * 3 / (3 * 10))


PAGES = ["run_dashboard", "run_scores_csv", "contrasts_csv"]
EXPECTED = {"owner": 200, "analyst": 200, "viewer": 200, "rater": 403, "outsider": 404}


def page_url(name, run):
    slug = run.protocol.project.slug
    if name == "contrasts_csv":
        return reverse("run_dashboard_csv", args=[slug, run.pk, "contrasts"])
    return reverse(name, args=[slug, run.pk])


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_dashboard_and_export_roles(client, cast, finished_run, page, who):
    dashboard_refresh(finished_run)
    client.force_login(cast[who])
    assert client.get(page_url(page, finished_run)).status_code == EXPECTED[who]


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_users_go_to_the_login(client, finished_run, page):
    response = client.get(page_url(page, finished_run))
    assert response.status_code == 302 and "/accounts/login/" in response.url


@pytest.mark.parametrize("page", PAGES)
def test_viewers_get_numbers_and_never_participant_text(client, cast, finished_run, page):
    dashboard_refresh(finished_run)
    client.force_login(cast["viewer"])
    body = client.get(page_url(page, finished_run)).content.decode()
    for text in Turn.objects.values_list("text", flat=True):
        assert text not in body
    for text in Prediction.objects.exclude(text=None).exclude(text="").values_list("text", flat=True):
        assert text not in body


def test_the_dashboard_labels_the_offline_stand_in_and_has_a_table_per_figure(client, cast, finished_run):
    dashboard_refresh(finished_run)
    client.force_login(cast["viewer"])
    body = client.get(page_url("run_dashboard", finished_run)).content.decode()
    assert "Offline stand-in" in body
    assert 'id="contrasts-table"' in body and 'id="means-table"' in body and 'id="cost-table"' in body
    assert "/static/vendor/plotly/plotly-custom.min.js" in body
    assert body.count('class="plot"') >= 5


def test_the_analysis_phase_computes_the_dashboard_and_the_page_says_when_it_is_stale(client, cast, finished_run):
    assert dashboard_cached(finished_run) is not None  # the run's analysis job computed it
    client.force_login(cast["owner"])
    assert 'id="contrasts-table"' in client.get(page_url("run_dashboard", finished_run)).content.decode()
    Grade.objects.filter(run=finished_run).update(score=None, status=Grade.Status.MISSING)
    body = client.get(page_url("run_dashboard", finished_run)).content.decode()
    assert 'id="analysis-missing"' in body and "analysis_refresh" in body


def test_the_numeric_package_has_remapped_labels_and_no_text(client, cast, finished_run):
    client.force_login(cast["viewer"])
    response = client.get(page_url("run_scores_csv", finished_run))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 10 * 3
    assert sorted({int(r["person"]) for r in rows}) == [1, 2]  # two eligible people, renumbered
    assert [int(r["task"]) for r in rows[::3]] == list(range(1, 11))
    assert {r["condition"] for r in rows} == {MEMORY, OWNWORDS, WHOLE}
    assert "sess-a" not in response.content.decode() and "p-sess-a" not in response.content.decode()
    graded = [r for r in rows if r["grade"] != ""]
    assert all(float(r["score"]) == pytest.approx(int(r["grade"]) / 3) for r in graded)


def test_a_csv_of_every_table_downloads(client, cast, finished_run):
    dashboard_refresh(finished_run)
    client.force_login(cast["analyst"])
    for table in ("contrasts", "means", "thresholds", "transitions", "sweep", "lengths", "cost_phase", "cost_condition"):
        response = client.get(reverse("run_dashboard_csv", args=["alpha", finished_run.pk, table]))
        assert response.status_code == 200, table
        assert response["Content-Type"].startswith("text/csv")
    transitions = list(csv.DictReader(io.StringIO(
        client.get(reverse("run_dashboard_csv", args=["alpha", finished_run.pk, "transitions"])).content.decode())))
    assert len(transitions) == 2 * 16  # two two-term contrasts, 4 x 4 cells each
    assert sum(int(r["tasks"]) for r in transitions if r["name"] == "Whole minus memory") == 10
    assert client.get(reverse("run_dashboard_csv", args=["alpha", finished_run.pk, "nope"])).status_code == 404


def test_token_counts_the_service_did_not_report_are_unknown_not_zero(finished_run, client, cast):
    from experiments.execution.progress import run_progress

    tokens = run_progress(finished_run)["tokens"]
    # the offline stand-in reports no usage at all
    assert tokens["input_tokens"] is None and tokens["output_tokens"] is None
    assert tokens["unreported"] == finished_run.slots.count()
    client.force_login(cast["viewer"])
    body = client.get(reverse("run_detail", args=["alpha", finished_run.pk])).content.decode()
    assert "input not reported" in body


def test_the_cost_per_condition_counts_each_call_of_the_slots_its_answers_came_from_once(finished_run):
    from datetime import timedelta

    from django.db.models import Count, Q, Sum

    from experiments.analysis.dashboard import _cost
    from experiments.models import ModelCall

    run = finished_run
    memory = list(Prediction.objects.filter(run=run, condition=MEMORY, label="final").order_by("pk"))
    first = memory[0]
    # A recovery of the first memory answer's slot: two calls, one with usage and time, one without usage.
    call = first.slot.calls.get()
    ModelCall.objects.create(slot=first.slot, run=run, phase=call.phase, attempt=2, basis=ModelCall.Basis.RECOVERY,
                             reserved_at=call.reserved_at, lease_until=call.reserved_at + timedelta(seconds=60),
                             finished_at=call.reserved_at, outcome="ok", input_tokens=7, output_tokens=3,
                             total_tokens=10, elapsed_s=1.25)
    # The same slot also served an OwnWords answer (a shared generation) and a second label of the memory
    # condition: counted for each condition, once in each.
    Prediction.objects.filter(run=run, condition=OWNWORDS, task=first.task, label="final").update(slot=first.slot)
    Prediction.objects.create(run=run, task=first.task, condition=MEMORY, label="b0", status="ok", text="x",
                              answer_sha256="0" * 64, slot=first.slot)
    # No answer of the whole record has a slot: a row with no calls.
    Prediction.objects.filter(run=run, condition=WHOLE).update(slot=None)

    expected = []  # the rows as counted one condition at a time, two statements each (the former way)
    for condition in run.protocol.conditions:
        slot_ids = Prediction.objects.filter(run=run, condition=condition).exclude(slot=None).values("slot_id")
        row = ModelCall.objects.filter(slot_id__in=slot_ids).aggregate(
            attempts=Count("pk"), recoveries=Count("pk", filter=Q(basis=ModelCall.Basis.RECOVERY)),
            input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
            reasoning_tokens=Sum("reasoning_tokens"), elapsed_s=Sum("elapsed_s"),
            unreported=Count("pk", filter=Q(total_tokens__isnull=True)))
        expected.append({**row, "condition": condition, "slots": finished_run.slots.filter(pk__in=slot_ids).count()})
    rows = _cost(run)["per_condition"]
    assert [list(r) for r in rows] == [list(r) for r in expected]  # the same keys in the same order
    for row, want in zip(rows, expected):
        assert {**row, "elapsed_s": None} == {**want, "elapsed_s": None}
        assert row["elapsed_s"] == pytest.approx(want["elapsed_s"])  # a float sum: its order may differ
    by_condition = {r["condition"]: r for r in rows}
    assert by_condition[MEMORY]["recoveries"] == 1 and by_condition[MEMORY]["input_tokens"] == 7
    assert by_condition[MEMORY]["attempts"] == len(memory) + 1 and by_condition[MEMORY]["slots"] == len(memory)
    assert by_condition[OWNWORDS]["input_tokens"] == 7 and by_condition[OWNWORDS]["unreported"] > 0
    assert by_condition[WHOLE] == {"attempts": 0, "recoveries": 0, "input_tokens": None, "output_tokens": None,
                                   "reasoning_tokens": None, "elapsed_s": None, "unreported": 0,
                                   "condition": WHOLE, "slots": 0}


def test_a_contrast_s_point_and_threshold_bars_open_the_tasks_where_its_two_conditions_differ(client, cast, finished_run):
    from urllib.parse import parse_qs, urlsplit
    client.force_login(cast["analyst"])
    page = client.get(reverse("run_dashboard", args=[finished_run.protocol.project.slug, finished_run.pk]))
    estimate = next(trace for trace in page.context["forest"]["data"] if trace["name"] == "estimate, 95% interval")
    links = dict(zip(estimate["y"], estimate["customdata"]))
    for bar in page.context["thresholds"]["data"]:
        assert dict(zip(bar["x"], bar["customdata"])) == links
        # printed values: three decimals, an exact zero as "0" (never "0.000")
        assert all(t == ("0" if y == 0 else f"{y:.3f}") for t, y in zip(bar["text"], bar["y"]))
    # the contrast table's rows open the same tasks as the figure's points
    body = page.content.decode()
    for name, link in links.items():
        if link:
            assert f'<a href="{link.replace("&", "&amp;")}" title="the tasks whose two grades differ' in body
    grades = final_grades(finished_run)  # (the explorer's a/b filter itself: tests/test_explorer.py)
    for name, (a, b) in {"OwnWords minus memory": (OWNWORDS, MEMORY), "Whole minus memory": (WHOLE, MEMORY)}.items():
        assert parse_qs(urlsplit(links[name]).query) == {"a": [a], "b": [b], "sort": ["-diff"]}
        # The link lands on exactly the tasks whose two grades differ, the larger a − b first.
        listed = client.get(links[name]).context["page"]
        differ = [t for t, g in grades[a].items() if g is not None and grades[b].get(t) is not None and g != grades[b][t]]
        assert listed.total == len(differ)
        diffs = [grades[a][row["task_id"]] - grades[b][row["task_id"]] for row in listed.rows]
        assert diffs == sorted(diffs, reverse=True) and all(diffs)
    client.force_login(cast["viewer"])  # no explorer for viewers: no links in their figures
    viewer = client.get(reverse("run_dashboard", args=[finished_run.protocol.project.slug, finished_run.pk]))
    assert not any(next(t for t in viewer.context["forest"]["data"]
                        if t["name"] == "estimate, 95% interval")["customdata"])


def _figure_links(context) -> dict[str, list]:
    """Each drawn figure of the dashboard: the link of every point, bar, box and cell (its own
    customdata, else its trace's meta, as static/js/figures.js reads them)."""
    figures = {name: context[name] for name in ("forest", "means", "sweep", "thresholds", "lengths", "cost")
               if context[name]}
    figures.update({f"transitions {name}": figure for name, figure in context["transitions"]})
    links = {}
    for name, figure in figures.items():
        links[name] = []
        for trace in figure["data"]:
            points = trace.get("z") or trace.get("y") if trace["type"] != "box" else [trace["name"]]
            for i, row in enumerate(points):
                cells = row if trace["type"] == "heatmap" else [None]
                for j, _ in enumerate(cells):
                    own = trace.get("customdata")
                    link = (own[i][j] if trace["type"] == "heatmap" else own[i]) if own is not None else trace.get("meta")
                    links[name].append(link)
    return links


def test_every_point_bar_box_and_cell_of_the_dashboard_opens_the_explorer(client, cast, finished_run):
    from urllib.parse import parse_qs, urlsplit
    slug = finished_run.protocol.project.slug
    explorer = reverse("run_explorer", args=[slug, finished_run.pk])
    client.force_login(cast["analyst"])
    context = client.get(reverse("run_dashboard", args=[slug, finished_run.pk])).context
    links = _figure_links(context)
    assert {"forest", "means", "thresholds", "lengths", "cost"} <= set(links)
    for name, found in links.items():
        assert found and all(isinstance(link, str) and link.startswith(explorer) for link in found), (name, found)
    # A condition's box of answer lengths opens exactly the tasks it answered (the box's answers),
    # its best grades first.
    grades = final_grades(finished_run)
    boxes = {trace["name"]: trace["meta"] for trace in context["lengths"]["data"]}
    answers = {row["condition"]: row["answers"] for row in context["data"]["lengths"]}
    for condition, link in boxes.items():
        assert parse_qs(urlsplit(link).query) == {"answered": [condition], "sort": [f"-grade:{condition}"]}
        listed = client.get(link).context["page"]
        assert listed.total == answers[condition] > 0
        shown = [grades[condition].get(row["task_id"]) for row in listed.rows]
        known = [g for g in shown if g is not None]
        assert known and known == sorted(known, reverse=True)
        assert shown[:len(known)] == known  # a missing grade ranks last
    # A phase's bar of calls: every phase called for every task, so the whole run's tasks.
    for link in context["cost"]["data"][0]["customdata"]:
        assert link == explorer
        assert client.get(link).context["page"].total == len(next(iter(grades.values())))
    client.force_login(cast["viewer"])  # no explorer for viewers: no link anywhere in their figures
    viewer = client.get(reverse("run_dashboard", args=[slug, finished_run.pk])).context
    assert not any(link for found in _figure_links(viewer).values() for link in found)
