"""In Chromium: a rater answers "same content?" with the keyboard only (Y, P, N, Enter), no reload
between pairs, is refused without an answer, and undoes with U."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from experiments.models import Membership, Project, Role
from tests.test_browser_rating import PASSWORD, _log_in, browser  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def check_queue(transactional_db):
    """A content-check campaign rater-a has pairs in, committed before Playwright starts; their queue
    as the page should show it (the original and the rewritten text of each assignment)."""
    from annotations.content_check import content_check_campaign_create, content_view
    from annotations.models import Assignment
    from tests.annotations_helpers import MEMORY, OWNWORDS, RATERS, add_raters, finished_run

    project = Project.objects.create(slug="alpha", name="Alpha study")
    owner = get_user_model().objects.create_user("owner-user", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    run = finished_run(project, people=2, conditions=[MEMORY, f"{MEMORY}+answer-paraphrased", OWNWORDS,
                                                      f"{OWNWORDS}+paraphrased"])
    add_raters(project)
    campaign = content_check_campaign_create(run=run, name="check", raters=RATERS[:2], user=owner, seed=11)
    rater = get_user_model().objects.get(username="rater-a")
    queue = [{"assignment": a.pk, "original": content_view(a)["original"], "rewritten": content_view(a)["rewritten"]}
             for a in Assignment.objects.filter(campaign=campaign, rater=rater).order_by("position")]
    assert len(queue) > 3
    return {"campaign": campaign, "rater": rater, "queue": queue}


def _shown(page):
    return {"assignment": int(page.input_value("#rate-assignment")), "original": page.inner_text("#rate-original"),
            "rewritten": page.inner_text("#rate-rewritten")}


def _stored(campaign, rater):
    from annotations.models import HumanGrade

    def read():
        try:
            return list(HumanGrade.objects.filter(assignment__campaign=campaign, assignment__rater=rater)
                        .order_by("assignment__position").values_list("assignment_id", "same_content"))
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(read).result()


def test_a_rater_checks_paraphrases_by_keyboard(check_queue, live_server, browser):  # noqa: F811
    campaign, rater, queue = check_queue["campaign"], check_queue["rater"], check_queue["queue"]
    errors = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _log_in(page, live_server.url)
    page.goto(f"{live_server.url}/p/alpha/ratings/{campaign.pk}/rate/")
    assert _shown(page) == queue[0]
    page.evaluate("window.__marker = 1")
    for i, (key, radio) in enumerate([("y", "#same-yes"), ("p", "#same-partly"), ("n", "#same-no")], start=1):
        before = page.input_value("#rate-assignment")
        page.keyboard.press(key)
        assert page.is_checked(radio)
        page.keyboard.press("Enter")
        page.wait_for_function("v => document.getElementById('rate-assignment').value !== v", arg=before)
        assert page.evaluate("window.__marker") == 1  # no reload
        assert _shown(page) == queue[i]
        assert not page.is_checked("#same-yes") and not page.is_checked("#same-no")
    assert _stored(campaign, rater) == [(queue[0]["assignment"], "yes"), (queue[1]["assignment"], "partly"),
                                        (queue[2]["assignment"], "no")]
    page.keyboard.press("Enter")  # no answer: refused, nothing stored
    page.wait_for_selector("#rate-error", state="visible")
    assert "choose Y (yes), P (partly) or N (no)" in page.inner_text("#rate-error")
    page.keyboard.press("u")
    page.wait_for_function("v => document.getElementById('rate-assignment').value === v",
                           arg=str(queue[2]["assignment"]))
    assert _shown(page) == queue[2]
    assert len(_stored(campaign, rater)) == 2
    assert errors == []
    context.close()
