"""A multi-slot worker's database connections lent to its slot threads (`workers.LoanedConnections`).

Real PostgreSQL: many threads run their own database steps on a few connections, one step per
connection at a time; a step's error reaches its caller and its connection is lent again; a
connection whose backend went away is replaced at the next step; a thread's own connection (the
test's, here) is put back after a borrowed step.
"""
import threading
import time

import pytest
from django.db import DatabaseError, connection, connections, transaction

from experiments.execution.workers import LoanedConnections
from tests.test_engine_queue import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _alive(pids) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", [list(pids)])
        return {row[0] for row in cursor.fetchall()}


def _gone(pids) -> bool:
    """True once none of these backends is left (an AssertionError after 5 s)."""
    return wait_for(lambda: not _alive(pids), 5.0, f"backends {sorted(pids)} to end")


def test_eight_threads_run_their_own_steps_on_two_connections_one_step_each_at_a_time():
    loans = LoanedConnections(2)
    lock = threading.Lock()
    inside, most = [0], [0]
    steps, left_open, errors = [], [], []

    def step(caller: int):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            pid = _backend()
            time.sleep(0.002)  # long enough for the other threads to ask meanwhile
            return caller, threading.get_ident(), pid
        finally:
            with lock:
                inside[0] -= 1

    def slot_thread():
        try:
            for _ in range(15):
                steps.append(loans(step, threading.get_ident()))
            left_open.append(len(connections.all(initialized_only=True)))
        except Exception as exc:  # reported below, not lost with the thread
            errors.append(exc)

    threads = [threading.Thread(target=slot_thread) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loans.shutdown()

    assert errors == []
    assert len(steps) == 120
    assert all(caller == runner for caller, runner, _ in steps)  # each step on the thread that asked
    pids = {pid for _, _, pid in steps}
    assert len(pids) == 2 and most[0] == 2  # two connections, each lent to one step at a time
    assert left_open == [0] * 8  # no slot thread kept a connection of its own
    assert _gone(pids)  # shutdown closed them


def test_an_error_reaches_the_caller_and_a_broken_connection_is_replaced():
    own = _backend()  # this thread's (the test's) own connection
    loans = LoanedConnections(1)
    first = loans(_backend)
    assert first != own and _backend() == own  # the thread's own connection is back after the step

    def failing_transaction():
        with transaction.atomic():
            _backend()
            raise ZeroDivisionError("the step's own error")

    with pytest.raises(ZeroDivisionError):
        loans(failing_transaction)
    assert loans(lambda: (connection.in_atomic_block, _backend())) == (False, first)  # lent again, clean

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first])
    assert _gone([first])
    with pytest.raises(DatabaseError):
        loans(_backend)  # the step on the connection that went away fails ...
    second = loans(_backend)  # ... and the next step has a new one
    assert second not in (first, own)
    loans.shutdown()
    assert _gone([second]) and _backend() == own
