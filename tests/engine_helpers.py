"""Shared helpers for the engine tests and the engine benchmark.

- ``build_cohort``: sessions with a chosen number of targets each, their tasks and a cohort;
- ``openai_model`` / ``gemini_model`` / ``anthropic_model``: generator or judge settings pointing at the fake server
  (tests/llm_fake_server.py), with a tiny timeout;
- ``make_run``: a protocol, sealed, and a started run;
- ``Roles``: role-aware default replies for the fake server (memory, answer, fusion, selection,
  judge), each kind answered by a function, so a whole run can go through a real local server;
- ``journal``: the attempts of a slot, in order.

Nothing here mocks httpx: every request goes over a socket to the fake server.
"""
from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable

from experiments.core.kinds import inferred_kind
from experiments.core.llm import wire
from experiments.execution.policy import model_config
from experiments.execution.control import run_start
from experiments.models import ModelCall, Protocol, Run, Slot
from experiments.execution.sealing import protocol_seal
from experiments.data.sessions import cohort_draw, sessions_import
from experiments.core.tasks import TaskRule
from tests.conftest import parsed_session, qa_turns
from tests.llm_fake_server import FakeLLMServer, RecordedRequest, Reply, answer

TIMEOUT_S = 0.5  # every request of these tests is local; a "slow" reply outlasts this
NO_WAIT = {"cooldown_s": 0.0}  # the paper's 30 s cooldown, shortened so no test waits

ONE_SHOT = "memory(concrete,100w)+one-shot"
FUSION = "memory(concrete,100w)+fusion(3)"
SELECTION = "memory(concrete,100w)+selection(3)"
QUESTION_ONLY = "question-only"


# --- data -----------------------------------------------------------------------------------

def build_cohort(project, *, sessions: int = 1, targets: int = 1, name: str = "engine", pairs: int | None = None):
    """`sessions` sessions (one person each) with `targets` tasks each, all in one cohort."""
    pairs = pairs or max(8, 2 * targets)  # targets come from the second half of the pairs
    parsed = [
        parsed_session(f"eng-{name}-{i}", qa_turns(pairs, answer=f"In session {i} I mostly talk about gardening",
                                                   question=f"Could you tell me more about part {i} of that?"),
                       study=f"s{i % 2}", screener=[("Age?", str(30 + i))])
        for i in range(sessions)
    ]
    rule = TaskRule(min_pairs=pairs, min_targets=targets, max_targets=targets)
    sessions_import(project=project, parsed=parsed, source_format="jsonl", source_file=f"{name}.jsonl",
                    task_rule=rule)
    task_set = project.task_sets.get(min_pairs=pairs, min_targets=targets, max_targets=targets)
    cohort = cohort_draw(project=project, name=name, size=sessions, seed=7, task_set=task_set)
    assert cohort.cohort_tasks.count() == sessions * targets
    return cohort


def openai_model(server: FakeLLMServer, **changes) -> dict:
    return {"provider": "openai", "base_url": server.openai_base_url, "model": "gpt-test-1",
            "timeout_s": TIMEOUT_S, **changes}


def gemini_model(server: FakeLLMServer, **changes) -> dict:
    return {"provider": "gemini", "base_url": server.gemini_base_url, "model": "gemini-test-flash",
            "expected_model_version": "gemini-test-flash", "reasoning": "minimal", "timeout_s": TIMEOUT_S,
            **changes}


ANTHROPIC_KEY_ENV = "OWNWORDS_TEST_ANTHROPIC_KEY"


def anthropic_model(server: FakeLLMServer, **changes) -> dict:
    """Anthropic's Messages API at the fake server; the key comes from ANTHROPIC_KEY_ENV (tests set it)."""
    return {"provider": "anthropic", "base_url": server.anthropic_base_url, "model": "claude-test-1",
            "expected_model_version": "claude-test-1", "api_key_env": ANTHROPIC_KEY_ENV, "timeout_s": TIMEOUT_S,
            **changes}


def make_protocol(project, cohort, *, conditions, generator, judge=None, retry_policy=None, concurrency=None,
                  contrasts=(), name="engine-test", bootstrap=None) -> Protocol:
    return Protocol.objects.create(
        project=project, cohort=cohort, name=name, conditions=list(conditions),
        kind=inferred_kind(conditions, regrade=False),
        generator=generator, judge=judge or generator,
        retry_policy={**NO_WAIT, **(retry_policy or {})},
        concurrency=concurrency or {},
        contrasts=list(contrasts), bootstrap=bootstrap or {"draws": 200},
    )


def make_run(project, cohort, **protocol_settings) -> Run:
    """A sealed protocol and a started run of it."""
    protocol = protocol_seal(protocol=make_protocol(project, cohort, **protocol_settings), user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    return run


# --- the journal ------------------------------------------------------------------------------

def journal(slot: Slot) -> list[ModelCall]:
    return list(ModelCall.objects.filter(slot=slot).order_by("attempt"))


def request_bytes(run: Run, slot: Slot) -> bytes:
    """The exact body the engine sends for `slot` (what the server must have received)."""
    protocol = run.protocol
    config = model_config(protocol.judge if slot.role == Slot.Role.JUDGE else protocol.generator)
    return wire.build_request(config, slot.system, slot.user).body_bytes


class Sleeps:
    """An injected `sleep`: records what the engine asked for, waits for nothing."""

    def __init__(self, then: Callable[[float], None] | None = None):
        self.calls: list[float] = []
        self.then = then

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.then is not None:
            then, self.then = self.then, None  # once
            then(seconds)


# --- role-aware replies -------------------------------------------------------------------------

def user_text(request: RecordedRequest) -> str:
    body = request.json
    if request.wire_format == "gemini":
        return "".join(part.get("text", "") for part in body["contents"][-1]["parts"])
    return body["messages"][-1]["content"]


def request_kind(request: RecordedRequest) -> str:
    """memory, answer, fusion, selection or judge: which call of a run this request is."""
    text = user_text(request)
    if "[PREDICTED ANSWER]" in text:
        return "judge"
    if "[DECISION TASK]" in text:
        return "selection" if "candidate_id" in text.split("[DECISION TASK]", 1)[1].split("[ANONYMOUS", 1)[0] \
            else "fusion"
    if "[EVERYTHING THIS PARTICIPANT HAS SAID" in text:
        return "memory"
    return "answer"


def _judge_score(request: RecordedRequest) -> int:
    predicted = user_text(request).split("[PREDICTED ANSWER]", 1)[1]
    return 3 if "Alpha" in predicted else 1


DEFAULT_REPLIES: dict[str, Callable[[RecordedRequest], str]] = {
    "memory": lambda request: "Likes gardening; works as a composer.",
    "answer": lambda request: "Alpha answer.",
    "fusion": lambda request: "Alpha answer.",
    "selection": lambda request: '{"candidate_id": "c1"}',
    "judge": lambda request: json.dumps({"score": _judge_score(request), "rationale": "test grade"}),
}


class Roles:
    """Installs role-aware default replies on a fake server; scripted replies still go first.

    ``texts`` maps a request kind to a function of the request returning the answer text (sent
    in the request's own wire format, as a complete STOP answer), or to a list of texts used in
    turn. ``kinds`` counts the requests received by kind.
    """

    def __init__(self, server: FakeLLMServer, **texts):
        self.server = server
        self.replies = dict(DEFAULT_REPLIES)
        for kind, value in texts.items():
            if isinstance(value, (list, tuple)):
                cycle = itertools.cycle(value)
                lock = threading.Lock()

                def next_text(request, cycle=cycle, lock=lock):
                    with lock:
                        return next(cycle)

                self.replies[kind] = next_text
            else:
                self.replies[kind] = value
        self.kinds: Counter = Counter()
        original = server._next_reply

        def next_reply(request: RecordedRequest) -> Reply:
            reply = original(request)
            self.kinds[request_kind(request)] += 1
            if not _is_default(reply):
                return reply  # scripted
            text = self.replies[request_kind(request)](request)
            return Reply(body=answer(request, text, server.model_version), delay_s=server.default_delay_s)

        server._next_reply = next_reply


def _is_default(reply: Reply) -> bool:
    # The server's own default reply is built from a lambda in FakeLLMServer._next_reply.
    return callable(reply.body) and getattr(reply.body, "__qualname__", "").startswith("FakeLLMServer.")


def bodies_by_kind(server: FakeLLMServer) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for request in list(server.requests):
        out.setdefault(request_kind(request), []).append(request.body)
    return out
