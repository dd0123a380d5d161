"""In Chromium: the tables pages and the dashboard with its criteria have no WCAG 2.1 A/AA
violation (axe-core), and screenshots go to var/screenshots/pages/ for review."""
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Project, Protocol, Role
from tests.test_browser_accessibility import PASSWORD, violations
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow

SHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots" / "pages"


@pytest.fixture
def site(transactional_db):
    from tests.annotations_helpers import finished_run
    project = Project.objects.create(slug="robust", name="Robustness")
    run = finished_run(project, people=4)
    # Written past the seal's guard (a test shortcut): the pages evaluate whatever criteria are stored.
    Protocol.objects.filter(pk=run.protocol_id).update(criteria=[
        {"name": "OwnWords beats the memory", "contrast": "OwnWords minus memory", "interval": "family", "above": 0}])
    viewer = get_user_model().objects.create_user("vera", password=PASSWORD)
    Membership.objects.create(project=project, user=viewer, role=Role.VIEWER)
    p = f"/p/{project.slug}"
    return [f"{p}/runs/{run.pk}/tables/", f"{p}/tables/?run={run.pk}", f"{p}/runs/{run.pk}/analysis/"]


def test_the_tables_pages_pass_axe_and_are_photographed(site, live_server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    found = {}
    for path in site:
        response = page.goto(live_server.url + path)
        assert response.status == 200, path
        page.wait_for_load_state("networkidle")
        name = path.strip("/").replace("/", "_").replace("?", "_").replace("=", "-")
        page.screenshot(path=str(SHOTS / f"{name}-1280.png"), full_page=True)
        found[path] = violations(page)
        if "tables" in path:
            assert page.locator("#table-planned").count() == 1
    assert page.locator("#criteria .criterion").count() == 1       # the dashboard says met or not met
    context.close()
    bad = {p: v for p, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)
