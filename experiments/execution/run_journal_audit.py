"""A run's journal read for the independent execution audit (paper App. B.2, Tables 13–14).

Two queries, both `values_list` (no per-row query, no participant text: neither the prompts nor
the answers are read), turned into the plain rows of `core.journal_audit`, which recounts the
phases and checks the journal's rules without the engine's tallies. The attempts are those of the
run's slots *or* naming the run, so an attempt filed under the wrong run or slot is seen too.
"""
from __future__ import annotations

from experiments.core.journal_audit import Audit, AttemptRow, Rules, SlotRow, audit_journal
from experiments.core.journal_audit_tables import audit_text
from experiments.execution.policy import run_retry_policy
from experiments.models import ModelCall, Run, Slot
from experiments.models.runs import PHASE_ORDER

ATTEMPT_FIELDS = ("pk", "slot_id", "run_id", "phase", "attempt", "basis", "outcome", "reserved_at", "lease_until",
                  "finished_at", "input_tokens", "output_tokens", "reasoning_tokens", "total_tokens", "elapsed_s")


def journal_rows(run: Run) -> tuple[list[SlotRow], list[AttemptRow]]:
    slots = [SlotRow(*row) for row in Slot.objects.filter(run=run).order_by("pk")
             .values_list("pk", "phase", "status", "key", "amended_attempts")]
    # One statement, a UNION rather than an OR across the join: each half reads its own index
    # (the calls' run, the slots' run), where an OR would scan every call of every run.
    # Unordered: the audit orders each slot's attempts itself.
    named = ModelCall.objects.filter(run=run).order_by().values_list(*ATTEMPT_FIELDS)
    owned = ModelCall.objects.filter(slot__run=run).order_by().values_list(*ATTEMPT_FIELDS)
    attempts = [AttemptRow(*row) for row in named.union(owned)]
    return slots, attempts


def run_rules(run: Run) -> Rules:
    policy = run_retry_policy(run)
    return Rules(run_id=run.pk, max_recoveries_per_slot=policy.max_recoveries_per_slot,
                 phase_allowance=policy.phase_allowance, phase_order=tuple(p.value for p in PHASE_ORDER),
                 finished=run.status == Run.Status.FINISHED)


def audit_run(run: Run) -> Audit:
    slots, attempts = journal_rows(run)
    return audit_journal(slots, attempts, run_rules(run))


def audit_run_text(run: Run, audit: Audit | None = None) -> str:
    audit = audit or audit_run(run)
    title = (f"Execution audit of run {run.pk} ({run.get_status_display().lower()}, phase "
             f"{run.get_phase_display().lower()}): recounted from the journal's reservations and receipts")
    return audit_text(audit, title=title)
