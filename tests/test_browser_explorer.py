"""In Chromium, as an analyst: open a run, filter the explorer to a disagreement, step with `j`,
show the evidence inside the transcript, click a dashboard cell and land on the filtered explorer.
Screenshots of each page at 1280 and 1920 px wide are saved for review."""
import hashlib
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Project, Role
from tests.figure_helpers import draw_every_figure
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow
PASSWORD = "a-long-test-password"


@pytest.fixture
def analyst_and_run(transactional_db):
    """Data committed before Playwright starts; two conditions graded differently on several tasks."""
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.analysis.grades import store_scores
    from experiments.models import Grade
    from tests.annotations_helpers import MEMORY, OWNWORDS, finished_run
    project = Project.objects.create(slug="ex", name="Explorer")
    run = finished_run(project, people=3, conditions=[MEMORY, OWNWORDS])
    # The offline stand-in answers both alike; give OwnWords its own answers, graded 3, and memory's
    # answers the grade 0, so the two conditions disagree on every task (OwnWords 3, memory 0).
    for prediction in run.predictions.filter(condition=MEMORY, label="final"):
        Grade.objects.filter(run=run, task=prediction.task, answer_sha256=prediction.answer_sha256).update(score=0)
    for prediction in run.predictions.filter(condition=OWNWORDS, label="final"):
        prediction.text = f"{prediction.text} (OwnWords)"
        prediction.answer_sha256 = hashlib.sha256(prediction.text.encode()).hexdigest()
        prediction.save(update_fields=["text", "answer_sha256"])
        Grade.objects.get_or_create(run=run, task=prediction.task, answer_sha256=prediction.answer_sha256,
                                    defaults={"status": Grade.Status.OK, "score": 3})
    store_scores(run.pk)  # as the engine does after writing answers and grades
    dashboard_refresh(run)
    user = get_user_model().objects.create_user("ana", password=PASSWORD)
    Membership.objects.create(project=project, user=user, role=Role.ANALYST)
    return run, MEMORY, OWNWORDS


def shoot(page, name, tmp_path):
    folder = Path(os.environ.get("OWNWORDS_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        path = folder / f"{name}-{width}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000
    page.set_viewport_size({"width": 1280, "height": 900})


def test_an_analyst_finds_a_disagreement_steps_through_it_and_clicks_through_the_dashboard(
        analyst_and_run, live_server, browser, tmp_path):
    run, memory, ownwords = analyst_and_run
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/p/ex/runs/{run.pk}/")
    page.click("text=Explore predictions")
    # The disagreement: OwnWords 3, memory 0, chosen in the form.
    page.select_option("select[name=a]", ownwords)
    page.select_option("select[name=ga]", "3")
    page.select_option("select[name=b]", memory)
    page.select_option("select[name=gb]", "0")
    page.click("#explorer-filters button")
    page.wait_for_selector("#explorer-count")
    query = parse_qs(urlparse(page.url).query)
    assert query["a"] == [ownwords] and query["ga"] == ["3"] and query["gb"] == ["0"]
    matches = int(page.inner_text("#explorer-count strong"))
    assert matches >= 2
    shoot(page, "explorer", tmp_path)
    with page.expect_navigation():
        page.click("#explorer-table tbody tr:first-child td.question-col a")
    page.wait_for_load_state("load")
    first = page.url
    assert "a=" in first  # the filter travels with the task
    page.keyboard.press("j")
    page.wait_for_url(lambda url: url != first)
    assert parse_qs(urlparse(page.url).query)["ga"] == ["3"]
    # The evidence inside the transcript.
    source = page.locator("#evidence-source")
    if source.count():
        values = source.locator("option").evaluate_all("os => os.map(o => o.value).filter(Boolean)")
        source.select_option(values[0])
    shoot(page, "task", tmp_path)
    # A dashboard cell opens the explorer on the tasks behind it.
    page.goto(f"{live_server.url}/p/ex/runs/{run.pk}/analysis/")
    page.wait_for_selector(".plot .main-svg")
    draw_every_figure(page)  # they draw lazily, when scrolled near
    heatmap = page.locator(".plot").filter(has=page.locator(".heatmaplayer")).first
    heatmap.scroll_into_view_if_needed()
    shoot(page, "dashboard", tmp_path)
    box = heatmap.locator(".nsewdrag").first.bounding_box()
    # The bottom-right cell: grade 3 under the columns' condition, 0 under the rows'.
    page.mouse.click(box["x"] + box["width"] * 7 / 8, box["y"] + box["height"] * 7 / 8)
    page.wait_for_url("**/explore/**")
    landed = parse_qs(urlparse(page.url).query)
    assert landed["ga"] == ["3"] and landed["gb"] == ["0"]
    assert int(page.inner_text("#explorer-count strong")) == matches
    assert not errors, errors
    page.close()
