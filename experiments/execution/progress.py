"""How far a run is: slot and call counters per phase, what the owner can do next, requests in flight, the
queue's reachability and workers."""
from __future__ import annotations

import functools
from datetime import timedelta

import django_rq
import redis
from django.db.models import Count, Q, Sum
from django.utils import timezone
from rq import Worker

from experiments.execution import control
from experiments.execution.concurrency import InflightLimiter
from experiments.execution.policy import effective_concurrency, limiter_name, role_config
from experiments.models import ModelCall, Run, Slot
from experiments.models.runs import PHASE_ORDER, Phase


def run_progress(run: Run) -> dict:
    """Counters per phase for the run page and the report command."""
    counts = {}
    for phase, status, n in (Slot.objects.filter(run=run).values_list("phase", "status")
                             .annotate(n=Count("pk")).order_by()):
        counts.setdefault(phase, {})[status] = n
    calls = ModelCall.objects.filter(slot__run=run)
    per_phase_calls = {
        row["slot__phase"]: row
        for row in calls.values("slot__phase").annotate(
            attempts=Count("pk"),
            recoveries=Count("pk", filter=Q(basis=ModelCall.Basis.RECOVERY)),
        ).order_by()
    }
    phases = []
    for phase in PHASE_ORDER[:4]:
        c = counts.get(phase, {})
        total = sum(c.values())
        done = sum(n for s, n in c.items() if s in Slot.TERMINAL)
        phases.append({
            "phase": phase,
            "label": Phase(phase).label,
            "total": total,
            "done": done,
            "ok": c.get(Slot.Status.OK, 0),
            "pending": c.get(Slot.Status.PENDING, 0),
            "in_flight": c.get(Slot.Status.IN_FLIGHT, 0),
            "failed": c.get(Slot.Status.FAILED, 0) + c.get(Slot.Status.UNUSABLE, 0),
            "held": c.get(Slot.Status.HELD, 0),
            "unknown": c.get(Slot.Status.UNKNOWN, 0),
            # Answered: an answer was received and used. Missing: the slot ended without one
            # (failed, content unusable or unknown); its results count as missing (App. B.2).
            "answered": c.get(Slot.Status.OK, 0),
            "missing": done - c.get(Slot.Status.OK, 0),
            "attempts": per_phase_calls.get(phase, {}).get("attempts", 0),
            "recoveries": per_phase_calls.get(phase, {}).get("recoveries", 0),
        })
    # Calls per second over the last minute, or since the start when that is shorter.
    now = timezone.now()
    window_s = 60.0
    if run.started_at is not None:
        window_s = min(window_s, max((now - run.started_at).total_seconds(), 1.0))
    recent = calls.filter(finished_at__gte=now - timedelta(seconds=window_s)).count()
    remaining = sum(p["total"] - p["done"] for p in phases)
    rate = recent / window_s
    # A count no attempt reported stays None (unknown, not zero: App. B.3, Table 14), and
    # `unreported` says how many finished attempts gave no usage at all.
    tokens = calls.aggregate(**{field: Sum(field) for field in ("input_tokens", "output_tokens", "reasoning_tokens")})
    tokens["unreported"] = calls.exclude(finished_at=None).filter(total_tokens=None).count()
    return {
        "phases": phases,
        "calls_per_second": rate,
        "eta_s": (remaining / rate) if rate > 0 and remaining else None,
        "tokens": tokens,
        "attempts": calls.count(),
    }





def run_next(run: Run) -> dict:
    """What the run waits for and what an owner can do next, for the run page and run_report.

    - `decision`: slots of the current phase awaiting the owner's decision (unknown, or failed
      after an amendment's allowance) with the cost of re-issuing them; `decision_due` when the
      phase has nothing else open, so the run waits for that decision;
    - `held`: slots waiting for a resume (quota or a non-transient error), each of which a
      resume lets send its allowance of identical requests;
    """
    finished = run.status == Run.Status.FINISHED
    decision = None if finished else control.reissue_estimate(run)
    phase_open = Slot.objects.filter(run=run, phase=run.phase, status__in=control.OPEN_SLOT_STATUSES).exists()
    decision_due = bool(decision and decision["requests"]) and not phase_open and not run.circuit_open
    held = 0 if finished else Slot.objects.filter(run=run, status=Slot.Status.HELD).count()
    return {
        "decision": decision if decision and decision["requests"] else None,
        "decision_due": decision_due,
        "only_unknown": bool(decision) and all(s["status"] == Slot.Status.UNKNOWN for s in decision["slots"]),
        "held": held,
        "can_pause": run.status == Run.Status.RUNNING,
        "can_resume": run.status in (Run.Status.PAUSED, Run.Status.STOPPED) and not decision_due,
    }


@functools.lru_cache(maxsize=1)
def _redis() -> redis.Redis:
    """The queue's Redis with short timeouts: a page must not hang on an unreachable server."""
    pool = django_rq.get_connection("default").connection_pool
    kwargs = {**pool.connection_kwargs, "socket_connect_timeout": 1, "socket_timeout": 2}
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs))


def queue_reachable() -> bool:
    try:
        return bool(_redis().ping())
    except (redis.RedisError, OSError):
        return False


def worker_count() -> int | None:
    try:
        return Worker.count(connection=_redis())
    except (redis.RedisError, OSError):
        return None


def in_flight(run: Run, *, redis_up: bool = True) -> list[dict]:
    """Requests in flight per service, from the Redis limiter shared by every worker (0 without Redis)."""
    rows = {}
    for role in (Slot.Role.GENERATOR, Slot.Role.JUDGE):
        config = role_config(run, role)
        name = limiter_name(config)
        if name in rows:
            continue
        try:
            count = InflightLimiter(_redis()).in_flight(name) if redis_up else 0
        except (redis.RedisError, OSError):
            count = 0
        label = f"{config.provider} at {config.base_url}" if config.base_url else config.provider
        rows[name] = {"service": label, "provider": config.provider, "in_flight": count,
                      "cap": effective_concurrency(run, config.provider)}
    return list(rows.values())



def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
