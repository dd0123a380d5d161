"""The answer of a complete response body, per wire format (App. B.3): its text, finish reason,
ids and token usage as `Outcome` fields, and the problems that make it unusable.

`client` reads the body and classifies the HTTP answer; these functions only read a parsed JSON
payload. Token counts a service does not report stay None (unknown, not zero). Imports no Django.
"""
from __future__ import annotations

from experiments.core.llm.wire import Usage


def count(value: object) -> int | None:
    """A token count as the service reported it, or None when it is not a whole number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_openai(payload: dict) -> tuple[dict, list[str]]:
    problems = []
    choices = payload.get("choices") or []
    text = finish_reason = None
    if len(choices) != 1:
        problems.append(f"expected a single choice, got {len(choices)}")
    else:
        # Some servers put hidden reasoning in message.reasoning_content: never an answer.
        text = (choices[0]["message"].get("content") or "").strip()
        finish_reason = choices[0].get("finish_reason")
        if finish_reason != "stop":
            problems.append(f"finish reason {finish_reason!r}, not 'stop' (incomplete)")
    usage = payload.get("usage") or {}
    details = usage.get("completion_tokens_details") or {}
    fields = {
        "response_id": payload.get("id"),
        "model_version": payload.get("model"),
        "finish_reason": finish_reason,
        "text": text,
        "usage": Usage(
            input_tokens=count(usage.get("prompt_tokens")),
            output_tokens=count(usage.get("completion_tokens")),
            reasoning_tokens=count(details.get("reasoning_tokens")),
            total_tokens=count(usage.get("total_tokens")),
        ),
    }
    return fields, problems


def parse_gemini(payload: dict) -> tuple[dict, list[str]]:
    problems = []
    candidates = payload.get("candidates") or []
    text = finish_reason = None
    if len(candidates) != 1:
        blocked = (payload.get("promptFeedback") or {}).get("blockReason")
        problems.append(
            f"expected a single candidate, got {len(candidates)}"
            + (f" (prompt blocked: {blocked})" if blocked else "")
        )
    else:
        candidate = candidates[0]
        parts = (candidate.get("content") or {}).get("parts") or []
        text = "".join(
            part["text"]
            for part in parts
            if isinstance(part.get("text"), str) and not part.get("thought")
        ).strip()
        finish_reason = candidate.get("finishReason")
        if finish_reason != "STOP":
            problems.append(f"finish reason {finish_reason!r}, not 'STOP' (incomplete)")
    usage = payload.get("usageMetadata") or {}
    fields = {
        "response_id": payload.get("responseId"),
        "model_version": payload.get("modelVersion"),
        "finish_reason": finish_reason,
        "text": text,
        "usage": Usage(
            input_tokens=count(usage.get("promptTokenCount")),
            output_tokens=count(usage.get("candidatesTokenCount")),
            reasoning_tokens=count(usage.get("thoughtsTokenCount")),
            total_tokens=count(usage.get("totalTokenCount")),
        ),
    }
    return fields, problems


def parse_anthropic(payload: dict) -> tuple[dict, list[str]]:
    problems = []
    blocks = payload["content"]
    if not isinstance(blocks, list):
        raise TypeError("content is not a list")
    # Thinking (and redacted thinking) blocks are hidden reasoning, never an answer.
    text = "".join(block["text"] for block in blocks
                   if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
                   ).strip()
    finish_reason = payload.get("stop_reason")
    if finish_reason != "end_turn":
        problems.append(f"stop reason {finish_reason!r}, not 'end_turn' (incomplete)")
    usage = payload.get("usage") or {}
    fresh, output = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
    # Cached prompt tokens are counted apart from input_tokens; the input is all of them.
    cached = [count(usage.get(name)) for name in ("cache_creation_input_tokens", "cache_read_input_tokens")]
    input_tokens = None if fresh is None else fresh + sum(n for n in cached if n is not None)
    fields = {
        "response_id": payload.get("id"),
        "model_version": payload.get("model"),
        "finish_reason": finish_reason,
        "text": text,
        "usage": Usage(
            input_tokens=input_tokens,
            output_tokens=output,
            reasoning_tokens=None,  # included in output_tokens, not reported apart
            total_tokens=None if input_tokens is None or output is None else input_tokens + output,
        ),
    }
    return fields, problems
