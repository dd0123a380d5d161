"""How far a run is: slot and call counters per phase, what the owner can do next, requests in flight, the
queue's reachability and workers."""
from __future__ import annotations

import functools
from datetime import timedelta

import django_rq
import redis
from django.db.models import Count, Max, Min
from django.utils import timezone
from rq import Worker

from experiments.execution import control
from experiments.execution.concurrency import InflightLimiter
from experiments.execution.policy import effective_concurrency, limiter_name, role_config
from experiments.execution.run_counts import TOKEN_FIELDS, run_counts
from experiments.models import Amendment, ModelCall, Run, Slot
from experiments.models.runs import PHASE_ORDER, Phase


def run_progress(run: Run) -> dict:
    """Counters per phase for the run page and the report command."""
    # Slots per phase and status, calls per phase: from the tallies the database keeps,
    # whose cost does not grow with the run (the page polls every 2 s).
    counts, per_phase_calls = run_counts(run)
    phases = []
    for phase in PHASE_ORDER[:4]:
        c = counts.get(phase, {})
        total = sum(c.values())
        done = sum(n for s, n in c.items() if s in Slot.TERMINAL)
        phases.append({
            "phase": phase,
            "label": Phase(phase).label,
            "total": total,
            # A phase the run went past without a slot had nothing to do (no memories, no
            # fusion or selection): "not needed", not "not planned yet".
            "not_needed": total == 0 and PHASE_ORDER.index(run.phase) > PHASE_ORDER.index(phase),
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
            # Whole percents for the bar, rounded down so a phase shows 100 only when it is complete.
            "percent": (100 * done // total) if total else 0,
        })
    now = timezone.now()
    rows = per_phase_calls.values()
    attempts = sum(row["attempts"] for row in rows)
    if run.status == Run.Status.FINISHED and run.started_at and run.finished_at:
        # A finished run's last minute says nothing: its calls over its whole time, pauses included.
        rate_basis = "the whole run, pauses included"
        rate = attempts / max((run.finished_at - run.started_at).total_seconds(), 1.0)
    else:
        # Calls per second over the last minute, or since the start when that is shorter.
        rate_basis = "the last minute, or since the start when shorter"
        window_s = 60.0
        if run.started_at is not None:
            window_s = min(window_s, max((now - run.started_at).total_seconds(), 1.0))
        # Every phase named: the (run, phase, finished_at) index finds the window's calls.
        recent = (ModelCall.objects.filter(run=run, phase__in=Phase.values,
                                           finished_at__gte=now - timedelta(seconds=window_s)).count())
        rate = recent / window_s
    pace = phase_pace(run, next((p for p in phases if p["phase"] == run.phase), None), now=now)
    # A count no attempt reported stays None (unknown, not zero: App. B.3, Table 14), and
    # `unreported` says how many finished attempts gave no usage at all.
    tokens = {field: _sum_known(row[field] for row in rows) for field in TOKEN_FIELDS}
    tokens["unreported"] = sum(row["unreported"] for row in rows)
    return {
        "phases": phases,
        "slot_counts": counts,  # phase → slot status → number (run_next and the run page read it too)
        "calls_per_second": rate,
        "rate_basis": rate_basis,
        "pace": pace,
        "eta_s": pace["eta_s"],
        "tokens": tokens,
        "attempts": attempts,
    }


def _sum_known(values):
    """The sum of the values that are known; None when none is (unknown, not zero)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None



# How far back the time-left estimate looks: long enough to smooth bursts of a few slots,
# short enough to follow a rate that changes (a new cap, a slower service). When fewer than
# PACE_MIN_ENDED slots ended in it (slow calls, a small phase), it looks back PACE_LONG_WINDOW_S.
PACE_WINDOW_S = 120.0
PACE_LONG_WINDOW_S = 900.0
PACE_MIN_ENDED = 20
# Amendments after which a paused or stopped run sends again (each sets the run running).
_RESTARTS = (Amendment.Kind.RESUME, Amendment.Kind.REISSUE_UNKNOWN, Amendment.Kind.ACCEPT_MISSING)


def phase_pace(run: Run, phase: dict | None, *, now=None) -> dict:
    """Time left in the current phase, from the rate its slots reached an outcome lately.

    The rate is the number of the phase's slots that ended (answered or missing) within the
    last PACE_WINDOW_S seconds of *running* time, divided by that time. The window never
    reaches back before the latest (re)start, nor before the phase's first request in it, so
    early on the rate is not diluted by time the phase did not exist, and paused time is never
    counted: while paused or stopped the window ends where sending stopped and the estimate is
    the running time still needed after a resume. Fewer than PACE_MIN_ENDED slots in the window
    widen it to PACE_LONG_WINDOW_S. At most five small aggregate queries (the window's calls come
    from the index on finished_at), whatever the size of the run.
    """
    now = now or timezone.now()
    state = _pace_state(run)
    result = {"state": state, "eta_s": None, "rate": None, "completions": 0, "window_s": 0.0,
              "remaining": (phase["total"] - phase["done"]) if phase else 0,
              "planned": bool(phase and phase["total"])}
    if phase is None or run.started_at is None or state in ("finished", "not started") or not result["remaining"]:
        return result
    restarts = Amendment.objects.filter(run=run, kind__in=_RESTARTS).aggregate(latest=Max("created_at"))["latest"]
    since = max(run.started_at, restarts or run.started_at)
    calls = ModelCall.objects.filter(run=run, phase=run.phase)
    end = now
    if state != "running":
        pause = (Amendment.objects.filter(run=run, kind=Amendment.Kind.PAUSE, created_at__gte=since)
                 .aggregate(at=Max("created_at"))["at"])
        # A stop by the engine (quota, a ceiling) records no amendment: sending ended with the last outcome.
        end = pause or calls.filter(finished_at__gte=since).aggregate(at=Max("finished_at"))["at"] or since
    for window in (PACE_WINDOW_S, PACE_LONG_WINDOW_S):
        start = max(since, end - timedelta(seconds=window))
        seen = (calls.filter(finished_at__gte=start, finished_at__lte=end, slot__status__in=Slot.TERMINAL)
                .aggregate(slots=Count("slot", distinct=True), first=Min("reserved_at")))
        if seen["slots"] >= PACE_MIN_ENDED or start == since:
            break
    if seen["first"] is not None:
        start = max(start, seen["first"])
    window_s = (end - start).total_seconds()
    result.update(completions=seen["slots"], window_s=window_s)
    if seen["slots"] and window_s > 0:
        result["rate"] = seen["slots"] / window_s
        result["eta_s"] = time_left(result["remaining"], seen["slots"], window_s)
    return result


def time_left(remaining: int, completions: int, window_s: float) -> float | None:
    """Seconds to finish `remaining` slots at the rate `completions` per `window_s` seconds."""
    if completions <= 0 or window_s <= 0:
        return None
    return remaining * window_s / completions


def _pace_state(run: Run) -> str:
    if run.status == Run.Status.FINISHED:
        return "finished"
    if run.status == Run.Status.CREATED:
        return "not started"
    if run.status == Run.Status.RUNNING and not run.circuit_open:
        return "running"
    return "paused"


def pace_text(pace: dict) -> str:
    """The time-left line of the run page and run_report."""
    if pace["state"] in ("finished", "not started"):
        return "—"
    if not pace.get("planned", True):
        return "planning this phase…"
    if not pace["remaining"]:
        return "this phase's slots have all ended"
    if pace["eta_s"] is None:
        waiting = "paused; " if pace["state"] == "paused" else ""
        return (f"{waiting}estimating: no slot of this phase ended in the last "
                f"{duration_text(PACE_LONG_WINDOW_S)} of running time")
    left = duration_text(pace["eta_s"])
    per_minute = pace["rate"] * 60
    basis = (f"{pace['completions']} slot{'s' if pace['completions'] != 1 else ''} ended in the last "
             f"{duration_text(pace['window_s'])} of running time, {per_minute:,.1f} a minute")
    if pace["state"] == "paused":
        return f"paused: about {left} of running time once resumed ({basis}; paused time not counted)"
    return f"about {left} for this phase ({basis})"


# --- amendments in words ------------------------------------------------------------------------

def amendment_text(amendment: Amendment) -> str:
    """What an amendment did, in a sentence, from its recorded payload (never the raw JSON)."""
    payload = amendment.payload or {}
    kind = amendment.kind
    if kind == Amendment.Kind.CONCURRENCY:
        caps = payload.get("concurrency", {})
        return "; ".join(f"at most {cap} request{_s(cap)} in flight to {provider}" for provider, cap in caps.items()) \
            or "concurrency unchanged"
    if kind == Amendment.Kind.PAUSE:
        return "paused: nothing more was sent until a resume"
    phase = _phase_words(payload.get("phase"))
    if kind == Amendment.Kind.RESUME:
        held, allowance = len(payload.get("held_slots_released", [])), payload.get("allowance", 1)
        text = f"resumed the {payload.get('was', 'stopped')} run"
        if payload.get("circuit_was_open"):
            text += " and closed the quota circuit"
        if held:
            text += (f"; {held} held slot{_s(held)} may each send {allowance} more identical "
                     f"request{_s(allowance)}")
        return text
    if kind == Amendment.Kind.REISSUE_UNKNOWN:
        requests = payload.get("requests", len(payload.get("slots", [])))
        text = f"re-issued {requests} slot{_s(requests)} of {phase} without an answer, one identical request each"
        if payload.get("tokens_known_for"):
            text += (f" (their last attempts used {payload.get('input_tokens')} input and "
                     f"{payload.get('output_tokens')} output tokens, reported for {payload['tokens_known_for']})")
        return text
    if kind == Amendment.Kind.ACCEPT_MISSING:
        n = len(payload.get("slots", []))
        parts = [f"{payload[k]} {k}" for k in ("unknown", "failed") if payload.get(k)]
        return (f"continued past {phase} with {n} slot{_s(n)} missing"
                + (f" ({', '.join(parts)})" if parts else ""))
    if kind == Amendment.Kind.CEILING:
        raised = [f"{words} HTTP ceiling from {payload[key]['from']} to {payload[key]['to']}"
                  for key, words in (("phase_http_ceiling", f"{phase}'s"), ("run_http_ceiling", "the run's"))
                  if isinstance(payload.get(key), dict)]
        extra = payload.get("extra_requests", 0)
        return (f"raised {' and '.join(raised) or 'an HTTP ceiling'}: at most {extra} more "
                f"request{_s(extra)}")
    return Amendment.Kind(kind).label if kind in Amendment.Kind.values else str(kind)


def _phase_words(phase) -> str:
    return f"the {Phase(phase).label.lower()} phase" if phase in Phase.values else "the phase"


def _s(n) -> str:
    return "" if n == 1 else "s"


def run_next(run: Run, slot_counts: dict | None = None) -> dict:
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
    if finished:
        held = 0
    elif slot_counts is not None:  # run_progress's counts, read a moment ago
        held = sum(by_status.get(Slot.Status.HELD, 0) for by_status in slot_counts.values())
    else:
        held = Slot.objects.filter(run=run, status=Slot.Status.HELD).count()
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
