"""In Chromium at a phone's width (412 px): no page of a project is wider than the screen. A wider
page is zoomed out to fit, so every line of it is smaller than the phone's text; wide tables scroll
on their own instead (each a tab stop, so the keyboard can scroll it). Every page reached from the
project page by its links (one of each kind: the first task page, not all twenty), with a finished run,
its dashboard and a rated campaign."""
import re
from collections import deque
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Project, Role
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow
PASSWORD = "a-long-test-password"
PHONE = 412
MOST_PAGES = 60
# Not pages: files, the API's JSON, actions reached only by forms.
NOT_PAGES = ("/api/", ".csv", ".json", ".jsonl", ".png", ".svg", "/export", "/download", "/logout", "/static/")


@pytest.fixture
def project_pages(transactional_db):
    from annotations.campaign_agreement import campaign_results
    from annotations.campaigns import campaign_create
    from annotations.models import Assignment
    from annotations.rating import rating_record
    from experiments.analysis.dashboard import dashboard_refresh
    from tests.annotations_helpers import CONDITIONS, add_raters, finished_run
    project = Project.objects.create(slug="phone", name="Phone")
    run = finished_run(project, people=4)
    dashboard_refresh(run)
    add_raters(project, ["rater-a", "rater-b"])
    campaign = campaign_create(run=run, name="phone", conditions=CONDITIONS, raters=["rater-a", "rater-b"], seed=5)
    for a in Assignment.objects.filter(campaign=campaign).select_related("item", "rater"):
        rating_record(campaign=campaign, user=a.rater, assignment_id=a.pk, grade=a.item.number % 4, flagged=False,
                      flag_reason="", note="", seconds=10.0)
    campaign_results(campaign, use_cache=False)
    from annotations.pairwise import pairwise_campaign_create
    pairwise_campaign_create(run=run, name="phone-pairs", conditions=CONDITIONS, raters=["rater-a", "rater-b"])
    campaign_create(run=run, name="phone-open", conditions=CONDITIONS, raters=["rater-a", "rater-b"], seed=6)
    owner = get_user_model().objects.create_user("olivia", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    return "/p/phone/"


def _signed_in(browser, live_server, username):
    page = browser.new_page(viewport={"width": PHONE, "height": 823})
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    return page


@pytest.fixture
def rater_campaigns(project_pages):
    """(pk, name) of the campaigns rater-a still has items in ("phone" is rated through), with a password to
    sign in by. Read before Playwright starts its loop: an ORM call while it runs opens a connection in
    another async context, never closed, and PostgreSQL then cannot drop the test database."""
    from annotations.models import RatingCampaign
    user = get_user_model().objects.get(username="rater-a")
    user.set_password(PASSWORD)
    user.save()
    return list(RatingCampaign.objects.exclude(name="phone").order_by("pk").values_list("pk", "name"))


def test_a_raters_pages_are_no_wider_than_a_phone(project_pages, rater_campaigns, live_server, browser):
    """The rating page of a grade campaign and of a pairwise one (two answers side by side), with an item shown."""
    assert len(rater_campaigns) == 2
    page = _signed_in(browser, live_server, "rater-a")
    for pk, name in rater_campaigns:
        page.goto(f"{live_server.url}{project_pages}ratings/{pk}/rate/")
        page.locator("#rate-answer, #rate-answer-a").first.wait_for(state="visible", timeout=20_000)
        page.wait_for_timeout(300)  # the item's text laid out
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE, (name, page.evaluate(
            f"Array.from(document.querySelectorAll('main *')).filter(e => e.getBoundingClientRect().right > {PHONE})"
            ".slice(0, 4).map(e => e.tagName + '#' + e.id + '.' + e.className)"))
    page.close()


def test_no_page_of_a_project_is_wider_than_a_phone(project_pages, live_server, browser):
    page = _signed_in(browser, live_server, "olivia")
    seen, queue, wide, untabbable = {project_pages}, deque([project_pages]), {}, {}
    kinds = {project_pages}  # each address with its numbers blanked: one page of each kind
    while queue and len(seen) <= MOST_PAGES:
        path = queue.popleft()
        response = page.goto(live_server.url + path)
        if response is None or response.status != 200 or "text/html" not in response.headers.get("content-type", ""):
            continue
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE:
            wide[path] = (width, page.evaluate(
                f"Array.from(document.querySelectorAll('main *')).filter(e => e.getBoundingClientRect().right > {PHONE})"
                ".slice(0, 3).map(e => e.tagName + '.' + e.className)"))
        scrolling = page.evaluate("Array.from(document.querySelectorAll('main table'))"
                                  ".filter(t => t.scrollWidth > t.clientWidth).map(t => t.tabIndex)")
        if any(index != 0 for index in scrolling):
            untabbable[path] = scrolling
        for href in page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))"):
            link = urlsplit(href)
            if link.netloc or not link.path.startswith(project_pages) or any(p in link.path for p in NOT_PAGES):
                continue
            target = link.path + (f"?{link.query}" if link.query and "page=" not in link.query else "")
            kind = re.sub(r"\d+", "N", target)
            if kind not in kinds:
                kinds.add(kind)
                seen.add(target)
                queue.append(target)
    page.close()
    assert len(seen) > 25, sorted(seen)  # the crawl reached the project's pages
    assert not wide, wide
    assert not untabbable, untabbable
