"""Two imports into one project at once take turns (PostgreSQL advisory lock).

The second waits for the first to end and then sees its sessions, so a session id both
files carry gets the usual clear message instead of a unique-key error, and nothing of the
second file is stored. (An import into a project without sessions skips the per-batch
session-id check, which is only right because of this.)
"""
import json
import threading

import pytest
from django.db import connection, transaction

from experiments.core.interviews.readers import parse_jsonl
from experiments.core.interviews.records import InterviewFileError
from experiments.core.tasks import TaskRule
from experiments.data.sessions import project_get_or_create, sessions_import
from experiments.models import Person, Session
from tests.test_import_sessions import good_session



def jsonl(*session_ids):
    return "\n".join(json.dumps(good_session(session_id=s, person_id=f"p-{s}")) for s in session_ids) + "\n"


@pytest.mark.django_db(transaction=True)
def test_a_second_import_into_the_same_project_waits_and_then_refuses_a_taken_session_id():
    project = project_get_or_create(slug="p")
    first_stored, release, outcome = threading.Event(), threading.Event(), {}

    def first():
        try:
            with transaction.atomic():
                sessions_import(project=project, parsed=parse_jsonl(jsonl("s-1", "s-2"), "first.jsonl"),
                                source_format="jsonl", source_file="first.jsonl")
                first_stored.set()
                release.wait(30)  # hold the transaction (and the project's import lock) open
        finally:
            connection.close()

    def second():
        try:
            # Another task rule, so the two imports do not meet on the same task set's row.
            sessions_import(project=project, parsed=parse_jsonl(jsonl("s-3", "s-2"), "second.jsonl"),
                            source_format="jsonl", source_file="second.jsonl", task_rule=TaskRule(min_pairs=1))
            outcome["result"] = "imported"
        except Exception as exc:  # noqa: BLE001 - the test looks at what it was
            outcome["result"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert first_stored.wait(30)
    threads.append(threading.Thread(target=second))
    threads[1].start()
    threads[1].join(1.0)
    assert threads[1].is_alive(), "the second import should wait for the first"
    release.set()
    for thread in threads:
        thread.join(30)
    assert isinstance(outcome["result"], InterviewFileError), outcome["result"]
    assert "second.jsonl, line 2, field 'session_id': session 's-2' exists already" in str(outcome["result"])
    assert sorted(Session.objects.values_list("external_id", flat=True)) == ["s-1", "s-2"]
    assert sorted(Person.objects.values_list("label", flat=True)) == ["p-s-1", "p-s-2"]
