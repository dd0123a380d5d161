"""The Content-Security-Policy: every page sends it, no template holds an inline
script, and in Chromium the key pages — the dashboard's plotly figures, the rating page's keyboard
flow, the explorer, the run page and a campaign's results page — run under it without one violation."""
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Role
from ownwords_site.middleware import CONTENT_SECURITY_POLICY
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "a-long-test-password"
# Collected in the page before any of its own scripts run (Playwright's init scripts are not
# subject to the page's policy).
LISTEN = ("window.__csp = []; document.addEventListener('securitypolicyviolation', "
          "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sourceFile || '')));")


def test_the_policy_allows_no_inline_script_and_no_eval():
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["script-src"] == "'self'"
    assert "unsafe" not in directives["script-src"] and "unsafe" not in directives["default-src"]
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"


def test_no_template_holds_an_inline_script_or_handler():
    problems = []
    for path in list((REPO / "templates").rglob("*.html")) + list((REPO / "experiments").rglob("templates/**/*.html")):
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            if "src=" not in tag and "application/json" not in tag:
                problems.append(f"{path.name}: {tag}")
        problems += [f"{path.name}: {m}" for m in re.findall(r"\son[a-z]+=\"", text)]
        problems += [f"{path.name}: javascript: URL" for _ in re.findall(r"javascript:", text)]
    assert problems == []


@pytest.mark.django_db
def test_every_answer_carries_the_policy(client, cast):
    client.force_login(cast["owner"])
    for path in ("/", "/p/alpha/", "/accounts/login/", "/admin/login/", "/p/alpha/nope/", "/p/alpha/search/?q=a%00"):
        response = client.get(path)
        assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
    response = client.get("/static/css/site.css")
    assert response.get("Content-Security-Policy") == CONTENT_SECURITY_POLICY


@pytest.fixture
def site(transactional_db):
    """A finished offline run with its dashboard, a campaign and its results, a viewer and a rater."""
    from annotations import campaign_agreement
    from annotations.campaigns import campaign_create
    from experiments.analysis.dashboard import dashboard_refresh
    from experiments.models import Project
    from tests.annotations_helpers import CONDITIONS, RATERS, add_raters, finished_run
    project = Project.objects.create(slug="csp", name="Policy")
    run = finished_run(project)
    dashboard_refresh(run)
    add_raters(project)
    campaign = campaign_create(run=run, name="csp", conditions=CONDITIONS, raters=RATERS[:2], seed=1)
    campaign_agreement.results_for_page(campaign, enqueue=lambda *a: False)
    owner = get_user_model().objects.create_user("cspowner", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    rater = get_user_model().objects.get(username="rater-a")
    rater.set_password(PASSWORD)
    rater.save()
    return {"run": run.pk, "campaign": campaign.pk}


def login(page, base, username):
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_key_pages_run_under_the_policy_without_a_violation(site, live_server, browser):  # noqa: F811
    from tests.figure_helpers import draw_every_figure
    context = browser.new_context()
    context.add_init_script(LISTEN)
    page = context.new_page()
    console, errors, seen = [], [], {}
    page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    base, run, campaign = live_server.url, site["run"], site["campaign"]

    login(page, base, "cspowner")
    for path, figures in ((f"/p/csp/runs/{run}/analysis/", True), (f"/p/csp/runs/{run}/", False),
                          (f"/p/csp/runs/{run}/explore/", False), (f"/p/csp/ratings/{campaign}/results/", False)):
        response = page.goto(base + path)
        assert response.status == 200 and response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        page.wait_for_load_state("networkidle")
        if figures:
            page.wait_for_selector(".plot .main-svg")
            assert draw_every_figure(page) >= 1, path
        seen[path] = page.evaluate("window.__csp")

    login(page, base, "rater-a")
    page.goto(f"{base}/p/csp/ratings/{campaign}/rate/")
    first = page.locator("#rate-assignment").input_value()
    page.keyboard.press("2")
    page.keyboard.press("Enter")  # the script posts with fetch and swaps in the next item
    page.locator("#rate-done", has_text="1").wait_for()  # (a locator: wait_for_function would eval)
    assert page.locator("#rate-assignment").input_value() != first
    seen["rate"] = page.evaluate("window.__csp")
    context.close()
    assert {path: v for path, v in seen.items() if v} == {} and console == [] and errors == []
