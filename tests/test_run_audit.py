"""`manage.py run_audit`: the independent execution audit (paper App. B.2, Tables 13–14) on a real run.

A run through the local LLM server (tests/llm_fake_server.py) with PostgreSQL, with faults: a
generation slot whose worker died mid-request (unknown), its late receipt, and its re-issue by
the owner's amendment; a slot recovered after a 503; a slot failed after three 503s; in judging,
a recovery and a slot left unknown (the owner continues with it missing). The audit's counts are
the journal's, counted here by hand with the ORM, and it finds 0 violations; then the journal is
corrupted on purpose and the audit names each violation and exits with status 1.
"""
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from experiments.core.llm import wire
from experiments.execution import control, journal as journal_rules, policy, progress
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_drive, run_inline
from experiments.models import ModelCall, Run, Slot
from experiments.models.runs import Phase
from experiments.execution.run_journal_audit import audit_run
from tests.engine_helpers import (
    FUSION, ONE_SHOT, QUESTION_ONLY, SELECTION, Roles, Sleeps, build_cohort, journal, make_run, openai_model,
)
from tests.llm_fake_server import Reply, answer

FIRST, RECOVERY, AMENDMENT = ModelCall.Basis.FIRST, ModelCall.Basis.RECOVERY, ModelCall.Basis.AMENDMENT
OK_REPLY = Reply(body=lambda request: answer(request, "Alpha answer."))
FAIL = Reply(503, b"")


def _reserve_and_die(slot):
    """What a worker leaves behind when it dies mid-request: a reservation, no outcome."""
    reservation = journal_rules._reserve(slot.pk, basis=FIRST, justification="", worker="dead", lease_s=30)
    ModelCall.objects.filter(pk=reservation.call_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    return reservation


def _execute(slot, http):
    journal_rules.slot_execute(slot.pk, limiter=NoLimiter(), client=http, worker="audit-test", sleep=Sleeps())


@pytest.fixture
def faulty_run(project, cast, server, http):
    Roles(server)  # valid grades for the judge; scripted replies still go first
    cohort = build_cohort(project, sessions=1, targets=3, name="audit")
    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server))
    lost, recovered, failed = Slot.objects.filter(pk__in=run_drive(run.pk).slot_ids).order_by("pk")
    _reserve_and_die(lost)
    server.script(FAIL, OK_REPLY)
    _execute(recovered, http)
    server.script(FAIL, FAIL, FAIL)
    _execute(failed, http)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert (run.status, run.phase) == (Run.Status.PAUSED, Phase.GENERATION)  # the unknown slot's decision
    # The dead worker's receipt arrives late: kept, the slot stays unknown.
    late = wire.Outcome(wire.OutcomeKind.OK, http_status=200, text="Too late.", finish_reason="stop",
                        usage=wire.Usage(input_tokens=40, output_tokens=7, total_tokens=47), elapsed_s=1.5)
    assert journal_rules._record(journal(lost)[0].pk, late, policy.Decision(
        retry=False, wait_s=0.0, justification="completed")) is False
    control.run_reissue_unknown(run=run, user=cast["owner"], reason="the worker was killed")
    for slot_id in run_drive(run.pk).slot_ids:
        journal_rules.slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="audit-test", sleep=Sleeps())
    for _ in range(5):
        if Slot.objects.filter(run=run, phase=Phase.JUDGING).exists():
            break
        run_drive(run.pk)
    judged_lost, judged_ok = Slot.objects.filter(run=run, phase=Phase.JUDGING).order_by("pk")
    _reserve_and_die(judged_lost)
    server.script(FAIL)  # the other judge slot is recovered
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert (run.status, run.phase) == (Run.Status.PAUSED, Phase.JUDGING)
    control.run_accept_missing(run=run, user=cast["owner"], reason="as the paper: unknowns stay missing")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    return run, {"lost": lost, "recovered": recovered, "failed": failed, "judged_lost": judged_lost,
                 "judged_ok": judged_ok}


def _by_hand(run, phase) -> dict:
    """The journal of one phase counted with the ORM, column by column."""
    slots = Slot.objects.filter(run=run, phase=phase)
    calls = ModelCall.objects.filter(run=run, phase=phase)
    usage = {name: [v for v in calls.values_list(name, flat=True) if v is not None]
             for name in ("input_tokens", "output_tokens", "reasoning_tokens", "total_tokens")}
    elapsed = [v for v in calls.values_list("elapsed_s", flat=True) if v is not None]
    return {
        "slots": slots.count(), "answered": slots.filter(status="ok").count(),
        "unusable": slots.filter(status="unusable").count(), "failed": slots.filter(status="failed").count(),
        "unknown": slots.filter(status="unknown").count(),
        "open": slots.filter(status__in=["pending", "in_flight", "held"]).count(),
        "reservations": calls.count(), "first_requests": calls.filter(basis="first").count(),
        "recoveries": calls.filter(basis="recovery").count(), "amended": calls.filter(basis="amendment").count(),
        "outcomes": {name: calls.filter(outcome=value).count() for name, value in (
            ("ok", "ok"), ("unusable", "unusable"), ("transient", "transient"), ("quota", "quota"),
            ("fatal", "fatal"), ("unknown", "unknown"), ("in_flight", ""))},
        "receipts": calls.filter(finished_at__isnull=False).count(),
        "late_receipts": sum(c.finished_at is not None and c.finished_at > c.lease_until for c in calls),
        "tokens": {name: {"sum": sum(values) if values else None, "reported": len(values)}
                   for name, values in usage.items()},
        "elapsed_s": round(sum(elapsed), 3), "elapsed_reported": len(elapsed),
        "request_to_receipt_s": round(sum((c.finished_at - c.reserved_at).total_seconds()
                                          for c in calls if c.finished_at is not None), 3),
    }


def test_the_audit_of_a_run_with_faults_is_the_journal_counted_by_hand_with_no_violation(faulty_run):
    run, slots = faulty_run
    assert [(c.basis, c.outcome) for c in journal(slots["lost"])] == [(FIRST, "ok"), (AMENDMENT, "ok")]
    assert [(c.basis, c.outcome) for c in journal(slots["recovered"])] == [(FIRST, "transient"), (RECOVERY, "ok")]
    assert [c.outcome for c in journal(slots["failed"])] == ["transient"] * 3
    assert [(c.basis, c.outcome) for c in journal(slots["judged_lost"])] == [(FIRST, "unknown")]
    assert [(c.basis, c.outcome) for c in journal(slots["judged_ok"])] == [(FIRST, "transient"), (RECOVERY, "ok")]

    audit = audit_run(run)
    assert audit.violations == []
    rows = {row["phase"]: row for row in audit.as_dict()["phases"]}
    assert list(rows) == [Phase.GENERATION, Phase.JUDGING]
    for phase in rows:
        hand = _by_hand(run, phase)
        assert {key: rows[phase][key] for key in hand} == hand
    # and the same numbers written out
    generation, judging = rows[Phase.GENERATION], rows[Phase.JUDGING]
    assert (generation["slots"], generation["answered"], generation["failed"], generation["unknown"]) == (3, 2, 1, 0)
    assert (generation["reservations"], generation["first_requests"], generation["recoveries"],
            generation["amended"], generation["late_receipts"]) == (7, 3, 3, 1, 1)
    assert generation["outcomes"]["ok"] == 3 and generation["outcomes"]["transient"] == 4
    assert (judging["slots"], judging["answered"], judging["unknown"], judging["reservations"],
            judging["recoveries"], judging["outcomes"]["unknown"]) == (2, 1, 1, 3, 1, 1)
    total = audit.as_dict()["total"]
    assert (total["reservations"], total["recoveries"], total["terminal"], total["open"]) == (10, 4, 5, 0)
    # The engine's own tallies (the run page's) agree with the recount.
    shown = {p["phase"]: p for p in progress.run_progress(run)["phases"]}
    for phase, row in rows.items():
        assert (shown[phase]["attempts"], shown[phase]["recoveries"]) == (row["reservations"], row["recoveries"])


def test_the_command_prints_both_tables_and_no_participant_text(faulty_run):
    run, slots = faulty_run
    out = StringIO()
    call_command("run_audit", str(run.pk), stdout=out)
    text = out.getvalue()
    assert "Table 13" in text and "Table 14" in text and text.rstrip().endswith("0 violations")
    assert "HTTP reservations" in text and "elapsed s (sum)" in text
    for slot in Slot.objects.filter(run=run):
        assert slot.user not in text and slot.system not in text
    for answer_text in ModelCall.objects.filter(run=run).exclude(text=None).values_list("text", flat=True):
        assert answer_text not in text
    data = StringIO()
    call_command("run_audit", str(run.pk), "--json", stdout=data)
    parsed = json.loads(data.getvalue())
    assert parsed["run"] == run.pk and parsed["violations"] == [] and parsed["total"]["reservations"] == 10


def test_a_clean_run_through_every_phase_has_no_violation(project, cohort2, server, http):
    Roles(server, answer=["Alpha answer.", "Alpha answer.", "Beta answer."])
    run = make_run(project, cohort2, conditions=[ONE_SHOT, FUSION, SELECTION], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    audit = audit_run(run)
    assert audit.violations == []
    rows = audit.as_dict()["phases"]
    assert [row["phase"] for row in rows] == [Phase.MEMORIES, Phase.GENERATION, Phase.DECISIONS, Phase.JUDGING]
    assert [row["reservations"] for row in rows] == [
        ModelCall.objects.filter(run=run, phase=row["phase"]).count() for row in rows]
    assert audit.as_dict()["total"]["reservations"] == len(server.requests)  # every request the server saw


def _audit_fails(run) -> str:
    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("run_audit", str(run.pk), stdout=out)
    assert raised.value.returncode == 1 and "violation" in str(raised.value)
    return out.getvalue()


def test_a_second_answered_request_of_a_terminal_slot_is_named_and_fails(faulty_run):
    run, slots = faulty_run
    slot = slots["recovered"]
    now = timezone.now()
    ModelCall.objects.create(slot=slot, run=run, phase=slot.phase, attempt=3, basis=RECOVERY, worker="forged",
                             reserved_at=now, lease_until=now + timedelta(seconds=60),
                             finished_at=now + timedelta(seconds=1), outcome="ok", text="Again.")
    text = _audit_fails(run)
    assert f"requested-after-answer: generation slot {slot.key} attempt 3" in text
    assert f"answered-twice: generation slot {slot.key} attempt 3: 2 attempts answered on time: 2, 3" in text
    assert "recovery-without-transient" in text
    # a generation request after judging began: judging's requests now precede generation's end
    assert f"phase-order: judging slot {slots['judged_ok'].key} attempt 1: reserved before generation ended" in text
    assert "0 violations" not in text


def test_a_receipt_before_its_request_and_a_terminal_slot_without_a_receipt_are_named(faulty_run):
    run, slots = faulty_run
    [_, answered] = journal(slots["judged_ok"])
    ModelCall.objects.filter(pk=answered.pk).update(finished_at=answered.reserved_at - timedelta(seconds=1))
    [_, amended] = journal(slots["lost"])
    ModelCall.objects.filter(pk=amended.pk).update(finished_at=None)
    text = _audit_fails(run)
    assert f"receipt-before-request: judging slot {slots['judged_ok'].key} attempt 2" in text
    assert f"outcome-without-receipt: generation slot {slots['lost'].key} attempt 2" in text
    assert f"terminal-without-receipt: generation slot {slots['lost'].key} attempt 2" in text


def test_an_unknown_run_is_refused(db):
    with pytest.raises(CommandError, match="no run with id 999999"):
        call_command("run_audit", "999999", stdout=StringIO())
