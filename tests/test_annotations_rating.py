"""The rater's side: next item, storing, undo, resume, and every refusal."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotations.campaigns import campaign_close, rater_remove
from annotations.models import Assignment, HumanGrade, RatingEvent
from annotations.rating import MAX_NOTE_CHARS, RatingError, rater_item, rating_record, rating_undo
from annotations.web.rating.forms import RatingForm


def rater(campaign, name="rater-a"):
    return campaign.raters.get(user__username=name).user


def rate_next(campaign, user, grade=2, **kw):
    view = rater_item(campaign, user)
    rating_record(campaign=campaign, user=user, assignment_id=view["item"]["assignment"], grade=grade, **kw)
    return view["item"]["assignment"]


def test_the_queue_goes_in_order_and_resumes_where_the_rater_left(campaign):
    user = rater(campaign)
    queue = list(Assignment.objects.filter(campaign=campaign, rater=user).order_by("position").values_list("pk", flat=True))
    done = [rate_next(campaign, user, grade=g) for g in (0, 1, 3)]
    assert done == queue[:3]
    view = rater_item(campaign, user)  # a new visit, e.g. after closing the browser
    assert view["item"]["assignment"] == queue[3]
    assert (view["done"], view["assigned"]) == (3, len(queue))
    assert list(HumanGrade.objects.filter(assignment__rater=user).order_by("assignment__position")
                .values_list("grade", flat=True)) == [0, 1, 3]


def test_next_item_takes_a_constant_number_of_queries(campaign):
    user = rater(campaign)
    counts = []
    for _ in range(3):
        with CaptureQueriesContext(connection) as ctx:
            rater_item(campaign, user)
        counts.append(len(ctx))
        rate_next(campaign, user)
    assert counts[1] == counts[2] and counts[1] <= 6


def test_undo_brings_the_item_back_and_the_log_keeps_it(campaign):
    user = rater(campaign)
    first = rate_next(campaign, user, grade=1)
    second = rate_next(campaign, user, grade=3)
    assert rating_undo(campaign=campaign, user=user) == second
    assert rater_item(campaign, user)["item"]["assignment"] == second
    assert Assignment.objects.get(pk=second).status == Assignment.Status.OPEN
    assert not HumanGrade.objects.filter(assignment_id=second).exists()
    assert HumanGrade.objects.get(assignment_id=first).grade == 1
    kinds = list(RatingEvent.objects.filter(assignment_id=second).values_list("kind", "grade"))
    assert kinds == [("rate", 3), ("undo", 3)]


def test_a_second_submission_updates_within_the_window_and_is_refused_after(campaign):
    user = rater(campaign)
    pk = rate_next(campaign, user, grade=1)
    rating_record(campaign=campaign, user=user, assignment_id=pk, grade=2, note="on reflection")
    assert HumanGrade.objects.filter(assignment_id=pk).count() == 1
    assert HumanGrade.objects.get(assignment_id=pk).grade == 2
    HumanGrade.objects.filter(assignment_id=pk).update(created_at=timezone.now() - timedelta(hours=1))
    with pytest.raises(RatingError, match="final"):
        rating_record(campaign=campaign, user=user, assignment_id=pk, grade=0)
    with pytest.raises(RatingError, match="nothing to undo"):
        rating_undo(campaign=campaign, user=user)
    assert HumanGrade.objects.get(assignment_id=pk).grade == 2


def test_a_grade_outside_0_to_3_is_refused(campaign):
    user = rater(campaign)
    pk = rater_item(campaign, user)["item"]["assignment"]
    for grade in (4, -1, None, True, 2.0, "2"):  # typed values: an int of 0 to 3, or None with a flag
        with pytest.raises(RatingError):
            rating_record(campaign=campaign, user=user, assignment_id=pk, grade=grade)
    for grade in ("4", "-1", "2.5", "x", "", "1e0", "True"):  # what a request may carry: the form refuses
        form = RatingForm({"assignment": str(pk), "grade": grade})
        assert not form.is_valid()
        assert form.problem() == ("choose a grade from 0 to 3 (or flag the item with a reason)" if grade == ""
                                  else f"{grade!r} is not a grade; grades are 0, 1, 2 or 3")
    assert not HumanGrade.objects.exists() and not RatingEvent.objects.exists()
    form = RatingForm({"assignment": str(pk), "grade": "3 "})  # surrounding space is no error
    assert form.is_valid() and form.cleaned_data["grade"] == 3
    rating_record(campaign=campaign, user=user, **form.rating())
    assert HumanGrade.objects.get().grade == 3


def test_a_flag_needs_a_reason_and_may_stand_without_a_grade(campaign):
    user = rater(campaign)
    pk = rater_item(campaign, user)["item"]["assignment"]
    with pytest.raises(RatingError, match="why"):
        rating_record(campaign=campaign, user=user, assignment_id=pk, grade=None, flagged=True)
    form = RatingForm({"assignment": str(pk), "flagged": "1", "flag_reason": " the answer is cut off ",
                       "seconds": "12.5"})
    assert form.is_valid(), form.errors
    rating_record(campaign=campaign, user=user, **form.rating())
    stored = HumanGrade.objects.get(assignment_id=pk)
    assert stored.grade is None and stored.flagged and stored.seconds_spent == 12.5
    assert stored.flag_reason == "the answer is cut off"


def test_an_item_of_another_rater_is_refused(campaign):
    a, b = rater(campaign, "rater-a"), rater(campaign, "rater-b")
    theirs = Assignment.objects.filter(campaign=campaign, rater=b).first().pk
    with pytest.raises(RatingError, match="not in your queue"):
        rating_record(campaign=campaign, user=a, assignment_id=theirs, grade=2)
    with pytest.raises(RatingError, match="not in your queue"):
        rating_record(campaign=campaign, user=a, assignment_id=99999999, grade=2)
    for assignment in ("x", "", "1" * 40):
        assert RatingForm({"assignment": assignment, "grade": "2"}).problem() == "no such item in your queue"
    assert not HumanGrade.objects.exists()


def test_a_closed_campaign_and_a_removed_rater_take_no_rating(campaign, rated_run):
    from annotations.campaigns import rater_add
    rater_add(campaign=campaign, username="rater-c")
    user = rater(campaign, "rater-b")
    pk = rater_item(campaign, user)["item"]["assignment"]
    rater_remove(campaign=campaign, username="rater-b")
    with pytest.raises(RatingError, match="no longer"):
        rating_record(campaign=campaign, user=user, assignment_id=pk, grade=2)
    a = rater(campaign, "rater-a")
    pk = rater_item(campaign, a)["item"]["assignment"]
    campaign_close(campaign=campaign)
    campaign.refresh_from_db()
    with pytest.raises(RatingError, match="closed"):
        rating_record(campaign=campaign, user=a, assignment_id=pk, grade=2)
    assert not HumanGrade.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_tabs_submitting_at_once_store_one_rating(cast, project):
    """Two threads (two connections) submit the same item: one rating, one rate + one update event."""
    from annotations.campaigns import campaign_create
    from tests.annotations_helpers import CONDITIONS, RATERS, add_raters, finished_run
    run = finished_run(project)
    add_raters(project)
    c = campaign_create(run=run, name="tabs", conditions=CONDITIONS, raters=RATERS[:2], seed=1)
    user = rater(c)
    pk = rater_item(c, user)["item"]["assignment"]
    barrier = threading.Barrier(2)
    errors = []

    def tab(grade):
        try:
            barrier.wait()
            rating_record(campaign=c, user=user, assignment_id=pk, grade=grade)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=tab, args=(g,)) for g in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert HumanGrade.objects.filter(assignment_id=pk).count() == 1
    assert sorted(RatingEvent.objects.filter(assignment_id=pk).values_list("kind", flat=True)) == ["rate", "update"]
    assert rater_item(c, user)["done"] == 1


def test_a_note_with_a_nul_or_a_lone_surrogate_or_too_long_is_refused_with_a_message(campaign):
    pk = rater_item(campaign, rater(campaign))["item"]["assignment"]
    for note in ("bad\x00note", "bad\ud800note", "x" * (MAX_NOTE_CHARS + 1)):
        for fields in ({"grade": "2", "note": note}, {"flagged": "on", "flag_reason": note}):
            form = RatingForm({"assignment": str(pk), **fields})
            assert not form.is_valid()
            assert form.problem().startswith("the note" if len(note) < 100 else "notes are at most 2000")
    assert RatingForm({"assignment": str(pk), "grade": "2", "note": " " + "x" * MAX_NOTE_CHARS + " "}).is_valid()
    form = RatingForm({"assignment": str(pk), "flagged": "1", "flag_reason": "   "})
    assert not form.is_valid() and form.problem() == "say why you flag this item"


@pytest.mark.parametrize("field, value, message", [
    ("note", "a\x00b", "the note"),
    ("note", "x" * (MAX_NOTE_CHARS + 1), "notes are at most"),
    ("flag_reason", "odd\ud800", "the flag reason"),
])
def test_a_direct_call_without_the_form_checks_the_texts_too(campaign, field, value, message):
    # Commands and other callers of rating_record never pass through RatingForm.
    user = rater(campaign)
    pk = rater_item(campaign, user)["item"]["assignment"]
    values = {"grade": 2, field: value} | ({"flagged": True} if field == "flag_reason" else {})
    with pytest.raises(RatingError, match=message):
        rating_record(campaign=campaign, user=user, assignment_id=pk, **values)
    assert not HumanGrade.objects.filter(assignment_id=pk).exists()
    assert not RatingEvent.objects.filter(assignment_id=pk).exists()
