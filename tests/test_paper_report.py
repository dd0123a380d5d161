"""The paper report: the catalog lists every table and figure of the paper in its order; on a project with
one finished offline run of the `common` template the report renders what that run feeds (checked by
hand on small cases) and names the ready-made protocol for the rest; the page's role matrix; the
archive (CSV = the page's numbers, LaTeX that parses, report.json's hashes); the queued rebuild after
a run finishes; hostile names escaped on the page and in LaTeX."""
import csv
import hashlib
import html
import io
import json
import re
import shutil
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from rq import SimpleWorker

from experiments.analysis import report_archive
from experiments.analysis.exports import csv_text
from experiments.analysis.grades import final_grades
from experiments.analysis.post_hoc_contrasts import POST_HOC
from experiments.analysis.paper_report_state import cached_report, report_inputs_sha256
from experiments.core.paper_report_catalog import (
    CATALOG, NEEDS_RUN, NOT_HERE, PAPER_FIGURES, PAPER_TABLES, RENDERED, STATES, number_of,
)
from experiments.core.report_format import MINUS, cell_text, latex_problems, table_latex
from experiments.execution import paper_report_build
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.paper_report_build import refresh_report, resolve
from experiments.execution.protocol_templates import protocol_from_template
from experiments.execution.sealing import protocol_seal
from experiments.core.stats.paired import paired_bootstrap
from experiments.models import AuditEntry, PaperReport, PaperReportImages, Run, Task
from tests.conftest import private_rq_queue
from tests.engine_helpers import build_cohort

PAPER = Path("/work/shared/paper/000_d10a81cc7fc5e22d.txt")
CONCRETE_FUSION, CONCRETE_ONE_SHOT = "memory(concrete,100w)+fusion(3)", "memory(concrete,100w)+one-shot"


def common_run(project, *, name="common-cohort", draws=200) -> Run:
    cohort = build_cohort(project, sessions=3, targets=2, name=name)
    protocol, _ = protocol_from_template(template="common", cohort=cohort)
    protocol.bootstrap = {"seed": 20260918, "draws": draws}
    protocol.save()
    run = Run.objects.create(protocol=protocol_seal(protocol=protocol, user=None))
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    return run


@pytest.fixture
def report_project(project, cast):
    run = common_run(project)
    return project, run, refresh_report(project)


def items_of(report) -> dict:
    return {item["id"]: item for item in report.items}


# ---- the catalog ---------------------------------------------------------------------------------

def test_the_catalog_lists_every_table_and_figure_of_the_paper_in_its_order():
    ids = [item.id for item in CATALOG]
    assert len(ids) == len(set(ids)) and len({i.slug for i in CATALOG}) == len(CATALOG)
    assert set(PAPER_TABLES) <= set(ids) and set(PAPER_FIGURES) <= set(ids)
    tables = [number_of(i)[1] for i in ids if i.startswith("Table ")]
    assert tables == list(range(1, 33))  # Tables 1–32, each once, in order
    figures = [(number_of(i)[1], number_of(i)[2]) for i in ids if i.startswith("Figure ")]
    assert figures == sorted(figures)  # 1, 2, 3a, 3b, 3c, 4, …, 8, 11
    assert [f"Figure {n}{s}" for n, s in figures] == list(PAPER_FIGURES)
    # main text (§…) before the appendices; the items beyond the paper last
    sections = [item.section for item in CATALOG if item.in_paper]
    first_appendix = next(i for i, s in enumerate(sections) if s.startswith("App."))
    assert all(s.startswith("§") for s in sections[:first_appendix])
    assert all(s.startswith("App.") for s in sections[first_appendix:])
    beyond = [i for i, item in enumerate(CATALOG) if not item.in_paper]
    assert beyond and beyond == list(range(len(CATALOG) - len(beyond), len(CATALOG)))
    for item in CATALOG:
        assert item.kind in ("table", "figure") and item.title and item.section
        assert item.builder is None or re.fullmatch(r"experiments(\.\w+)+:\w+", item.builder)
        assert item.template is None or re.fullmatch(r"[a-z0-9-]+", item.template)
        assert item.builder or item.offline_only  # an item without a builder says why


@pytest.mark.skipif(not PAPER.exists(), reason="the paper's text is not on this machine")
def test_quoted_titles_are_the_papers_captions():
    text = PAPER.read_text().replace("’", "'")
    absent = [item.id for item in CATALOG if item.caption and item.in_paper and f"{item.id}: {item.title}" not in text]
    assert not absent


def test_a_builder_not_in_this_version_is_said_not_a_crash():
    assert resolve("experiments.analysis.no_such_module:table1") is None
    assert resolve("experiments.analysis.report_items_cached:no_such_function") is None
    assert resolve("experiments.analysis.report_items_cached:table7") is not None


# ---- one finished offline run of the common template -----------------------------------------------

def test_the_common_run_renders_what_it_feeds_and_names_the_template_of_the_rest(report_project):
    project, run, report = report_project
    items = items_of(report)
    assert [i["id"] for i in report.items] == [c.id for c in CATALOG]
    assert all(i["state"] in STATES for i in report.items)
    for key in ("Table 5", "Table 6", "Table 7", "Table 8", "Table 9", "Table 10", "Table 11", "Table 12", "Table 13",
                "Table 14", "Table 24", "Table 25", "Table 28", "Table 29", "Figure 3b", "Figure 3c", "Figure 5",
                "Figure 6", "Figure 7"):
        assert items[key]["state"] == RENDERED, (key, items[key]["reason"])
        assert items[key]["table"]["inputs"]["offline_runs"] == [run.pk]  # labelled the stand-in
    for key, template in (("Table 2", "memory-systems"), ("Table 17", "budget-sweep"), ("Table 18", "budget-sweep"),
                          ("Figure 4", "budget-sweep"), ("Figure 11", "budget-sweep"), ("Table 19", "confirmation"),
                          ("Table 20", "memory-systems")):
        assert items[key]["state"] == NEEDS_RUN and items[key]["template"] == template, key
    for key in ("Figure 1", "Figure 2", "Figure 8", "Table 3"):
        assert items[key]["state"] == NOT_HERE and items[key]["reason"], key
    assert "diagram" in items["Figure 1"]["reason"] and items["Figure 1"]["table"]["rows"]  # its parameters


def test_table_8_the_post_hoc_contrasts_by_hand(report_project):
    project, run, report = report_project
    table = items_of(report)["Table 8"]["table"]
    rows = {r[0]: r for r in table["rows"]}
    grades = final_grades(run)
    person_of = dict(Task.objects.filter(pk__in=grades["whole-record"]).values_list("pk", "session__person_id"))
    assert list(rows) == [name for name, _ in POST_HOC]
    for name, key in POST_HOC:
        a, b = grades[key], grades["whole-record"]
        tasks = [t for t in sorted(b) if a.get(t) is not None and b[t] is not None]  # jointly graded
        diff = np.array([(a[t] - b[t]) / 3 for t in tasks])
        by_hand = paired_bootstrap([person_of[t] for t in tasks], diff, seed=20260918, draws=200)
        row = dict(zip(table["columns"], rows[name]))
        assert row["Tasks"] == len(tasks) and row["People"] == by_hand.n_people
        assert row["Estimate"] == pytest.approx(by_hand.estimate, abs=1e-12)
        assert (row["95% lo"], row["95% hi"]) == (pytest.approx(by_hand.lo, abs=1e-12),
                                                  pytest.approx(by_hand.hi, abs=1e-12))
        assert (row["Wins"], row["Ties"], row["Losses"]) == ((diff > 0).sum(), (diff == 0).sum(), (diff < 0).sum())
    assert any("not part of the prespecified family" in n for n in table["notes"])


def test_table_25_and_table_5_by_hand(report_project):
    project, run, report = report_project
    items = items_of(report)
    grades = final_grades(run)
    fusion, one_shot = grades[CONCRETE_FUSION], grades[CONCRETE_ONE_SHOT]
    by_hand = np.zeros((4, 4), dtype=int)  # rows: the second-named (one-shot), columns: fusion
    for task, g in fusion.items():
        by_hand[one_shot[task], g] += 1
    block = [r for r in items["Table 25"]["table"]["rows"]]
    start = next(i for i, r in enumerate(block) if r[0] == "concrete: fusion − one-shot")
    assert [r[2:6] for r in block[start:start + 4]] == by_hand.tolist()
    higher = sum(fusion[t] > one_shot[t] for t in fusion)
    assert block[start][6:9] == [higher, sum(fusion[t] == one_shot[t] for t in fusion),
                                 sum(fusion[t] < one_shot[t] for t in fusion)]
    means = {r[0]: r for r in items["Table 5"]["table"]["rows"]}
    for condition, per_task in grades.items():
        if condition in means:
            values = [g / 3 for g in per_task.values() if g is not None]
            assert means[condition][1] == pytest.approx(sum(values) / len(values))
            assert means[condition][4] == len(values)


def test_cells_round_as_the_paper_prints_them():
    table = {"columns": ["a", "b", "n"], "digits": {"a": 4, "b": 3}, "signed": ["a"]}
    assert cell_text(0.01234, "a", table) == "+0.0123" and cell_text(-0.01236, "a", table) == f"{MINUS}0.0124"
    assert cell_text(0.5, "b", table) == "0.500" and cell_text(1768, "n", table) == "1768"
    assert cell_text(None, "a", table) == "–"
    assert latex_problems(r"\begin{table}{x}\end{table}") == []
    assert latex_problems(r"\begin{table}{x\end{table}") and latex_problems(r"\begin{table}\end{tabular}")


def test_an_unchanged_journal_keeps_its_audit_rows_and_a_changed_one_is_audited_again(report_project, monkeypatch):
    from experiments.execution import report_audit
    from experiments.models import Slot
    project, run, report = report_project
    before = items_of(report)
    assert before["Table 13"]["table"]["notes"][0].startswith(f"run {run.pk}: 0 violations; journal ")

    def no_audit(run):
        raise AssertionError("the journal was read again")
    monkeypatch.setattr(report_audit, "audit_run", no_audit)
    again = items_of(refresh_report(project))
    for key in ("Table 13", "Table 14"):
        assert again[key]["state"] == RENDERED and again[key]["table"] == before[key]["table"]
    Slot.objects.filter(run=run).order_by("pk").first().save()  # a changed journal: audited again
    assert items_of(refresh_report(project))["Table 13"]["state"] == NOT_HERE  # (here: the refusing audit)


# ---- the page and its roles ---------------------------------------------------------------------------

@pytest.mark.parametrize("role, status", [("owner", 200), ("analyst", 200), ("viewer", 200), ("rater", 403),
                                          ("outsider", 404)])
def test_the_role_matrix(client, report_project, cast, role, status):
    project = report_project[0]
    client.force_login(cast[role])
    page = client.get(reverse("paper_report", args=[project.slug]))
    assert page.status_code == status
    rebuild = client.post(reverse("paper_report_rebuild", args=[project.slug]))
    assert rebuild.status_code == (302 if role in ("owner", "analyst") else status if status != 200 else 403)
    if status == 200:
        body = page.content.decode()
        assert 'id="table-7"' in body and "Offline stand-in" in body
        # the buttons that spend or rebuild are for owners and analysts only
        assert ('id="report-rebuild"' in body) == (role != "viewer")
        assert ('class="row needs-run-form"' in body) == (role != "viewer")
        assert "gardening" not in body and "Could you tell me more" not in body  # no participant text


def test_anonymous_is_sent_to_log_in(client, report_project):
    for name in ("paper_report", "paper_report_zip"):
        response = client.get(reverse(name, args=[report_project[0].slug]))
        assert response.status_code == 302 and "login" in response["Location"]


def test_the_page_serves_the_cache_and_says_when_it_is_stale(client, report_project, cast):
    project, run, report = report_project
    client.force_login(cast["owner"])
    body = client.get(reverse("paper_report", args=[project.slug])).content.decode()
    assert 'id="report-stale"' not in body and 'id="figure-3c"' in body
    assert 'value="common"' not in body or 'name="template"' in body
    assert 'value="budget-sweep"' in body  # the needs-run button opens the ready-made protocol
    Run.objects.filter(pk=run.pk).update(status=Run.Status.STOPPED)  # an input of the report changed
    assert cached_report(project)[1] is True
    assert 'id="report-stale"' in client.get(reverse("paper_report", args=[project.slug])).content.decode()
    # Rebuild with no worker on the queue: built in the request, and the run that stopped is gone from it
    client.post(reverse("paper_report_rebuild", args=[project.slug]))
    rebuilt, stale = cached_report(project)
    assert not stale and rebuilt.built_at > report.built_at
    assert items_of(rebuilt)["Table 7"]["state"] == NEEDS_RUN
    assert 'id="report-stale"' not in client.get(reverse("paper_report", args=[project.slug])).content.decode()


# ---- the archive ---------------------------------------------------------------------------------------

def page_cells(body: str, slug: str) -> list[list[str]]:
    section = body.split(f'id="{slug}"', 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>", 1)[1], re.S)
    return [[re.sub(r"<.*?>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]


def _no_browser_here(figures):
    raise AssertionError("a download started a browser")


def test_the_archive_csv_latex_and_hashes(client, report_project, cast, monkeypatch):
    project, run, report = report_project
    monkeypatch.setattr(report_archive, "figure_images", _no_browser_here)
    client.force_login(cast["viewer"])
    body = client.get(reverse("paper_report", args=[project.slug])).content.decode()
    response = client.get(reverse("paper_report_zip", args=[project.slug]))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert AuditEntry.objects.filter(project=project, kind="export", target__contains="report.zip").exists()
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    meta = json.loads(archive.read("report.json"))
    assert [i["id"] for i in meta["items"]] == [c.id for c in CATALOG] and meta["stale"] is False
    assert meta["figure_images"] == report_archive.NOT_MADE_YET  # built without images: said, none drawn
    checked = 0
    for listed in meta["items"]:
        for path, sha in listed["files"].items():
            assert hashlib.sha256(archive.read(path)).hexdigest() == sha, path
        item = items_of(report)[listed["id"]]
        if listed["state"] != RENDERED or not item.get("table"):
            continue
        stem = f"{'figures' if item['kind'] == 'figure' else 'tables'}/{item['slug']}"
        rows = list(csv.reader(io.StringIO(archive.read(f"{stem}.csv").decode())))
        assert rows[0] == item["table"]["columns"]
        # every CSV cell, rounded by the page's rule, is the page's cell
        shown = page_cells(body, item["slug"])
        assert len(shown) == len(rows) - 1, item["id"]
        for csv_row, page_row, stored in zip(rows[1:], shown, item["table"]["rows"]):
            for column, raw, cell, value in zip(rows[0], csv_row, page_row, stored):
                # the CSV holds the number unrounded; rounded by the page's rule it is the page's cell
                if isinstance(value, str):  # text through the app's CSV-injection guard
                    written = list(csv.reader(io.StringIO(csv_text(["x"], [{"x": value}]))))[1][0]
                    assert raw == written, (item["id"], column, raw, value)
                    read = value
                else:
                    read = None if value is None and raw == "" else _number(raw)
                    assert read == value, (item["id"], column, raw, value)
                assert html.unescape(cell) == cell_text(read, column, item["table"]), (item["id"], column, cell)
        tex = archive.read(f"{stem}.tex").decode()
        assert latex_problems(tex) == [] and r"\toprule" in tex and r"\bottomrule" in tex
        assert ("offline stand-in" in tex) == bool(item["table"]["inputs"]["offline_runs"])
        checked += 1
    assert checked >= 15


def test_the_archive_takes_the_images_its_build_made_and_only_for_its_figures(client, report_project, cast,
                                                                              monkeypatch):
    project, run, report = report_project
    drawn = []

    def fake_images(figures):  # stands in for kaleido: one PNG and SVG a figure, named by its slug
        drawn.append(sorted(figures))
        return {slug: {"png": b"png of " + slug.encode(), "svg": b"<svg>" + slug.encode()} for slug in figures}, "made"

    monkeypatch.setattr(paper_report_build, "figure_images", fake_images)
    kept = paper_report_build.store_images(report)
    assert drawn == [sorted(report_archive.drawable_figures(report.items))] and "figure-3c" in drawn[0]
    monkeypatch.setattr(report_archive, "figure_images", _no_browser_here)
    client.force_login(cast["viewer"])
    archive = zipfile.ZipFile(io.BytesIO(client.get(reverse("paper_report_zip", args=[project.slug])).content))
    assert archive.read("figures/figure-3c.png") == b"png of figure-3c"
    meta = json.loads(archive.read("report.json"))
    assert meta["figure_images"] == "made"
    listed = next(i for i in meta["items"] if i["id"] == "Figure 3c")
    assert listed["files"]["figures/figure-3c.svg"] == hashlib.sha256(b"<svg>figure-3c").hexdigest()
    # A build whose figures differ (a later run) does not take these images: they draw other numbers.
    item = next(i for i in report.items if i["slug"] == "figure-3c")
    item["figure"]["data"][0]["name"] = "changed"
    report.save()
    archive = zipfile.ZipFile(io.BytesIO(client.get(reverse("paper_report_zip", args=[project.slug])).content))
    assert "figures/figure-3c.png" not in archive.namelist()
    assert json.loads(archive.read("report.json"))["figure_images"] == report_archive.NOT_MADE_YET
    assert PaperReportImages.objects.get(pk=kept.pk).figures_sha256 != report_archive.figures_sha256(
        report_archive.drawable_figures(report.items))
    # An older build that finishes drawing after the report changed stores nothing over the newer one's.
    stale = PaperReport.objects.get(pk=report.pk)
    item = next(i for i in stale.items if i["slug"] == "figure-3c")
    item["figure"]["data"][0]["name"] = "older"
    monkeypatch.setattr(paper_report_build, "figure_images", fake_images)
    assert paper_report_build.store_images(stale) is None
    assert PaperReportImages.objects.get(pk=kept.pk).figures_sha256 == kept.figures_sha256
    assert paper_report_build.store_images(report).figures_sha256 == report_archive.figures_sha256(
        report_archive.drawable_figures(report.items))


def _number(raw: str):
    try:
        return int(raw)
    except ValueError:
        try:
            return float(raw)
        except ValueError:
            return raw


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("google-chrome")), reason="no Chrome here")
def test_the_archive_has_png_and_svg_figures_when_a_browser_is_here(report_project):
    project = report_project[0]
    out = io.StringIO()
    path = Path(f"/tmp/report-test-{project.pk}.zip")
    call_command("paper_report", project.slug, out=str(path), stdout=out)
    assert "Table 7: rendered" in out.getvalue() and "Table 19: needs run [confirmation]" in out.getvalue()
    archive = zipfile.ZipFile(path)
    assert archive.read("figures/figure-3c.png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in archive.read("figures/figure-3c.svg")[:200]
    assert json.loads(archive.read("report.json"))["figure_images"].startswith("made")
    path.unlink()


def test_no_browser_is_said_at_once_not_waited_for(monkeypatch):
    # kaleido's own sync server waited for ever when its browser could not start (its thread died):
    # the analysis lane of a worker on a machine without Chromium was held for good.
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    figure = {"data": [{"type": "bar", "x": [1, 2], "y": [3, 4]}], "layout": {}}
    outcome = []
    drawing = threading.Thread(target=lambda: outcome.append(report_archive.figure_images({"f": figure})),
                               daemon=True)
    drawing.start()
    drawing.join(60)
    assert not drawing.is_alive(), "figure_images still waits for a browser that never started"
    images, note = outcome[0]
    assert images == {} and note.startswith("not made: plotly's static export needs Chrome or Chromium")


# ---- the queued rebuild -------------------------------------------------------------------------------

def test_the_report_is_rebuilt_by_the_job_after_a_run_finishes(project, monkeypatch):
    with private_rq_queue("test-report") as queue:
        monkeypatch.setattr(paper_report_build, "report_queue", lambda: queue)
        # No worker serves the queue: a finished run queues nothing (no job left behind for nobody).
        common_run(project, name="unserved", draws=100)
        assert queue.count == 0 and not PaperReport.objects.filter(project=project).exists()
        monkeypatch.setattr(paper_report_build, "queue_has_worker", lambda queue: True)
        # The job draws the figures' images (kaleido stood in for: the real one is tested by the command).
        monkeypatch.setattr(paper_report_build, "figure_images",
                            lambda figures: ({slug: {"png": b"p"} for slug in figures}, "made by the job"))
        run = common_run(project, draws=100)
        assert queue.count == 1 and not PaperReport.objects.filter(project=project).exists()
        SimpleWorker([queue], connection=queue.connection).work(burst=True)
        report = PaperReport.objects.get(project=project)
        assert report.inputs_sha256 == report_inputs_sha256(project)
        assert items_of(report)["Table 7"]["table"]["inputs"]["runs"] == [run.pk]  # the latest common run
        assert [r for r, *_ in items_of(report)["Table 13"]["table"]["rows"]].count(run.pk) == 5  # 4 phases, total
        assert cached_report(project) == (report, False)
        images = PaperReportImages.objects.get(report=report)
        assert images.note == "made by the job"
        assert images.figures_sha256 == report_archive.figures_sha256(report_archive.drawable_figures(report.items))


# ---- hostile names ---------------------------------------------------------------------------------

def test_hostile_names_are_escaped_on_the_page_and_in_latex(client, project, cast, monkeypatch):
    hostile = "<script>alert(1)</script> & {\\}%$#_~^"
    run = common_run(project, name="hostile")
    run.protocol.cohort.__class__.objects.filter(pk=run.protocol.cohort_id).update(name=hostile)
    run.protocol.__class__.objects.filter(pk=run.protocol_id).update(name=hostile[:100])
    report = refresh_report(project)
    client.force_login(cast["owner"])
    body = client.get(reverse("paper_report", args=[project.slug])).content.decode()
    assert "<script>alert(1)</script>" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    figure5 = items_of(report)["Figure 5"]
    assert figure5["table"]["rows"][0][0] == hostile
    tex = table_latex(figure5)
    assert latex_problems(tex) == [] and r"\&" in tex and r"\{\textbackslash{}\}\%\$\#\_" in tex
    # every LaTeX file of the archive parses, whatever names its items carry
    archive = zipfile.ZipFile(io.BytesIO(report_archive.archive_bytes(report, stale=False, images=False)))
    texts = [name for name in archive.namelist() if name.endswith(".tex")]
    assert texts and all(latex_problems(archive.read(name).decode()) == [] for name in texts)
    assert json.loads(archive.read("report.json"))["items"][0]["id"] == "Figure 1"
    assert list(csv.reader(io.StringIO(archive.read("figures/figure-5.csv").decode())))[1][0].startswith("<script>")


def test_one_waiting_rebuild_per_project_however_many_runs_finish(project, monkeypatch):
    with private_rq_queue("test-report-dedupe") as queue:
        monkeypatch.setattr(paper_report_build, "report_queue", lambda: queue)
        monkeypatch.setattr(paper_report_build, "queue_has_worker", lambda queue: True)
        for _ in range(3):
            assert paper_report_build.report_enqueue(project)
        assert queue.count == 1                         # the waiting rebuild covers every finished run
        SimpleWorker([queue], connection=queue.connection).work(burst=True)
        assert paper_report_build.report_enqueue(project) and queue.count == 1   # done: a new one may wait


@pytest.mark.django_db(transaction=True)
def test_a_rebuild_while_another_builds_waits_for_nothing_and_builds_nothing(project):
    import threading
    from django.db import connections
    from experiments.execution.report_lock_sql import report_build_lock
    held, release = threading.Event(), threading.Event()

    def other_build():
        with report_build_lock(project.pk, wait=True):
            held.set()
            release.wait(10)
        connections.close_all()
    thread = threading.Thread(target=other_build)
    thread.start()
    assert held.wait(10)
    assert paper_report_build.refresh_report(project, wait=False) is None      # busy: nothing built here
    assert not PaperReport.objects.filter(project=project).exists()
    release.set()
    thread.join(10)
    assert paper_report_build.refresh_report(project, wait=False) is not None  # free again: built
