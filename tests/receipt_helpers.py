"""Many receipts of the same tasks at once, for tests/test_engine_receipts.py and
benchmarks/receipts.py.

A run whose tasks each have many slots per phase — four fusion and selection decisions over
two memories, and their six candidate answers — goes through its phases; in each, every
slot is reserved as the journal reserves it, then K threads, released together by a barrier,
receive the answers through the journal's own step (`journal._decide_and_record`, the receipt
and its results) in an order that keeps them on the same task at the same moment. Nothing is
mocked: the receipts are PostgreSQL transactions racing for the same rows.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from django.db import connection

from experiments.core.conditions import memory_key
from experiments.core.llm.wire import Outcome, OutcomeKind
from experiments.core.slot_keys import parse_slot_key
from experiments.execution import durable
from experiments.execution.driver import run_drive
from experiments.execution.journal import _decide_and_record
from experiments.execution.reservation import reserve, reserve_named_first
from experiments.execution.slot_reads import named_slot, prepare
from experiments.execution.policy import LEASE_GRACE_S, run_retry_policy
from experiments.models import ModelCall, Run, Slot

# Four decisions per task (fusion and selection over two memories), six candidates.
DECIDING = [f"{memory_key(kind, 100)}+{workflow}(3)" for kind in ("concrete", "trait")
            for workflow in ("fusion", "selection")]
CANDIDATE_TEXTS = ("Alpha answer.", "Beta answer.", "Gamma answer.")


def answer_text(slot: Slot) -> str:
    """The answer a slot receives: memories, candidates by their index, a fusion that copies a
    candidate or writes anew, a selection of c1 or c2, a judge's grade (Alpha 3, Beta 0, else 1)."""
    key = parse_slot_key(slot.key)
    if slot.phase == "memories":
        return f"Likes gardening; works as a composer ({key.memory_kind} memory)."  # its own text per kind
    if slot.phase == "generation":
        return CANDIDATE_TEXTS[key.index % 3]
    if slot.phase == "decisions":
        concrete = "concrete" in key.condition
        if "fusion" in key.condition:
            return "Alpha answer." if concrete else "A fused answer."
        return json.dumps({"candidate_id": "c1" if concrete else "c2"})
    answer = slot.user.split("[PREDICTED ANSWER]", 1)[-1]
    score = 3 if "Alpha" in answer else 0 if "Beta" in answer else 1
    return json.dumps({"score": score, "rationale": "receipts test"})


@dataclass
class PhaseReceipts:
    """What one phase's receipts did: how many, in how long, retried and lost (with the errors)."""

    phase: str
    receipts: int = 0
    seconds: float = 0.0
    retries: int = 0
    lost: int = 0
    errors: list = field(default_factory=list)


def _reserved(slot_id: int, worker: str, named: tuple[int, str] | None = None):
    """The slot as the journal reads it, its attempt reserved, and its answer and retry rules;
    `named` (run id, role): as a slot its job names, read in its reservation (`slot_reads.named_slot`)."""
    slot, config = named_slot(slot_id, *named, in_this_thread) if named is not None else prepare(slot_id)
    policy = run_retry_policy(slot.run)
    lease_s = config.timeout_s + LEASE_GRACE_S
    reservation = (reserve_named_first(slot, worker=worker, lease_s=lease_s) if named is not None
                   else reserve(slot_id, basis=ModelCall.Basis.FIRST, justification="", worker=worker,
                                lease_s=lease_s, policy=policy))
    outcome = Outcome(OutcomeKind.OK, http_status=200, response_id=f"resp-{slot_id}", model_version="gpt-test-1",
                      finish_reason="stop", text=answer_text(slot))
    return policy, slot, reservation, outcome


def in_this_thread(step, *args):
    return step(*args)


def receive_phase(run: Run, slot_ids, threads: int, db=in_this_thread) -> PhaseReceipts:
    """Reserve every slot, then receive all their answers on `threads` threads at once. Slots are
    dealt by task, round robin, so the threads work on the same task at the same moments. `db`
    runs each database step (`workers.LoanedConnections`: on a few connections lent to the threads)."""
    phase = Slot.objects.get(pk=slot_ids[0]).phase
    by_task = sorted(Slot.objects.filter(pk__in=slot_ids).values_list("task_id", "pk"),
                     key=lambda row: (row[0] or 0, row[1]))
    dealt = [[pk for _, pk in by_task[i::threads]] for i in range(threads)]
    result = PhaseReceipts(phase)
    barrier = threading.Barrier(threads + 1)
    lock = threading.Lock()

    def receiver(number: int, mine: list[int]) -> None:
        prepared = []
        try:
            prepared = [db(_reserved, slot_id, f"receipts-{number}") for slot_id in mine]
        except Exception as exc:  # pragma: no cover - reported by the caller
            with lock:
                result.errors.append(f"reserving: {type(exc).__name__}: {exc}")
        finally:
            connection.close()
            barrier.wait()
        for policy, slot, reservation, outcome in prepared:
            try:
                db(_decide_and_record, policy, slot.run, slot, reservation, outcome)
            except Exception as exc:  # a receipt that escaped: its answer is lost
                with lock:
                    result.errors.append(f"{type(exc).__name__}: {exc}")
        connection.close()

    workers = [threading.Thread(target=receiver, args=(n, mine)) for n, mine in enumerate(dealt)]
    for worker in workers:
        worker.start()
    retries_before = durable.RETRIES.value
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    result.seconds = time.perf_counter() - started
    result.retries = durable.RETRIES.value - retries_before
    result.receipts = len(slot_ids)
    stored = Slot.objects.filter(pk__in=slot_ids, status=Slot.Status.OK, calls__outcome="ok").distinct().count()
    result.lost = len(slot_ids) - stored
    return result


def receive_run(run: Run, threads: int, db=in_this_thread) -> list[PhaseReceipts]:
    """Every phase of the run, each received at once by `threads` threads; then the analysis
    step is left to the caller (the run stands at it)."""
    phases = []
    while True:
        step = run_drive(run.pk)
        if not step.slot_ids:
            return phases
        phases.append(receive_phase(run, list(step.slot_ids), threads, db))
