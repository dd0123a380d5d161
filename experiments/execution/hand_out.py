"""Handing a phase's slots out to the queue, a window at a time.

A slot handed out has its `dispatched_at` set and a job on its phase's queue (`jobs.dispatch`).
The queue's driver hands out at most a window of a phase's slots that are handed out and not
settled; a refill (`jobs.job_refill`) hands out the next when about half the window is left.
The inline driver hands out everything at once (it runs what it is handed).
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from experiments.execution.hand_out_sql import mark_handed_out
from experiments.execution.policy import effective_concurrency, sending_provider
from experiments.models import Run, Slot

# A phase's slots are handed out (put on the queue) a window at a time: a million-slot phase would
# otherwise hold a million jobs in Redis (about 600 bytes each) and take a minute to enqueue.
# The window is many rounds of the phase's in-flight cap, refilled when half of it is left, so
# the queue never runs dry while the next half is handed out.
HAND_OUT_MIN, HAND_OUT_ROUNDS = 4096, 32


def hand_out_window(run: Run) -> int:
    """How many of the phase's slots may be handed out and unfinished at once
    (`settings.OWNWORDS_HAND_OUT_WINDOW` overrides it)."""
    override = settings.OWNWORDS_HAND_OUT_WINDOW
    if override is not None and override > 0:
        return override
    return max(HAND_OUT_MIN, HAND_OUT_ROUNDS * effective_concurrency(run, sending_provider(run)))


def hand_out_next(run: Run, redispatch_after_s: float | None = None, *,
                  windowed: bool) -> tuple[tuple[int, ...], int | None]:
    """The slots to put on the queue now and, when slots are left, after how many more finished
    slot jobs to hand out the next (`driver.Step.refill_after`).

    The room is counted in the database — the phase's slots handed out and not settled — not
    from the queue's count, which a lost job (its worker killed, a step that raised) would leave
    too high for good. Slots handed out again (`redispatch_after_s`: their jobs were lost) are
    in the window already and go regardless of its room. Whether slots are left is asked after
    the hand-out: a concurrent hand-out may have taken some of the rows this one chose."""
    redispatched = hand_out(run.pk, run.phase, redispatch_after_s) if redispatch_after_s is not None else ()
    if not windowed:
        return tuple(sorted((*redispatched, *hand_out(run.pk, run.phase)))), None
    window = hand_out_window(run)
    out = handed_out_unsettled(run.pk, run.phase)  # the redispatched among them
    fresh = hand_out(run.pk, run.phase, limit=max(window - out, 0))
    left = Slot.objects.filter(run_id=run.pk, phase=run.phase, status=Slot.Status.PENDING,
                               dispatched_at__isnull=True).exists()
    # Refill when the unfinished fall to half the window (at least one more must finish first).
    refill_after = max(out + len(fresh) - window // 2, 1) if left else None
    return tuple(sorted((*redispatched, *fresh))), refill_after


def handed_out_unsettled(run_id: int, phase: str) -> int:
    """The phase's slots handed out whose jobs have not finished: pending with a job on the
    queue (or lost), or in flight. Read from their partial index (`slot_handed_out`): the cost
    follows the window, not the phase."""
    return Slot.objects.filter(run_id=run_id, phase=phase, status__in=(Slot.Status.PENDING, Slot.Status.IN_FLIGHT),
                               dispatched_at__isnull=False).count()


def hand_out(run_id: int, phase: str, redispatch_after_s: float | None = None, *,
             limit: int | None = None) -> tuple[int, ...]:
    """The phase's pending slots not handed out yet (or, with `redispatch_after_s`, those handed
    out at least that long ago), the first `limit` of them in planning order (None: all), marked
    handed out now. One conditional statement: a slot that two looks hand out at the same
    moment (a delayed look and a part's planner) goes to one of them only (the outer conditions
    are checked again on the row as the other left it); a slot job handed out twice costs a
    reservation refused, and many would stall every worker. The slots not handed out yet are
    read from their partial index (`slot_to_hand_out`), so a window costs its own size."""
    if limit == 0:
        return ()
    now = timezone.now()
    before = now - timedelta(seconds=redispatch_after_s) if redispatch_after_s is not None else None
    return mark_handed_out(run_id, phase, now, before, limit)
