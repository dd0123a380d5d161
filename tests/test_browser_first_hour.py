"""In Chromium, a researcher's first hour as links a person follows, at 1280 and 1920 px, with
screenshots: home → project → dashboard → a contrast's row → the explorer → a task; and a rater:
their queue → rate with the keyboard → (the owner) the results with numbers."""
import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from experiments.models import Membership, Project, Role
from tests.test_browser_dashboard import screenshots_dir
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow
PASSWORD = "a-long-test-password"


@pytest.fixture
def first_hour(transactional_db):
    """Committed before Playwright starts: a finished offline run, its dashboard, a campaign."""
    from annotations.campaigns import campaign_create
    from experiments.analysis.dashboard import dashboard_refresh
    from tests.annotations_helpers import add_raters, finished_run
    project = Project.objects.create(slug="hour", name="First hour")
    run = finished_run(project, people=4)
    dashboard_refresh(run)
    User = get_user_model()
    owner = User.objects.create_user("hana", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    add_raters(project, names=["rudi", "rosa"])
    for name in ("rudi", "rosa"):
        user = User.objects.get(username=name)
        user.set_password(PASSWORD)
        user.save()
    campaign = campaign_create(run=run, name="hour-ratings", conditions=list(run.protocol.conditions),
                               raters=["rudi", "rosa"], seed=3)
    return {"run": run, "campaign": campaign}


def _login(context, url, username):
    page = context.new_page()
    page.goto(url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    return page


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_first_hour_by_links_alone(first_hour, live_server, browser, tmp_path, width):
    shots = screenshots_dir(tmp_path)
    problems = []
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = _login(context, live_server.url, "hana")
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    # home → project → the run's dashboard, by the links on the pages
    page.click("text=First hour")
    page.wait_for_url("**/p/hour/")
    page.screenshot(path=str(shots / f"hour-project-{width}.png"), full_page=True)
    page.click("#next-step a")                                   # "Read the dashboard of run …"
    page.wait_for_url(f"**/runs/{first_hour['run'].pk}/analysis/")
    page.screenshot(path=str(shots / f"hour-dashboard-{width}.png"), full_page=True)
    # a contrast's row → the explorer on the tasks where its two conditions differ
    page.locator("#contrasts-table tbody a").first.click()
    page.wait_for_url("**/explore/**")
    assert "sort=-diff" in page.url
    page.screenshot(path=str(shots / f"hour-explorer-{width}.png"), full_page=True)
    rows = page.locator("td.question-col a")
    if not rows.count():  # the offline stand-in may grade both conditions alike on every task
        page.goto(f"{live_server.url}/p/hour/runs/{first_hour['run'].pk}/explore/")
    rows.first.click()
    page.wait_for_url("**/predictions/**")
    assert page.locator("#task-nav").count() == 1
    page.screenshot(path=str(shots / f"hour-task-{width}.png"), full_page=True)
    # the rater: their queue, three ratings with the keyboard
    rater = browser.new_context(viewport={"width": width, "height": 900})
    rpage = _login(rater, live_server.url, "rudi")
    rpage.goto(f"{live_server.url}/p/hour/ratings/{first_hour['campaign'].pk}/rate/")
    for grade in ("2", "3", "1"):
        done = int(rpage.locator("#rate-done").inner_text())
        rpage.keyboard.press(grade)
        rpage.keyboard.press("Enter")
        expect(rpage.locator("#rate-done")).to_have_text(str(done + 1))  # (no eval: the site's CSP)
    rpage.screenshot(path=str(shots / f"hour-rate-{width}.png"), full_page=True)
    rater.close()
    # the owner reads the results: numbers, not "nothing to compare" for the raters' counts
    page.goto(f"{live_server.url}/p/hour/ratings/{first_hour['campaign'].pk}/results/")
    counts = page.locator("#results-counts").inner_text()
    assert "3 ratings by 1 rater" in counts, counts
    page.screenshot(path=str(shots / f"hour-results-{width}.png"), full_page=True)
    # nothing wider than the window on any of these pages
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()
    assert not problems, problems
