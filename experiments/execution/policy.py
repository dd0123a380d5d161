"""A run's settings as the engine reads them: model configs per role, the retry rule (App. B.2), caps, the offline stand-in's roles."""
from __future__ import annotations

import time
from dataclasses import dataclass, fields

from experiments.core.llm.offline import OFFLINE_LABEL
from experiments.core.llm.wire import RETRYABLE_STATUSES, ModelConfig, Outcome, OutcomeKind
from experiments.models import Amendment, Run, Slot

DEFAULT_RETRY = {"max_recoveries_per_slot": 2, "cooldown_s": 30.0, "phase_allowance": 256}
DEFAULT_CONCURRENCY = 4
# A reservation outlives its request by this much before it counts as unknown.
LEASE_GRACE_S = 10.0
class RunError(Exception):
    """A run cannot do what was asked; the message says why, for the page or the shell."""


# --- configuration --------------------------------------------------------------------------

_CONFIG_FIELDS = {f.name for f in fields(ModelConfig)}


def model_config(data: dict) -> ModelConfig:
    unknown = set(data) - _CONFIG_FIELDS
    if unknown:
        raise RunError(f"unknown model settings: {', '.join(sorted(unknown))}")
    try:
        return ModelConfig(**data)
    except (TypeError, ValueError) as exc:
        raise RunError(f"model settings: {exc}") from None


def role_config(run: Run, role: str) -> ModelConfig:
    protocol = run.protocol
    return model_config(protocol.judge if role == Slot.Role.JUDGE else protocol.generator)


def retry_settings(run: Run) -> dict:
    return {**DEFAULT_RETRY, **run.protocol.retry_policy}


def effective_concurrency(run: Run, provider: str) -> int:
    """The protocol's cap, as changed by the latest concurrency amendment."""
    caps = dict(run.protocol.concurrency)
    for amendment in run.amendments.filter(kind=Amendment.Kind.CONCURRENCY).order_by("created_at", "pk"):
        caps.update(amendment.payload.get("concurrency", {}))
    return int(caps.get(provider, DEFAULT_CONCURRENCY))


def limiter_name(config: ModelConfig) -> str:
    """The cap is shared by every run that talks to the same service."""
    return f"{config.provider}:{config.base_url}"



@dataclass(frozen=True)
class RetryPolicy:
    """The paper's recovery rule (App. B.2), configurable per protocol."""

    max_recoveries_per_slot: int = 2
    cooldown_s: float = 30.0
    retry_statuses: tuple[int, ...] = RETRYABLE_STATUSES


@dataclass(frozen=True)
class Decision:
    retry: bool
    wait_s: float
    justification: str  # stored with the recovery attempt in the journal


def decide_retry(
    policy: RetryPolicy, outcome: Outcome, recoveries_so_far: int, phase_allowance_left: int
) -> Decision:
    """May this slot be re-sent (the identical request), and after how long? (App. B.2)

    Only a transient outcome qualifies: received content, a parse failure, a non-STOP finish or an
    unexpected model version never authorise a new draw. The server's retry delay, when given,
    wins over the default cooldown.
    """
    if outcome.kind is not OutcomeKind.TRANSIENT:
        reason = {
            OutcomeKind.OK: "completed",
            OutcomeKind.UNUSABLE: "content was received; recorded as it is, never redrawn",
            OutcomeKind.QUOTA: "quota exhausted; the circuit opens until an owner resumes",
            OutcomeKind.FATAL: "non-transient error; the phase stops",
        }[outcome.kind]
        return Decision(False, 0.0, f"no retry: {reason}")
    if outcome.http_status is not None and outcome.http_status not in policy.retry_statuses:
        return Decision(False, 0.0, f"no retry: HTTP {outcome.http_status} is not retryable")
    if recoveries_so_far >= policy.max_recoveries_per_slot:
        return Decision(
            False, 0.0, f"no retry: slot used its {policy.max_recoveries_per_slot} recoveries"
        )
    if phase_allowance_left <= 0:
        return Decision(False, 0.0, "no retry: the phase's recovery allowance is used up")
    if outcome.retry_after_s is not None:
        wait_s, source = outcome.retry_after_s, "server retry delay"
    else:
        wait_s, source = policy.cooldown_s, "cooldown"
    cause = (
        f"output-free HTTP {outcome.http_status}"
        if outcome.http_status is not None
        else f"no response ({outcome.error})"
    )
    recovery = recoveries_so_far + 1
    return Decision(
        True,
        wait_s,
        f"recovery {recovery} of {policy.max_recoveries_per_slot} after {cause}; "
        f"identical request after {wait_s:g} s ({source})",
    )


_CAP_CACHE: dict[tuple[int, str], tuple[float, int]] = {}
CAP_CACHE_S = 2.0  # a concurrency amendment reaches every worker within this


def _cap(run: Run, provider: str) -> int:
    key, now = (run.pk, provider), time.monotonic()
    cached = _CAP_CACHE.get(key)
    if cached is None or cached[0] < now:
        cached = (now + CAP_CACHE_S, effective_concurrency(run, provider))
        _CAP_CACHE[key] = cached
    return cached[1]



def offline_roles(protocol) -> dict:
    """Which roles the offline stand-in plays: every page showing its output must say so (DESIGN §7)."""
    roles = {role: getattr(protocol, role).get("provider") == "offline" for role in ("generator", "judge")}
    return {**roles, "any": any(roles.values()), "label": OFFLINE_LABEL}
