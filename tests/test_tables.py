"""Robustness tables and prespecified criteria of a run: figures against the statistics, pages by role, downloads."""
import csv
import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.analysis.dashboard import dashboard_refresh
from experiments.analysis.grades import final_grades
from experiments.analysis.tables import cached_results, tables_cached, tables_refresh
from experiments.core import stats
from experiments.core.stats import robustness
from experiments.core.task_attributes import is_specific
from experiments.data.sessions import cohort_draw, sessions_import
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.policy import RunError
from experiments.execution.sealing import protocol_seal, protocol_settings
from experiments.core.canonical import sha256_text
from experiments.models import Grade, Prediction, Protocol, Run, Turn
from experiments.core.interviews.records import ParsedTurn
from tests.conftest import parsed_session

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
WHOLE = "whole-record"
ANSWERS = ["I would say it depends on the day really", "We moved to Boston in 2019 and liked it a lot",
           "My sister Anna taught me to cook when I was young", "honestly I just keep going and do my best work",
           "The garden takes most of my weekend mornings now", "I read about history and music every single evening"]


def interview(seed):
    rng = np.random.default_rng(seed)
    turns = []
    for i in range(12):
        turns.append(ParsedTurn("interviewer", f"Could you tell me more about that part of your life? ({i})"))
        # No digit of its own: a reference answer is "specific" (I.2) by its content alone.
        turns.append(ParsedTurn("participant", f"{ANSWERS[int(rng.integers(0, len(ANSWERS)))]}, {'so' * (i + 1)}."))
    return tuple(turns)


@pytest.fixture
def tables_run(project):
    # Seven sessions of six people: p-0 has two sessions (an exclusion candidate, App. I.5).
    sessions = [parsed_session(f"s-{i}", interview(i), person=f"p-{max(i - 1, 0)}", study=f"st{i % 2}")
                for i in range(7)]
    sessions_import(project=project, parsed=sessions, source_format="jsonl", source_file="t.jsonl")
    cohort = cohort_draw(project=project, name="c", size=7, seed=3)
    protocol = Protocol.objects.create(
        project=project, name="p", cohort=cohort, conditions=[MEMORY, OWNWORDS, WHOLE],
        generator=OFFLINE, judge=OFFLINE,
        contrasts=[{"name": "OwnWords minus memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": True,
                    "criterion": None},
                   {"name": "Whole minus memory", "terms": {WHOLE: 1, MEMORY: -1}, "family": True, "criterion": None}],
        criteria=[{"name": "whole record beats memory",
                   "all": [{"contrast": "Whole minus memory", "interval": "family", "above": 0}]},
                  {"name": "not worse", "contrast": "Whole minus memory", "estimate": "task", "above": -1}],
        bootstrap={"seed": 7, "draws": 600})
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED
    assert tables_cached(run) is not None                 # the analysis phase computed the tables
    # The offline stand-in answers every condition alike here (identical questions): give each
    # condition its own answer and grade, so that differences, lengths and subgroups vary.
    rng = np.random.default_rng(11)
    Grade.objects.filter(run=run).delete()
    for prediction in Prediction.objects.filter(run=run, label="final"):
        text = " ".join(["word"] * int(rng.integers(3, 60))) + f" {prediction.condition}"
        prediction.text, prediction.answer_sha256 = text, sha256_text(text)
        prediction.status = Prediction.Status.OK
        prediction.save(update_fields=["text", "answer_sha256", "status"])
        Grade.objects.create(run=run, task=prediction.task, answer_sha256=prediction.answer_sha256,
                             status=Grade.Status.OK, score=int(rng.integers(0, 4)))
    dashboard_refresh(run)
    tables_refresh(run)
    return run


def contrast_arrays(run, a, b):
    """Per-task person and normalized difference from `final_grades` (not the tables' grade matrix)."""
    table = final_grades(run)
    person = dict(run.protocol.cohort.tasks.values_list("pk", "session__person_id"))
    tasks = [t for t in run.protocol.cohort.cohort_tasks.order_by("position").values_list("task_id", flat=True)
             if table[a].get(t) is not None and table[b].get(t) is not None]
    # (a − b) / 3, as PairedSet.diff writes it: a/3 − b/3 can differ in the last bit.
    diff = (np.array([table[a][t] for t in tasks], float) - np.array([table[b][t] for t in tasks], float)) / 3
    return tasks, np.array([person[t] for t in tasks]), diff


def test_the_tables_are_the_robustness_statistics_of_the_grades(tables_run):
    payload = tables_cached(tables_run).payload
    row = next(c for c in payload["contrasts"] if c["name"] == "Whole minus memory")
    tasks, person, diff = contrast_arrays(tables_run, WHOLE, MEMORY)
    expected = stats.paired_bootstrap(person, diff, seed=7, draws=600)
    assert (row["task_weighted"]["lo"], row["task_weighted"]["hi"]) == (expected.lo, expected.hi)
    by_person = stats.paired_bootstrap(person, diff, seed=7, draws=600, weighting="person")
    assert row["person_weighted"]["estimate"] == pytest.approx(by_person.estimate)
    assert row["person_weighted"]["lo"] == by_person.lo
    table = final_grades(tables_run)
    per_task = stats.threshold_decomposition([table[WHOLE][t] for t in tasks], [table[MEMORY][t] for t in tasks]).per_task
    for k in range(3):
        direct = stats.paired_bootstrap(person, per_task[k], seed=7, draws=600)
        assert (row["thresholds"]["delta"][k]["lo"], row["thresholds"]["delta"][k]["hi"]) == (direct.lo, direct.hi)
    # Specific reference answers, by the rule applied to the stored reference texts.
    reference = dict(tables_run.protocol.cohort.tasks.values_list("pk", "answer_turn__text"))
    specific = np.array(["specific" if is_specific(reference[t]) else "other" for t in tasks], dtype=object)
    assert payload["specific_tasks"] == sum(is_specific(reference[t]) for t in reference)
    split = robustness.subgroups(specific, person, diff, seed=7, draws=600, order=["specific", "other"])
    got = row["subgroups"]["reference answer"]
    assert [g["estimate"] for g in got["groups"]] == pytest.approx([r.estimate for r in split.groups.values()])
    assert 0 < (specific == "specific").sum() < len(tasks)
    assert got["difference"]["estimate"] == pytest.approx(split.difference.estimate)
    assert (got["difference"]["lo"], got["difference"]["hi"]) == (split.difference.lo, split.difference.hi)
    assert np.ptp(diff) > 0
    # Multi-session people: p-0 had two sessions, if the cohort kept both (one per person per draw).
    exclusion = row["exclusions"][0]
    assert exclusion["all"]["n_tasks"] == len(tasks)
    assert payload["multi_session_people"] == exclusion["people_excluded"]
    # Answer length regression: slope and intercept against numpy least squares.
    words = {(p.condition, p.task_id): len(p.text.split()) for p in Prediction.objects.filter(
        run=tables_run, label="final", condition__in=[WHOLE, MEMORY]).exclude(text=None)}
    known = [i for i, t in enumerate(tasks) if (WHOLE, t) in words and (MEMORY, t) in words]
    x = np.array([np.log1p(words[(WHOLE, tasks[i])]) - np.log1p(words[(MEMORY, tasks[i])]) for i in known])
    fit = row["regressions"].get("log answer length gap")
    assert len(known) == len(tasks) and np.ptp(x) > 0
    (intercept, slope), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), diff[known], rcond=None)
    assert (fit["slope"]["estimate"], fit["intercept"]["estimate"]) == pytest.approx((slope, intercept))
    assert fit["slope"]["lo"] <= fit["slope"]["hi"]


def test_the_cache_follows_the_grades(tables_run):
    dashboard, tables = cached_results(tables_run)
    assert dashboard is not None and tables is not None
    prediction = Prediction.objects.filter(run=tables_run, condition=WHOLE, label="final").first()
    Grade.objects.filter(run=tables_run, task=prediction.task, answer_sha256=prediction.answer_sha256).update(
        status=Grade.Status.MISSING, score=None)
    assert cached_results(tables_run) == (None, None)
    dashboard_refresh(tables_run)
    tables_refresh(tables_run)
    assert cached_results(tables_run)[1] is not None


EXPECTED = {"owner": 200, "analyst": 200, "viewer": 200, "rater": 403, "outsider": 404}


@pytest.mark.parametrize("who", sorted(EXPECTED))
@pytest.mark.parametrize("fmt", ["", "?format=csv", "?format=latex"])
def test_the_tables_pages_by_role(client, cast, tables_run, who, fmt):
    client.force_login(cast[who])
    slug = tables_run.protocol.project.slug
    for url in (reverse("run_tables", args=[slug, tables_run.pk]),
                reverse("project_tables", args=[slug]) + f"?run={tables_run.pk}"):
        joined = url + (fmt if "?" not in url else fmt.replace("?", "&"))
        response = client.get(joined)
        assert response.status_code == EXPECTED[who], joined
        if response.status_code == 200:
            body = response.content.decode()
            for text in Turn.objects.values_list("text", flat=True):
                assert text not in body            # numbers only, for every role that may see them


def test_the_downloads_hold_the_page_figures(client, cast, tables_run):
    client.force_login(cast["viewer"])
    slug = tables_run.protocol.project.slug
    url = reverse("run_tables", args=[slug, tables_run.pk])
    rows = list(csv.DictReader(io.StringIO(client.get(url + "?format=csv").content.decode())))
    dashboard, tables = cached_results(tables_run)
    planned = next(c for c in dashboard.payload["contrasts"] if c["name"] == "Whole minus memory")
    family = next(r for r in rows if r["table"] == "planned" and r["row"] == "family interval"
                  and r["contrast"] == "Whole minus memory")
    assert float(family["lo"]) == pytest.approx(planned["family_lo"]) and int(family["n_people"]) == planned["people"]
    assert {r["table"] for r in rows} >= {"planned", "weightings", "thresholds", "subgroups", "exclusions"}
    latex = client.get(url + "?format=latex").content.decode()
    assert latex.count(r"\begin{tabular}") == len({r["table"] for r in rows})
    assert r"$\Delta P_{\geq 1}$" in latex
    assert client.get(url + "?format=pdf").status_code == 404


def test_the_dashboard_says_which_criteria_are_met(client, cast, tables_run):
    client.force_login(cast["viewer"])
    slug = tables_run.protocol.project.slug
    response = client.get(reverse("run_dashboard", args=[slug, tables_run.pk]))
    verdicts = {v["name"]: v["verdict"] for v in response.context["verdicts"]}
    planned = next(c for c in response.context["data"]["contrasts"] if c["name"] == "Whole minus memory")
    assert verdicts["whole record beats memory"] == ("met" if planned["family_lo"] > 0 else "not met")
    assert verdicts["not worse"] == "met"
    assert 'data-verdict="met"' in response.content.decode()


def test_criteria_are_sealed_and_bad_criteria_refused(tables_run):
    protocol = tables_run.protocol
    assert protocol_settings(protocol)["criteria"] == protocol.criteria
    bad = Protocol.objects.create(
        project=protocol.project, name="bad", cohort=protocol.cohort, conditions=protocol.conditions,
        generator=OFFLINE, judge=OFFLINE, contrasts=protocol.contrasts,
        criteria=[{"name": "x", "contrast": "no such contrast", "interval": "pointwise", "above": 0}])
    with pytest.raises(RunError, match="not a planned contrast"):
        protocol_seal(protocol=bad, user=None)
    bad.criteria = []
    assert "criteria" not in protocol_settings(bad)     # a protocol without criteria seals as before


def test_the_export_through_contrast_gives_the_dashboard_figures(client, cast, tables_run, tmp_path):
    """Round trip: the numeric package, read by `manage.py contrast`, gives the dashboard's numbers."""
    prediction = Prediction.objects.filter(run=tables_run, condition=MEMORY, label="final").first()
    Grade.objects.filter(run=tables_run, task=prediction.task, answer_sha256=prediction.answer_sha256).update(
        status=Grade.Status.MISSING, score=None)         # one task lost to a missing grade
    dashboard = dashboard_refresh(tables_run).payload
    tables = tables_refresh(tables_run).payload
    client.force_login(cast["viewer"])
    package = client.get(reverse("run_scores_csv", args=[tables_run.protocol.project.slug, tables_run.pk]))
    path = tmp_path / "scores.csv"
    path.write_bytes(package.content)
    out = io.StringIO()
    call_command("contrast", "--csv", str(path), "--a", WHOLE, "--b", MEMORY, "--seed", "7", "--draws", "600",
                 "--family-size", "2", "--json", "--robustness", stdout=out)
    report = json.loads(out.getvalue())
    # The robustness figures of the tables page, from the package alone, to the last digit.
    row = next(c for c in tables["contrasts"] if c["name"] == "Whole minus memory")
    figures = report["robustness"]
    assert figures["person_weighted"] == row["person_weighted"]
    assert [{k: d[k] for k in ("k", "estimate", "lo", "hi")} for d in figures["thresholds"]] == [
        {k: d[k] for k in ("k", "estimate", "lo", "hi")} for d in row["thresholds"]["delta"]]
    assert figures["top_step_share"] == row["thresholds"]["top_step_share"]
    split = row["subgroups"]["target position"]
    assert figures["target position"]["groups"] == {g.pop("label"): g for g in split["groups"]}
    assert {k: figures["target position"]["difference"][k] for k in ("estimate", "lo", "hi")} == {
        k: split["difference"][k] for k in ("estimate", "lo", "hi")}
    fit = row["regressions"]["log answer length gap"]
    for part in ("slope", "intercept"):
        assert {k: figures["log answer length gap"][part][k] for k in ("estimate", "lo", "hi", "n_tasks")} == {
            k: fit[part][k] for k in ("estimate", "lo", "hi", "n_tasks")}
    planned = next(c for c in dashboard["contrasts"] if c["name"] == "Whole minus memory")
    assert (report["estimate"], report["lo"], report["hi"]) == (planned["estimate"], planned["lo"], planned["hi"])
    assert (report["family_lo"], report["family_hi"]) == (planned["family_lo"], planned["family_hi"])
    assert (report["tasks"], report["people"], report["lost_to_missing"]) == (
        planned["n_tasks"], planned["people"], planned["lost"]) and planned["lost"] == 1
    assert report["person_weighted"] == pytest.approx(planned["person_weighted"])
    assert (report["wins"], report["ties"], report["losses"]) == (planned["wins"], planned["ties"], planned["losses"])
    # Leaving a person out (App. I.5) is the bootstrap of the others' tasks.
    rows = [r for r in csv.DictReader(io.StringIO(package.content.decode())) if r["condition"] in (WHOLE, MEMORY)]
    out = io.StringIO()
    call_command("contrast", "--csv", str(path), "--a", WHOLE, "--b", MEMORY, "--seed", "7", "--draws", "600",
                 "--exclude-person", "1", "--json", stdout=out)
    without = json.loads(out.getvalue())
    kept = {}
    for r in rows:
        if r["person"] != "1":
            kept.setdefault(r["task"], {"person": int(r["person"])})[r["condition"]] = r["grade"]
    paired = [t for t in kept.values() if t[WHOLE] != "" and t[MEMORY] != ""]
    diff = (np.array([float(t[WHOLE]) for t in paired]) - np.array([float(t[MEMORY]) for t in paired])) / 3
    direct = stats.paired_bootstrap([t["person"] for t in paired], diff, seed=7, draws=600)
    assert (without["lo"], without["hi"], without["people"]) == (direct.lo, direct.hi, direct.n_people)


def test_contrast_says_what_is_wrong_with_a_long_file(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("task,person,condition,grade\n1,1,a,3\n1,2,b,1\n")
    with pytest.raises(CommandError, match="two people"):
        call_command("contrast", "--csv", str(path), "--a", "a", "--b", "b", "--seed", "1")
    path.write_text("task,person,condition,grade\n1,1,a,3\n1,1,b,1\n")
    with pytest.raises(CommandError, match="no condition c"):
        call_command("contrast", "--csv", str(path), "--a", "a", "--b", "c", "--seed", "1")
    path.write_text("task,person,condition\n1,1,a\n")
    with pytest.raises(CommandError, match="needs the columns grade"):
        call_command("contrast", "--csv", str(path), "--a", "a", "--b", "b", "--seed", "1")


def test_the_run_page_and_run_report_say_which_criteria_are_met(client, cast, tables_run):
    # Verdicts are evaluated once, at the analysis phase, on the dashboard's full rows.
    verdicts = {v["name"]: v for v in tables_run.analysis["verdicts"]}
    assert set(verdicts) == {"whole record beats memory", "not worse"}
    assert verdicts["not worse"]["verdict"] == "met"
    summary = {c["name"]: c for c in tables_run.analysis["contrasts"]}
    family_lo = summary["Whole minus memory"].get("family_lo")
    expected = "not decided" if family_lo is None else ("met" if family_lo > 0 else "not met")
    assert verdicts["whole record beats memory"]["verdict"] == expected
    client.force_login(cast["viewer"])
    body = client.get(reverse("run_detail", args=[tables_run.protocol.project.slug, tables_run.pk])).content.decode()
    assert 'data-verdict="met"' in body and "not worse: met" in body
    out = io.StringIO()
    call_command("run_report", str(tables_run.pk), stdout=out)
    assert "criterion not worse: met" in out.getvalue()
    assert f"criterion whole record beats memory: {expected}" in out.getvalue()


def test_the_tables_of_an_offline_run_say_so(client, cast, tables_run):
    """The pages and the LaTeX caption name the offline stand-in; with a model, neither does."""
    client.force_login(cast["viewer"])
    slug = tables_run.protocol.project.slug
    run_url = reverse("run_tables", args=[slug, tables_run.pk])
    runs_url = reverse("project_tables", args=[slug]) + f"?run={tables_run.pk}"
    for url in (run_url, runs_url):
        assert client.get(url).content.decode().count('id="offline-notice"') == 1, url
        latex = client.get(url + ("&" if "?" in url else "?") + "format=latex").content.decode()
        assert f"{tables_run.pk}: offline stand-in, not model results" in latex, url
    model = {"provider": "openai", "base_url": "", "model": "m"}
    Protocol.objects.filter(pk=tables_run.protocol_id).update(generator=model, judge=model)
    for url in (run_url, runs_url):
        body = client.get(url).content.decode()
        assert 'id="offline-notice"' not in body and "tables-csv" in body, url
        assert "offline" not in client.get(url + ("&" if "?" in url else "?") + "format=latex").content.decode()
