"""In Chromium: a newcomer logs in, opens a project and reads a transcript with its targets marked."""
import os
from contextlib import contextmanager

import pytest
from django.contrib.auth import get_user_model

from experiments.core.interviews.readers import read_interview_path
from experiments.models import Membership, Project, Role
from experiments.data.sessions import sessions_import
from experiments.core.tasks import TaskRule
from tests.figure_helpers import draw_every_figure
from tests.test_import_sessions import GENAGENTS

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def chromium():
    """Debian's Chromium through Playwright (never `playwright install`: no browser download)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is missing: apt-get install -y chromium (bin/test and .ci/run do)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        )
        yield browser
        browser.close()


@pytest.fixture
def browser():
    # Playwright's sync API runs an event loop in this thread; the live server's
    # database calls happen in another thread, so Django's async guard is moot here.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with chromium() as launched:
        yield launched


@pytest.fixture
def analyst_with_a_transcript(transactional_db):
    """Data set up before Playwright starts its event loop: ORM calls made while that
    loop runs would open a connection in another async context, never closed."""
    project = Project.objects.create(slug="demo", name="Demo project")
    sessions_import(
        project=project,
        parsed=read_interview_path(GENAGENTS),
        source_format="genagents",
        source_file="genagents-sample",
        task_rule=TaskRule(),
    )
    user = get_user_model().objects.create_user("ana", password="a-long-test-password")
    Membership.objects.create(project=project, user=user, role=Role.ANALYST)
    return user


def test_an_analyst_logs_in_and_reads_a_transcript_with_targets_marked(
    analyst_with_a_transcript, live_server, browser, tmp_path
):
    page = browser.new_page()
    page.goto(live_server.url + "/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "ana")
    page.fill("#id_password", "a-long-test-password")
    page.click("button[type=submit]")
    page.click("text=Demo project")
    page.click("text=01fd7d2a-0357-4c1b-9f3e-8eade2d537ae")

    assert page.locator("li.turn").count() == 227
    assert page.locator("li.turn.target-q").count() == 5
    assert page.locator("li.turn.reference").count() == 5
    assert page.locator("#record-cut").is_visible()
    # The targets are told apart from ordinary turns by colour, not only by a class name.
    target_bg = page.locator("li.turn.target-q").first.evaluate("e => getComputedStyle(e).backgroundColor")
    plain_bg = page.locator("li.turn.interviewer:not(.target-q)").first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert target_bg != plain_bg
    assert page.locator("dl.screener dd").first.inner_text() == "Joon"
    page.screenshot(path=str(tmp_path / "session.png"), full_page=False)



@pytest.fixture
def viewer_with_a_finished_run(transactional_db):
    """A finished offline run with its dashboard computed (before Playwright's loop starts)."""
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.execution.driver import run_inline
    from experiments.execution.control import run_start
    from experiments.models import Protocol, Run
    from experiments.execution.sealing import protocol_seal
    from experiments.data.sessions import cohort_draw
    from tests.conftest import parsed_session, qa_turns

    project = Project.objects.create(slug="dash", name="Dashboard project")
    sessions = [parsed_session(f"s{k}", qa_turns(12), person=f"p{k}", study=f"st{k % 2}") for k in range(4)]
    sessions_import(project=project, parsed=sessions, source_format="jsonl", source_file="x.jsonl")
    offline = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
    protocol = Protocol.objects.create(
        project=project, name="p", cohort=cohort_draw(project=project, name="c", size=4, seed=1),
        conditions=["memory(concrete,100w)+one-shot", "ownwords(B=|memory|)"], generator=offline, judge=offline,
        contrasts=[{"name": "OwnWords minus memory", "family": True,
                    "terms": {"ownwords(B=|memory|)": 1, "memory(concrete,100w)+one-shot": -1}}],
        bootstrap={"seed": 1, "draws": 500},
    )
    run = Run.objects.create(protocol=protocol_seal(protocol=protocol, user=None))
    run_start(run=run)
    run = run_inline(run.pk)
    dashboard_refresh(run)
    user = get_user_model().objects.create_user("vic", password="a-long-test-password")
    Membership.objects.create(project=project, user=user, role=Role.VIEWER)
    return run


def test_a_viewer_sees_the_dashboard_figures_drawn_by_the_local_plotly(
    viewer_with_a_finished_run, live_server, browser
):
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "vic")
    page.fill("#id_password", "a-long-test-password")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/p/dash/runs/{viewer_with_a_finished_run.pk}/analysis/")
    page.wait_for_selector(".plot .main-svg")
    # every figure container got a plotly SVG (forest, means, thresholds, transitions, lengths, cost)
    # once scrolled to: they draw lazily
    assert draw_every_figure(page) >= 5
    assert errors == []
    assert page.locator(".plot:has(.main-svg)").count() == page.locator(".plot").count()
    assert page.locator("#offline-label").is_visible()
