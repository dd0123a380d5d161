"""The LLM client against a real model server (paper App. B.2/B.3), when one is named.

Runs only with OWNWORDS_TEST_LLM_URL set to an OpenAI-compatible base URL, e.g. the llama.cpp
server of ../shared/scripts/local-llm.sh: OWNWORDS_TEST_LLM_URL=http://127.0.0.1:8089/v1.
A tiny model may answer badly or run out of tokens; what must hold is the wire: one attempt,
received content (ok, or unusable when it stopped early), a returned model version and usage.
"""

import json
import os

import pytest

from experiments.core.llm.wire import ModelConfig, OutcomeKind, build_request
from experiments.core.llm.client import send

BASE_URL = os.environ.get("OWNWORDS_TEST_LLM_URL")

pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(not BASE_URL, reason="OWNWORDS_TEST_LLM_URL is not set"),
]


def real_config(max_output_tokens: int) -> ModelConfig:
    # llama.cpp and older servers read max_tokens; temperature 0 keeps the check repeatable.
    return ModelConfig(
        provider="openai",
        base_url=BASE_URL,
        model=os.environ.get("OWNWORDS_TEST_LLM_MODEL", "local-model"),
        max_output_tokens=max_output_tokens,
        temperature=0.0,
        token_param="max_tokens",
        timeout_s=120,
    )


def assert_received(outcome):
    assert outcome.kind in (OutcomeKind.OK, OutcomeKind.UNUSABLE), outcome.error
    assert outcome.http_status == 200
    assert outcome.model_version
    assert outcome.finish_reason in ("stop", "length")
    assert outcome.text is not None
    assert outcome.usage.input_tokens and outcome.usage.input_tokens > 0
    assert outcome.usage.total_tokens is not None


def test_a_real_model_answers_as_a_participant(http):
    config = real_config(max_output_tokens=60)
    system = "You are simulating a research-interview participant. Reply only with their reply."
    user = (
        "[EARLIER IN THE INTERVIEW, verbatim]\n- I cycle to the hospital every morning.\n\n"
        "[QUESTION]\nHow do you get to work?\n\nAnswer as this participant would."
    )
    outcome = send(config, build_request(config, system, user), client=http)
    assert_received(outcome)
    print(f"\nanswer ({outcome.kind}, {outcome.elapsed_s:.2f} s, {outcome.usage}):", outcome.text)


def test_a_real_model_grades_like_a_judge(http):
    config = real_config(max_output_tokens=120)
    system = (
        "You are grading whether a PREDICTED answer matches the ACTUAL one. "
        "Output valid JSON only."
    )
    user = (
        "[QUESTION]\nHow do you get to work?\n\n[ACTUAL ANSWER]\nI cycle every morning.\n\n"
        "[PREDICTED ANSWER]\nBy bike.\n\n"
        'Return only a JSON object {"score": <0-3>, "rationale": "..."}.'
    )
    outcome = send(config, build_request(config, system, user), client=http)
    assert_received(outcome)
    try:
        parsed = json.loads(outcome.text)
    except ValueError:
        parsed = None  # a tiny model may not manage JSON: the judge parser records a missing grade
    print(f"\njudge ({outcome.kind}, {outcome.elapsed_s:.2f} s): {outcome.text!r} -> {parsed!r}")
