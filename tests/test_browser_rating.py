"""In Chromium: a rater rates three items with the keyboard only, no reload between
items, closes the page, comes back to find the queue where they left it, and undoes."""
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from experiments.models import Membership, Project, Role
from tests.test_browser_session import chromium

pytestmark = pytest.mark.slow

PASSWORD = "pw-for-tests-only"  # what tests.annotations_helpers.add_raters gives every rater


@pytest.fixture
def browser():
    # Without DJANGO_ALLOW_ASYNC_UNSAFE: this test reads the database from a short worker thread.
    with chromium() as launched:
        yield launched


@pytest.fixture
def rater_queue(transactional_db):
    """A campaign rater-a has items in, committed before Playwright starts (the live server
    reads it from another thread). Returns rater-a's queue as the page should show it."""
    from annotations.campaigns import campaign_create
    from annotations.models import Assignment
    from tests.annotations_helpers import CONDITIONS, RATERS, add_raters, finished_run

    project = Project.objects.create(slug="alpha", name="Alpha study")
    owner = get_user_model().objects.create_user("owner-user", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    run = finished_run(project, people=2)  # a queue of 20: enough, and quicker to build
    add_raters(project)
    campaign = campaign_create(run=run, name="first", conditions=CONDITIONS, raters=RATERS[:2],
                               user=owner, seed=11)
    rater = get_user_model().objects.get(username="rater-a")
    queue = [
        {"assignment": a.pk, "question": a.item.task.question_turn.text, "answer": a.item.prediction.text}
        for a in Assignment.objects.filter(campaign=campaign, rater=rater)
        .select_related("item__task__question_turn", "item__prediction").order_by("position")
    ]
    assert len(queue) > 4
    return {"campaign": campaign, "rater": rater, "queue": queue}


def _log_in(page, base):
    page.goto(base + "/p/alpha/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "rater-a")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/p/alpha/")


def _shown(page):
    return {
        "assignment": int(page.input_value("#rate-assignment")),
        "question": page.inner_text("#rate-question"),
        "answer": page.inner_text("#rate-answer"),
        "done": int(page.inner_text("#rate-done")),
        "assigned": int(page.inner_text("#rate-assigned")),
    }


def _rate_with_keys(page, grade: str, note: str = ""):
    """Press a grade key (and N, the note, if any) then Enter; wait until the next item is in
    (fetch, no navigation)."""
    before = page.input_value("#rate-assignment")
    page.keyboard.press(grade)
    assert page.is_checked(f"#grade-{grade}")
    if note:
        page.keyboard.press("n")
        page.keyboard.type(note)
        assert page.input_value("#rate-note") == note
    page.keyboard.press("Enter")
    page.wait_for_function("v => document.getElementById('rate-assignment').value !== v", arg=before)
    # The next item starts clean and the grade keys work again, even after typing a note.
    assert page.input_value("#rate-note") == ""
    assert page.evaluate("document.activeElement.matches('input[type=text], textarea')") is False


def _stored(campaign, rater):
    """The rater's stored ratings in queue order: (assignment id, grade, seconds spent).

    Read in a thread of its own: in this thread Playwright's event loop is running, so Django
    would refuse the query (async guard) or, allowed, open a connection in the loop's context
    that nothing closes (PostgreSQL then cannot drop the test database).
    """
    from annotations.models import HumanGrade

    def read():
        try:
            return list(
                HumanGrade.objects.filter(assignment__campaign=campaign, assignment__rater=rater)
                .order_by("assignment__position").values_list("assignment_id", "grade", "seconds_spent", "note")
            )
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(read).result()


def test_a_rater_rates_three_items_by_keyboard_and_finds_the_queue_where_they_left_it(
    rater_queue, live_server, browser, tmp_path
):
    campaign, rater, queue = rater_queue["campaign"], rater_queue["rater"], rater_queue["queue"]
    n = len(queue)
    base = live_server.url
    errors = []

    # --- first visit: log in, reach the page through the links a rater sees ---
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    loads = []
    page.on("load", lambda _: loads.append(page.url))
    _log_in(page, base)
    page.click("#ratings-link")  # "My rating queue"
    assert page.locator("#ratings-link").count() == 0 and "/ratings/" in page.url
    page.click("text=Start rating")
    page.wait_for_selector("#rate-form")
    assert page.url.endswith(f"/p/alpha/ratings/{campaign.pk}/rate/")

    rubric = page.locator("#rubric")
    assert rubric.is_visible()
    assert "comparable specificity" in rubric.inner_text()

    shown = _shown(page)
    assert shown == {**queue[0], "done": 0, "assigned": n}
    page.evaluate("window.__marker = 1")
    loads_before = len(loads)

    pressed = ["2", "0", "3"]
    notes = ["", "vague answer", ""]
    for i, (grade, note) in enumerate(zip(pressed, notes), start=1):
        _rate_with_keys(page, grade, note)
        # same document: the marker survives and no load event fired
        assert page.evaluate("window.__marker") == 1
        assert len(loads) == loads_before
        shown = _shown(page)
        assert shown == {**queue[i], "done": i, "assigned": n}, f"after rating {i}"
        assert page.inner_text("#rate-error") == "" and page.is_hidden("#rate-error")

    stored = _stored(campaign, rater)
    assert [(a, g, note) for a, g, _, note in stored] == [
        (q["assignment"], int(g), note) for q, g, note in zip(queue, pressed, notes)]
    assert all(s is not None and 0 <= s < 60 for _, _, s, _ in stored), stored
    page.close()
    context.close()

    # --- second visit, a fresh browser context: the queue is where they left it ---
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _log_in(page, base)
    page.goto(f"{base}/p/alpha/ratings/{campaign.pk}/rate/")
    shown = _shown(page)
    assert shown == {**queue[3], "done": 3, "assigned": n}
    assert page.inner_text("#rate-progress").startswith(f"3 of {n} rated")
    assert page.is_enabled("#rate-undo")
    page.evaluate("window.__marker = 2")

    # U brings the third item back and withdraws its rating
    page.keyboard.press("u")
    page.wait_for_function(
        "v => document.getElementById('rate-assignment').value === v", arg=str(queue[2]["assignment"]))
    assert _shown(page) == {**queue[2], "done": 2, "assigned": n}
    assert page.evaluate("window.__marker") == 2
    assert [row[0] for row in _stored(campaign, rater)] == [queue[0]["assignment"], queue[1]["assignment"]]

    # Enter before choosing a grade: refused, nothing stored, and the note typed so far is kept
    page.keyboard.press("n")
    page.keyboard.type("second look")
    page.keyboard.press("Enter")
    page.wait_for_selector("#rate-error", state="visible")
    assert "choose a grade" in page.inner_text("#rate-error")
    assert _shown(page) == {**queue[2], "done": 2, "assigned": n}
    assert page.input_value("#rate-note") == "second look"
    assert len(_stored(campaign, rater)) == 2
    page.keyboard.press("Escape")  # leave the note field; the grade keys work again

    # rated again as 1, with the keyboard
    _rate_with_keys(page, "1")
    assert page.evaluate("window.__marker") == 2
    assert page.is_hidden("#rate-error")
    assert _shown(page) == {**queue[3], "done": 3, "assigned": n}
    stored = _stored(campaign, rater)
    assert [(a, g, note) for a, g, _, note in stored] == [
        (queue[0]["assignment"], 2, ""), (queue[1]["assignment"], 0, "vague answer"),
        (queue[2]["assignment"], 1, "second look")]
    assert all(s is not None for _, _, s, _ in stored)

    # a picture of the page, rubric in view
    assert page.locator("#rubric").is_visible()
    assert "comparable specificity" in page.inner_text("#rubric")
    shots = Path(os.environ.get("OWNWORDS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / "rating-page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.exists() and shot.stat().st_size > 20_000
    assert errors == []
    context.close()
