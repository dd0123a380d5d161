"""What goes over the wire to an LLM: model configurations, the exact request bytes, and the outcome types.

``build_request`` makes the exact bytes of a request once, so that an allowed retry re-sends the
identical payload and the journal can store its hash. ``ModelConfig`` names the environment
variable of a key, never the key, so it can be stored, hashed into a seal and printed;
``api_key_env_problem`` refuses a pasted key. A judge's ``structured_output`` adds the
provider's JSON-schema switch to the body, or JSON mode (``structured_format``), and nothing
when unset, so earlier bodies keep their bytes; ``first_call_failure_hint`` names the likely
cause of a server error on a run's first call. Sending is `client.send`; whether to send again is the journal's decision
(`experiments.execution.policy`).

Imports no Django.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass, field

from experiments.core.canonical import canonical_json
from experiments.core.parsers import JUDGE_SCHEMA, JUDGE_SCORES

PROVIDERS = ("openai", "gemini", "anthropic", "offline")
TOKEN_PARAMS = ("max_completion_tokens", "max_tokens")
# The statuses whose output-free envelope the paper retries (App. B.2). 500 is deliberately absent.
# 529 is Anthropic's "overloaded" (its 503): the same transient, output-free answer.
RETRYABLE_STATUSES = (429, 502, 503, 504, 529)
# Anthropic's Messages API version header (https://docs.anthropic.com/en/api/versioning).
ANTHROPIC_VERSION = "2023-06-01"
# Anthropic's extended thinking needs a budget of at least this many tokens.
ANTHROPIC_MIN_THINKING = 1024
OPENAI_QUOTA_CODES = ("insufficient_quota",)
# Providers whose API can hold a reply to a JSON schema; the offline stand-in has no such switch.
STRUCTURED_OUTPUT_PROVIDERS = ("openai", "gemini")
# OpenAI-compatible servers take JSON Schema as it is ("strict" needs every property required
# and no others, which JUDGE_SCHEMA says).
OPENAI_JUDGE_FORMAT = {"type": "json_schema",
                       "json_schema": {"name": "judge_grade", "strict": True, "schema": JUDGE_SCHEMA}}
# The two forms of structured output an OpenAI-compatible server may take (`structured_format`):
# "json_schema", the reply held to JUDGE_SCHEMA (OpenAI, vLLM, SGLang), or "json_object", JSON
# mode: any JSON object, its shape left to the judge's prompt (what llama.cpp's server takes; it
# answered json_schema with HTTP 500). Gemini's responseSchema is its only form.
STRUCTURED_FORMATS = ("json_schema", "json_object")
OPENAI_JSON_OBJECT_FORMAT = {"type": "json_object"}
# Gemini's responseSchema is an OpenAPI subset: upper-case types, no enum of integers (a range
# instead), no additionalProperties; propertyOrdering keeps the prompt's order, score first.
GEMINI_JUDGE_SCHEMA = {
    "type": "OBJECT",
    "properties": {
        "score": {"type": "INTEGER", "minimum": min(JUDGE_SCORES), "maximum": max(JUDGE_SCORES)},
        "rationale": {"type": "STRING"},
    },
    "required": ["score", "rationale"],
    "propertyOrdering": ["score", "rationale"],
}


class OutcomeKind(enum.StrEnum):
    OK = "ok"
    TRANSIENT = "transient"  # no response, or an output-free 429/502/503/504: may be retried
    QUOTA = "quota"  # quota exhausted: open the durable circuit, send nothing more
    FATAL = "fatal"  # credentials, payment, other non-transient errors: stop the phase
    UNUSABLE = "unusable"  # content received but not a usable answer: record, never redraw


@dataclass(frozen=True)
class ModelConfig:
    """One generator or judge configuration (App. B.3: model, reasoning, caps, temperature).

    ``api_key_env`` is the NAME of the environment variable holding the key, so this object can
    be stored, hashed into a seal and printed without revealing anything.
    """

    provider: str  # "openai" (any Chat Completions server), "gemini", "anthropic" (native) or "offline"
    # e.g. "https://api.openai.com/v1", "https://generativelanguage.googleapis.com/v1beta"
    base_url: str
    model: str
    expected_model_version: str | None = None  # the returned identifier must match (App. B.3)
    api_key_env: str | None = None  # None: send no credentials (local servers)
    max_output_tokens: int = 1600
    temperature: float | None = None  # None: omit, keeping the service default
    # OpenAI reasoning_effort / Gemini thinkingLevel / Anthropic's thinking budget in tokens; None: omit
    reasoning: str | None = None
    token_param: str = "max_completion_tokens"  # older servers want "max_tokens"
    timeout_s: float = 180.0  # the paper's transport timeout
    quota_pattern: str | None = None  # regex over an error body meaning "quota exhausted"
    # Judges only: ask the service for the JSON object parse_judge reads (parsers.JUDGE_SCHEMA).
    # Stored on a protocol only when true, so protocols sealed before it existed hash as before.
    structured_output: bool = False
    # In which form an OpenAI-compatible server is asked (STRUCTURED_FORMATS); stored only when
    # not the default, so protocols sealed before the choice existed hash as before.
    structured_format: str = "json_schema"

    def __post_init__(self):
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {PROVIDERS}, not {self.provider!r}")
        if not isinstance(self.structured_output, bool):
            raise ValueError(f"structured_output must be true or false, not {self.structured_output!r}")
        if self.structured_output and self.provider not in STRUCTURED_OUTPUT_PROVIDERS:
            raise ValueError(f"structured output is not supported by provider {self.provider!r} "
                             f"(only {' and '.join(STRUCTURED_OUTPUT_PROVIDERS)})")
        if self.structured_format not in STRUCTURED_FORMATS:
            raise ValueError(f"structured_format must be one of {STRUCTURED_FORMATS}, not {self.structured_format!r}")
        if self.structured_format != "json_schema" and not (self.structured_output and self.provider == "openai"):
            raise ValueError(f"structured_format {self.structured_format!r} is a form of structured output for "
                             "OpenAI-compatible servers: it needs structured_output and provider 'openai'")
        if self.token_param not in TOKEN_PARAMS:
            raise ValueError(f"token_param must be one of {TOKEN_PARAMS}")
        if self.max_output_tokens <= 0 or self.timeout_s <= 0:
            raise ValueError("max_output_tokens and timeout_s must be positive")
        if self.quota_pattern is not None:
            re.compile(self.quota_pattern)  # fail when configured, not at the first error
        if self.provider == "anthropic" and self.reasoning is not None:
            budget = str(self.reasoning)
            if not budget.isdigit() or not ANTHROPIC_MIN_THINKING <= int(budget) < self.max_output_tokens:
                raise ValueError(f"for anthropic, reasoning is the extended-thinking budget in tokens, a whole "
                                 f"number from {ANTHROPIC_MIN_THINKING} to below max_output_tokens")
            if self.temperature is not None:
                raise ValueError("anthropic's extended thinking does not allow a temperature; leave it empty")


@dataclass(frozen=True)
class PreparedRequest:
    """A request ready to send, minus its credentials. ``body_bytes`` is what goes on the wire."""

    method: str
    url: str
    headers: dict[str, str]  # never holds the key; send() adds it
    json_body: dict = field(repr=False)
    body_bytes: bytes = field(repr=False)

    @property
    def request_sha256(self) -> str:
        """Hash of method, URL and body: equal hashes mean an identical request."""
        digest = hashlib.sha256(f"{self.method} {self.url}\n".encode())
        digest.update(self.body_bytes)
        return digest.hexdigest()


@dataclass(frozen=True)
class Usage:
    """Token counts as the service reports them; None when it does not (unknown, not zero).

    ``output_tokens`` is the provider's own figure: OpenAI's completion_tokens include reasoning
    tokens, Gemini's candidatesTokenCount excludes thoughts, Anthropic's output_tokens include
    thinking (which it does not count apart: reasoning None). ``total_tokens`` is comparable.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None


@dataclass(frozen=True)
class Outcome:
    """What one attempt produced, ready to be written to the request journal (App. B.2).

    ``text`` is None when no content was received, "" for a received empty answer.
    """

    kind: OutcomeKind
    http_status: int | None = None
    response_id: str | None = None
    model_version: str | None = None
    finish_reason: str | None = None
    text: str | None = None
    usage: Usage = field(default_factory=Usage)
    elapsed_s: float = 0.0
    retry_after_s: float | None = None  # the server's requested delay, when it gave one
    error: str = ""
    raw_body: str = field(default="", repr=False)


def build_request(config: ModelConfig, system: str, user: str) -> PreparedRequest:
    """The canonical request for (system, user) under ``config``; same inputs, same bytes."""
    headers = {"content-type": "application/json"}
    if config.provider == "gemini":
        url = f"{config.base_url.rstrip('/')}/models/{config.model}:generateContent"
        generation_config: dict = {"maxOutputTokens": config.max_output_tokens}
        if config.temperature is not None:
            generation_config["temperature"] = config.temperature
        if config.reasoning is not None:
            generation_config["thinkingConfig"] = {"thinkingLevel": config.reasoning}
        if config.structured_output:
            generation_config["responseMimeType"] = "application/json"
            generation_config["responseSchema"] = GEMINI_JUDGE_SCHEMA
        body: dict = {
            "contents": [{"role": "user", "parts": [{"text": user}]}],
            "generationConfig": generation_config,
        }
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        method = "POST"
    elif config.provider == "anthropic":
        # The Messages API: the system prompt is a top-level field, max_tokens is required.
        url = f"{config.base_url.rstrip('/')}/messages"
        body = {"model": config.model, "max_tokens": config.max_output_tokens,
                "messages": [{"role": "user", "content": user}]}
        if system:
            body["system"] = system
        if config.temperature is not None:
            body["temperature"] = config.temperature
        if config.reasoning is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": int(config.reasoning)}
        method = "POST"
        headers["anthropic-version"] = ANTHROPIC_VERSION
    else:
        messages = [{"role": "user", "content": user}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        body = {"model": config.model, "messages": messages}
        if config.provider == "offline":
            # No wire: the stand-in reads the same messages a real model would get.
            method, url = "OFFLINE", f"offline:{config.model}"
        else:
            method, url = "POST", f"{config.base_url.rstrip('/')}/chat/completions"
            body[config.token_param] = config.max_output_tokens
            if config.temperature is not None:
                body["temperature"] = config.temperature
            if config.reasoning is not None:
                body["reasoning_effort"] = config.reasoning
            if config.structured_output:
                body["response_format"] = (OPENAI_JUDGE_FORMAT if config.structured_format == "json_schema"
                                           else OPENAI_JSON_OBJECT_FORMAT)
    return PreparedRequest(
        method=method,
        url=url,
        headers=headers,
        json_body=body,
        body_bytes=canonical_json(body).encode("utf-8"),
    )



# --- the NAME of the variable holding an API key, never the key ------------------------------

_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Prefixes of keys people paste by mistake: OpenAI and compatible, Google, Hugging Face, Groq, xAI.
_KEY_PREFIXES = ("sk-", "sk_", "aiza", "hf_", "gsk_", "xai-", "bearer ")
_LONG_TOKEN_CHARS = 32


def api_key_env_problem(value: str) -> str | None:
    """Why `value` cannot be the name of a key variable, or None when it can.

    The messages never repeat the value: it may be a secret.
    """
    if not value:
        return None
    # Variable names are short and plain; keys are long and mix cases and digits or punctuation.
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)
    looks_random = len(value) >= _LONG_TOKEN_CHARS and " " not in value and (
        mixed or not _ENV_VAR_NAME.fullmatch(value)
    )
    if value.lower().startswith(_KEY_PREFIXES) or looks_random:
        return (
            "This looks like an API key itself. Enter the NAME of the environment variable that holds "
            "the key (for example OPENAI_API_KEY), never the key: keys are read from the environment "
            "and never stored. What you entered was not saved."
        )
    if not _ENV_VAR_NAME.fullmatch(value):
        return (
            "Not an environment variable name: use letters, digits and _ (for example OPENAI_API_KEY). "
            "What you entered was not saved."
        )
    return None


# --- concurrency written as one "provider=cap" per line (the management command's JSON uses a dict)

def concurrency_problems(concurrency) -> list[str]:
    if not isinstance(concurrency, dict):
        return ["concurrency must be a mapping {provider: cap}"]
    problems = []
    for provider, cap in concurrency.items():
        if provider not in PROVIDERS:
            problems.append(f"concurrency: unknown provider {provider!r} (one of {', '.join(PROVIDERS)})")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            problems.append(f"concurrency of {provider}: the in-flight cap must be a whole number ≥ 1")
    return problems



def first_call_failure_hint(config: ModelConfig, http_status: int | None) -> str:
    """The likely cause of an HTTP 500 on a run's first call with these settings ("" for another
    status): before anything was answered, a server error is more often a setting the server does
    not take than a passing fault (llama.cpp's server answers a json_schema response_format so)."""
    if http_status != 500:
        return ""
    if config.structured_output and config.provider == "openai" and config.structured_format == "json_schema":
        return ("Likely cause: structured output was asked for as a JSON schema (response_format json_schema), "
                "which some OpenAI-compatible servers (llama.cpp's among them) answer with HTTP 500; choose "
                "structured output as a JSON object (json_object), or turn it off.")
    return ("Likely cause: this was the first call with these settings, so the server more likely refuses one "
            "of them (token parameter, reasoning setting, structured output) or the model than it failed "
            "in passing.")
