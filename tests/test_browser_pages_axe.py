"""In Chromium: the project, member, audit, protocol and run pages have no
WCAG 2.1 A/AA violation (axe-core, vendored for the tests), and screenshots of each at 1280 and
1920 px go to var/screenshots/pages/ for review."""
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from experiments.data.audit_log import Kind
from experiments.models import AuditEntry, Membership, Project, Role
from tests.test_browser_accessibility import AXE, PASSWORD, violations
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
    bad = {page: v for page, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)


@pytest.fixture
def rated_site(transactional_db):
    from annotations.campaigns import campaign_create
    from tests.annotations_helpers import add_raters, finished_run
    project = Project.objects.create(slug="tgt", name="Targets")
    run = finished_run(project, people=2)
    owner = get_user_model().objects.create_user("otto", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    add_raters(project, names=["rita", "rolf"])
    for name in ("rita", "rolf"):
        get_user_model().objects.filter(username=name).update(password=owner.password)
    campaign = campaign_create(run=run, name="targets", conditions=list(run.protocol.conditions),
                               raters=["rita", "rolf"], seed=2)
    task = run.protocol.cohort.cohort_tasks.order_by("position").first().task_id
    p = f"/p/{project.slug}"
    return {"otto": [f"{p}/", f"{p}/runs/{run.pk}/predictions/{task}/"],
            "rita": [f"{p}/ratings/{campaign.pk}/rate/"]}


def test_targets_are_24_px_and_landmarks_unique(rated_site, live_server, browser):
    # WCAG 2.2's target size (<summary>, text buttons such as Undo) and one name per landmark
    # (the site's navigation and the task page's own): axe's two rules on the pages that have them.
    found = {}
    for username, paths in rated_site.items():
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(live_server.url + "/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        for path in paths:
            assert page.goto(live_server.url + path).status == 200, path
            page.wait_for_load_state("networkidle")
            page.evaluate(AXE)
            result = page.evaluate(
                "() => axe.run(document, {runOnly: {type: 'rule', values: ['target-size', 'landmark-unique']}})")
            found[path] = [{"id": v["id"], "nodes": [n["target"] for n in v["nodes"]][:5]} for v in result["violations"]]
        context.close()
    bad = {page: v for page, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)
