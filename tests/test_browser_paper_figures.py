"""In Chromium, under the Content-Security-Policy: the dashboard's grade distributions (Fig. 6) and
the cohort map (Fig. 5) draw, and the tables page with the budget sweep by share of the source
loads, with no console error and no policy violation."""
import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Project, Role
from tests.figure_helpers import draw_every_figure
from tests.test_browser_csp import LISTEN
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow
PASSWORD = "a-long-test-password"
CONDITIONS = ["memory(concrete,100w)+one-shot", "ownwords(B=|memory|)", "recency(B=|memory|)", "whole-record"]


@pytest.fixture
def pages(transactional_db):
    """A finished run with its dashboard and tables, a second cohort, and a viewer; committed before
    Playwright starts."""
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.analysis.tables import tables_refresh
    from experiments.data.sessions import cohort_draw
    from tests.annotations_helpers import finished_run
    project = Project.objects.create(slug="paperfigs", name="Paper figures")
    run = finished_run(project, people=4, conditions=CONDITIONS)
    cohort_draw(project=project, name="second", size=2, seed=9)
    dashboard_refresh(run)
    tables_refresh(run)
    for name, role in (("fig-owner", Role.OWNER), ("fig-viewer", Role.VIEWER)):
        user = get_user_model().objects.create_user(name, password=PASSWORD)
        Membership.objects.create(project=project, user=user, role=role)
    return run.pk


def test_the_new_figures_draw_under_the_policy_without_a_console_error(pages, live_server, browser):  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(LISTEN)
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: m.type in ("error", "warning") and problems.append(f"{m.type}: {m.text}"))
    base = live_server.url
    for user in ("fig-owner", "fig-viewer"):
        page.goto(base + "/accounts/login/")
        page.fill("#id_username", user)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        for path, figures in ((f"/p/paperfigs/runs/{pages}/analysis/", "#grade-distribution .plot"),
                              ("/p/paperfigs/cohorts/map/", ".plot"),
                              (f"/p/paperfigs/runs/{pages}/tables/", None)):
            assert page.goto(base + path).status == 200, path
            if figures:
                assert draw_every_figure(page) >= (1 if "analysis" in path else 2), path
                page.locator(figures).first.wait_for()
                assert page.locator(f"{figures} .barlayer .trace").count() >= 1, path
            else:
                page.locator("#share-groups-table").wait_for()
            assert page.evaluate("window.__csp") == [], path
        assert page.goto(base + "/p/paperfigs/cohorts/map/").ok   # labels for the owner only
        assert page.locator("#cohort-labels").count() == (1 if user == "fig-owner" else 0)
        context.clear_cookies()
    context.close()
    assert not problems, problems
