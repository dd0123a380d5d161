"""Raters of one campaign do not wait on each other, on PostgreSQL, threads with
connections of their own: a rating locks its assignment row and reads the campaign row FOR SHARE.
What the campaign lock guaranteed still holds: one rating per item however many tabs, no rating
after a close, one rater's undos one after the other."""
import threading

import pytest
from django.db import OperationalError, connection, transaction

from annotations.campaigns import campaign_close, campaign_create
from annotations.models import Assignment, HumanGrade, RatingEvent
from annotations.rating import RatingError, rater_item, rating_record, rating_undo
from tests.annotations_helpers import CONDITIONS, add_raters, finished_run

pytestmark = pytest.mark.django_db(transaction=True)

RATERS = [f"concurrent-{i}" for i in range(6)]
WAIT_S = 20


def lock_timeout(ms: int) -> None:
    """Inside a transaction: a lock not granted within `ms` is an error, not a wait."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{int(ms)}ms'")


@pytest.fixture
def campaign(project):
    run = finished_run(project)
    users = add_raters(project, RATERS)
    c = campaign_create(run=run, name="concurrent", conditions=CONDITIONS, raters=RATERS, seed=5)
    return c, users


def next_assignment(c, user) -> int:
    return rater_item(c, user)["item"]["assignment"]


def in_thread(target, *args):
    """Run `target` in a thread with its own connection; returns (thread, errors list)."""
    errors = []

    def run():
        try:
            target(*args)
        except BaseException as e:  # noqa: BLE001 - collected and asserted by the test
            errors.append(e)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def hold_open(work, inside: threading.Event, release: threading.Event):
    with transaction.atomic():
        work()
        inside.set()
        assert release.wait(WAIT_S)


def test_a_raters_open_transaction_does_not_block_another_rater(campaign):
    c, (a, b, *_) = campaign
    a_pk, b_pk = next_assignment(c, a), next_assignment(c, b)
    inside, release = threading.Event(), threading.Event()
    thread, errors = in_thread(hold_open, lambda: rating_record(campaign=c, user=a, assignment_id=a_pk, grade=1),
                               inside, release)
    try:
        assert inside.wait(WAIT_S)
        with transaction.atomic():
            lock_timeout(500)  # the campaign row locked FOR UPDATE made this wait for rater a
            rating_record(campaign=c, user=b, assignment_id=b_pk, grade=2)
    finally:
        release.set()
        thread.join()
    assert errors == []
    assert dict(HumanGrade.objects.values_list("assignment_id", "grade")) == {a_pk: 1, b_pk: 2}


def test_six_raters_submitting_at_once_are_all_inside_together_and_each_rating_is_stored_once(campaign):
    c, users = campaign
    rounds = 3
    queues = {u.pk: list(Assignment.objects.filter(campaign=c, rater=u).order_by("position")
                         .values_list("pk", flat=True)[:rounds]) for u in users}
    together = threading.Barrier(len(users), timeout=WAIT_S)

    def rater(user):
        for n, pk in enumerate(queues[user.pk]):
            try:
                with transaction.atomic():
                    lock_timeout(2000)
                    rating_record(campaign=c, user=user, assignment_id=pk, grade=n % 4, seconds=1.5)
                    # Every rater has stored and not yet committed: nobody waits for anybody.
                    together.wait()
            except BaseException:
                together.abort()
                raise

    started = [in_thread(rater, u) for u in users]
    for thread, _ in started:
        thread.join()
    assert [e for _, errors in started for e in errors] == []
    rated = [pk for queue in queues.values() for pk in queue]
    assert sorted(HumanGrade.objects.values_list("assignment_id", flat=True)) == sorted(rated)
    assert sorted(RatingEvent.objects.values_list("assignment_id", "kind")) == sorted((pk, "rate") for pk in rated)
    assert Assignment.objects.filter(status=Assignment.Status.DONE).count() == len(rated)
    for user in users:
        assert rater_item(c, user)["done"] == rounds


def test_a_close_waits_for_the_rating_in_flight_and_a_rating_waits_for_the_close(campaign):
    c, (a, b, *_) = campaign
    a_pk, b_pk = next_assignment(c, a), next_assignment(c, b)
    inside, release = threading.Event(), threading.Event()
    thread, errors = in_thread(hold_open, lambda: rating_record(campaign=c, user=a, assignment_id=a_pk, grade=3),
                               inside, release)
    try:
        assert inside.wait(WAIT_S)
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            lock_timeout(300)
            campaign_close(campaign=c)
    finally:
        release.set()
        thread.join()
    assert errors == [] and HumanGrade.objects.get().assignment_id == a_pk  # stored before the close

    inside, release = threading.Event(), threading.Event()
    thread, errors = in_thread(hold_open, lambda: campaign_close(campaign=c), inside, release)
    try:
        assert inside.wait(WAIT_S)
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            lock_timeout(300)
            rating_record(campaign=c, user=b, assignment_id=b_pk, grade=3)
    finally:
        release.set()
        thread.join()
    assert errors == []
    with pytest.raises(RatingError, match="closed"):
        rating_record(campaign=c, user=b, assignment_id=b_pk, grade=3)
    assert HumanGrade.objects.count() == 1


def test_two_undos_at_once_withdraw_the_raters_last_two_ratings(campaign):
    c, (a, *_) = campaign
    done = []
    for grade in (1, 2, 3):
        pk = next_assignment(c, a)
        rating_record(campaign=c, user=a, assignment_id=pk, grade=grade)
        done.append(pk)
    barrier = threading.Barrier(2, timeout=WAIT_S)

    def undo():
        barrier.wait()
        rating_undo(campaign=c, user=a)

    started = [in_thread(undo) for _ in range(2)]
    for thread, _ in started:
        thread.join()
    assert [e for _, errors in started for e in errors] == []
    assert list(HumanGrade.objects.values_list("assignment_id", flat=True)) == done[:1]
    undone = sorted(RatingEvent.objects.filter(kind=RatingEvent.Kind.UNDO).values_list("assignment_id", "grade"))
    assert undone == sorted([(done[1], 2), (done[2], 3)])
    assert next_assignment(c, a) == done[1]
