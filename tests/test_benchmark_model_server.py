"""The engine benchmark's asyncio stand-in provider (benchmarks/model_server.py) answers what the
threaded test server with `Roles` answers, byte for byte, over kept-alive connections, after its delay."""
import sys
import time
from pathlib import Path

import httpx

from experiments.core.llm.wire import build_request
from experiments.execution.policy import model_config
from tests.engine_helpers import Roles, openai_model
from tests.llm_fake_server import running_fake_llm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from model_server import running_model_server  # noqa: E402

PROMPTS = [  # an answer's request and a judge's, as the engine builds them
    ("You answer as the participant.", "[QUESTION]\nWhat do you grow?"),
    ("You grade answers.", "[QUESTION]\nWhat do you grow?\n[PREDICTED ANSWER]\nAlpha answer.\n[REAL ANSWER]\nBeans."),
    ("You grade answers.", "[QUESTION]\nWhat do you grow?\n[PREDICTED ANSWER]\nBeta.\n[REAL ANSWER]\nBeans."),
]


def replies(server, client: httpx.Client) -> list[tuple[int, bytes]]:
    config = model_config(openai_model(server))
    out = []
    for system, user in PROMPTS:
        prepared = build_request(config, system, user)
        response = client.post(prepared.url, content=prepared.body_bytes, headers=dict(prepared.headers))
        out.append((response.status_code, response.content))
    return out


def test_the_quiet_server_answers_the_threaded_server_s_bytes_after_its_delay():
    with running_fake_llm() as threaded, running_model_server() as quiet, httpx.Client() as client:
        Roles(threaded)
        expected = replies(threaded, client)
        assert [status for status, _ in expected] == [200, 200, 200]
        assert len({body for _, body in expected}) == 3  # an answer, a judge's 3 and a judge's 1
        assert replies(quiet, client) == expected
        quiet.default_delay_s = 0.15
        started = time.monotonic()
        assert replies(quiet, client) == expected  # the same kept-alive connection
        assert time.monotonic() - started >= 3 * 0.15
        assert quiet.requests == 6
