"""The paper's retry policy exactly (App. B.2), through the real local LLM server.

- The cooldown: an ordinary retry re-sends the identical request after the protocol's cooldown
  at least; a provider's Retry-After (OpenAI) or RetryInfo.retryDelay (Gemini) may lengthen
  it, never shorten it.
- The ceilings: at most `max_recoveries_per_slot` recoveries per slot, `phase_allowance` per
  phase, and — when the protocol sets them — HTTP ceilings per phase and for the whole run.
  A ceiling reached stops the run with a reason that names it, and nothing more is sent.
- The seal: the ceilings enter a protocol's settings only when set, so protocols sealed
  before they existed keep their hashes.

`sleep` is injected (tests/engine_helpers.Sleeps): nothing waits out a 30 s cooldown.
"""
import dataclasses
import hashlib
import re
from pathlib import Path

import pytest

from experiments.core.canonical import canonical_json
from experiments.execution import sealing
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.journal import slot_execute
from experiments.execution.policy import DEFAULT_RETRY, RetryPolicy, RunError
from experiments.models import ModelCall, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import (
    QUESTION_ONLY, Roles, Sleeps, build_cohort, gemini_model, journal, make_protocol, make_run, openai_model,
    request_bytes,
)
from tests.llm_fake_server import Reply, gemini_quota_exhausted, openai_rate_limited

FIRST, RECOVERY = ModelCall.Basis.FIRST, ModelCall.Basis.RECOVERY
PER_MINUTE = "GenerateRequestsPerMinutePerProjectPerModel"


def generation_slots(run) -> list[Slot]:
    step = run_drive(run.pk)
    assert step.phase == Phase.GENERATION, step
    return list(Slot.objects.filter(pk__in=step.slot_ids).order_by("pk"))


def execute(slot, http, sleep=None) -> Sleeps:
    sleep = sleep if sleep is not None else Sleeps()
    slot_execute(slot.pk, limiter=NoLimiter(), client=http, worker="test", sleep=sleep)
    slot.refresh_from_db()
    return sleep


# --- the cooldown ------------------------------------------------------------------------------

# (provider, the server's 429 with its retry delay, the delay in seconds)
RETRY_DELAYS = {
    "openai Retry-After": ("openai", lambda s: Reply(429, openai_rate_limited(), {"retry-after": str(s)})),
    "openai retry-after-ms": ("openai", lambda s: Reply(429, openai_rate_limited(),
                                                        {"retry-after-ms": str(int(s * 1000))})),
    "gemini RetryInfo": ("gemini", lambda s: Reply(429, gemini_quota_exhausted(PER_MINUTE, f"{s}s"))),
}


@pytest.mark.parametrize("case", list(RETRY_DELAYS))
@pytest.mark.parametrize("server_delay_s, waited_s", [(2, 30.0), (45, 45.0), (None, 30.0)],
                         ids=["shorter than the cooldown", "longer than the cooldown", "none given"])
def test_a_retry_waits_the_cooldown_at_least_and_the_servers_delay_only_lengthens_it(
        project, server, http, case, server_delay_s, waited_s):
    provider, reply = RETRY_DELAYS[case]
    model = (openai_model if provider == "openai" else gemini_model)(server)
    run = make_run(project, build_cohort(project), conditions=[QUESTION_ONLY], generator=model,
                   retry_policy={"cooldown_s": 30.0})  # the paper's cooldown
    [slot] = generation_slots(run)
    server.script(reply(server_delay_s) if server_delay_s is not None else Reply(429, openai_rate_limited()))
    sleeps = execute(slot, http)

    assert sleeps.calls == [waited_s]
    first, recovery = journal(slot)
    assert (first.basis, recovery.basis) == (FIRST, RECOVERY)
    assert f"identical request after {waited_s:g} s" in recovery.justification
    if server_delay_s is not None and server_delay_s < 30:
        assert f"the server asked for {server_delay_s:g} s" in recovery.justification
    assert slot.status == Slot.Status.OK
    assert [r.body for r in server.requests] == [request_bytes(run, slot)] * 2  # the identical request


# --- the recovery allowances (per slot, per phase) ---------------------------------------------


def test_a_slot_has_at_most_two_recoveries(project, server, http):
    run = make_run(project, build_cohort(project), conditions=[QUESTION_ONLY], generator=openai_model(server))
    [slot] = generation_slots(run)
    server.script(*[Reply(503, {"error": {"message": "overloaded"}}) for _ in range(4)])
    sleeps = execute(slot, http)
    assert [c.basis for c in journal(slot)] == [FIRST, RECOVERY, RECOVERY]
    assert slot.status == Slot.Status.FAILED and slot.status_note == "no retry: slot used its 2 recoveries"
    assert len(server.requests) == 3 and len(sleeps.calls) == 2


def test_a_phase_has_at_most_its_recovery_allowance(project, server, http):
    run = make_run(project, build_cohort(project, sessions=3, name="allow"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), retry_policy={"phase_allowance": 2})
    slots = generation_slots(run)
    server.script(*[Reply(429, openai_rate_limited()) for _ in range(6)])
    for slot in slots:
        execute(slot, http)
    recoveries = ModelCall.objects.filter(slot__run=run, basis=RECOVERY).count()
    assert recoveries == 2  # slot 1: two recoveries, both failed; slots 2 and 3: none left
    assert [s.status for s in slots] == [Slot.Status.FAILED] * 3
    assert slots[-1].status_note == "no retry: the phase's recovery allowance is used up"
    assert len(server.requests) == 5


# --- the HTTP ceilings -----------------------------------------------------------------------------


def test_the_phase_http_ceiling_stops_the_phase_with_its_reason(project, server, http):
    Roles(server)
    run = make_run(project, build_cohort(project, sessions=4, name="ceil"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), retry_policy={"phase_http_ceilings": {"generation": 3}})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.STOPPED and run.phase == Phase.GENERATION
    assert run.status_reason == ("Stopped: the generation phase's HTTP ceiling was reached (3 of 3 attempts "
                                 "reserved). Nothing more is sent in this phase until an owner amends the ceiling.")
    assert len(server.requests) == 3 == ModelCall.objects.filter(slot__run=run).count()
    assert Slot.objects.filter(run=run, status=Slot.Status.PENDING).count() == 1  # never sent


def test_recoveries_count_against_the_ceiling_and_a_due_recovery_is_held(project, server, http):
    run = make_run(project, build_cohort(project, sessions=2, name="held"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), retry_policy={"phase_http_ceilings": {"generation": 2}})
    first, second = generation_slots(run)
    server.script(Reply(429, openai_rate_limited()))
    # While the first slot waits for its recovery, the second takes the last attempt allowed.
    execute(first, http, Sleeps(then=lambda s: execute(second, http)))
    assert second.status == Slot.Status.OK
    assert first.status == Slot.Status.HELD
    assert "HTTP ceiling was reached (2 of 2 attempts reserved)" in first.status_note
    assert [c.basis for c in journal(first)] == [FIRST]
    assert Run.objects.get(pk=run.pk).status == Run.Status.STOPPED
    assert len(server.requests) == 2


def test_the_run_http_ceiling_counts_every_phase(project, server, http):
    Roles(server)
    run = make_run(project, build_cohort(project, sessions=2, name="runceil"), conditions=[QUESTION_ONLY],
                   generator=openai_model(server), retry_policy={"run_http_ceiling": 3})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    # Two answers in generation, then one judge call: the second judge call would be the fourth.
    assert run.status == Run.Status.STOPPED and run.phase == Phase.JUDGING
    assert "the run's HTTP ceiling was reached (3 of 3 attempts reserved)" in run.status_reason
    assert len(server.requests) == 3


# --- the seal ------------------------------------------------------------------------------------


def test_the_ceilings_enter_the_seal_only_when_set(project, server):
    cohort = build_cohort(project)
    plain = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server))
    settings = sealing.protocol_settings(plain)
    assert settings["retry_policy"] == {**DEFAULT_RETRY, "cooldown_s": 0.0}  # as before the ceilings existed
    before = hashlib.sha256(canonical_json(settings).encode()).hexdigest()
    assert sealing.protocol_hashes(plain)["settings_sha256"] == before

    capped = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server),
                           name="capped", retry_policy={"phase_http_ceilings": {"generation": 10},
                                                        "run_http_ceiling": 20})
    assert sealing.protocol_hashes(capped)["settings_sha256"] != before
    sealed = sealing.protocol_seal(protocol=capped, user=None)
    assert sealed.seal["settings_sha256"] == sealing.protocol_hashes(capped)["settings_sha256"]


@pytest.mark.parametrize("retry_policy, message", [
    ({"phase_http_ceilings": 5}, "retry setting phase_http_ceilings must map phases to HTTP ceilings"),
    ({"phase_http_ceilings": {"lunch": 5}}, "phase_http_ceilings: unknown phase 'lunch'"),
    ({"phase_http_ceilings": {"judging": -1}}, "the ceiling of judging must be a non-negative integer"),
    ({"run_http_ceiling": 2.5}, "retry setting run_http_ceiling must be a non-negative integer"),
])
def test_bad_ceilings_are_refused_at_sealing(project, server, retry_policy, message):
    protocol = make_protocol(project, build_cohort(project), conditions=[QUESTION_ONLY],
                             generator=openai_model(server))
    type(protocol).objects.filter(pk=protocol.pk).update(retry_policy=retry_policy)
    protocol.refresh_from_db()
    with pytest.raises(RunError, match=message):
        sealing.protocol_seal(protocol=protocol, user=None)


# --- the settings object: JSON at the boundary, a frozen RetryPolicy inside ------------------------

def test_the_policy_object_reads_the_protocols_json_with_its_defaults():
    assert RetryPolicy.from_settings({}) == RetryPolicy()  # the dataclass's defaults are DEFAULT_RETRY's
    assert {name: getattr(RetryPolicy(), name) for name in DEFAULT_RETRY} == DEFAULT_RETRY
    capped = RetryPolicy.from_settings({"cooldown_s": 0, "phase_allowance": 3,
                                        "phase_http_ceilings": {"generation": 10}, "run_http_ceiling": 20})
    assert (capped.cooldown_s, capped.phase_allowance, capped.max_recoveries_per_slot) == (0.0, 3, 2)
    assert capped.http_ceilings("generation") == (10, 20) and capped.http_ceilings("judging") == (None, 20)
    assert capped.has_http_ceilings and not RetryPolicy().has_http_ceilings
    # an empty mapping is still a setting: such a run counts every reservation under the run's lock
    assert RetryPolicy.from_settings({"phase_http_ceilings": {}}).has_http_ceilings
    with pytest.raises(dataclasses.FrozenInstanceError):
        capped.phase_allowance = 4


def test_the_engine_reads_no_retry_setting_by_name():
    # every read goes through RetryPolicy's fields; the JSON form is read once, in policy.py
    # (`RetryPolicy.from_settings`), and otherwise only sealed and edited
    execution = Path(sealing.__file__).parent
    found = [f"{path.name}:{number}" for path in sorted(execution.glob("*.py")) if path.name != "policy.py"
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"""\[\s*["'](?:max_recoveries_per_slot|cooldown_s|phase_allowance|phase_http_ceilings|"""
                          r"""run_http_ceiling)["']\s*\]""", line)]
    assert found == [], found
