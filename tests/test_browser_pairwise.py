"""In Chromium: a rater compares pairs with the keyboard only (A, B, T, Enter), no reload between
pairs, is refused without a choice, and undoes with U."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from experiments.models import Membership, Project, Role
from tests.test_browser_rating import PASSWORD, _log_in, browser  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def pair_queue(transactional_db):
    """A pairwise campaign rater-a has pairs in, committed before Playwright starts; their queue as
    the page should show it (answer A and B by the side each assignment drew)."""
    from annotations.models import Assignment
    from annotations.pairwise import pairwise_campaign_create
    from tests.annotations_helpers import CONDITIONS, RATERS, add_raters, finished_run

    project = Project.objects.create(slug="alpha", name="Alpha study")
    owner = get_user_model().objects.create_user("owner-user", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    run = finished_run(project, people=2)
    add_raters(project)
    campaign = pairwise_campaign_create(run=run, name="pairs", conditions=CONDITIONS, raters=RATERS[:2],
                                        user=owner, seed=11)
    rater = get_user_model().objects.get(username="rater-a")
    queue = []
    for a in (Assignment.objects.filter(campaign=campaign, rater=rater)
              .select_related("item__prediction", "item__prediction_b").order_by("position")):
        x, y = a.item.prediction.text, a.item.prediction_b.text
        queue.append({"assignment": a.pk, "a": x if a.x_on_a else y, "b": y if a.x_on_a else x})
    assert len(queue) > 3
    return {"campaign": campaign, "rater": rater, "queue": queue}


def _shown(page):
    return {"assignment": int(page.input_value("#rate-assignment")), "a": page.inner_text("#rate-answer-a"),
            "b": page.inner_text("#rate-answer-b")}


def _choose(page, key: str, radio: str):
    before = page.input_value("#rate-assignment")
    page.keyboard.press(key)
    assert page.is_checked(radio)
    page.keyboard.press("Enter")
    page.wait_for_function("v => document.getElementById('rate-assignment').value !== v", arg=before)


def _stored(campaign, rater):
    from annotations.models import HumanGrade

    def read():
        try:
            return list(HumanGrade.objects.filter(assignment__campaign=campaign, assignment__rater=rater)
                        .order_by("assignment__position").values_list("assignment_id", "preference", "grade"))
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(read).result()


def test_a_rater_compares_pairs_by_keyboard(pair_queue, live_server, browser):  # noqa: F811
    campaign, rater, queue = pair_queue["campaign"], pair_queue["rater"], pair_queue["queue"]
    errors = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _log_in(page, live_server.url)
    page.goto(f"{live_server.url}/p/alpha/ratings/{campaign.pk}/rate/")
    assert _shown(page) == queue[0]
    page.evaluate("window.__marker = 1")
    for i, (key, radio) in enumerate([("a", "#pref-a"), ("t", "#pref-tie"), ("b", "#pref-b")], start=1):
        _choose(page, key, radio)
        assert page.evaluate("window.__marker") == 1  # no reload
        assert _shown(page) == queue[i]
        assert not page.is_checked("#pref-a") and not page.is_checked("#pref-b")
    assert _stored(campaign, rater) == [(queue[0]["assignment"], "a", None), (queue[1]["assignment"], "tie", None),
                                        (queue[2]["assignment"], "b", None)]
    # Enter without a choice: refused, nothing stored
    page.keyboard.press("Enter")
    page.wait_for_selector("#rate-error", state="visible")
    assert "choose A, B or T" in page.inner_text("#rate-error")
    # U brings the third pair back
    page.keyboard.press("u")
    page.wait_for_function("v => document.getElementById('rate-assignment').value === v",
                           arg=str(queue[2]["assignment"]))
    assert _shown(page) == queue[2]
    assert len(_stored(campaign, rater)) == 2
    assert errors == []
    context.close()
