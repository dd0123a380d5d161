"""In Chromium: a survey run's dashboard draws its two figures with the vendored plotly
bundle, labels the synthetic sample and the offline stand-in, and logs nothing to the console."""
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from experiments.core.survey.prompt import MEMORY, OWNWORDS, SCREENER_ONLY
from experiments.execution.driver import run_inline
from experiments.models import Cohort, Membership, Project, Role
from tests.engine_helpers import make_run
from tests.figure_helpers import draw_every_figure
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture
from tests.survey_helpers import SAMPLE

pytestmark = pytest.mark.slow
PASSWORD = "a-long-test-password"
OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


@pytest.fixture
def survey_page(transactional_db):
    project = Project.objects.create(slug="svy", name="Survey")
    call_command("import_survey", str(SAMPLE), "--project", "svy", "--name", "twin", "--synthetic")
    run = make_run(project, Cohort.objects.get(name="twin development"), conditions=[SCREENER_ONLY, MEMORY, OWNWORDS],
                   generator=OFFLINE, bootstrap={"draws": 500})
    run = run_inline(run.pk)
    assert run.analysis.get("kind") == "survey"
    owner = get_user_model().objects.create_user("fiona", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    return f"/p/svy/runs/{run.pk}/survey/"


def test_survey_dashboard_draws_its_figures_without_a_console_message(survey_page, live_server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: m.type in ("error", "warning") and problems.append(f"{m.type}: {m.text}"))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    assert page.goto(live_server.url + survey_page).status == 200
    assert page.locator(".plot").count() == 2
    # Figures draw lazily when scrolled near (static/js/figures.js): scroll to each first.
    assert draw_every_figure(page) == 2
    bars = page.locator(".plot .barlayer .trace").count()
    points = page.locator(".plot .scatterlayer .trace").count()
    synthetic = page.locator("#synthetic-label").inner_text()
    offline = page.locator("#offline-label").inner_text()
    page.close()
    assert bars == 2 and points == 2
    assert "Synthetic data" in synthetic and "Offline stand-in" in offline
    assert not problems, problems


@pytest.fixture
def six_condition_survey(transactional_db):
    """The demo's survey protocol: six conditions, eight option columns on a respondent's page."""
    from experiments.core.survey import prompt
    project = Project.objects.create(slug="svy6", name="Survey six")
    call_command("import_survey", str(SAMPLE), "--project", "svy6", "--name", "twin", "--synthetic")
    conditions = [prompt.SCREENER_ONLY, prompt.MEMORY, prompt.OWNWORDS, prompt.MEMORY_PLUS_OWNWORDS,
                  prompt.WHOLE_PERSONA, prompt.MEMORY_PLUS_WHOLE_PERSONA]
    run = make_run(project, Cohort.objects.get(name="twin development"), conditions=conditions,
                   generator=OFFLINE, bootstrap={"draws": 200})
    run = run_inline(run.pk)
    owner = get_user_model().objects.create_user("fiona", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    return f"/p/svy6/runs/{run.pk}/survey/"


def test_a_respondent_page_leaves_the_item_column_readable_at_1280(six_condition_survey, live_server, browser):
    """Eight option columns once squeezed the item to ~110 px, a word or two a line."""
    survey_page = six_condition_survey
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(live_server.url + survey_page + "respondents/")
    page.click("main li a")
    page.wait_for_selector("#respondent-items")
    item = page.locator("#respondent-items thead th").nth(1)
    assert item.inner_text() == "Item" and item.bounding_box()["width"] >= 200
    # ... and the table still fits inside the page's content column
    assert page.evaluate("""() => { const main = document.querySelector('main'), style = getComputedStyle(main);
        const right = main.getBoundingClientRect().right - parseFloat(style.paddingRight);
        return document.querySelector('#respondent-items').getBoundingClientRect().right <= right + 1; }""")
    page.close()
