"""In Chromium: the project, member, audit, protocol and run pages have no
WCAG 2.1 A/AA violation (axe-core, vendored for the tests), and screenshots of each at 1280 and
1920 px go to var/screenshots/pages/ for review."""
import json
import threading
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from experiments.data.audit_log import Kind
from experiments.models import AuditEntry, Membership, Project, Role
from tests.test_browser_accessibility import PASSWORD, violations
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow

SHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots" / "pages"


@pytest.fixture
def site(transactional_db):
    from tests.annotations_helpers import finished_run
    project = Project.objects.create(slug="axe", name="Accessibility")
    run = finished_run(project, people=2)
    owner = get_user_model().objects.create_user("olga", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    AuditEntry.objects.create(project=project, user=owner, username="olga", kind=Kind.SESSION,
                              target="session s-1", path="/p/axe/sessions/s-1/")
    p = f"/p/{project.slug}"
    protocol = run.protocol.pk
    return [f"{p}/members/", f"{p}/audit/", "/projects/new/", f"{p}/protocols/new/",
            f"{p}/protocols/{protocol}/", f"{p}/runs/{run.pk}/"]


def test_the_new_pages_pass_axe_and_are_photographed(site, live_server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    found = {}
    for width in (1280, 1920):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto(live_server.url + "/accounts/login/")
        page.fill("#id_username", "olga")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        for path in site:
            response = page.goto(live_server.url + path)
            assert response.status == 200, path
            page.wait_for_load_state("networkidle")
            name = path.strip("/").replace("/", "_") or "home"
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            if width == 1280:
                found[path] = violations(page)
        context.close()
    threading.Thread(target=connections.close_all).start()
    bad = {page: v for page, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)
