"""The driver loop (paper App. B.1): a run advances phase by phase — memories → base generation → decisions → judging → analysis.

`run_drive` plans a phase's slots (`planning`: each a logical request with a stable key), hands
out those not yet handed out, and moves on once every slot of the phase is terminal — or pauses
there when some ended without an answer in a way only the owner settles (unknown; failed after an
amendment's allowance): `control.run_accept_missing` or `control.run_reissue_unknown` then. Whoever
calls it — an RQ job (`execution.jobs`) or `run_inline` — only moves ids.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

import httpx
from django.db import transaction
from django.db.models import Count, F, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from experiments.analysis.pools import pools_refresh, run_pools
from experiments.analysis.tables import tables_refresh
from experiments.data.sessions import cohort_tasks
from experiments.core.llm.transport import StdlibTransport
from experiments.core.rankers import RankerError
from experiments.execution.concurrency import NoLimiter
from experiments.execution.control import decision_pause, slots_awaiting_decision
from experiments.execution.hand_out import hand_out_next
from experiments.execution import generation_parts, mem0_planning, policy
from experiments.execution.journal import OPEN_STATUSES, expire_leases, slot_execute
from experiments.execution.kind_table import kind_rules
from experiments.execution.paper_report_build import report_after_run
from experiments.execution.planning import PLANNERS, plan_generation, plan_judging, task_inputs
from experiments.execution.policy import LEASE_GRACE_S, effective_concurrency, role_config, run_retry_policy
from experiments.execution.sealing import seal_mismatches
from experiments.execution.statistics_sql import refresh_planned_statistics
from experiments.models import ModelCall, Run, Slot
from experiments.models.runs import PHASE_ORDER, Phase

logger = logging.getLogger(__name__)

# --- driving the run ------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """What the driver should do next: send these slots and/or look again later, or nothing.

    `recheck_in_s` comes with every step of a phase that still has open slots: somebody must
    look again when a lease may have run out (a worker that died mid-request sends no word).
    """

    slot_ids: tuple[int, ...] = ()
    recheck_in_s: float | None = None
    phase: str = ""
    analyze: bool = False  # the analysis phase is due: run `run_analyze`
    plan_rest: bool = False  # the phase is planned in part: `run_plan_part` plans and hands out the next
    seal_checked: bool = False  # by this look, before its part (the next part need not check it again)
    # Slots of the phase are left to hand out: after this many more of its slot jobs finish, the
    # next are handed out (`jobs.job_refill`). None: nothing left to refill.
    refill_after: int | None = None
    # A generation phase planned in parts: the cohort position its next part starts at (None: found
    # from the slots planned, `generation_parts.planned_upto`).
    plan_from: int | None = None


# How often a drive builds Mem0's store again outside the lock when the journal's extraction
# answers changed meanwhile (a late receipt); after that it is built under the lock, as before.
MEM0_OUTSIDE_TRIES = 3


def run_drive(run_id: int, *, redispatch_after_s: float | None = None, windowed: bool = False) -> Step:
    """`_drive`, with Mem0's store (adds and searches: seconds per session) built outside the run's
    lock: a drive that comes to plan a Mem0 run's base generation without it gives up its
    transaction (nothing it did is kept), builds it (`mem0_planning.prepare`, reading only the
    journal) and drives again; the planning under the lock writes it only if the journal's
    extraction answers are still those it was built from."""
    prepared = None
    for tries in range(MEM0_OUTSIDE_TRIES + 1):
        try:
            step = _drive(run_id, redispatch_after_s=redispatch_after_s, windowed=windowed, mem0=prepared,
                          mem0_outside=tries < MEM0_OUTSIDE_TRIES)
        except mem0_planning.OutsideTheLock:
            prepared = _mem0_prepared(run_id)
            continue
        if step.seal_checked and not step.plan_rest:
            refresh_planned_statistics()  # a phase this look planned whole; one in parts: `run_plan_part`
        return step
    raise AssertionError("unreachable: the last try builds Mem0's store under the lock")


def _mem0_prepared(run_id: int) -> mem0_planning.Prepared:
    run = Run.objects.select_related("protocol").get(pk=run_id)
    tasks = cohort_tasks(run.protocol.cohort)
    return mem0_planning.prepare(run, tasks, task_inputs(tasks))


def _drive(run_id: int, *, redispatch_after_s: float | None, windowed: bool,
           mem0: mem0_planning.Prepared | None, mem0_outside: bool) -> Step:
    """Advance the run as far as it can go without sending anything.

    Marks reservations whose lease ran out as unknown, finishes a phase whose slots are
    all terminal (the next phase starts only after the previous one is complete, B.2),
    plans the next phase, and returns the slots to hand out now.

    `redispatch_after_s`: hand out again pending slots handed out at least this long ago
    (their job was lost, e.g. the driver died between committing and enqueuing). A slot
    handed out twice is still sent at most once: `_reserve` decides under the slot's lock.

    `windowed` (the queue's driver): hand out no more than the room left in the phase's window
    (`hand_out.hand_out_window`). Otherwise (the inline driver, which runs what it is handed): every
    pending slot.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("protocol").get(pk=run_id)
        seal_checked = False
        rules = kind_rules(run.protocol)
        while run.may_send():
            complete, plan_from = True, None
            slots = Slot.objects.filter(run=run, phase=run.phase)
            if run.phase == Phase.DONE:
                _finish(run)
                return Step()
            if run.phase == Phase.ANALYSIS:
                return Step(phase=Phase.ANALYSIS, analyze=True)
            if run.planned_phase != run.phase:
                in_parts = _in_parts(run, rules)
                if in_parts and slots.filter(status__in=OPEN_STATUSES).exists():
                    # Planned in parts and its first calls under way: the rest is planned without
                    # the run's lock (`run_plan_part`, which checks the seal then), not here, where
                    # every reservation and answer would wait for it. (With none under way the rest
                    # is planned here, and a seal that no longer holds stops the run saying why.)
                    complete = False
                else:
                    if not seal_checked and not _seal_holds(run):
                        return Step()
                    seal_checked = True  # once per look: nothing is read from disk twice in one transaction
                    if in_parts and not slots.exists():
                        # Every in-flight place is empty until the phase's first calls are handed
                        # out: a large phase hands out its first part now and the rest is planned
                        # without the run's lock while these are sent (`run_plan_part`).
                        if run.phase == Phase.JUDGING:
                            complete = plan_judging(run, first=_first_part(run))
                        else:
                            complete, plan_from = generation_parts.plan_part(run, 0, _first_part(run))
                    elif in_parts and run.phase == Phase.GENERATION:
                        # Its parts fell behind its calls (or their planner died): one more part
                        # here, never the whole rest under the lock; the rest again in parts.
                        start = generation_parts.planned_upto(run)
                        complete, plan_from = generation_parts.plan_part(
                            run, start, min(max(_first_part(run), start), generation_parts.PART_MAX))
                    elif run.phase == Phase.GENERATION and rules.planners[run.phase] is plan_generation:
                        plan_generation(run, mem0=mem0, mem0_outside=mem0_outside)
                    else:
                        rules.planners[run.phase](run)
                if complete:
                    run.planned_phase = run.phase
                    run.save(update_fields=["planned_phase"])
            expire_leases(run)
            cooling_s = _continue_allowances(run)
            to_send, refill_after = hand_out_next(run, redispatch_after_s, windowed=windowed)
            if not complete or cooling_s is not None or to_send or slots.filter(status__in=OPEN_STATUSES).exists():
                recheck_in_s = _next_deadline_s(run)
                if cooling_s is not None:
                    recheck_in_s = min(recheck_in_s, cooling_s + 0.1)
                return Step(slot_ids=tuple(to_send), recheck_in_s=recheck_in_s, phase=run.phase,
                            plan_rest=not complete, seal_checked=seal_checked, refill_after=refill_after,
                            plan_from=plan_from)
            if slots_awaiting_decision(run).exists():
                # Unknown slots (and slots an amendment's allowance left without an answer) are the
                # owner's decision, never a silent loss: the phase waits for it (App. B.2).
                decision_pause(run)
                return Step()
            _advance(run)
        return _expire_while_stopped(run)


# The first part of a large judging phase: enough calls to keep every place busy for a round
# while the next part is planned. It is planned under the run's lock between the phases, while
# every place is empty: at K = 128, four rounds (512 calls) took 0.2 s there, one takes 0.05 s.
FIRST_PART_ROUNDS, FIRST_PART_MIN = 1, 64


def _first_part(run: Run) -> int:
    return max(FIRST_PART_MIN, FIRST_PART_ROUNDS * effective_concurrency(run, policy.sending_provider(run)))


def _in_parts(run: Run, rules) -> bool:
    """Judging, and base generation unless Mem0's store (built for the whole cohort) is in it, are
    planned in parts: the first under the run's lock, the rest without it while the first calls
    are sent."""
    if not rules.judging_in_parts:
        return False
    return run.phase == Phase.JUDGING or (run.phase == Phase.GENERATION and not mem0_planning.uses_mem0(run))


def run_plan_part(run_id: int, *, check_seal: bool = True, windowed: bool = False,
                  start: int | None = None) -> Step:
    """The next part of a judging phase whose first part `run_drive` planned and handed out;
    the phase is marked planned with its last part. Returns the part's slots to hand out.

    Without the run's lock, so the earlier parts' reservations go on meanwhile: planning again
    is harmless (a slot's key is unique in its run, a grade per answer), and `run_drive` plans
    the whole phase under its lock if this never ran. The seal is checked as before any
    planning (`check_seal`: unless the caller's drive just did); a mismatch is left to
    `run_drive`, which stops the run saying why. Each part is as large as all before it
    together (its planning, slowed by the calls under way, must end before they do). A part is
    handed out only while the run may send (a reservation checks again anyway)."""
    run = Run.objects.select_related("protocol").get(pk=run_id)
    if run.planned_phase == run.phase or not _in_parts(run, kind_rules(run.protocol)):
        return Step()
    if check_seal and seal_mismatches(run.protocol, code=False):
        return Step()
    if run.phase == Phase.GENERATION:
        # A base generation part: as large as all before it together, at most PART_MAX
        # tasks (`start`: where the last part ended; else found from what is planned).
        start = generation_parts.planned_upto(run) if start is None else start
        complete, plan_from = generation_parts.plan_part(
            run, start, min(max(_first_part(run), start), generation_parts.PART_MAX))
    else:
        planned = Slot.objects.filter(run=run, phase=Phase.JUDGING).count()
        complete, plan_from = plan_judging(run, first=max(_first_part(run), planned)), None
    if complete:
        Run.objects.filter(pk=run_id, phase=run.phase).exclude(planned_phase=run.phase).update(planned_phase=run.phase)
    refresh_planned_statistics()  # the part's rows outgrew them: the receipts' plans come from these
    slot_ids, refill_after = hand_out_next(run, windowed=windowed) if run.may_send() else ((), None)
    return Step(slot_ids=slot_ids, phase=run.phase, plan_rest=not complete, refill_after=refill_after,
                plan_from=plan_from)


def run_refill(run_id: int, phase: str) -> Step:
    """The next slots of a phase whose window of handed-out slots is running low: up to the
    window, without the run's lock (the hand-out is one conditional statement, so a slot goes to
    one hand-out only). Nothing while the run may not send or has moved on; the delayed looks
    hand out what a lost refill left."""
    run = Run.objects.select_related("protocol").get(pk=run_id)
    if run.phase != phase or not run.may_send():
        return Step()
    slot_ids, refill_after = hand_out_next(run, windowed=True)
    return Step(slot_ids=slot_ids, phase=phase, refill_after=refill_after)


def _expire_while_stopped(run: Run) -> Step:
    """A run that may not send (paused, stopped, circuit open) still has its dead workers'
    reservations settled: unknown after their lease, held after an abandoned cooldown. While
    some slot of the phase is in flight, somebody must look again after its deadline."""
    if run.phase not in PLANNERS:  # (a phase planned in part may have slots in flight)
        return Step()
    in_flight = Slot.objects.filter(run=run, phase=run.phase, status=Slot.Status.IN_FLIGHT)
    if not in_flight.exists():
        return Step()
    expire_leases(run)
    if not in_flight.exists():
        return Step()
    return Step(recheck_in_s=_next_deadline_s(run), phase=run.phase)


def _continue_allowances(run: Run) -> float | None:
    """Hand out again failed slots with identical requests left of an amendment's allowance.

    The journal ends a slot after an amended request fails without output (no ordinary
    retry follows an amended request); when the owner allowed more than one, the next one is
    due after the protocol's cooldown, like any identical request. Returns the seconds until
    the next such slot's cooldown ends, or None when none is waiting.
    """
    amended = ModelCall.objects.filter(slot=OuterRef("pk"), basis=ModelCall.Basis.AMENDMENT)
    used = Subquery(amended.values("slot").annotate(n=Count("pk")).values("n")[:1])
    waiting = (Slot.objects.filter(run=run, phase=run.phase, status=Slot.Status.FAILED)
               .annotate(amended_used=Coalesce(used, 0))
               .filter(amended_used__gt=0, amended_used__lt=F("amended_attempts")))
    now = timezone.now()
    cooldown = timedelta(seconds=run_retry_policy(run).cooldown_s)
    due_ids, waits = [], []
    for slot in waiting.only("pk", "amended_attempts"):
        last = ModelCall.objects.filter(slot=slot).order_by("-attempt").values_list("finished_at", flat=True).first()
        due = (last or now) + cooldown
        if due <= now:
            due_ids.append(slot.pk)
        else:
            waits.append((due - now).total_seconds())
    if due_ids:
        Slot.objects.filter(pk__in=due_ids).update(
            status=Slot.Status.PENDING, dispatched_at=None, updated_at=now,
            status_note="the amendment's allowance has identical requests left: sent again after the cooldown")
    return min(waits) if waits else None


def _seal_holds(run: Run) -> bool:
    """Before a phase's requests are built: prompts, tasks and settings are still the sealed
    ones (App. B.2: a hash failure stops the phase). Otherwise the run stops, saying why."""
    missing = mem0_planning.planning_problem(run)
    if missing is not None:  # before the seal, which binds Mem0's prompt: say what is missing
        run.status = Run.Status.STOPPED
        run.status_reason = f"Stopped before planning {Phase(run.phase).label.lower()}: {missing}"
        run.save(update_fields=["status", "status_reason"])
        return False
    problems = seal_mismatches(run.protocol, code=False)
    if not problems:
        return True
    run.status = Run.Status.STOPPED
    run.status_reason = (f"Stopped before planning {Phase(run.phase).label.lower()}: the seal no longer matches: "
                         + "; ".join(problems))
    run.save(update_fields=["status", "status_reason"])
    return False


def _next_deadline_s(run: Run) -> float:
    """Seconds until the earliest moment an open slot of the phase may need the driver: a
    reservation's lease running out, or a recovery overdue. Never later than one lease from
    now, since a slot handed out now can be reserved at any moment."""
    now = timezone.now()
    lease = timedelta(seconds=max(role_config(run, role).timeout_s for role in Slot.Role.values) + LEASE_GRACE_S)
    open_calls = ModelCall.objects.filter(slot__run=run, slot__phase=run.phase, outcome=ModelCall.Outcome.IN_FLIGHT,
                                          slot__status=Slot.Status.IN_FLIGHT)
    deadlines = [now + lease]
    earliest_lease = open_calls.order_by("lease_until").values_list("lease_until", flat=True).first()
    if earliest_lease is not None:
        deadlines.append(earliest_lease)
    earliest_retry = (Slot.objects.filter(run=run, phase=run.phase, status=Slot.Status.IN_FLIGHT,
                                          retry_at__isnull=False)
                      .order_by("retry_at").values_list("retry_at", flat=True).first())
    if earliest_retry is not None:
        deadlines.append(earliest_retry + lease)
    return max((min(deadlines) - now).total_seconds(), 0.0) + 0.5


def run_analyze(run_id: int) -> None:
    """The analysis phase: the dashboards' numbers from the grades, cached with their inputs'
    hash so pages only read them, and their headline on the run; then the run is done."""
    run = Run.objects.select_related("protocol").get(pk=run_id)
    if run.phase != Phase.ANALYSIS:
        return  # done already (a second analysis job)
    summary = kind_rules(run.protocol).summary(run)  # a survey's is scored against the recorded options
    if run_pools(run):
        # The candidate-pool page is computed here too, so its first view only reads it.
        try:
            pools_refresh(run)
        except RankerError as error:  # a configured reranker that does not load: the page says so
            logger.warning("run %s: candidate pools not computed: %s", run_id, error)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.phase != Phase.ANALYSIS:
            return  # another worker finished it first
        run.analysis = summary
        run.save(update_fields=["analysis"])
        _advance(run)
        if run.may_send():  # (else the drive finishes it once it may go on)
            _finish(run)  # before the report, which reads the finished runs, is queued (see below)
    # The project's paper report, rebuilt on the queue (a lane may start it at once), reads it finished.
    _tables_after(run)
    report_after_run(run)


def _tables_after(run: Run) -> None:
    """The robustness tables, once the run is done (many more intervals than the dashboard: they
    never hold the run back; the tables page says when they are missing, `analysis_refresh` computes
    them again). A survey run has none: it is scored against recorded options (`analysis.survey_results`)."""
    if not kind_rules(run.protocol).robustness_tables:
        return
    try:
        tables_refresh(run)
    except Exception:           # noqa: BLE001 - logged with its traceback; the run's own result stands
        logger.exception("run %s: the robustness tables could not be computed", run.pk)


def _finish(run: Run) -> None:
    run.status = Run.Status.FINISHED
    run.finished_at = timezone.now()
    run.status_reason = ""  # a pause or resume note no longer describes a finished run
    run.save(update_fields=["status", "finished_at", "status_reason"])


def _advance(run: Run) -> None:
    run.phase = PHASE_ORDER[PHASE_ORDER.index(run.phase) + 1]
    run.save(update_fields=["phase"])


def run_inline(run_id: int, *, client: httpx.Client | None = None, sleep=time.sleep) -> Run:
    """Drive a run to its end in this process, one request at a time (no queue)."""
    own_client = client is None
    client = client or httpx.Client(transport=StdlibTransport())  # as the workers' (`jobs.http_client`)
    try:
        while True:
            # Every slot handed out is executed before the next drive, so a pending slot handed
            # out earlier belongs to an inline driver that stopped (e.g. an interrupted demo).
            step = run_drive(run_id, redispatch_after_s=0)
            if step.analyze:
                run_analyze(run_id)
            elif step.slot_ids:
                for slot_id in step.slot_ids:  # named as a queued slot's job names it (`jobs.slot_job_id`)
                    slot_execute(slot_id, limiter=NoLimiter(), client=client, worker="inline", sleep=sleep,
                                 run_id=run_id, role=policy.sending_role(step.phase))
            elif step.recheck_in_s is not None:
                sleep(step.recheck_in_s)
            else:
                return Run.objects.get(pk=run_id)
    finally:
        if own_client:
            client.close()
