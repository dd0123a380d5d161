"""`experiments.core.journal_audit` on hand-built journal rows: the counts of Tables 13–14, and
each of the journal's rules broken once, named by its own code (no database)."""
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from experiments.core.journal_audit import AttemptRow, Rules, SlotRow, audit_journal
from experiments.core.journal_audit_tables import audit_text

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
RULES = Rules(run_id=1, max_recoveries_per_slot=2, phase_allowance=256,
              phase_order=("memories", "generation", "decisions", "judging", "analysis", "done"), finished=True)


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def call(id, slot_id, attempt, basis, outcome, start, end, *, phase="generation", lease=60, **usage):
    return AttemptRow(id=id, slot_id=slot_id, run_id=1, phase=phase, attempt=attempt, basis=basis, outcome=outcome,
                      reserved_at=t(start), lease_until=t(start + lease), finished_at=None if end is None else t(end),
                      **usage)


def clean_journal():
    slots = [
        SlotRow(1, "generation", "ok", "gen|recovered"),
        SlotRow(2, "generation", "ok", "gen|reissued", amended_attempts=1),
        SlotRow(3, "generation", "failed", "gen|failed"),
        SlotRow(4, "generation", "unusable", "gen|unusable"),
        SlotRow(5, "judging", "ok", "judge|a"),
        SlotRow(6, "judging", "unknown", "judge|lost"),
    ]
    attempts = [
        call(1, 1, 1, "first", "transient", 0, 1, elapsed_s=1.0),
        call(2, 1, 2, "recovery", "ok", 2, 4, input_tokens=10, output_tokens=5, total_tokens=15, elapsed_s=2.0),
        # a worker died mid-request; its receipt came after the lease; the owner re-issued the slot
        call(3, 2, 1, "first", "ok", 0, 70, lease=60, input_tokens=40, output_tokens=7, total_tokens=47,
             elapsed_s=70.0),
        call(4, 2, 2, "amendment", "ok", 80, 81, input_tokens=40, output_tokens=6, total_tokens=46, elapsed_s=1.0),
        call(5, 3, 1, "first", "transient", 0, 1),
        call(6, 3, 2, "recovery", "transient", 2, 3),
        call(7, 3, 3, "recovery", "transient", 4, 5),
        call(8, 4, 1, "first", "unusable", 0, 2, elapsed_s=2.0),
        call(9, 5, 1, "first", "ok", 100, 103, phase="judging", input_tokens=20, output_tokens=3, reasoning_tokens=2,
             total_tokens=25, elapsed_s=3.0),
        call(10, 6, 1, "first", "unknown", 100, None, phase="judging"),
    ]
    return slots, attempts


def test_a_clean_journal_is_counted_per_phase_with_no_violation():
    audit = audit_journal(*clean_journal(), RULES)
    assert audit.violations == []
    generation, judging = (p.as_dict() for p in audit.phases)
    assert [generation["phase"], judging["phase"]] == ["generation", "judging"]
    assert {k: generation[k] for k in ("slots", "answered", "unusable", "failed", "unknown", "terminal", "open",
                                       "reservations", "first_requests", "recoveries", "amended", "receipts",
                                       "late_receipts")} == {
        "slots": 4, "answered": 2, "unusable": 1, "failed": 1, "unknown": 0, "terminal": 4, "open": 0,
        "reservations": 8, "first_requests": 4, "recoveries": 3, "amended": 1, "receipts": 8, "late_receipts": 1}
    assert generation["outcomes"] == {"ok": 3, "unusable": 1, "transient": 4, "quota": 0, "fatal": 0, "unknown": 0,
                                      "in_flight": 0}
    # Unreported usage stays unknown: sums over the attempts that reported it, with how many did.
    assert generation["tokens"]["input_tokens"] == {"sum": 90, "reported": 3}
    assert generation["tokens"]["reasoning_tokens"] == {"sum": None, "reported": 0}
    assert (generation["elapsed_s"], generation["elapsed_reported"]) == (76.0, 5)
    assert generation["request_to_receipt_s"] == 1 + 2 + 70 + 1 + 1 + 1 + 1 + 2
    assert (generation["first_request"], generation["last_receipt"], generation["span_s"]) == (
        T0.isoformat(), t(81).isoformat(), 81.0)
    assert {k: judging[k] for k in ("slots", "answered", "unknown", "reservations", "receipts")} == {
        "slots": 2, "answered": 1, "unknown": 1, "reservations": 2, "receipts": 1}
    assert judging["outcomes"]["unknown"] == 1 and judging["span_s"] == 3.0
    total = audit.total.as_dict()
    assert (total["slots"], total["reservations"], total["recoveries"], total["tokens"]["total_tokens"]) == (
        6, 10, 3, {"sum": 133, "reported": 4})


def test_the_tables_name_their_columns_and_end_with_the_violations():
    text = audit_text(audit_journal(*clean_journal(), RULES), title="run 1")
    assert text.startswith("run 1\nTable 13")
    for header in ("slots", "answered", "HTTP reservations", "recoveries", "amended", "no receipt", "late",
                   "input tokens", "elapsed s (sum)", "request→receipt s", "span s"):
        assert header in text
    assert "90 [3/8]" in text and "unknown [0/8]" in text  # reported input tokens; reasoning never reported
    assert text.endswith("0 violations")


def broken(change):
    slots, attempts = clean_journal()
    slots, attempts, rules = change(list(slots), list(attempts), RULES) or (slots, attempts, RULES)
    return audit_journal(slots, attempts, rules)


def at(rows, id, **changes):
    return [replace(row, **changes) if row.id == id else row for row in rows]


def slot_at(slots, id, **changes):
    return [replace(slot, **changes) if slot.id == id else slot for slot in slots]


CASES = {
    # a terminal slot requested again after its answer, and answered twice
    "requested-after-answer": lambda s, a, r: (s, a + [call(11, 1, 3, "recovery", "ok", 10, 11)], r),
    "answered-twice": lambda s, a, r: (s, a + [call(11, 1, 3, "recovery", "ok", 10, 11)], r),
    "receipt-before-request": lambda s, a, r: (s, at(a, 2, finished_at=t(1)), r),
    "no-reservation": lambda s, a, r: (s, at(a, 8, reserved_at=None), r),
    "outcome-without-receipt": lambda s, a, r: (s, at(a, 8, finished_at=None), r),
    "receipt-without-outcome": lambda s, a, r: (s, at(a, 10, finished_at=t(101)), r),
    "terminal-without-receipt": lambda s, a, r: (s, [row for row in a if row.slot_id != 3], r),
    "status-mismatch": lambda s, a, r: (slot_at(s, 3, status="ok"), a, r),
    "overlapping-requests": lambda s, a, r: (s, at(a, 2, reserved_at=t(0.5)), r),
    "recovery-without-transient": lambda s, a, r: (s, at(a, 4, basis="recovery"), r),
    "amended-beyond-allowance": lambda s, a, r: (slot_at(s, 2, amended_attempts=0), a, r),
    "attempt-numbering": lambda s, a, r: (s, at(a, 7, attempt=4), r),
    "attempt-basis": lambda s, a, r: (s, at(a, 1, basis="recovery"), r),
    "attempt-phase": lambda s, a, r: (s, at(a, 8, phase="judging"), r),
    "attempt-run": lambda s, a, r: (s, at(a, 8, run_id=2), r),
    "orphan-attempt": lambda s, a, r: (s, a + [call(11, 99, 1, "first", "ok", 0, 1)], r),
    "slot-recoveries": lambda s, a, r: (s, a, replace(r, max_recoveries_per_slot=1)),
    "phase-recoveries": lambda s, a, r: (s, a, replace(r, phase_allowance=2)),
    "open-at-finish": lambda s, a, r: (s + [SlotRow(7, "judging", "pending", "judge|never")], a, r),
    "phase-order": lambda s, a, r: (s, at(a, 9, reserved_at=t(50), lease_until=t(110)), r),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_broken_rule_is_named(code):
    audit = broken(CASES[code])
    assert code in {v.code for v in audit.violations}, [v.text() for v in audit.violations]
    text = audit_text(audit)
    assert f"  {code}: " in text and "0 violations" not in text


def test_a_late_receipt_settles_nothing_but_an_on_time_answer_does():
    # The late receipt of slot 2 is no answer: its re-issue is no second request of an answered slot.
    assert broken(lambda s, a, r: None).violations == []
    # Received on time instead, the re-issue is a terminal slot requested again.
    audit = broken(lambda s, a, r: (s, at(a, 3, lease_until=t(75)), r))
    assert {v.code for v in audit.violations} >= {"requested-after-answer", "answered-twice"}


def test_open_slots_are_fine_while_the_run_goes_on():
    slots, attempts = clean_journal()
    slots += [SlotRow(7, "judging", "pending", "judge|next"), SlotRow(8, "judging", "in_flight", "judge|now")]
    attempts += [call(11, 8, 1, "first", "", 104, None, phase="judging")]
    audit = audit_journal(slots, attempts, replace(RULES, finished=False))
    assert audit.violations == []
    assert audit.phases[1].as_dict()["open"] == 2 and audit.phases[1].as_dict()["outcomes"]["in_flight"] == 1
