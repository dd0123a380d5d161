"""In Chromium: the vendored partial plotly bundle (static/vendor/plotly) draws every figure of the
run dashboard and of a campaign's results, every trace type the app uses (scatter, bar, heatmap,
box), with no error or warning in the console."""
import plotly.offline
import pytest
from django.contrib.auth import get_user_model

from experiments.models import Membership, Project, Role
from tests.figure_helpers import draw_every_figure
from tests.test_browser_session import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = pytest.mark.slow
PASSWORD = "a-long-test-password"
# The layer plotly draws each trace type into.
TRACE_LAYERS = {"scatter": ".scatterlayer .trace", "bar": ".barlayer .trace", "heatmap": ".heatmaplayer .hm",
                "box": ".boxlayer .trace"}


@pytest.fixture
def figure_pages(transactional_db):
    """A finished run with its dashboard and a fully rated campaign with its results; committed
    before Playwright starts."""
    from annotations.campaign_agreement import campaign_results
    from annotations.campaigns import campaign_create
    from annotations.models import Assignment, RatingItem
    from annotations.rating import rating_record
    from experiments.analysis.dashboard import dashboard_refresh
    from tests.annotations_helpers import CONDITIONS, add_raters, finished_run
    project = Project.objects.create(slug="figs", name="Figures")
    run = finished_run(project, people=4)
    dashboard_refresh(run)
    add_raters(project, ["rater-a", "rater-b"])
    campaign = campaign_create(run=run, name="figs", conditions=CONDITIONS, raters=["rater-a", "rater-b"], seed=5)
    for item in RatingItem.objects.filter(campaign=campaign):  # the offline judge says 0 everywhere
        item.judge_score = (item.number * 3) % 4
        item.save(update_fields=["judge_score"])
    for a in Assignment.objects.filter(campaign=campaign).select_related("item", "rater"):
        grade = (a.item.number * 5 + (a.rater.username == "rater-b") * (a.item.number % 3 == 0)) % 4
        rating_record(campaign=campaign, user=a.rater, assignment_id=a.pk, grade=grade, flagged=False,
                      flag_reason="", note="", seconds=10.0)
    campaign_results(campaign, use_cache=False)
    owner = get_user_model().objects.create_user("fiona", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    return [f"/p/figs/runs/{run.pk}/analysis/", f"/p/figs/ratings/{campaign.pk}/results/"]


def test_the_partial_bundle_draws_every_figure_and_trace_type_without_a_console_message(
        figure_pages, live_server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: m.type in ("error", "warning") and problems.append(f"{m.type}: {m.text}"))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    drawn = {}
    for path in figure_pages:
        assert page.goto(live_server.url + path).status == 200
        plots = draw_every_figure(page)
        assert plots >= 3, path
        page.wait_for_function(f"document.querySelectorAll('.plot .main-svg').length >= {plots}")
        assert page.evaluate("Plotly.version") == plotly.offline.get_plotlyjs_version()
        for trace, selector in TRACE_LAYERS.items():
            drawn[trace] = drawn.get(trace, 0) + page.locator(f".plot {selector}").count()
        if path == figure_pages[0]:  # the dashboard's grade grids fill their column, their axis titles fit
            heatmaps = page.evaluate("""Array.from(document.querySelectorAll('.plot')).filter(p => p.querySelector(
                '.heatmaplayer .hm')).map(p => ({figure: p.querySelector('.main-svg').getBoundingClientRect().width,
                column: p.parentElement.getBoundingClientRect().width,
                title: p.querySelector('.g-ytitle').getBoundingClientRect().height,
                plot: p.querySelector('.nsewdrag').getBoundingClientRect().height,
                lines: p.querySelectorAll('.g-ytitle tspan.line').length}))""")
            assert heatmaps and all(abs(h["figure"] - h["column"]) <= 1 and h["column"] > 600
                                    for h in heatmaps), heatmaps
            assert all(h["lines"] <= 1 and h["title"] <= h["plot"] for h in heatmaps), heatmaps
    page.close()
    assert all(drawn.values()), drawn
    assert not problems, problems


def test_figures_below_the_window_draw_only_when_scrolled_near_and_keep_their_place(
        figure_pages, live_server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 700})
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(live_server.url + figure_pages[0])
    first, last = page.locator(".plot").first, page.locator(".plot").last
    first.locator(".main-svg").first.wait_for(state="attached")  # the first screenful draws at once
    page.wait_for_timeout(1500)  # time enough to draw every figure, were they all drawn on load
    assert last.get_attribute("data-drawn") is None
    top_before = page.evaluate("el => el.getBoundingClientRect().top + window.scrollY", last.element_handle())
    plots = draw_every_figure(page)
    assert page.locator(".plot[data-drawn=yes]").count() == plots
    # Each container kept its figure's height before the figure was drawn: nothing below moved.
    assert page.evaluate("el => el.getBoundingClientRect().top + window.scrollY", last.element_handle()) == top_before
    page.close()
    assert not problems, problems


def test_printing_draws_every_figure_without_scrolling(figure_pages, live_server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 700})
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(live_server.url + figure_pages[0])
    page.locator(".plot").first.locator(".main-svg").first.wait_for(state="attached")
    plots = page.locator(".plot").count()
    assert page.locator(".plot").last.get_attribute("data-drawn") is None   # below the window: not yet
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")   # what the browser sends before printing
    page.wait_for_function(f"document.querySelectorAll('.plot .main-svg').length >= {plots}", timeout=10_000)
    assert page.locator(".plot[data-drawn=yes]").count() == plots
    page.close()
    assert not problems, problems


def test_plotly_loads_at_the_first_scroll_when_no_figure_is_mostly_in_view_and_printing_draws_every_figure(
        figure_pages, live_server, browser):
    """A phone's width (no page wider), and a window whose bottom edge shows only the top 60 px of the
    first figure: the page loads without plotly; the first scroll loads it and draws that figure, not the last; and
    printing a page opened without a move draws every figure."""
    page = browser.new_page(viewport={"width": 412, "height": 823})
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    for path in figure_pages:
        page.goto(live_server.url + path)
        top = page.evaluate("document.querySelector('.plot').getBoundingClientRect().top")
        # nothing wider than the phone: a wider page is zoomed out, and more of it is in the first screen
        assert page.evaluate("document.documentElement.scrollWidth") <= 412, path
        # the wide tables scroll on their own instead, each a tab stop so the keyboard can scroll it
        scrolling = page.evaluate("Array.from(document.querySelectorAll('main table'))"
                                  ".filter(t => t.scrollWidth > t.clientWidth).map(t => t.tabIndex)")
        assert scrolling and all(index == 0 for index in scrolling), (path, scrolling)
        page.set_viewport_size({"width": 412, "height": round(top) + 60})
        page.goto(live_server.url + path)
        first = page.locator(".plot").first
        page.wait_for_timeout(1500)
        assert page.evaluate("typeof window.Plotly") == "undefined", path
        assert first.get_attribute("data-drawn") is None
        assert "drawn when you scroll to it" in first.inner_text()  # its placeholder line
        page.mouse.wheel(0, 100)
        first.locator(".main-svg").first.wait_for(state="attached", timeout=30_000)
        assert first.get_attribute("data-drawn") == "yes" and "drawn when" not in first.inner_text()
        assert page.locator(".plot").last.get_attribute("data-drawn") is None  # far below: not yet
    page.goto(live_server.url + figure_pages[0])
    page.wait_for_timeout(1000)
    assert page.evaluate("typeof window.Plotly") == "undefined"
    plots = page.locator(".plot").count()
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    page.wait_for_function(f"document.querySelectorAll('.plot[data-drawn=yes]').length === {plots}", timeout=30_000)
    page.close()
    assert not problems, problems


def test_a_failed_plotly_load_says_so_and_the_next_scroll_or_printing_loads_it_again(
        figure_pages, live_server, browser):
    """The bundle's request fails once (the network or the server failing): the figures in view say they
    could not be drawn, nothing is drawn until the reader moves; the next scroll asks for plotly again and
    draws them. Then, on a page where the load fails again, printing is what retries it."""
    page = browser.new_page(viewport={"width": 1280, "height": 700})
    problems = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "fiona")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    requests = []

    def fail_the_first(route):
        requests.append(route.request.url)
        if len(requests) == 1:
            route.abort("failed")
        else:
            route.continue_()
    page.route("**/plotly-custom.min*.js", fail_the_first)
    page.goto(live_server.url + figure_pages[0])
    first = page.locator(".plot").first
    page.locator(".plot .plot-state", has_text="could not be drawn").first.wait_for()
    page.wait_for_timeout(1000)  # no retry on its own
    assert len(requests) == 1 and first.get_attribute("data-drawn") is None
    assert page.evaluate("typeof window.Plotly") == "undefined"
    assert "drawn when you scroll" not in first.inner_text() and "its table" in first.inner_text()
    page.mouse.wheel(0, 50)
    first.locator(".main-svg").first.wait_for(state="attached", timeout=30_000)
    assert len(requests) == 2 and first.get_attribute("data-drawn") == "yes"

    requests.clear()
    page.goto(live_server.url + figure_pages[0])
    page.locator(".plot .plot-state", has_text="could not be drawn").first.wait_for()
    plots = page.locator(".plot").count()
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    page.locator(".plot[data-drawn=yes]").nth(plots - 1).wait_for(state="attached", timeout=30_000)
    assert len(requests) == 2 and page.locator(".plot[data-drawn=yes]").count() == plots
    page.close()
    assert not problems, problems
