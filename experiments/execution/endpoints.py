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

Credentials belong to the same list: an entry's `key_env` names the only environment variables its
key may come from, and a protocol names at most one of them (`api_key_env`). Whatever a stored
protocol says, no other variable is read on its behalf: sealing and starting refuse it
(`endpoint_problem`, `require_allowed_endpoint`), and the client itself asks `key_refusal` before it
reads the environment (`install_key_gate`, called when the app is ready), so neither a typed
`SECRET_KEY` nor a protocol stored before this rule can send the server's secrets anywhere.

What an endpoint answers in an error reaches people only as `provider_excerpt`: one line, cut
short, with control and direction-changing characters written as visible escapes (a terminal
running `run_report` must not obey an escape sequence a server sent; pages escape HTML besides).
"""
from __future__ import annotations

import copy
import unicodedata
from dataclasses import dataclass

from django.conf import settings

from experiments.core.llm import client as llm_client
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
    key_env: tuple[str, ...] = ()  # the variables its key may be read from; empty: no credentials

    def describe(self) -> str:
        if self.provider == OFFLINE:
            return f"{self.name} (the offline stand-in, no network)"
        where = self.base_url if self.base_url is not None else f"URLs beginning {self.url_prefix}"
        return f"{self.name} ({where}{f', {self.provider}' if self.provider else ''})"

    def allows_key(self, api_key_env: str | None) -> bool:
        """Whether a request here may carry the key of `api_key_env` (None or empty: no key)."""
        return not api_key_env or api_key_env in self.key_env

    def keys_text(self) -> str:
        return ", ".join(self.key_env) if self.key_env else "none (requests go without credentials)"

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
    return [Endpoint(**{**entry, "key_env": _key_names(entry.get("key_env"))}) for entry in settings.LLM_ENDPOINTS]


def _key_names(key_env) -> tuple[str, ...]:
    # The start-up check (env.llm_endpoints) makes it a list; an entry written in settings may give one name.
    return (key_env,) if isinstance(key_env, str) else tuple(key_env or ())


def endpoint_by_name(name: str) -> Endpoint | None:
    return next((e for e in configured_endpoints() if e.name == name), None)


def endpoint_for(provider: str, base_url: str, api_key_env: str | None = None) -> Endpoint | None:
    """The first configured endpoint that admits this provider and URL, and the key variable when
    one is named; None when there is none."""
    return next((e for e in configured_endpoints()
                 if e.admits(provider, base_url or "") and e.allows_key(api_key_env)), None)


def admitting_endpoints(provider: str, base_url: str) -> list[Endpoint]:
    return [e for e in configured_endpoints() if e.admits(provider, base_url or "")]


def allowed_endpoints_text() -> str:
    described = [e.describe() for e in configured_endpoints()]
    return "; ".join(described) if described else "none (the administrator allows no endpoint)"


def shown_url(url: str) -> str:
    """A URL as a message may quote it: repr'd (so control characters show as escapes) and cut."""
    text = repr(url or "")
    return text if len(text) <= URL_SHOWN_CHARS else text[: URL_SHOWN_CHARS - 1] + "…"


# endpoint_problem's answers with the list they were worked out from (the settings' list itself and
# a copy of it, so that a list replaced or changed in place is seen), replaced as one: asked before
# every request.
_ANSWERS: tuple = (None, None, {})
_ANSWERS_KEPT = 256
_UNKNOWN = object()


def endpoint_problem(provider: str, base_url: str, api_key_env: str | None = None) -> str | None:
    """Why this provider and base URL may not be called (with the key of `api_key_env`, when
    named), naming the allowed endpoints or key variables; None when allowed. Remembered per
    endpoint list: the list is read and every endpoint's URL parsed once, not per request."""
    global _ANSWERS
    entries = settings.LLM_ENDPOINTS
    source, snapshot, answers = _ANSWERS
    if entries is not source or entries != snapshot or len(answers) >= _ANSWERS_KEPT:
        answers = {}
        _ANSWERS = (entries, copy.deepcopy(entries), answers)
    key = (provider, base_url, api_key_env)
    answer = answers.get(key, _UNKNOWN)
    if answer is _UNKNOWN:
        answer = answers[key] = _worked_out_problem(provider, base_url, api_key_env)
    return answer


def _worked_out_problem(provider: str, base_url: str, api_key_env: str | None) -> str | None:
    if endpoint_for(provider, base_url, api_key_env) is not None:
        return None
    if admitting_endpoints(provider, base_url):
        return key_refusal_text(provider, base_url)
    if provider == OFFLINE:
        return f"the offline stand-in is not among the endpoints this server allows: {allowed_endpoints_text()}"
    return (f"the base URL {shown_url(base_url)} for {provider} is not among the endpoints this server's "
            f"administrator allows: {allowed_endpoints_text()}")


def key_refusal_text(provider: str, base_url: str) -> str:
    """Why a named key variable may not be read for this address. It never repeats the name: a
    key pasted where its variable's name belongs must not come back in a message."""
    admitting = admitting_endpoints(provider, base_url)
    if provider == OFFLINE:
        return "the offline stand-in sends nothing and uses no key: leave the key variable empty"
    allowed = "; ".join(f"{e.name}: {e.keys_text()}" for e in admitting)
    return ("the key variable is not one the administrator allows for this endpoint, so it is never read "
            f"(allowed key variables — {allowed})")


def key_refusal(config: ModelConfig) -> str | None:
    """Why the client may not read `config.api_key_env` from the environment, or None when it may
    (the gate `client.install_key_gate` installs: asked right before the environment is read)."""
    return endpoint_problem(config.provider, config.base_url, config.api_key_env)


def install_key_gate() -> None:
    """From now on this process reads a key only for a configuration the endpoint list allows."""
    llm_client.install_key_gate(key_refusal)


def require_allowed_endpoint(config: ModelConfig) -> None:
    """Defence in depth on the execution path: raise EndpointNotAllowed rather than send, for an
    address outside the list or a key variable its endpoint does not allow."""
    problem = endpoint_problem(config.provider, config.base_url, config.api_key_env)
    if problem:
        raise EndpointNotAllowed(problem)


def endpoint_choices() -> list[tuple[str, str]]:
    """For the protocol editor's select: every configured endpoint by name."""
    return [(e.name, e.describe() + (f" — key variables: {', '.join(e.key_env)}" if e.key_env else ""))
            for e in configured_endpoints()]


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
