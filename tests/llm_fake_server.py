"""A real local HTTP server speaking the LLM wire formats, with scripted faults.

Tests (and the engine benchmark) start it with ``running_fake_llm()``; it listens on 127.0.0.1 on
an ephemeral port and serves

- ``POST /v1/chat/completions`` (OpenAI-compatible Chat Completions),
- ``POST /v1beta/models/{model}:generateContent`` (Gemini native) and
- ``POST /v1/messages`` (Anthropic's Messages API; like the real one it answers 401 without an
  ``x-api-key`` header and 400 without ``anthropic-version``, before any scripted reply).

Each request takes the next ``Reply`` from the script (``server.script(...)``); when the script
is empty it answers normally in the request's own format after ``server.default_delay_s``. Every
request received is recorded (method, path, headers, exact body bytes), so tests can count
attempts and check that a retry re-sent identical bytes.

The reply helpers below build the bodies real services send for each fault (paper App. B.2).
"""

from __future__ import annotations

import contextlib
import json
import socketserver
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OPENAI_PATH = "/v1/chat/completions"
GEMINI_PREFIX = "/v1beta/models/"
GEMINI_SUFFIX = ":generateContent"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)

    @property
    def wire_format(self) -> str:
        if self.path == ANTHROPIC_PATH:
            return "anthropic"
        return "gemini" if self.path.startswith(GEMINI_PREFIX) else "openai"

    @property
    def model(self) -> str:
        if self.wire_format == "gemini":
            return self.path[len(GEMINI_PREFIX) :].removesuffix(GEMINI_SUFFIX)
        return self.json.get("model", "")


@dataclass(frozen=True)
class Reply:
    """One scripted response. ``body`` may be bytes, a JSON-able value, or a function of the
    request returning either (so one script entry serves both wire formats)."""

    status: int = 200
    body: bytes | dict | list | Callable[[RecordedRequest], object] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # answer this long after the request arrived (longer than the client timeout: a timeout)
    drop: bool = False  # close the connection without sending any response
    cut_body: bool = False  # send the status line and headers, then only half the body
    trickle_s: float = 0.0  # send the body a byte at a time, this long apart (never idle long enough for a read timeout)


class FakeLLMServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler still sleeping through a "slow" reply must not block exit
    # socketserver's default backlog is 5: a hundred clients connecting at once (the engine
    # benchmark's 128 in flight) would see connections reset before they are accepted.
    request_queue_size = 512

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[RecordedRequest] = []
        self.default_delay_s = 0.0
        self.model_version: str | None = None  # default replies echo the requested model
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def server_bind(self):
        # HTTPServer.server_bind resolves its own host name (socket.getfqdn), a DNS lookup that
        # can cost 100 ms per server; nothing here needs it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def gemini_base_url(self) -> str:
        return f"{self.base_url}/v1beta"

    @property
    def anthropic_base_url(self) -> str:
        return f"{self.base_url}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        return Reply(body=lambda req: answer(req, "A default answer.", self.model_version),
                     delay_s=self.default_delay_s)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real services do
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms stall
    server: FakeLLMServer

    def parse_request(self):
        # The request line is in: a reply's delay counts from here, so that the server's own
        # reading and parsing (slow under load in this Python server) is not added to it.
        self.arrived = time.monotonic()
        return super().parse_request()

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=self.rfile.read(length),
        )
        if request.path not in (OPENAI_PATH, ANTHROPIC_PATH) and not (
            request.path.startswith(GEMINI_PREFIX) and request.path.endswith(GEMINI_SUFFIX)
        ):
            self._write(404, b'{"error": {"message": "no such route"}}', {})
            return
        if request.path == ANTHROPIC_PATH and (refusal := _anthropic_refusal(request)):
            with self.server._lock:
                self.server.requests.append(request)
            self._write(refusal[0], json.dumps(refusal[1]).encode(), {})
            return
        reply = self.server._next_reply(request)
        if reply.delay_s and self.server.stopping.wait(max(reply.delay_s - (time.monotonic() - self.arrived), 0.0)):
            return
        if reply.drop:
            self.close_connection = True  # the client sees the socket close with no response
            return
        body = reply.body(request) if callable(reply.body) else reply.body
        if not isinstance(body, bytes):
            body = json.dumps(body).encode() if body is not None else b""
        with contextlib.suppress(OSError):  # the client may have timed out and gone
            if reply.cut_body:
                self.close_connection = True
                self._write(reply.status, body[: len(body) // 2], reply.headers, len(body))
            elif reply.trickle_s:
                self._write(reply.status, b"", reply.headers, len(body))
                for i in range(len(body)):
                    if self.server.stopping.wait(reply.trickle_s):
                        return
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
            else:
                self._write(reply.status, body, reply.headers)

    def _write(self, status: int, body: bytes, headers: dict[str, str],
               content_length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body) if content_length is None
                                               else content_length))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # keep test output clean
        pass


def _anthropic_refusal(request: RecordedRequest) -> tuple[int, dict] | None:
    """What Anthropic answers a request without its required headers."""
    if not request.headers.get("x-api-key"):
        return 401, anthropic_error("authentication_error", "x-api-key header is required")
    if not request.headers.get("anthropic-version"):
        return 400, anthropic_error("invalid_request_error", "anthropic-version: header is required")
    return None


@contextlib.contextmanager
def running_fake_llm() -> Iterator[FakeLLMServer]:
    """A started ``FakeLLMServer``; stopped (with any sleeping handlers released) on exit."""
    server = FakeLLMServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- bodies real services send ------------------------------------------------------------------


def openai_completion(text: str | None = "An answer.", *, model: str = "gpt-test-1",
                      finish_reason: str = "stop", prompt_tokens: int = 11,
                      completion_tokens: int = 7, reasoning_tokens: int | None = 3,
                      response_id: str = "chatcmpl-test-1", choices: int = 1) -> dict:
    usage: dict = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": 1_780_000_000,
        "model": model,
        "choices": [
            {
                "index": index,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": finish_reason,
            }
            for index in range(choices)
        ],
        "usage": usage,
    }


def gemini_response(parts: list[dict] | None = None, *, model_version: str = "gemini-test-flash",
                    finish_reason: str = "STOP", prompt_tokens: int = 12,
                    candidates_tokens: int | None = 6, thoughts_tokens: int | None = 20,
                    response_id: str = "resp-test-1", candidates: int = 1) -> dict:
    parts = [{"text": "An answer."}] if parts is None else parts
    usage = {"promptTokenCount": prompt_tokens}
    if candidates_tokens is not None:
        usage["candidatesTokenCount"] = candidates_tokens
    if thoughts_tokens is not None:
        usage["thoughtsTokenCount"] = thoughts_tokens
    usage["totalTokenCount"] = prompt_tokens + (candidates_tokens or 0) + (thoughts_tokens or 0)
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish_reason,
             "index": index}
            for index in range(candidates)
        ],
        "usageMetadata": usage,
        "modelVersion": model_version,
        "responseId": response_id,
    }


def anthropic_message(text: str | None = "An answer.", *, model: str = "claude-test-1", stop_reason: str = "end_turn",
                      input_tokens: int = 13, output_tokens: int = 8, cache_read_input_tokens: int | None = None,
                      thinking: str | None = None, message_id: str = "msg_test_1") -> dict:
    content = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig-test"})
    if text is not None:
        content.append({"type": "text", "text": text})
    usage = {"input_tokens": input_tokens, "output_tokens": output_tokens, "cache_creation_input_tokens": 0}
    if cache_read_input_tokens is not None:
        usage["cache_read_input_tokens"] = cache_read_input_tokens
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": None, "usage": usage}


def anthropic_error(error_type: str, message: str) -> dict:
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_test_1"}


def anthropic_overloaded() -> dict:
    return anthropic_error("overloaded_error", "Overloaded")


def anthropic_rate_limited() -> dict:
    return anthropic_error("rate_limit_error", "This request would exceed the rate limit for your organization "
                                               "of 50 requests per minute.")


def anthropic_credit_exhausted() -> dict:
    return anthropic_error("invalid_request_error", "Your credit balance is too low to access the Anthropic API. "
                                                    "Please go to Plans & Billing to upgrade or purchase credits.")


def answer(request: RecordedRequest, text: str, model_version: str | None = None) -> dict:
    """A normal complete answer in the request's own wire format."""
    if request.wire_format == "anthropic":
        return anthropic_message(text, model=model_version or request.model)
    if request.wire_format == "gemini":
        return gemini_response([{"text": text}], model_version=model_version or request.model)
    return openai_completion(text, model=model_version or request.model)


def openai_error(message: str, *, code: str | None, error_type: str) -> dict:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def openai_rate_limited() -> dict:
    return openai_error(
        "Rate limit reached for gpt-test-1 in organization org-test on requests per min (RPM): "
        "Limit 3, Used 3, Requested 1. Please try again in 20s.",
        code="rate_limit_exceeded", error_type="requests",
    )


def openai_request_too_large() -> dict:
    return openai_error(
        "Request too large for gpt-test-1 in organization org-test on tokens per min (TPM): "
        "Limit 30000, Requested 45000. The input or output tokens must be reduced in order to "
        "run successfully.",
        code="rate_limit_exceeded", error_type="tokens",
    )


def openai_insufficient_quota() -> dict:
    return openai_error(
        "You exceeded your current quota, please check your plan and billing details.",
        code="insufficient_quota", error_type="insufficient_quota",
    )


def gemini_error(code: int, status: str, message: str, details: list[dict] = ()) -> dict:
    return {"error": {"code": code, "message": message, "status": status,
                      "details": list(details)}}


def gemini_quota_exhausted(quota_id: str, retry_delay: str | None = "30s") -> dict:
    details = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                "quotaId": quota_id,
                "quotaDimensions": {"location": "global", "model": "gemini-test-flash"},
                "quotaValue": "250",
            }],
        },
        {"@type": "type.googleapis.com/google.rpc.Help",
         "links": [{"description": "Learn more",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
    ]
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": retry_delay})
    return gemini_error(429, "RESOURCE_EXHAUSTED",
                        "You exceeded your current quota, please check your plan and billing "
                        "details.", details)
