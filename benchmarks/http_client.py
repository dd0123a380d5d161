"""CPU of one LLM request in the client, over httpx's own transport and over `StdlibTransport`.

The engine workers send every request through `httpx.Client`; this measures the CPU time of the
sending thread (`time.thread_time`) per request and its response, `--requests` times, against
the tests' local model server (tests/llm_fake_server.py) answering at once. Printed per
transport: CPU microseconds per request, and the wall time per request (server included).

    .venv/bin/python benchmarks/http_client.py --requests 2000

Measured on 5 Dec 2026, 00:45 UTC (2-core AMD EPYC, quiet, `sum(i*i for i in range(10**7))` in
0.63 s): httpx's own transport 589-610 µs, `StdlibTransport` 412-436 µs. Earlier that night, at
the machine's slow time (1.27 s) and against a server in another process: 1,733-1,919 µs and
1,362 µs, `http.client` alone 617-646 µs (benchmarks/engine-results.md).
"""
import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from experiments.core.llm.transport import StdlibTransport  # noqa: E402
from tests.llm_fake_server import running_fake_llm  # noqa: E402


def per_request(client: httpx.Client, url: str, body: bytes, requests: int) -> tuple[float, float]:
    """(CPU µs, wall ms) per request and its whole response, after a warm-up."""
    headers = {"content-type": "application/json", "authorization": "Bearer benchmark"}
    for _ in range(50):
        client.post(url, content=body, headers=headers, timeout=10)
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(requests):
        with client.stream("POST", url, content=body, headers=headers, timeout=10) as response:
            b"".join(response.iter_bytes())
    return (time.thread_time() - cpu) / requests * 1e6, (time.perf_counter() - wall) / requests * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    body = json.dumps({"model": "gpt-test-1", "messages": [{"role": "user", "content": "q" * 2000}]}).encode()
    with running_fake_llm() as server:
        url = server.openai_base_url.rstrip("/") + "/chat/completions"
        for name, transport in (("httpx's own transport", None), ("StdlibTransport", StdlibTransport())):
            with httpx.Client(transport=transport, trust_env=False) as client:
                cpu_us, wall_ms = per_request(client, url, body, args.requests)
            print(f"{name:>22}: {cpu_us:7.0f} µs of the client's CPU per request, {wall_ms:5.2f} ms wall "
                  f"({args.requests} requests)")


if __name__ == "__main__":
    main()
