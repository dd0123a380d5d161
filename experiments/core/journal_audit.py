"""An independent audit of a run's request journal (paper App. B.2, Tables 13–14), on plain rows.

It takes the journal as stored — one row per slot (a logical request) and one per attempt (an
HTTP reservation with its receipt) — and recounts every phase from them alone: it never reads
the engine's own tallies, so a tally that drifted from the journal, or a journal that broke one
of its rules, shows here as a difference or a violation. The rules checked are the journal's
guarantees (`execution.journal`, `execution.reservation`):

- every attempt is a reservation made before it was sent, numbered 1, 2, … within its slot, the
  first with basis ``first`` and later ones ``recovery`` or ``amendment``;
- a receipt is never earlier than its request, and an outcome has a receipt time exactly when it
  is a received outcome (``unknown`` and in-flight attempts have none);
- a slot's next attempt is reserved only once the previous one ended (its receipt, or its lease
  running out without one), and a recovery only after a transient outcome;
- a slot answered on time (content received, ok or unusable) is never requested again, so it has
  one such answer; a late receipt (after the lease ran out) is kept but settles nothing;
- recoveries stay within the slot's and the phase's allowances, amended attempts within the
  slot's amended allowance;
- a slot's status agrees with its last attempt (a terminal ok/unusable/failed slot has a receipt);
- phases run in order: no attempt of a phase is reserved before an earlier phase's last receipt;
- a finished run has no slot pending, in flight or held.

No Django here (the layout's rule for `experiments.core`): the command reads the rows.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from experiments.core.llm.wire import OutcomeKind

# The journal's stored strings, spelled out here rather than imported from the models: the
# audit reads what is stored, whatever the engine's enums are called this week.
FIRST, RECOVERY, AMENDMENT = "first", "recovery", "amendment"
OK, UNUSABLE, TRANSIENT = OutcomeKind.OK.value, OutcomeKind.UNUSABLE.value, OutcomeKind.TRANSIENT.value
QUOTA, FATAL = OutcomeKind.QUOTA.value, OutcomeKind.FATAL.value
UNKNOWN, IN_FLIGHT = "unknown", ""
RECEIVED = (OK, UNUSABLE, TRANSIENT, QUOTA, FATAL)  # outcomes that come with a receipt
ANSWERED = (OK, UNUSABLE)  # content received: the slot's answer, never redrawn
SLOT_OPEN = ("pending", "in_flight", "held")
SLOT_TERMINAL = ("ok", "unusable", "failed", "unknown")
TOKEN_FIELDS = ("input_tokens", "output_tokens", "reasoning_tokens", "total_tokens")


@dataclass(frozen=True)
class SlotRow:
    id: int
    phase: str
    status: str
    key: str
    amended_attempts: int = 0


@dataclass(frozen=True)
class AttemptRow:
    id: int
    slot_id: int
    run_id: int
    phase: str
    attempt: int
    basis: str
    outcome: str
    reserved_at: datetime | None
    lease_until: datetime | None
    finished_at: datetime | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None
    elapsed_s: float | None = None

    @property
    def late(self) -> bool:
        """A receipt stored after the lease ran out: kept, settles nothing (the slot was unknown)."""
        return (self.finished_at is not None and self.lease_until is not None
                and self.finished_at > self.lease_until)

    @property
    def answered_on_time(self) -> bool:
        return self.outcome in ANSWERED and self.finished_at is not None and not self.late

    @property
    def ended_at(self) -> datetime | None:
        """When the request was over for the journal: its on-time receipt, else its lease's end."""
        if self.finished_at is not None and not self.late:
            return self.finished_at
        return self.lease_until


@dataclass(frozen=True)
class Rules:
    """The run's limits, as its protocol sealed them, and whether the run says it is finished."""
    run_id: int
    max_recoveries_per_slot: int
    phase_allowance: int
    phase_order: tuple[str, ...]
    finished: bool = False


@dataclass(frozen=True)
class Violation:
    code: str
    phase: str
    slot_key: str
    attempt: int | None
    detail: str

    def text(self) -> str:
        where = f"{self.phase} slot {self.slot_key}" + (f" attempt {self.attempt}" if self.attempt else "")
        return f"{self.code}: {where}: {self.detail}"


@dataclass
class PhaseAccount:
    """One row of Tables 13 and 14."""
    phase: str
    slots: int = 0
    slot_status: dict = field(default_factory=lambda: defaultdict(int))
    reservations: int = 0
    basis: dict = field(default_factory=lambda: defaultdict(int))
    outcomes: dict = field(default_factory=lambda: defaultdict(int))
    late_receipts: int = 0
    tokens: dict = field(default_factory=lambda: {name: [0, 0] for name in TOKEN_FIELDS})  # [sum, reported]
    elapsed_s: float = 0.0
    elapsed_reported: int = 0
    interval_s: float = 0.0  # request → receipt, over attempts with a receipt
    receipts: int = 0
    first_request: datetime | None = None
    last_receipt: datetime | None = None

    def add_slot(self, slot: SlotRow) -> None:
        self.slots += 1
        self.slot_status[slot.status] += 1

    def add_attempt(self, row: AttemptRow) -> None:
        self.reservations += 1
        self.basis[row.basis] += 1
        self.outcomes[row.outcome] += 1
        self.late_receipts += row.late
        for name in TOKEN_FIELDS:
            if (value := getattr(row, name)) is not None:
                self.tokens[name][0] += value
                self.tokens[name][1] += 1
        if row.elapsed_s is not None:
            self.elapsed_s += row.elapsed_s
            self.elapsed_reported += 1
        if row.reserved_at is not None and (self.first_request is None or row.reserved_at < self.first_request):
            self.first_request = row.reserved_at
        if row.finished_at is not None:
            self.receipts += 1
            if row.reserved_at is not None:
                self.interval_s += (row.finished_at - row.reserved_at).total_seconds()
            if self.last_receipt is None or row.finished_at > self.last_receipt:
                self.last_receipt = row.finished_at

    def merge(self, other: PhaseAccount) -> None:
        for name in ("slots", "reservations", "late_receipts", "elapsed_s", "elapsed_reported", "interval_s",
                     "receipts"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for mine, theirs in ((self.slot_status, other.slot_status), (self.basis, other.basis),
                             (self.outcomes, other.outcomes)):
            for key, value in theirs.items():
                mine[key] += value
        for name in TOKEN_FIELDS:
            self.tokens[name] = [a + b for a, b in zip(self.tokens[name], other.tokens[name])]
        self.first_request = min((t for t in (self.first_request, other.first_request) if t), default=None)
        self.last_receipt = max((t for t in (self.last_receipt, other.last_receipt) if t), default=None)

    @property
    def span_s(self) -> float | None:
        if self.first_request is None or self.last_receipt is None:
            return None
        return (self.last_receipt - self.first_request).total_seconds()

    def as_dict(self) -> dict:
        status = self.slot_status
        return {
            "phase": self.phase, "slots": self.slots,
            "answered": status["ok"], "unusable": status["unusable"], "failed": status["failed"],
            "unknown": status["unknown"], "terminal": sum(status[s] for s in SLOT_TERMINAL),
            "open": sum(status[s] for s in SLOT_OPEN),
            "reservations": self.reservations, "first_requests": self.basis[FIRST],
            "recoveries": self.basis[RECOVERY], "amended": self.basis[AMENDMENT],
            "outcomes": {"ok": self.outcomes[OK], "unusable": self.outcomes[UNUSABLE],
                         "transient": self.outcomes[TRANSIENT], "quota": self.outcomes[QUOTA],
                         "fatal": self.outcomes[FATAL], "unknown": self.outcomes[UNKNOWN],
                         "in_flight": self.outcomes[IN_FLIGHT]},
            "receipts": self.receipts, "late_receipts": self.late_receipts,
            "tokens": {name: {"sum": total if reported else None, "reported": reported}
                       for name, (total, reported) in self.tokens.items()},
            "elapsed_s": round(self.elapsed_s, 3), "elapsed_reported": self.elapsed_reported,
            "request_to_receipt_s": round(self.interval_s, 3),
            "first_request": self.first_request.isoformat() if self.first_request else None,
            "last_receipt": self.last_receipt.isoformat() if self.last_receipt else None,
            "span_s": None if self.span_s is None else round(self.span_s, 3),
        }


@dataclass
class Audit:
    phases: list[PhaseAccount]
    total: PhaseAccount
    violations: list[Violation]

    def as_dict(self) -> dict:
        return {"phases": [p.as_dict() for p in self.phases], "total": self.total.as_dict(),
                "violations": [{"code": v.code, "phase": v.phase, "slot": v.slot_key, "attempt": v.attempt,
                                "detail": v.detail} for v in self.violations]}


def audit_journal(slots: list[SlotRow], attempts: list[AttemptRow], rules: Rules) -> Audit:
    """Tables 13–14 per phase (in the run's phase order, then any other phase found) and every
    broken rule, recounted from the rows alone."""
    by_slot: dict[int, list[AttemptRow]] = defaultdict(list)
    for row in attempts:
        by_slot[row.slot_id].append(row)
    slot_by_id = {slot.id: slot for slot in slots}
    accounts: dict[str, PhaseAccount] = {}

    def account(phase: str) -> PhaseAccount:
        return accounts.setdefault(phase, PhaseAccount(phase))

    found: list[Violation] = []
    for slot in slots:
        account(slot.phase).add_slot(slot)
        rows = sorted(by_slot.get(slot.id, ()), key=lambda r: (r.attempt, r.id))
        for row in rows:
            account(slot.phase).add_attempt(row)
        found += _slot_violations(slot, rows, rules)
    for slot_id, rows in by_slot.items():
        if slot_id not in slot_by_id:
            for row in rows:
                account(row.phase).add_attempt(row)
                found.append(Violation("orphan-attempt", row.phase, f"#{slot_id}", row.attempt,
                                       "an attempt whose slot is not one of the run's slots"))
    for phase, acc in accounts.items():
        if acc.basis[RECOVERY] > rules.phase_allowance:
            found.append(Violation("phase-recoveries", phase, "*", None,
                                   f"{acc.basis[RECOVERY]} recoveries, the phase allows {rules.phase_allowance}"))
    found += _phase_order_violations(slots, by_slot, rules)
    order = [p for p in rules.phase_order if p in accounts] + sorted(p for p in accounts if p not in rules.phase_order)
    phases = [accounts[p] for p in order]
    total = PhaseAccount("total")
    for acc in phases:
        total.merge(acc)
    return Audit(phases, total, found)


def _slot_violations(slot: SlotRow, rows: list[AttemptRow], rules: Rules) -> list[Violation]:
    out = []

    def flag(code: str, row: AttemptRow | None, detail: str) -> None:
        out.append(Violation(code, slot.phase, slot.key, row.attempt if row else None, detail))

    answered_at: AttemptRow | None = None
    for number, row in enumerate(rows, start=1):
        if row.run_id != rules.run_id:
            flag("attempt-run", row, f"the attempt names run {row.run_id}")
        if row.phase != slot.phase:
            flag("attempt-phase", row, f"the attempt says phase {row.phase!r}")
        if row.attempt != number:
            flag("attempt-numbering", row, f"attempts are not numbered 1, 2, … (position {number})")
        expected = FIRST if number == 1 else (RECOVERY, AMENDMENT)
        if (row.basis != expected) if number == 1 else (row.basis not in expected):
            flag("attempt-basis", row, f"basis {row.basis!r} at position {number}")
        if row.reserved_at is None:
            flag("no-reservation", row, "a request without a reservation time")
        if row.finished_at is not None and row.reserved_at is not None and row.finished_at < row.reserved_at:
            flag("receipt-before-request", row, f"received {row.finished_at.isoformat()}, "
                                                f"requested {row.reserved_at.isoformat()}")
        if row.outcome in RECEIVED and row.finished_at is None:
            flag("outcome-without-receipt", row, f"outcome {row.outcome!r} has no receipt time")
        elif row.outcome not in RECEIVED and row.finished_at is not None:
            flag("receipt-without-outcome", row, f"a receipt time with outcome {row.outcome!r}")
        if row.outcome not in (*RECEIVED, UNKNOWN, IN_FLIGHT):
            flag("outcome", row, f"unknown outcome {row.outcome!r}")
        if number > 1:
            before = rows[number - 2]
            if answered_at is not None:
                flag("requested-after-answer", row,
                     f"reserved after attempt {answered_at.attempt} was answered ({answered_at.outcome})")
            ended = before.ended_at
            if ended is not None and row.reserved_at is not None and row.reserved_at < ended:
                flag("overlapping-requests", row, f"reserved before attempt {before.attempt} ended")
            if row.basis == RECOVERY and before.outcome != TRANSIENT:
                flag("recovery-without-transient", row, f"follows a {before.outcome or 'in-flight'} attempt")
        if row.answered_on_time and answered_at is None:
            answered_at = row
    answered = [row for row in rows if row.answered_on_time]
    if len(answered) > 1:
        flag("answered-twice", answered[1], f"{len(answered)} attempts answered on time: "
                                            + ", ".join(str(r.attempt) for r in answered))
    recoveries = sum(row.basis == RECOVERY for row in rows)
    if recoveries > rules.max_recoveries_per_slot:
        flag("slot-recoveries", None, f"{recoveries} recoveries, a slot may have {rules.max_recoveries_per_slot}")
    amended = sum(row.basis == AMENDMENT for row in rows)
    if amended > slot.amended_attempts:
        flag("amended-beyond-allowance", None, f"{amended} amended attempts, allowed {slot.amended_attempts}")
    if problem := _status_problem(slot.status, rows[-1] if rows else None):
        no_receipt = not rows or (rows[-1].finished_at is None and slot.status != "unknown")
        code = "terminal-without-receipt" if slot.status in SLOT_TERMINAL and no_receipt else "status-mismatch"
        flag(code, rows[-1] if rows else None, problem)
    if rules.finished and slot.status in SLOT_OPEN:
        flag("open-at-finish", None, f"the run is finished and the slot is {slot.status}")
    return out


def _status_problem(status: str, last: AttemptRow | None) -> str:
    """Why the slot's status cannot follow from its last attempt; "" when it can."""
    if last is None:
        return "" if status == "pending" else f"{status} without any attempt"
    outcome = last.outcome if not last.late else f"{last.outcome} (late)"
    allowed = {
        "ok": last.outcome == OK and last.finished_at is not None and not last.late,
        "unusable": last.outcome == UNUSABLE and last.finished_at is not None and not last.late,
        "failed": last.outcome == TRANSIENT and last.finished_at is not None and not last.late,
        "unknown": last.outcome == UNKNOWN or last.late,
        # a recovery is due (transient), or the attempt is under way
        "in_flight": last.outcome in (IN_FLIGHT, TRANSIENT) and not last.late,
        # released again by an amendment, or a recovery due after its worker stopped
        "pending": last.outcome != IN_FLIGHT and not last.answered_on_time,
        "held": last.outcome in (QUOTA, FATAL, TRANSIENT) and not last.late,
    }.get(status)
    if allowed is None:
        return f"unknown slot status {status!r}"
    return "" if allowed else f"the slot is {status} but its last attempt is {outcome or 'in flight'}"


def _phase_order_violations(slots: list[SlotRow], by_slot: dict, rules: Rules) -> list[Violation]:
    """A phase's attempts are all reserved after every earlier phase's requests ended."""
    ends: dict[str, datetime] = {}
    keys = {slot.id: slot.key for slot in slots}
    for slot in slots:
        for row in by_slot.get(slot.id, ()):
            if (ended := row.ended_at) is not None and (slot.phase not in ends or ended > ends[slot.phase]):
                ends[slot.phase] = ended
    rank = {phase: i for i, phase in enumerate(rules.phase_order)}
    out = []
    for slot in slots:
        if slot.phase not in rank:
            continue
        earlier = [(ends[p], p) for p in ends if p in rank and rank[p] < rank[slot.phase]]
        if not earlier:
            continue
        last_end, last_phase = max(earlier)
        for row in by_slot.get(slot.id, ()):
            if row.reserved_at is not None and row.reserved_at < last_end:
                out.append(Violation("phase-order", slot.phase, keys[slot.id], row.attempt,
                                     f"reserved before {last_phase} ended ({last_end.isoformat()})"))
    return out
