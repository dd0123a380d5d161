"""A run's settings as the engine reads them: model configs per role, the retry rule (App. B.2), caps, the offline stand-in's roles."""
from __future__ import annotations

import time
from dataclasses import dataclass, fields

from experiments.core.llm.offline import OFFLINE_LABEL
from experiments.core.llm.wire import RETRYABLE_STATUSES, ModelConfig, Outcome, OutcomeKind
from experiments.models import Amendment, Run, Slot
from experiments.models.runs import Phase

DEFAULT_RETRY = {"max_recoveries_per_slot": 2, "cooldown_s": 30.0, "phase_allowance": 256}
# Settings with no default: they enter a protocol's settings (and so its seal) only when set,
# so every protocol sealed before they existed keeps its hash (App. B.2's HTTP ceilings).
PHASE_HTTP_CEILINGS = "phase_http_ceilings"  # {phase: most HTTP attempts reserved in it}
RUN_HTTP_CEILING = "run_http_ceiling"  # most HTTP attempts reserved in the whole run
OPTIONAL_RETRY = (PHASE_HTTP_CEILINGS, RUN_HTTP_CEILING)
CEILING_PHASES = ("memories", "generation", "decisions", "judging")
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


def sending_role(phase: str) -> str:
    """The role whose model sends a phase's requests, as planning makes its slots: the judge in
    judging, the generator in every other phase."""
    return Slot.Role.JUDGE if phase == Phase.JUDGING else Slot.Role.GENERATOR


def sending_provider(run: Run) -> str:
    """The provider of the model that sends the run's current phase (the name of its in-flight cap)."""
    return role_config(run, sending_role(run.phase)).provider


def role_config(run: Run, role: str) -> ModelConfig:
    protocol = run.protocol
    return model_config(protocol.judge if role == Slot.Role.JUDGE else protocol.generator)


def run_retry_policy(run: Run) -> RetryPolicy:
    """The run's retry rule and HTTP ceilings, read once from the protocol's JSON."""
    return RetryPolicy.from_settings(run.protocol.retry_policy)


def retry_policy_problems(policy) -> list[str]:
    """What is wrong with a protocol's retry settings (the sealing check); [] when nothing."""
    if not isinstance(policy, dict):
        return ["the retry policy must be a mapping"]
    problems = []
    known = (*DEFAULT_RETRY, *OPTIONAL_RETRY)
    for key, value in policy.items():
        if key == PHASE_HTTP_CEILINGS:
            if not isinstance(value, dict):
                problems.append(f"retry setting {key} must map phases to HTTP ceilings, not {value!r}")
                continue
            for phase, ceiling in value.items():
                if phase not in CEILING_PHASES:
                    problems.append(f"{key}: unknown phase {phase!r} (one of {', '.join(CEILING_PHASES)})")
                elif not _whole(ceiling):
                    problems.append(f"{key}: the ceiling of {phase} must be a non-negative integer, not {ceiling!r}")
        elif key not in known:
            problems.append(f"unknown retry setting {key!r} (known: {', '.join(known)})")
        elif not (_whole(value) if key != "cooldown_s" else _number(value)):
            problems.append(f"retry setting {key} must be a non-negative "
                            f"{'number' if key == 'cooldown_s' else 'integer'}, not {value!r}")
    return problems


def is_number(value, *, integer=False) -> bool:
    """A JSON number (an integer if asked), never a bool: the protocol checks' one test of type."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if integer else isinstance(value, (int, float))


def _number(value) -> bool:
    return is_number(value) and value >= 0


def _whole(value) -> bool:
    return is_number(value, integer=True) and value >= 0


def effective_http_ceilings(run: Run, phase: str, policy: RetryPolicy) -> tuple[int | None, int | None]:
    """The phase's and the run's HTTP ceilings as the protocol sets them, raised by the run's
    ceiling amendments (`control.run_raise_ceiling`), the latest of each kind counting."""
    phase_ceiling, run_ceiling = policy.http_ceilings(phase)
    for payload in (run.amendments.filter(kind=Amendment.Kind.CEILING).order_by("created_at", "pk")
                    .values_list("payload", flat=True)):
        if payload.get("phase") == phase and payload.get("phase_http_ceiling"):
            phase_ceiling = payload["phase_http_ceiling"]["to"]
        if payload.get("run_http_ceiling"):
            run_ceiling = payload["run_http_ceiling"]["to"]
    return phase_ceiling, run_ceiling


def effective_concurrency(run: Run, provider: str) -> int:
    """The protocol's cap, as changed by the latest concurrency amendment."""
    caps = dict(run.protocol.concurrency)
    for amendment in run.amendments.filter(kind=Amendment.Kind.CONCURRENCY).order_by("created_at", "pk"):
        caps.update(amendment.payload.get("concurrency", {}))
    return int(caps.get(provider, DEFAULT_CONCURRENCY))


def limiter_name(config: ModelConfig) -> str:
    """The cap is shared by every run that talks to the same service."""
    return f"{config.provider}:{config.base_url}"



@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """The paper's recovery rule (App. B.2) and the HTTP ceilings, configurable per protocol.

    A protocol keeps them as JSON (`Protocol.retry_policy`, sealed as `{**DEFAULT_RETRY, **retry_policy}`,
    whose bytes must not change); `from_settings` reads that JSON once and the engine reads this."""

    max_recoveries_per_slot: int = 2
    cooldown_s: float = 30.0
    phase_allowance: int = 256  # recoveries per phase, all slots together
    retry_statuses: tuple[int, ...] = RETRYABLE_STATUSES
    # (phase, ceiling) pairs; None when the protocol sets none. Set but empty still counts as set:
    # with any ceiling set, every reservation is counted under the run's lock (`reservation`).
    phase_http_ceilings: tuple[tuple[str, int], ...] | None = None
    run_http_ceiling: int | None = None

    @classmethod
    def from_settings(cls, settings: dict) -> RetryPolicy:
        """From a protocol's (checked) JSON retry settings, the defaults filling what it leaves out."""
        merged = {**DEFAULT_RETRY, **settings}
        ceilings = merged.get(PHASE_HTTP_CEILINGS)
        return cls(max_recoveries_per_slot=int(merged["max_recoveries_per_slot"]),
                   cooldown_s=float(merged["cooldown_s"]), phase_allowance=int(merged["phase_allowance"]),
                   phase_http_ceilings=None if ceilings is None else tuple(ceilings.items()),
                   run_http_ceiling=merged.get(RUN_HTTP_CEILING))

    @property
    def has_http_ceilings(self) -> bool:
        return self.phase_http_ceilings is not None or self.run_http_ceiling is not None

    def http_ceilings(self, phase: str) -> tuple[int | None, int | None]:
        """The phase's and the run's HTTP ceilings as the protocol sets them (None: no ceiling set)."""
        return dict(self.phase_http_ceilings or ()).get(phase), self.run_http_ceiling


@dataclass(frozen=True, kw_only=True)
class Decision:
    retry: bool
    wait_s: float
    justification: str  # stored with the recovery attempt in the journal


def decide_retry(
    policy: RetryPolicy, outcome: Outcome, recoveries_so_far: int, phase_allowance_left: int
) -> Decision:
    """May this slot be re-sent (the identical request), and after how long? (App. B.2)

    Only a transient outcome qualifies: received content, a parse failure, a non-STOP finish or an
    unexpected model version never authorise a new draw. The wait is the protocol's cooldown at
    least: a server's retry delay (Retry-After, Gemini's RetryInfo) may lengthen it, never
    shorten it (App. B.2: "after a 30-second cooldown").
    """
    if outcome.kind is not OutcomeKind.TRANSIENT:
        reason = {
            OutcomeKind.OK: "completed",
            OutcomeKind.UNUSABLE: "content was received; recorded as it is, never redrawn",
            OutcomeKind.QUOTA: "quota exhausted; the circuit opens until an owner resumes",
            OutcomeKind.FATAL: "non-transient error; the phase stops",
        }[outcome.kind]
        return Decision(retry=False, wait_s=0.0, justification=f"no retry: {reason}")
    if outcome.http_status is not None and outcome.http_status not in policy.retry_statuses:
        return Decision(retry=False, wait_s=0.0,
                        justification=f"no retry: HTTP {outcome.http_status} is not retryable")
    if recoveries_so_far >= policy.max_recoveries_per_slot:
        return Decision(retry=False, wait_s=0.0,
                        justification=f"no retry: slot used its {policy.max_recoveries_per_slot} recoveries")
    if phase_allowance_left <= 0:
        return Decision(retry=False, wait_s=0.0,
                        justification="no retry: the phase's recovery allowance is used up")
    if outcome.retry_after_s is not None and outcome.retry_after_s > policy.cooldown_s:
        wait_s, source = outcome.retry_after_s, f"server retry delay, longer than the {policy.cooldown_s:g} s cooldown"
    elif outcome.retry_after_s is not None:
        wait_s, source = policy.cooldown_s, f"cooldown; the server asked for {outcome.retry_after_s:g} s"
    else:
        wait_s, source = policy.cooldown_s, "cooldown"
    cause = (
        f"output-free HTTP {outcome.http_status}"
        if outcome.http_status is not None
        else f"no response ({outcome.error})"
    )
    recovery = recoveries_so_far + 1
    return Decision(
        retry=True,
        wait_s=wait_s,
        justification=f"recovery {recovery} of {policy.max_recoveries_per_slot} after {cause}; "
        f"identical request after {wait_s:g} s ({source})",
    )


_CAP_CACHE: dict[tuple[int, str], tuple[float, int]] = {}
CAP_CACHE_S = 2.0  # a concurrency amendment reaches every worker within this


def current_cap(run: Run, provider: str) -> int:
    """The run's in-flight cap for the provider, read again at most every CAP_CACHE_S seconds."""
    cap = cached_cap(run.pk, provider)
    if cap is None:
        cap = effective_concurrency(run, provider)
        _CAP_CACHE[(run.pk, provider)] = (time.monotonic() + CAP_CACHE_S, cap)
    return cap


def cached_cap(run_id: int, provider: str) -> int | None:
    """`current_cap` while it needs no database (None: it does): a slot's worker asks for a database
    connection only then (with more slots than connections, a loan, `workers.LoanedConnections`)."""
    cached = _CAP_CACHE.get((run_id, provider))
    return cached[1] if cached is not None and cached[0] >= time.monotonic() else None



def offline_roles(protocol) -> dict:
    """Which roles the offline stand-in plays: every page showing its output must say so (docs/design.md §7)."""
    roles = {role: getattr(protocol, role).get("provider") == "offline" for role in ("generator", "judge")}
    return {**roles, "any": any(roles.values()), "label": OFFLINE_LABEL}
