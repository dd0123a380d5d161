"""In Chromium: axe-core (vendored, test-only) finds no WCAG 2.1 A/AA violation on the app's pages,
for each role that uses them."""
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Project, Role, Session
from tests.figure_helpers import draw_every_figure
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow

AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text()
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
PASSWORD = "a-long-test-password"


@pytest.fixture
def site(transactional_db):
    """A finished run, its dashboard, a campaign; an owner and a rater. Committed before Playwright starts."""
    from annotations.campaigns import campaign_create
    from experiments.analysis.dashboard import dashboard_refresh
    from tests.annotations_helpers import CONDITIONS, add_raters, finished_run
    project = Project.objects.create(slug="axe", name="Accessibility")
    run = finished_run(project, people=2)
    dashboard_refresh(run)
    add_raters(project, ["rater-a", "rater-b"])
    campaign = campaign_create(run=run, name="axe-campaign", conditions=CONDITIONS, raters=["rater-a", "rater-b"])
    User = get_user_model()
    owner = User.objects.create_user("olga", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    for name in ("rater-a",):
        user = User.objects.get(username=name)
        user.set_password(PASSWORD)
        user.save()
    task = run.predictions.first().task
    session = Session.objects.filter(project=project).first()
    p = f"/p/{project.slug}"
    return {
        "olga": [f"{p}/", f"{p}/sessions/{session.external_id}/", f"/p/{project.slug}/runs/{run.pk}/",
                 f"{p}/runs/{run.pk}/analysis/", f"{p}/runs/{run.pk}/predictions/",
                 f"{p}/runs/{run.pk}/predictions/{task.pk}/", f"{p}/ratings/", f"{p}/ratings/{campaign.pk}/",
                 f"{p}/ratings/{campaign.pk}/results/", f"{p}/ratings/{campaign.pk}/adjudication/", "/"],
        "rater-a": [f"{p}/ratings/", f"{p}/ratings/{campaign.pk}/rate/"],
    }


def violations(page) -> list[dict]:
    # Evaluated through the DevTools protocol, not as an inline <script>: the site's
    # Content-Security-Policy refuses inline scripts, a test's included.
    page.evaluate(AXE)
    result = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", TAGS)
    return [{"id": v["id"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in result["violations"]]


def test_no_wcag_violation_on_any_page(site, live_server, browser):
    found = {}
    login = browser.new_page()
    login.goto(live_server.url + "/accounts/login/")
    found["/accounts/login/"] = violations(login)
    login.close()
    for username, paths in site.items():
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(live_server.url + "/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        for path in paths:
            response = page.goto(live_server.url + path)
            assert response.status == 200, path
            page.wait_for_load_state("networkidle")
            draw_every_figure(page)  # figures draw lazily: axe checks them drawn
            found[f"{username} {path}"] = violations(page)
        context.close()
    bad = {page: v for page, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)
