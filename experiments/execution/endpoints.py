"""The provider endpoints this server may call: a list its administrator configures.

A protocol's analyst picks an endpoint by name; the protocol stores (and seals) the endpoint's
base URL, as it always has, so the seals of existing protocols do not change. Whatever a stored
protocol says, a request goes only to a URL that the current list allows: sealing refuses
anything else (`sealing.protocol_problems`), and the execution path checks again before sending
(`require_allowed_endpoint`), so an analyst-typed address can never make a worker POST to an
internal host and show what came back.

The list is `settings.LLM_ENDPOINTS` (from `OWNWORDS_LLM_ENDPOINTS`, checked at start-up by
`ownwords_site.env.llm_endpoints`): entries with an exact `base_url`, entries with a
`url_prefix` (e.g. a fleet of local servers), and the offline stand-in (provider "offline", no
URL: it sends nothing).

What an endpoint answers in an error reaches people only as `provider_excerpt`: one line, cut
short, with control and direction-changing characters written as visible escapes (a terminal
running `run_report` must not obey an escape sequence a server sent; pages escape HTML besides).
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from django.conf import settings

from experiments.core.llm.wire import ModelConfig
from experiments.execution.policy import RunError
from ownwords_site.env import plain_http_url_problem

OFFLINE = "offline"
# Long enough to recognise an address, short enough that a pasted page cannot fill a message.
URL_SHOWN_CHARS = 80
ERROR_EXCERPT_CHARS = 200


@dataclass(frozen=True)
class Endpoint:
    name: str
    provider: str | None = None  # None: any provider's wire format may be sent there
    base_url: str | None = None
    url_prefix: str | None = None

    def describe(self) -> str:
        if self.provider == OFFLINE:
            return f"{self.name} (the offline stand-in, no network)"
        where = self.base_url if self.base_url is not None else f"URLs beginning {self.url_prefix}"
        return f"{self.name} ({where}{f', {self.provider}' if self.provider else ''})"

    def admits(self, provider: str, base_url: str) -> bool:
        if self.provider is not None and self.provider != provider:
            return False
        if provider == OFFLINE or self.provider == OFFLINE:
            # The stand-in sends nothing, whatever its (ignored) base URL says.
            return provider == OFFLINE and self.provider == OFFLINE
        if plain_http_url_problem(base_url):
            return False
        if self.base_url is not None:
            return base_url.rstrip("/") == self.base_url.rstrip("/")
        return base_url.startswith(self.url_prefix)


class EndpointNotAllowed(RunError):
    """A model configuration names an address outside the administrator's list."""


def configured_endpoints() -> list[Endpoint]:
    return [Endpoint(**entry) for entry in settings.LLM_ENDPOINTS]


def endpoint_by_name(name: str) -> Endpoint | None:
    return next((e for e in configured_endpoints() if e.name == name), None)


def endpoint_for(provider: str, base_url: str) -> Endpoint | None:
    """The first configured endpoint that admits this provider and URL, or None."""
    return next((e for e in configured_endpoints() if e.admits(provider, base_url or "")), None)


def allowed_endpoints_text() -> str:
    described = [e.describe() for e in configured_endpoints()]
    return "; ".join(described) if described else "none (the administrator allows no endpoint)"


def shown_url(url: str) -> str:
    """A URL as a message may quote it: repr'd (so control characters show as escapes) and cut."""
    text = repr(url or "")
    return text if len(text) <= URL_SHOWN_CHARS else text[: URL_SHOWN_CHARS - 1] + "…"


def endpoint_problem(provider: str, base_url: str) -> str | None:
    """Why this provider and base URL may not be called, naming the allowed endpoints; None when allowed."""
    if endpoint_for(provider, base_url) is not None:
        return None
    if provider == OFFLINE:
        return f"the offline stand-in is not among the endpoints this server allows: {allowed_endpoints_text()}"
    return (f"the base URL {shown_url(base_url)} for {provider} is not among the endpoints this server's "
            f"administrator allows: {allowed_endpoints_text()}")


def require_allowed_endpoint(config: ModelConfig) -> None:
    """Defence in depth on the execution path: raise EndpointNotAllowed rather than send."""
    problem = endpoint_problem(config.provider, config.base_url)
    if problem:
        raise EndpointNotAllowed(problem)


def endpoint_choices() -> list[tuple[str, str]]:
    """For the protocol editor's select: every configured endpoint by name."""
    return [(e.name, e.describe()) for e in configured_endpoints()]


def provider_excerpt(text: str, limit: int | None = ERROR_EXCERPT_CHARS) -> str:
    """An error text from a provider as a page or terminal may show it (see the module's docstring).

    Whitespace runs become one space; control (Cc) and format (Cf: bidi overrides, zero-width)
    characters become escapes such as \\x1b or \\u202e; at most `limit` characters (None: no cut).
    """
    shown = "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cf") else ch
        for ch in " ".join(str(text or "").split())
    )
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return shown
