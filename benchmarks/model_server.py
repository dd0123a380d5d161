"""The engine benchmark's stand-in provider: OpenAI-compatible chat completions on one asyncio loop.

A real provider spends none of this machine's CPU. tests/llm_fake_server.py's threaded server (a thread
per connection, http.server's parsing, a thread woken per reply) spent 0.5-0.6 ms of CPU per call on
the benchmark's machines, on the same two cores as the workers and PostgreSQL, and so took from the
engine's share of K/L what no provider would. This one sends the same bytes (the role-aware default
answers of `tests.engine_helpers.Roles`, in the request's wire format) after `default_delay_s`, counted
from the request's arrival, for a fraction of that CPU (`benchmarks/engine.py --levels` prints both).
It serves what the benchmark's levels send: POST requests on kept-alive HTTP/1.1 connections, with a
Content-Length body; no scripted faults (tests use the threaded server for those).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator

from tests.engine_helpers import DEFAULT_REPLIES, request_kind
from tests.llm_fake_server import RecordedRequest, answer


class QuietModelServer:
    def __init__(self):
        self.default_delay_s = 0.0
        self.model_version: str | None = None  # as FakeLLMServer's: None echoes the requested model
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="model-server", daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    def start(self) -> None:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=512), self._loop).result()
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def close():
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def reply(self, request: RecordedRequest) -> bytes:
        """What `Roles` answers this request: its kind's default text, as a complete answer."""
        text = DEFAULT_REPLIES[request_kind(request)](request)
        return json.dumps(answer(request, text, self.model_version)).encode()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = loop.time()
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {}
                for line in header_lines:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                self.requests += 1
                reply = self.reply(RecordedRequest(method, path, headers, body))
                wait = self.default_delay_s - (loop.time() - arrived)
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(reply)).encode() + b"\r\n\r\n" + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed its connection
        finally:
            writer.close()


@contextlib.contextmanager
def running_model_server() -> Iterator[QuietModelServer]:
    server = QuietModelServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
