"""In Chromium: the run dashboard draws every figure with a one-button toolbar, no cloud or share
button, and fits 1280 and 1920 px wide windows; screenshots are saved for review."""
import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Project, Role
from tests.figure_helpers import draw_every_figure
from tests.test_browser_session import CHROMIUM, browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow


@pytest.fixture
def viewer_and_run(transactional_db):
    """Data committed before Playwright starts (its loop must not open ORM connections)."""
    from tests.annotations_helpers import finished_run
    from experiments.analysis.dashboard import dashboard_refresh
    project = Project.objects.create(slug="dash", name="Dashboard")
    run = finished_run(project, people=3)
    dashboard_refresh(run)
    user = get_user_model().objects.create_user("vera", password="a-long-test-password")
    Membership.objects.create(project=project, user=user, role=Role.VIEWER)
    return run


def screenshots_dir(tmp_path) -> Path:
    path = Path(os.environ.get("OWNWORDS_SCREENSHOTS") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_dashboard_figures_have_no_cloud_button_and_fit_the_window(viewer_and_run, live_server, browser, tmp_path):
    run = viewer_and_run
    url = f"{live_server.url}/p/dash/runs/{run.pk}/analysis/"
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", "a-long-test-password")
    page.click("button[type=submit]")
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        page.wait_for_selector(".plot .main-svg")
        plots = draw_every_figure(page)
        assert plots >= 3
        page.wait_for_function(f"document.querySelectorAll('.plot .main-svg').length >= {plots}")
        buttons = page.evaluate("Array.from(document.querySelectorAll('.plot')).map("
                                "p => p.querySelectorAll('.modebar-btn').length)")
        assert max(buttons) <= 1, buttons
        html = page.content().lower()
        assert "chart studio" not in html and "sendDataToCloud".lower() not in html
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page is {overflow} px wider than a {width} px window"
        shot = screenshots_dir(tmp_path) / f"dashboard-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000
    assert not errors
    context.close()
