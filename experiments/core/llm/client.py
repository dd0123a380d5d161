"""One attempt of an LLM request, over HTTP or to the offline stand-in, and its classification.

The paper's execution rules (App. B.2) decide what this module reports, and the caller's request
journal decides what happens next. ``send`` performs exactly ONE attempt and returns an
``Outcome``: ``ok``, ``transient`` (an exception with no response, or an output-free
429/502/503/504), ``quota`` (opens the durable circuit), ``fatal`` (stops the phase) or
``unusable`` (content was received but is not a usable answer; recorded as it is and never a
reason for a new draw).

Output text follows App. B.3: for Gemini the concatenation of the non-thought text parts of a
single complete STOP candidate, surrounding whitespace stripped; for Chat Completions the single
choice's message content, stripped the same way; for Anthropic's Messages API the text blocks
of a message that ended its turn (``end_turn``), thinking blocks left out, stripped the same way. Hidden reasoning (thought parts, a server's
reasoning_content) is never used as an answer. Token counts the service does not report stay
``None`` (unknown, not zero; App. B.3 Table 14).

API keys are read from the environment variable named in the config at send time; they are never
stored on these objects, never logged, and redacted from any error text or body we keep. An
application that sends on others' behalf installs a key gate (``install_key_gate``): asked right
before the environment is read, it refuses a variable its administrator does not allow for that
endpoint, and then nothing is read or sent.

Imports no Django.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time
from email.utils import parsedate_to_datetime

import httpx

from experiments.core.llm.replies import parse_anthropic, parse_gemini, parse_openai
from experiments.core.llm.offline import OFFLINE_LABEL, OFFLINE_MODEL_VERSION, offline_reply
from experiments.core.llm.transport import stream
from experiments.core.llm.wire import (
    OPENAI_QUOTA_CODES, RETRYABLE_STATUSES, ModelConfig, Outcome, OutcomeKind, PreparedRequest,
)

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 300
# config -> why its api_key_env may not be read, or None. None here: no gate (a notebook reads the
# variables its own configurations name); OwnWords Lab installs one at start-up.
_key_gate = None


def install_key_gate(gate) -> None:
    """Ask `gate(config)` before any key is read from the environment (see the module's docstring)."""
    global _key_gate
    _key_gate = gate
ANTHROPIC_BILLING_ERROR = "billing_error"
ANTHROPIC_NO_CREDIT = "credit balance is too low"


def send(config: ModelConfig, prepared: PreparedRequest, *, client: httpx.Client) -> Outcome:
    """Exactly one attempt of ``prepared``, classified. Never retries: the journal decides."""
    started = time.monotonic()
    if config.provider == "offline":
        outcome = _send_offline(config, prepared)
    else:
        outcome = _send_http(config, prepared, client)
    outcome = dataclasses.replace(_storable(outcome), elapsed_s=round(time.monotonic() - started, 6))
    logger.info(
        "LLM attempt %s %s: %s (HTTP %s, %.3f s)",
        config.provider,
        config.model,
        outcome.kind,
        outcome.http_status,
        outcome.elapsed_s,
    )
    return outcome


# --- one HTTP attempt --------------------------------------------------------------------------


def _send_http(config: ModelConfig, prepared: PreparedRequest, client: httpx.Client) -> Outcome:
    refusal = _key_gate(config) if config.api_key_env and _key_gate is not None else None
    if refusal:
        return Outcome(OutcomeKind.FATAL, error=f"{refusal}; no key was read and nothing was sent")
    api_key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    if config.api_key_env and not api_key:
        return Outcome(
            OutcomeKind.FATAL,
            error=f"environment variable {config.api_key_env} is not set; nothing was sent",
        )
    headers = dict(prepared.headers)
    if api_key:
        # Gemini's key goes in a header too, never in the URL, so no log line can carry it.
        if config.provider == "gemini":
            headers["x-goog-api-key"] = api_key
        elif config.provider == "anthropic":
            headers["x-api-key"] = api_key
        else:
            headers["authorization"] = f"Bearer {api_key}"
    status: int | None = None
    started = time.monotonic()
    try:
        with stream(client, prepared.method, prepared.url, prepared.body_bytes, headers,
                    config.timeout_s) as response:
            status = response.status_code
            response_headers = response.headers
            body = _read_before(response, started + config.timeout_s)
    except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
        message = _redact(_describe(exc), api_key)
        if status is None:
            return Outcome(OutcomeKind.TRANSIENT, error=f"no response: {message}")
        # The status line arrived but the body broke off: the service answered, so this is not
        # the response-free exception the paper retries.
        return Outcome(
            OutcomeKind.UNUSABLE, http_status=status, error=f"response interrupted: {message}"
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        message = _redact(_describe(exc), api_key)
        if status is None:  # bad URL, unsupported scheme, proxy errors: configuration
            return Outcome(OutcomeKind.FATAL, error=message)
        return Outcome(
            OutcomeKind.UNUSABLE, http_status=status, error=f"undecodable response: {message}"
        )
    raw_body = _redact(body.decode("utf-8", errors="replace"), api_key)
    return _classify(config, status, response_headers, raw_body)


def _read_before(response: httpx.Response, deadline: float) -> bytes:
    """The whole body, or ReadTimeout once the attempt's total time is up.

    httpx's timeout bounds each network step, not the request: a body trickling in a
    byte at a time would otherwise outlive the journal's lease for this attempt.
    """
    chunks = []
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the response took longer than the attempt's timeout in total")
    return b"".join(chunks)


def _classify(config: ModelConfig, status: int, headers: httpx.Headers, raw_body: str) -> Outcome:
    try:
        payload = json.loads(raw_body)
    except ValueError:
        payload = None
    # Gemini's OpenAI-compatible endpoint wraps errors in a one-element list.
    if isinstance(payload, list) and len(payload) == 1 and isinstance(payload[0], dict):
        payload = payload[0]
    retry_after_s = _retry_after(headers, payload)

    if 200 <= status < 300:
        if not isinstance(payload, dict):
            return Outcome(
                OutcomeKind.UNUSABLE,
                http_status=status,
                error="malformed JSON body",
                raw_body=raw_body,
            )
        return _parse_content(config, status, payload, raw_body)

    if _carries_output(payload):
        # An error status with output is received content: recorded, never a new draw.
        received = _parse_content(config, status, payload, raw_body)
        problem = f"HTTP {status} carried output; recorded as received"
        return dataclasses.replace(
            received,
            kind=OutcomeKind.UNUSABLE,
            error="; ".join(filter(None, [problem, received.error])),
            retry_after_s=retry_after_s,
        )

    error = payload.get("error") if isinstance(payload, dict) else None
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or raw_body.strip() or f"HTTP {status}")
    summary = _short(f"HTTP {status}: {message}")

    def outcome(kind: OutcomeKind) -> Outcome:
        return Outcome(
            kind, http_status=status, retry_after_s=retry_after_s, error=summary, raw_body=raw_body
        )

    if status == 402 or _is_quota_exhausted(config, error, raw_body):
        return outcome(OutcomeKind.QUOTA)
    if status == 429 and "request too large" in message.lower():
        # OpenAI's per-request token limit: the identical request can never succeed.
        return outcome(OutcomeKind.FATAL)
    if status in RETRYABLE_STATUSES:
        return outcome(OutcomeKind.TRANSIENT)
    return outcome(OutcomeKind.FATAL)  # 401/403 credentials, 400, 404, 500, ...


def _carries_output(payload: object) -> bool:
    return isinstance(payload, dict) and bool(
        payload.get("choices") or payload.get("candidates")
        or (payload.get("type") == "message" and payload.get("content")))


def _is_quota_exhausted(config: ModelConfig, error: dict, raw_body: str) -> bool:
    """App. B.2's circuit breakers: Gemini per-day quota, OpenAI insufficient_quota, a pattern."""
    if error.get("code") in OPENAI_QUOTA_CODES or error.get("type") in OPENAI_QUOTA_CODES:
        return True
    if error.get("type") == ANTHROPIC_BILLING_ERROR or (
        error.get("type") == "invalid_request_error" and ANTHROPIC_NO_CREDIT in str(error.get("message", "")).lower()
    ):
        # Anthropic: a prepaid balance spent is answered 400 "credit balance is too low" (or a
        # billing_error): nothing clears it but the owner, as with a quota.
        return True
    if error.get("status") == "RESOURCE_EXHAUSTED":
        # A per-minute limit clears by itself (transient); a per-day one does not.
        for detail in error.get("details") or []:
            if not isinstance(detail, dict):
                continue
            quota_ids = [
                violation.get("quotaId", "")
                for violation in detail.get("violations") or []
                if isinstance(violation, dict)
            ]
            metadata = detail.get("metadata")
            if isinstance(metadata, dict):
                quota_ids.append(metadata.get("quota_limit", ""))
            if any("perday" in str(quota_id).lower() for quota_id in quota_ids):
                return True
    return bool(config.quota_pattern and re.search(config.quota_pattern, raw_body))


def _parse_content(config: ModelConfig, status: int, payload: dict, raw_body: str) -> Outcome:
    """The answer, usage and identity of a response body; UNUSABLE unless complete and expected."""
    try:
        if config.provider == "gemini":
            fields, problems = parse_gemini(payload)
        elif config.provider == "anthropic":
            fields, problems = parse_anthropic(payload)
        else:
            fields, problems = parse_openai(payload)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return Outcome(
            OutcomeKind.UNUSABLE,
            http_status=status,
            error=f"unexpected response shape ({type(exc).__name__})",
            raw_body=raw_body,
        )
    expected = config.expected_model_version
    if expected is not None and fields["model_version"] != expected:
        returned = fields["model_version"]
        problems.append(f"unexpected model version {returned!r} (expected {expected!r})")
    kind = OutcomeKind.UNUSABLE if problems else OutcomeKind.OK
    return Outcome(kind, http_status=status, error="; ".join(problems), raw_body=raw_body, **fields)


def _send_offline(config: ModelConfig, prepared: PreparedRequest) -> Outcome:
    messages = {m["role"]: m["content"] for m in prepared.json_body["messages"]}
    text = offline_reply(messages.get("system", ""), messages.get("user", ""))
    raw_body = json.dumps(
        {"label": OFFLINE_LABEL, "model_version": OFFLINE_MODEL_VERSION, "text": text},
        ensure_ascii=False,
    )
    expected = config.expected_model_version
    wrong_version = expected is not None and expected != OFFLINE_MODEL_VERSION
    return Outcome(
        OutcomeKind.UNUSABLE if wrong_version else OutcomeKind.OK,
        response_id=f"offline-{prepared.request_sha256[:16]}",
        model_version=OFFLINE_MODEL_VERSION,
        finish_reason="stop",
        text=text,
        error=f"unexpected model version (expected {expected!r})" if wrong_version else "",
        raw_body=raw_body,
    )


# --- small helpers -----------------------------------------------------------------------------

# NUL and lone surrogates: valid in a JSON string ("\u0000", "\ud800"), refused by PostgreSQL's
# text and jsonb. A model may emit them; the receipt must still land, or a paid answer is lost.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
UNSTORABLE_REPLACEMENT = "\ufffd"


def _storable(outcome: Outcome) -> Outcome:
    """The outcome with every character PostgreSQL cannot store replaced by U+FFFD, and the
    replacement said in its error, so the journal records the answer instead of failing on it.
    (Python joins a valid surrogate pair when it decodes JSON, so any surrogate left is lone.)"""
    fields = ("text", "response_id", "model_version", "finish_reason", "error", "raw_body")
    found = {name: len(_UNSTORABLE.findall(getattr(outcome, name) or "")) for name in fields}
    if not any(found.values()):
        return outcome
    changes = {name: _UNSTORABLE.sub(UNSTORABLE_REPLACEMENT, getattr(outcome, name))
               for name, count in found.items() if count}
    if found["text"]:
        note = (f"the answer held {found['text']} character(s) that cannot be stored (NUL or a lone surrogate); "
                "each is kept as U+FFFD")
        changes["error"] = "; ".join(filter(None, [changes.get("error", outcome.error), note]))
    return dataclasses.replace(outcome, **changes)



def _retry_after(headers: httpx.Headers, payload: object) -> float | None:
    """Seconds the server asks us to wait: retry-after-ms, retry-after, or Gemini's RetryInfo."""
    if (milliseconds := _number(headers.get("retry-after-ms"))) is not None:
        return max(0.0, milliseconds / 1000)
    value = headers.get("retry-after")
    if value is not None:
        if (seconds := _number(value)) is not None:
            return max(0.0, seconds)
        try:  # an HTTP date
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    error = payload.get("error") if isinstance(payload, dict) else None
    for detail in (error.get("details") or []) if isinstance(error, dict) else []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            delay = str(detail.get("retryDelay", ""))  # a protobuf Duration: "30s", "12.5s"
            if delay.endswith("s") and (seconds := _number(delay[:-1])) is not None:
                return max(0.0, seconds)
    return None


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _describe(exc: Exception) -> str:
    return _short(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "[redacted]") if secret else text


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


