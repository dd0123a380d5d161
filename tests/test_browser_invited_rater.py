"""In Chromium: an invited rater opens the link, makes an account, passes the calibration round,
is dealt items by the owner, rates with the keyboard and meets a hidden repeat that the owner's
results count as one retest pair; and an invited rater compares five pairs with A, B, T and Enter."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.urls import reverse
from playwright.sync_api import expect

from experiments.models import Membership, Project, Role
from tests.test_browser_session import browser  # noqa: F401  (the shared Chromium fixture)

pytestmark = pytest.mark.slow

PASSWORD = "pw-for-tests-only"
NEW_NAME, NEW_PASSWORD = "crowd-newcomer", "violet-harbour-1987-kettle"
RETEST_ROW = "same rater, hidden repeat (retest ceiling)"


def _in_thread(fn):
    """Run a database read or write in a thread of its own (Playwright's loop runs in this one),
    closing its connection after (PostgreSQL must be able to drop the test database)."""
    def call():
        try:
            return fn()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


def _project_with_raters():
    from tests.annotations_helpers import add_raters, finished_run
    project = Project.objects.create(slug="alpha", name="Alpha study")
    owner = get_user_model().objects.create_user("owner-user", password=PASSWORD)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    run = finished_run(project)
    add_raters(project)
    return project, owner, run


@pytest.fixture
def invited_to_calibrated(transactional_db):
    """A grade campaign (raters a and b) with 30 % hidden repeats, two calibration items (gold 3
    and 1) and a 100 % pass mark, and an invite link: committed before Playwright starts."""
    from annotations.calibration import calibration_item_set
    from annotations.campaigns import campaign_create, gold_set
    from annotations.invites import invite_create
    from tests.annotations_helpers import CONDITIONS, RATERS

    project, owner, run = _project_with_raters()
    campaign = campaign_create(run=run, name="calibrated", conditions=CONDITIONS, raters=RATERS[:2], user=owner,
                               seed=11, repeat_percent=30, qualification_percent=100)
    gold = {1: 3, 2: 1}
    for number, grade in gold.items():
        gold_set(campaign=campaign, number=number, grade=grade)
        calibration_item_set(campaign=campaign, number=number, on=True, note=f"a gold {grade}, because")
    link = reverse("invite_accept", args=[invite_create(campaign=campaign, by=owner).token])
    return {"campaign": campaign, "gold": gold, "link": link}


@pytest.fixture
def invited_to_pairs(transactional_db):
    """A pairwise campaign (raters a and b) and an invite link."""
    from annotations.invites import invite_create
    from annotations.pairwise import pairwise_campaign_create
    from tests.annotations_helpers import CONDITIONS, RATERS

    project, owner, run = _project_with_raters()
    campaign = pairwise_campaign_create(run=run, name="pairs", conditions=CONDITIONS, raters=RATERS[:2],
                                        user=owner, seed=11)
    link = reverse("invite_accept", args=[invite_create(campaign=campaign, by=owner).token])
    return {"campaign": campaign, "link": link}


def _sign_up(page, url):
    response = page.goto(url)
    # the token is not sent to other sites, and the form's POST carries a real Origin (CSRF passes)
    assert response.headers["referrer-policy"] == "same-origin"
    expect(page.locator("#invite-names")).to_contain_text("Alpha study")
    page.fill("#id_new-username", NEW_NAME)
    page.fill("#id_new-password1", NEW_PASSWORD)
    page.fill("#id_new-password2", NEW_PASSWORD)
    page.click("#invite-new button[type=submit]")


def _owner_deals(browser, base, campaign):  # noqa: F811
    """The owner logs in in a browser of their own and deals open items to the new rater."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", "owner-user")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{base}/p/alpha/ratings/{campaign.pk}/invites/")
    expect(page.locator("#deal-form")).to_contain_text("Deal open items to new raters")
    page.click("#deal-form button[type=submit]")
    expect(page.locator("#deal-form")).to_have_count(0)   # nobody left without items
    return context, page


def _queue(campaign):
    """The newcomer's open queue in order: (assignment id, item number, showing, x_on_a)."""
    from annotations.models import Assignment
    return _in_thread(lambda: list(
        Assignment.objects.filter(campaign=campaign, rater__username=NEW_NAME, status=Assignment.Status.OPEN)
        .order_by("position").values_list("pk", "item__number", "showing", "x_on_a")))


def _submit_with_keys(page, key: str, checked: str):
    before = page.input_value("#rate-assignment")
    page.keyboard.press(key)
    expect(page.locator(checked)).to_be_checked()
    page.keyboard.press("Enter")
    expect(page.locator("#rate-assignment")).not_to_have_value(before)


def test_an_invited_rater_signs_up_calibrates_rates_by_keyboard_and_a_hidden_repeat_is_counted(
    invited_to_calibrated, live_server, browser  # noqa: F811
):
    from annotations.campaign_agreement import retest_pairs
    from annotations.models import HumanGrade
    campaign, gold, base = invited_to_calibrated["campaign"], invited_to_calibrated["gold"], live_server.url
    errors = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    # --- the link: a new account, then straight to the calibration round (the queue waits) ---
    _sign_up(page, base + invited_to_calibrated["link"])
    expect(page).to_have_url(f"{base}/p/alpha/ratings/{campaign.pk}/calibrate/")
    for n in range(len(gold)):
        number = int(page.input_value("#calibration-form input[name=number]"))
        page.check(f"#cal-grade-{gold[number]}")
        page.click("#calibration-form button[type=submit]")
        expect(page.locator("#feedback-gold")).to_have_text(str(gold[number]))
        expect(page.locator("#feedback-note")).to_have_text(f"a gold {gold[number]}, because")
        if n < len(gold) - 1:
            page.click("#calibration-next")
    expect(page.locator("#calibration-passed")).to_contain_text("You passed")
    page.click("#calibration-passed a")
    expect(page).to_have_url(f"{base}/p/alpha/ratings/{campaign.pk}/rate/")
    expect(page.locator("#rate-no-items")).to_be_visible()    # joined, no items dealt yet

    # --- the owner deals; the newcomer's queue has the campaign's share of hidden repeats ---
    owner_context, owner_page = _owner_deals(browser, base, campaign)
    queue = _queue(campaign)
    repeats = [k for k, (_, _, showing, _) in enumerate(queue) if showing == 2]
    assert repeats and len(repeats) == round((len(queue) - len(repeats)) * 30 / 100)
    calibration_numbers = set(gold)
    assert not calibration_numbers & {number for _, number, _, _ in queue}  # calibration items stay out

    # --- rating by keyboard, one item after another without a reload, up to the first repeat ---
    page.reload()
    page.evaluate("window.__marker = 1")
    first_repeat = repeats[0]
    first_showing = next(k for k, row in enumerate(queue) if row[1] == queue[first_repeat][1] and row[2] == 1)
    assert first_showing + 2 <= first_repeat                        # never adjacent
    for k in range(first_repeat + 1):
        assert int(page.input_value("#rate-assignment")) == queue[k][0]
        grade = "2" if k in (first_showing, first_repeat) else str(k % 4)
        _submit_with_keys(page, grade, f"#grade-{grade}")
    assert page.evaluate("window.__marker") == 1
    stored = _in_thread(lambda: list(HumanGrade.objects.filter(assignment__campaign=campaign,
                                                               assignment__rater__username=NEW_NAME)
                                     .order_by("assignment__position")
                                     .values_list("assignment_id", "grade")))
    assert [a for a, _ in stored] == [row[0] for row in queue[:first_repeat + 1]]
    assert _in_thread(lambda: retest_pairs(campaign)) == [[_person(campaign, queue[first_showing][1]), 2, 2]]

    # --- the owner's results: the retest row counts the one pair ---
    owner_page.goto(f"{base}/p/alpha/ratings/{campaign.pk}/results/")
    row = owner_page.locator("#agreement-table tr", has=owner_page.locator("td", has_text=RETEST_ROW))
    expect(row).to_have_count(1)
    expect(row.locator("td.num").first).to_have_text("1")
    assert errors == []
    owner_context.close()
    context.close()


def _person(campaign, number):
    from annotations.models import RatingItem
    return _in_thread(lambda: RatingItem.objects.get(campaign=campaign, number=number).task.session.person_id)


def test_an_invited_rater_compares_five_pairs_by_keyboard(invited_to_pairs, live_server, browser):  # noqa: F811
    from annotations.core.pairwise import outcome
    from annotations.models import HumanGrade
    campaign, base = invited_to_pairs["campaign"], live_server.url
    errors = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _sign_up(page, base + invited_to_pairs["link"])
    expect(page).to_have_url(f"{base}/p/alpha/ratings/{campaign.pk}/rate/")   # no calibration round here
    owner_context, _ = _owner_deals(browser, base, campaign)
    queue = _queue(campaign)
    assert len(queue) >= 5 and all(x_on_a is not None for *_, x_on_a in queue)   # sides drawn for them
    page.reload()
    page.evaluate("window.__marker = 1")
    picks = [("a", "#pref-a"), ("b", "#pref-b"), ("t", "#pref-tie"), ("a", "#pref-a"), ("b", "#pref-b")]
    for k, (key, radio) in enumerate(picks):
        assert int(page.input_value("#rate-assignment")) == queue[k][0]
        expect(page.locator("#rate-answer-a")).not_to_be_empty()
        expect(page.locator("#rate-answer-b")).not_to_be_empty()
        _submit_with_keys(page, key, radio)
        expect(page.locator("#pref-a")).not_to_be_checked()
    assert page.evaluate("window.__marker") == 1                      # no reload between pairs
    stored = _in_thread(lambda: list(HumanGrade.objects.filter(assignment__campaign=campaign,
                                                               assignment__rater__username=NEW_NAME)
                                     .order_by("assignment__position")
                                     .values_list("assignment_id", "preference", "grade")))
    assert stored == [(queue[k][0], {"t": "tie"}.get(key, key), None) for k, (key, _) in enumerate(picks)]
    # what each pick means for the conditions follows the side the assignment drew
    assert [outcome(p, queue[k][3]) for k, (_, p, _) in enumerate(stored)][2] == "tie"
    assert errors == []
    owner_context.close()
    context.close()
