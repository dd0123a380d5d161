"""Mem0 as deployed (paper App. H): mem0ai runs unmodified on embedded Qdrant and the bundled
MiniLM embedder; its extraction call goes through the request journal to the tests' local
OpenAI-compatible server (tests/llm_fake_server.py), over a real socket.

- one add is exactly one journaled call (and one request at the server), and its memories, ranked by
  Mem0's search against the question, fill B greedily;
- a non-JSON extraction reply leaves no memories without an error from Mem0: counted, and shown on
  the run page;
- a slow store does not hold the run's lock (its adds and searches run outside it);
- a store rebuilt from the journal never sends: a request other than the journaled one is refused;
- without mem0 importable, the condition says why and cannot be chosen (a subprocess whose import
  of mem0 fails).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from experiments.execution.driver import run_inline
from experiments.memory_systems.mem0_store import unavailable_reason
from experiments.models import Membership, Mem0Extraction, Memory, ModelCall, Prediction, Role, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import Roles, build_cohort, make_run, openai_model, user_text
from tests.llm_fake_server import Reply, answer

REPO = Path(__file__).resolve().parent.parent
MEM0 = "mem0(B=|memory|)"
# The written memory sets B = 60: room for the on-topic memory (47 characters as a "- " line) or
# the off-topic one (20), never both (68).
MEMORY_TEXT = "Likes gardening; works as a composer; plays chess on Sundays"
ON_TOPIC = "Talks about this part of the interview at length"
OFF_TOPIC = "Owns a red bicycle"
# Extraction order puts the off-topic memory first: only Mem0's ranking can put the other one in.
CANNED = json.dumps({"memory": [{"id": "0", "text": OFF_TOPIC}, {"id": "1", "text": ON_TOPIC}]})

needs_mem0 = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def is_extraction(request) -> bool:
    return "## New Messages\nuser: " in user_text(request)


def serve_extraction(server, reply_text: str) -> None:
    """Role-aware replies for the rest of the run; Mem0's extraction requests get `reply_text`."""
    Roles(server, memory=lambda request: MEMORY_TEXT)
    others = server._next_reply

    def next_reply(request):
        if is_extraction(request):
            with server._lock:
                server.requests.append(request)
            return Reply(body=answer(request, reply_text))
        return others(request)

    server._next_reply = next_reply


@pytest.fixture
def mem0_dir(tmp_path, settings):
    settings.OWNWORDS_MEM0_DIR = str(tmp_path / "mem0")
    return tmp_path / "mem0"


def mem0_run(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=1, name="mem0")
    run = make_run(project, cohort, conditions=[MEM0], generator=openai_model(server, timeout_s=5))
    return run_inline(run.pk, client=http)


@pytest.mark.slow
@needs_mem0
@pytest.mark.django_db(transaction=True)
def test_one_add_is_one_journaled_call_and_mem0s_ranking_fills_the_budget(project, server, http, mem0_dir,
                                                                          client, django_user_model):
    serve_extraction(server, CANNED)
    run = mem0_run(project, server, http)
    assert run.status == run.Status.FINISHED, run.status_reason

    extractions = list(Slot.objects.filter(run=run, phase=Phase.MEMORIES, key__startswith="mem0|"))
    assert len(extractions) == 2
    for slot in extractions:
        calls = list(ModelCall.objects.filter(slot=slot))
        assert [call.outcome for call in calls] == ["ok"]  # reserved once, one outcome
        assert calls[0].text == CANNED
    sent = [request for request in server.requests if is_extraction(request)]
    assert len(sent) == 2  # the store's adds at planning sent nothing more
    assert {request.json["messages"][1]["content"] for request in sent} == {slot.user for slot in extractions}

    rows = list(Mem0Extraction.objects.filter(run=run))
    assert [(row.outcome, row.memories) for row in rows] == [("memories", [OFF_TOPIC, ON_TOPIC])] * 2
    assert set(Memory.objects.filter(run=run).values_list("text", flat=True)) == {MEMORY_TEXT}
    predictions = list(Prediction.objects.filter(run=run, condition=MEM0))
    assert len(predictions) == 2
    for prediction in predictions:
        assert prediction.status == Prediction.Status.OK
        assert prediction.budget == len(MEMORY_TEXT) == 60
        assert prediction.evidence == "- " + ON_TOPIC
        assert "[EARLIER IN THE INTERVIEW, verbatim]\n- " + ON_TOPIC in prediction.slot.user
    assert list((mem0_dir / f"run-{run.pk}").iterdir()) == []  # the store is rebuilt from the journal, never kept

    # The task page shows what Mem0 kept of the session, beside the evidence it ranked from it.
    owner = django_user_model.objects.create_user(username="mem0-reader", password="pw-for-tests-only")
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    client.force_login(owner)
    body = client.get(reverse("prediction_detail", args=[project.slug, run.pk, predictions[0].task_id])).content.decode()
    memories = body.split('class="mem0-memories"')[1].split("</details>")[0]
    assert "(2; memories stored)" in memories and f"<li>{OFF_TOPIC}</li>" in memories
    assert f"<li>{ON_TOPIC}</li>" in memories and "extraction attempt 1:" in memories


@pytest.mark.slow
@needs_mem0
@pytest.mark.django_db(transaction=True)
def test_a_non_json_extraction_gives_no_memories_and_is_counted_on_the_run_page(project, server, http, mem0_dir,
                                                                                 client, django_user_model):
    serve_extraction(server, "Sure! Here is what I learned about this person: they garden.")
    run = mem0_run(project, server, http)
    assert run.status == run.Status.FINISHED, run.status_reason
    assert ModelCall.objects.filter(slot__run=run, slot__key__startswith="mem0|").count() == 2
    rows = list(Mem0Extraction.objects.filter(run=run))
    assert [(row.outcome, row.memories) for row in rows] == [("unparseable", [])] * 2
    for prediction in Prediction.objects.filter(run=run, condition=MEM0):
        assert prediction.status == Prediction.Status.OK and prediction.evidence == ""

    owner = django_user_model.objects.create_user(username="mem0-owner", password="pw-for-tests-only")
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    client.force_login(owner)
    body = client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
    assert "Mem0 added 2 sessions" in body and "unparseable reply (no memories): 2" in body
    assert "eng-mem0-0" in body and "eng-mem0-1" in body


@pytest.mark.slow
@needs_mem0
@pytest.mark.django_db(transaction=True)
def test_a_slow_mem0_store_does_not_hold_the_runs_lock(project, server, http, mem0_dir, monkeypatch):
    """Mem0's adds and searches run outside the run's lock: while a (slowed) add is in progress,
    another transaction locks the run's row at once (NOWAIT), and the run ends as it always did."""
    import threading
    import time

    from django.db import connections, transaction

    from experiments.memory_systems import mem0_store
    from experiments.models import Run

    serve_extraction(server, CANNED)
    locked, original_add = [], mem0_store.Mem0Store.add

    def lock_the_run(run_id):
        try:
            with transaction.atomic():
                Run.objects.select_for_update(nowait=True).get(pk=run_id)
                locked.append(True)
        except Exception as error:  # noqa: BLE001 - a lock not granted is the failure recorded here
            locked.append(error)
        finally:
            connections.close_all()

    def slow_add(self, *args, **kwargs):
        time.sleep(0.5)  # a slow store: the run's row must be free meanwhile
        other = threading.Thread(target=lock_the_run, args=(run_ids[0],))
        other.start()
        other.join(timeout=30)
        return original_add(self, *args, **kwargs)

    monkeypatch.setattr(mem0_store.Mem0Store, "add", slow_add)
    cohort = build_cohort(project, sessions=2, targets=1, name="mem0")
    run = make_run(project, cohort, conditions=[MEM0], generator=openai_model(server, timeout_s=5))
    run_ids = [run.pk]
    run = run_inline(run.pk, client=http)
    assert run.status == run.Status.FINISHED, run.status_reason
    assert locked == [True, True]  # one add per session, the run's row free during each
    rows = list(Mem0Extraction.objects.filter(run=run))
    assert [(row.outcome, row.memories) for row in rows] == [("memories", [OFF_TOPIC, ON_TOPIC])] * 2
    for prediction in Prediction.objects.filter(run=run, condition=MEM0):
        assert prediction.status == Prediction.Status.OK and prediction.evidence == "- " + ON_TOPIC


@needs_mem0
def test_a_store_rebuilt_from_the_journal_refuses_a_request_other_than_the_journaled_one(tmp_path):
    from experiments.memory_systems.mem0_store import MEMORIES, REFUSED, Mem0Store, extraction_request
    source = "- I grow tomatoes in a community garden.\n- I compose music for films."
    planned = extraction_request(source)
    with Mem0Store(tmp_path / "store") as store:
        refused = store.add("a", source + " And one more thing.", planned, CANNED)
        added = store.add("b", source, planned, CANNED)
        ranked = store.rank("b", "What do you grow in your garden?", top_k=len(added.ids))
    assert (refused.outcome, refused.memories) == (REFUSED, [])
    assert "differs from the journaled one" in refused.note
    assert added.outcome == MEMORIES and added.memories == [OFF_TOPIC, ON_TOPIC]
    assert set(ranked) <= set(added.ids)


BLOCK_MEM0 = """
import sys
class NoMem0:
    def find_spec(self, name, path=None, target=None):
        if name == "mem0" or name.startswith("mem0."):
            raise ImportError("mem0 blocked for this test")
sys.meta_path.insert(0, NoMem0())
"""


# Where Mem0 is not installed: a one-session cohort and an (unsealed) protocol with its condition.
A_MEM0_PROTOCOL = BLOCK_MEM0 + """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from experiments.models import Project, Protocol, Run, Slot
from tests.engine_helpers import build_cohort, make_protocol
project = Project.objects.create(slug="x", name="x")
cohort = build_cohort(project, sessions=1, targets=1, name="m")
offline = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
protocol = make_protocol(project, cohort, conditions=["mem0(B=|memory|)"], generator=offline)
"""


def run_without_mem0(code: str, database_url: str) -> subprocess.CompletedProcess:
    """`code` (which starts with BLOCK_MEM0) in a fresh interpreter on a database of its own."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ownwords_site.settings", "DEBUG": "1",
           "DATABASE_URL": database_url}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
def test_without_mem0_the_condition_says_why_and_cannot_be_chosen(scratch_database_url):
    code = BLOCK_MEM0 + """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from experiments.core.conditions import get_condition
from experiments.memory_systems.availability import condition_unavailable
from experiments.models import Project
from experiments.web.runs.forms import ProtocolEditor
print(condition_unavailable(get_condition("mem0(B=|memory|)")))
project = Project.objects.create(slug="x", name="x")
rows = {row["key"]: row for group in ProtocolEditor(None, project=project).condition_groups()
        for row in group["rows"]}
print(rows["mem0(B=|memory|)"]["runnable"], rows["mem0(B=|memory|)"]["note"])
print(rows["ownwords(B=|memory|)"]["runnable"])
"""
    done = run_without_mem0(code, scratch_database_url)
    reason, row, other = done.stdout.strip().splitlines()
    assert reason.startswith("Mem0 is not installed on this machine (missing: ")
    assert "mem0" in reason.split("(missing: ")[1].split(")")[0].split(", ")
    assert "requirements-mem0.txt" in reason
    assert row == f"False CANNOT RUN HERE: {reason}"
    assert other == "True"


def test_the_estimate_counts_one_extraction_call_per_session_besides_the_memory_it_takes_its_budget_from():
    from experiments.core.conditions import get_condition
    from experiments.core.estimate import MEM0_EXTRACTION_CHARS, CohortShape, estimate_run
    shape = CohortShape(sessions=5, tasks=15, record_chars=2000.0, question_chars=50.0, reference_chars=80.0)
    with_mem0 = estimate_run([get_condition(MEM0)], shape, generator_cap=100, judge_cap=50).phases[0]
    memory_only = estimate_run([get_condition("memory(concrete,100w)+one-shot")], shape, generator_cap=100,
                               judge_cap=50).phases[0]
    assert (with_mem0.calls, memory_only.calls) == (10, 5)
    assert with_mem0.input_chars - memory_only.input_chars == 5 * (MEM0_EXTRACTION_CHARS + 2000)
    assert with_mem0.output_cap_tokens == 1000


@needs_mem0
def test_the_estimates_prompt_length_is_mem0s_own():
    from experiments.core.estimate import MEM0_EXTRACTION_CHARS
    from experiments.memory_systems.mem0_store import extraction_request
    system, user = extraction_request("")
    assert len(system) + len(user) == MEM0_EXTRACTION_CHARS


@pytest.mark.slow
def test_a_worker_without_mem0_stops_the_run_before_planning_and_says_why(scratch_database_url):
    # Sealed where Mem0 was installed, driven by a worker where it is not: a stop with the reason,
    # nothing planned, no exception.
    code = A_MEM0_PROTOCOL + """
from django.utils import timezone
from experiments.execution.driver import run_drive
Protocol.objects.filter(pk=protocol.pk).update(sealed_at=timezone.now())
run = Run.objects.create(protocol=protocol, status=Run.Status.RUNNING)
step = run_drive(run.pk)
run.refresh_from_db()
print(step.slot_ids, run.status, Slot.objects.filter(run=run).count())
print(run.status_reason)
"""
    done = run_without_mem0(code, scratch_database_url)
    outcome, reason = done.stdout.strip().splitlines()[-2:]
    assert outcome == "() stopped 0"
    assert reason.startswith("Stopped before planning memories: Mem0 is not installed on this machine (missing: ")
    assert "mem0" in reason.split("(missing: ")[1].split(")")[0].split(", ")


@pytest.mark.slow
def test_a_seal_made_where_mem0_ran_says_mem0_is_missing_here_not_that_a_prompt_changed(scratch_database_url):
    code = A_MEM0_PROTOCOL + """
from experiments.execution.sealing import protocol_hashes, seal_mismatches
seal = protocol_hashes(protocol)
seal["prompts"]["mem0ai 2.2.1 ADDITIVE_EXTRACTION_PROMPT"] = "0" * 64  # as sealed where Mem0 was installed
Protocol.objects.filter(pk=protocol.pk).update(seal=seal)
protocol.refresh_from_db()
for problem in seal_mismatches(protocol, code=False):
    print(problem)
"""
    done = run_without_mem0(code, scratch_database_url)
    problems = done.stdout.strip().splitlines()
    assert len(problems) == 1, problems
    assert problems[0].startswith("mem0(B=|memory|) cannot run here: Mem0 is not installed on this machine")
    assert "sealed where it could" in problems[0] and "prompt file" not in problems[0]
