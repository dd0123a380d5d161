"""No paid answer is lost at its receipt, on PostgreSQL with real transactions.

- Twelve threads receive, all at once, the answers of the same three tasks, phase by phase: the
  memories, the six candidates per task, the four fusion and selection decisions per task
  (two of which deadlocked in `store_scores` and were lost) and the judge's grades. Every
  answer is stored; PostgreSQL counts no deadlock and the journal made no retry, because every
  receipt takes the task's `TaskGrades` row before any of its predictions.
- A receipt whose connection is killed by the server (`pg_terminate_backend`, while it waits for
  a row another transaction holds) is made again on a new connection, with the answer it holds,
  and stored once that transaction ends.
(A worker killed while it holds an unrecorded answer leaves its slot to become unknown at its
lease: tests/test_engine_queue.py kills an rqworker mid-request.)
"""
import threading
import time

from django.db import connection, transaction

from experiments.core.conditions import FINAL
from experiments.execution import durable
from experiments.execution.driver import run_drive
from experiments.models import ModelCall, Prediction, Project, Slot
from tests.engine_helpers import QUESTION_ONLY, build_cohort, make_run, openai_model
from tests.receipt_helpers import CANDIDATE_TEXTS, DECIDING, _reserved, answer_text, receive_run
from tests.test_prediction_score import assert_stored_as_computed
from tests.test_task_grades import assert_rows_right

THREADS = 12


def deadlocks_counted() -> int:
    """PostgreSQL's count of deadlocks in the tests' database (the backends that closed have
    reported theirs: a backend sends its statistics when it exits)."""
    time.sleep(1.0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_twelve_threads_receiving_the_candidates_and_decisions_of_the_same_tasks_lose_no_answer(
        transactional_db, server):
    project = Project.objects.create(slug="receipts", name="Receipts")
    run = make_run(project, build_cohort(project, sessions=1, targets=3, name="receipts"), conditions=DECIDING,
                   generator=openai_model(server))
    deadlocks_before = deadlocks_counted()

    phases = receive_run(run, THREADS)

    assert [(p.phase, p.receipts) for p in phases[:3]] == [("memories", 2), ("generation", 18), ("decisions", 12)]
    assert [p.phase for p in phases[3:]] == ["judging"]
    for phase in phases:
        assert (phase.phase, phase.errors, phase.lost) == (phase.phase, [], 0)
        assert phase.retries == 0, phase  # nothing even had to be retried: no deadlock happened
    assert deadlocks_counted() == deadlocks_before
    # every answer is in the journal and in the results, as one receipt at a time would store them
    slots = list(Slot.objects.filter(run=run))
    assert slots and {s.status for s in slots} == {Slot.Status.OK}
    assert all(c.text == answer_text(c.slot) for c in ModelCall.objects.filter(run=run).select_related("slot"))
    finals = list(Prediction.objects.filter(run=run, label=FINAL))
    assert len(finals) == 3 * len(DECIDING)
    for final in finals:
        if "fusion" in final.condition:
            assert final.text == ("Alpha answer." if "concrete" in final.condition else "A fused answer.")
        else:  # the candidate shown first or second (the display order is the task's own)
            assert final.text in CANDIDATE_TEXTS and final.chosen_label
    assert_stored_as_computed(run)
    assert_rows_right(run)


def test_a_receipt_whose_connection_the_server_kills_is_made_again_with_its_answer(transactional_db, server):
    project = Project.objects.create(slug="receipt-killed", name="Receipt")
    run = make_run(project, build_cohort(project, sessions=1, name="killed"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server))
    [slot_id] = run_drive(run.pk).slot_ids
    policy, slot, reservation, outcome = _reserved(slot_id, "killed")
    holding, release = threading.Event(), threading.Event()
    blocker_pid = []

    def hold_the_slot_row():
        try:
            with transaction.atomic():  # another transaction on the slot's row (as a long drive)
                Slot.objects.select_for_update().get(pk=slot_id)
                blocker_pid.append(connection.connection.info.backend_pid)
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    recorded = []

    def receive():
        from experiments.execution.journal import _decide_and_record
        try:
            recorded.append(_decide_and_record(policy, slot.run, slot, reservation, outcome))
        except Exception as exc:  # the old code: the answer is lost with this error
            recorded.append(exc)
        finally:
            connection.close()

    blocker = threading.Thread(target=hold_the_slot_row)
    blocker.start()
    assert holding.wait(10)
    retries_before = durable.RETRIES.value
    receiver = threading.Thread(target=receive)
    receiver.start()
    try:
        first = waiting_backend(exclude=blocker_pid)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [first])
        second = waiting_backend(exclude=blocker_pid + [first])  # made again, on a new connection
        assert second != first
    finally:
        release.set()
        blocker.join(10)
        receiver.join(30)
    [(decision, on_time)] = recorded
    assert on_time and not decision.retry
    assert durable.RETRIES.value - retries_before >= 1
    call = ModelCall.objects.get(pk=reservation.call_id)
    assert (call.outcome, call.text) == ("ok", outcome.text)
    assert Slot.objects.get(pk=slot_id).status == Slot.Status.OK
    assert Prediction.objects.get(slot_id=slot_id).text == outcome.text


def waiting_backend(exclude, timeout_s: float = 10.0) -> int:
    """The pid of a backend of the tests' database waiting for a row lock, other than `exclude`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                           "AND wait_event_type = 'Lock' AND pid <> ALL(%s)", [list(exclude)])
            row = cursor.fetchone()
        if row:
            return row[0]
        time.sleep(0.02)
    raise AssertionError("no receipt waited for the slot's row")
