"""A slot named by its job (its run and role, `jobs.slot_job_id`) is read in the statement that
reserves its first attempt (`reservation.reserve_named_first`), not in a round trip before it.
Whatever the job's words do not fit (another role, a protocol the worker holds that is not the
run's as sealed, a recovery due) claims nothing: the slot is then read and handled as before, its
place given back first, nothing reserved or sent on the strength of the words."""
from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.execution import jobs, journal as journal_rules, slot_reads
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.journal import slot_execute
from experiments.execution.policy import model_config
from experiments.execution.workers import slot_job_arguments
from experiments.models import Grade, ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, Sleeps, build_cohort, make_run, openai_model, request_bytes

pytestmark = pytest.mark.django_db


class CountingLimiter:
    """Every place taken and given back, counted (the journal gives back each one it takes)."""

    def __init__(self):
        self.taken = self.given_back = 0

    def acquire(self, name, cap, *, lease_s, ticket=None):
        self.taken += 1
        return object()

    def release(self, place):
        self.given_back += 1


@pytest.fixture
def read_slots(monkeypatch):
    """The slots read by `slot_reads.slot_for_execution` (the journal's read before a reservation)."""
    read = []
    original = slot_reads.slot_row
    monkeypatch.setattr(slot_reads, "slot_row", lambda slot_id: read.append(slot_id) or original(slot_id))
    return read


def run_of(project, server, *, cohort_name="engine", cohort=None, name=None):
    Roles(server)
    return make_run(project, cohort or build_cohort(project, targets=2, name=cohort_name), conditions=[QUESTION_ONLY],
                    generator=openai_model(server), judge=openai_model(server, model="judge-test-1"),
                    name=name or f"named-{cohort_name}")


def results(run) -> dict:
    """The run's answers and grades by task, and each slot's request and answer by key."""
    return {
        "predictions": sorted(Prediction.objects.filter(run=run).values_list(
            "task_id", "condition", "label", "status", "text", "answer_sha256", "score")),
        "grades": sorted(Grade.objects.filter(run=run).values_list(
            "task_id", "answer_sha256", "status", "score", "rationale", "parse_error")),
        "calls": sorted(ModelCall.objects.filter(run=run).values_list(
            "slot__key", "slot__request_sha256", "attempt", "basis", "outcome", "text")),
    }


def test_every_slot_of_an_inline_run_is_read_in_its_reservation_and_the_results_are_the_read_ones(
        server, http, project, read_slots):
    run = run_inline(run_of(project, server).pk, client=http)
    assert run.status == Run.Status.FINISHED
    assert read_slots == []  # no slot was read before its reservation
    slots = Slot.objects.filter(run=run)
    assert slots.count() == 4 and set(slots.values_list("status", flat=True)) == {Slot.Status.OK}
    calls = ModelCall.objects.filter(run=run)
    assert [(c.attempt, c.basis, c.outcome) for c in calls] == [(1, ModelCall.Basis.FIRST, ModelCall.Outcome.OK)] * 4
    # What each slot's request was: the bytes built from its own prompts, under its role's model.
    assert sorted(r.body for r in server.requests) == sorted(request_bytes(run, slot) for slot in slots)
    assert sorted(r.json["model"] for r in server.requests) == ["gpt-test-1"] * 2 + ["judge-test-1"] * 2
    # Its results as a read slot's: every answer stored with its task, every answer graded.
    predictions = Prediction.objects.filter(run=run)
    assert {p.status for p in predictions} == {Prediction.Status.OK} and all(p.text for p in predictions)
    assert sorted(p.slot.calls.get().text for p in predictions) == sorted(p.text for p in predictions)
    grades = Grade.objects.filter(run=run)
    assert grades.count() == 2 and all(g.status == Grade.Status.OK for g in grades)
    assert {p.score for p in predictions} == {g.score for g in grades} != {None}


def test_a_run_whose_slots_are_read_first_has_the_same_results(server, http, project, monkeypatch):
    """The same protocol on the same cohort, once with its slots named (read in their reservations)
    and once with each slot read before its reservation, as before: the same requests, answers,
    grades and scores."""
    named = run_inline(run_of(project, server).pk, client=http)
    monkeypatch.setattr(journal_rules, "named_slot", lambda *args: None)
    read_first = run_inline(run_of(project, server, cohort=named.protocol.cohort, name="read-first").pk, client=http)
    assert named.status == read_first.status == Run.Status.FINISHED
    assert results(named) == results(read_first)
    assert len(results(named)["calls"]) == 4 and len(results(named)["grades"]) == 2


def first_generation_slot(run) -> Slot:
    step = run_drive(run.pk)
    assert step.phase == Phase.GENERATION and step.slot_ids, step
    return Slot.objects.get(pk=step.slot_ids[0])


def test_a_slot_named_with_another_role_is_read_and_sent_with_its_own(server, http, project, read_slots):
    run = run_of(project, server)
    slot = first_generation_slot(run)
    limiter = CountingLimiter()
    slot_execute(slot.pk, limiter=limiter, client=http, worker="test", run_id=run.pk, role=Slot.Role.JUDGE)
    assert read_slots == [slot.pk]
    assert [r.json["model"] for r in server.requests] == ["gpt-test-1"]
    assert server.requests[0].body == request_bytes(run, slot)
    slot.refresh_from_db()
    assert slot.status == Slot.Status.OK
    assert [(c.attempt, c.basis) for c in slot.calls.all()] == [(1, ModelCall.Basis.FIRST)]
    assert limiter.taken == limiter.given_back == 2  # the named claim's place, given back, then the read one's


def test_a_protocol_held_for_the_run_that_is_not_its_own_as_sealed_claims_nothing(server, http, project, read_slots):
    """A process's protocol for a run id is checked in the claim itself (the protocol's id and seal
    time): one kept for an id reused (a test database's sequences) never sends with its settings."""
    run = run_of(project, server)
    other = run_of(project, server, cohort_name="other")
    other.protocol.generator = {**other.protocol.generator, "model": "not-this-run-s-model"}
    slot_reads._RUN_SETTINGS[(run.pk, Slot.Role.GENERATOR)] = (other.protocol, model_config(other.protocol.generator))
    slot = first_generation_slot(run)
    try:
        slot_execute(slot.pk, limiter=CountingLimiter(), client=http, worker="test", run_id=run.pk,
                     role=Slot.Role.GENERATOR)
    finally:
        slot_reads._RUN_SETTINGS.pop((run.pk, Slot.Role.GENERATOR), None)
    assert read_slots == [slot.pk]
    assert [r.json["model"] for r in server.requests] == ["gpt-test-1"]
    assert [(c.attempt, c.basis, c.outcome) for c in slot.calls.all()] == [
        (1, ModelCall.Basis.FIRST, ModelCall.Outcome.OK)]


def test_a_named_slot_whose_recovery_is_due_is_read_and_sent_as_its_recovery(server, http, project, read_slots):
    """Its worker died during the cooldown (`journal.expire_leases` put it back to pending with its
    recovery due): the named claim leaves it, and the read slot's recovery is reserved and sent."""
    run = run_of(project, server)
    slot = first_generation_slot(run)
    now = timezone.now()
    ModelCall.objects.create(slot=slot, run=run, phase=slot.phase, attempt=1, basis=ModelCall.Basis.FIRST,
                             worker="died", reserved_at=now - timedelta(seconds=5), lease_until=now,
                             finished_at=now - timedelta(seconds=4), outcome=ModelCall.Outcome.TRANSIENT,
                             http_status=503, error="HTTP 503")
    Slot.objects.filter(pk=slot.pk).update(status=Slot.Status.PENDING, retry_at=now - timedelta(seconds=1),
                                           status_note="transient: HTTP 503; recovery 1 of 2")
    limiter, sleeps = CountingLimiter(), Sleeps()
    slot_execute(slot.pk, limiter=limiter, client=http, worker="test", sleep=sleeps, run_id=run.pk,
                 role=Slot.Role.GENERATOR)
    assert read_slots == [slot.pk]
    assert [(c.attempt, c.basis, c.outcome) for c in slot.calls.order_by("attempt")] == [
        (1, ModelCall.Basis.FIRST, ModelCall.Outcome.TRANSIENT), (2, ModelCall.Basis.RECOVERY, ModelCall.Outcome.OK)]
    assert len(server.requests) == 1 and sleeps.calls == [0.0]
    assert limiter.taken == limiter.given_back == 2


def test_a_named_slot_of_a_paused_run_sends_nothing(server, http, project, read_slots):
    run = run_of(project, server)
    slot = first_generation_slot(run)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.PAUSED)
    limiter = CountingLimiter()
    slot_execute(slot.pk, limiter=limiter, client=http, worker="test", run_id=run.pk, role=Slot.Role.GENERATOR)
    assert server.requests == [] and not slot.calls.exists()
    slot.refresh_from_db()
    assert slot.status == Slot.Status.PENDING
    assert limiter.taken == limiter.given_back


def test_a_slot_job_s_id_names_its_run_and_role_and_an_older_one_only_its_slot():
    assert slot_job_arguments(jobs.slot_job_id(12, 34, Slot.Role.JUDGE)) == (12, 34, "judge")
    assert slot_job_arguments(jobs.slot_job_id(12)) == (12,)
    assert slot_job_arguments(f"{jobs.SLOT_JOB_PREFIX}12-34-auditor-0123456789ab") == (12,)  # no such role
    assert slot_job_arguments("ownwords-recheck-3-0123456789ab") is None


def test_a_named_slot_whose_request_cannot_be_built_stops_the_run_saying_nothing_was_sent(
        server, http, project, monkeypatch):
    """Its request is built once its reservation read it: should that fail, the reservation gets a
    receipt saying so (never left to expire as a request that may have been sent)."""
    run = run_of(project, server)
    slot = first_generation_slot(run)

    def unbuildable(config, system, user):
        raise ValueError("no such wire format")

    monkeypatch.setattr(journal_rules, "build_request", unbuildable)
    limiter = CountingLimiter()
    slot_execute(slot.pk, limiter=limiter, client=http, worker="test", run_id=run.pk, role=Slot.Role.GENERATOR)
    assert server.requests == []
    [call] = slot.calls.all()
    assert call.outcome == ModelCall.Outcome.FATAL and "could not be built" in call.error
    assert "nothing was sent" in call.error and call.finished_at is not None
    run.refresh_from_db()
    assert run.status == Run.Status.STOPPED and "could not be built" in run.status_reason
    assert limiter.taken == limiter.given_back == 1
