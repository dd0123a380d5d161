"""Tiny, loud readers of environment variables for settings.

A bad value stops start-up with a message naming the variable, rather than
silently falling back to a default nobody asked for.
"""
import json
import os
import re
from urllib.parse import parse_qs, quote, unquote, urlsplit


class ConfigError(RuntimeError):
    pass


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name, default=None, *, required=False):
    value = os.environ.get(name)
    if value is None:
        if required:
            raise ConfigError(f"{name} must be set")
        return default
    return value


def env_bool(name, default=False):
    raw = os.environ.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name, default, *, minimum=None):
    return _env_number(name, default, int, "an integer", minimum)


def env_float(name, default, *, minimum=None):
    return _env_number(name, default, float, "a number", minimum)


def _env_number(name, default, parse, kind, minimum):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not {kind}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_list(name, default=()):
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url):
    """Translate DATABASE_URL into a Django DATABASES entry: PostgreSQL, the one engine.

    ``postgres://user:password@host:port/name`` (also ``postgresql://``); a Unix socket directory
    goes in the query, as libpq writes it: ``postgres://user@/name?host=/path/to/socket/dir``
    (the embedded server's form).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ConfigError(f"DATABASE_URL={url!r}: the scheme must be postgres (the one engine this app runs on)")
    name = parts.path.lstrip("/")
    if not name:
        raise ConfigError(f"DATABASE_URL={url!r} names no database")
    query = parse_qs(parts.query)
    unknown = set(query) - {"host"}
    if unknown:
        raise ConfigError(f"DATABASE_URL={url!r}: unknown parameters {sorted(unknown)} (known: host)")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(name),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": query["host"][-1] if "host" in query else (parts.hostname or ""),
        "PORT": str(parts.port or ""),
        "OPTIONS": {},
    }


def database_url(settings_dict) -> str:
    """The DATABASE_URL of a Django DATABASES entry (what another process needs to open it)."""
    user = quote(settings_dict.get("USER") or "", safe="")
    password = f":{quote(settings_dict['PASSWORD'], safe='')}" if settings_dict.get("PASSWORD") else ""
    host, port = settings_dict.get("HOST") or "", settings_dict.get("PORT") or ""
    name = quote(settings_dict["NAME"], safe="")
    if host.startswith("/"):
        return f"postgres://{user}{password}@/{name}?host={quote(host, safe='/')}"
    return f"postgres://{user}{password}@{host or '127.0.0.1'}{f':{port}' if port else ''}/{name}"


def env_json(name, default):
    """A JSON value given inline (starting with ``[`` or ``{``) or as the path of a JSON file."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    text = raw.strip()
    source = name
    if not text.startswith(("[", "{")):
        try:
            with open(text, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ConfigError(f"{name}={raw!r} is neither inline JSON nor a readable file ({exc.strerror})") from None
        source = f"{name} (file {raw})"
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc}") from None


_ENDPOINT_KEYS = {"name", "provider", "base_url", "url_prefix", "key_env"}
_KEY_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The server's own secrets: no endpoint may name them as the variable its key comes from, so a
# typo in the list cannot send them to a provider either.
SERVER_SECRET_VARIABLES = frozenset({"SECRET_KEY", "DATABASE_URL", "REDIS_URL"})


def plain_http_url_problem(url):
    """Why ``url`` is not a plain http(s) URL (scheme, host, optional port and path), or None.

    User information, a query, a fragment, backslashes, spaces and ``.``/``..`` path segments are
    refused: each is a way to make a URL look like one host and reach another.
    """
    if not isinstance(url, str) or not url:
        return "is empty"
    if any(ch in url for ch in "@\\?#") or any(ord(ch) <= 32 or ord(ch) == 127 for ch in url):
        return "may not contain user information, a query, a fragment, a backslash or spaces"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host"
    try:
        parts.port
    except ValueError:
        return "has an invalid port"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "may not contain . or .. path segments"
    return None


def llm_endpoints(entries, *, source="OWNWORDS_LLM_ENDPOINTS"):
    """Check the provider endpoints the administrator allows; returns them as plain dicts.

    Each entry is ``{"name", "provider"?, "base_url" | "url_prefix"}``: a ``base_url`` is one exact
    address, a ``url_prefix`` admits every plain URL beginning with it (it must end at a port or
    path boundary, ``:`` or ``/``, so ``https://a.example`` cannot admit ``https://a.example.evil``).
    The offline stand-in is ``{"name": ..., "provider": "offline"}`` with no URL: it sends nothing.
    ``key_env`` names the environment variable(s) a key for this endpoint may come from (a name or a
    list of names; none: requests go without credentials). A protocol may name at most one of them,
    and nothing else is ever read from the environment on a protocol's behalf.
    """
    if not isinstance(entries, list):
        raise ConfigError(f"{source} must be a JSON list of endpoints")
    checked, names = [], set()
    for index, entry in enumerate(entries, start=1):
        where = f"{source}: endpoint {index}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be an object")
        unknown = set(entry) - _ENDPOINT_KEYS
        if unknown:
            raise ConfigError(f"{where} has unknown keys {sorted(unknown)} (known: {sorted(_ENDPOINT_KEYS)})")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where} needs a name")
        if name in names:
            raise ConfigError(f"{where}: the name {name!r} is used twice")
        names.add(name)
        provider = entry.get("provider")
        if provider is not None and not isinstance(provider, str):
            raise ConfigError(f"{where} ({name}): provider must be a string")
        urls = [key for key in ("base_url", "url_prefix") if key in entry]
        if provider == "offline":
            if urls:
                raise ConfigError(f"{where} ({name}): the offline stand-in has no URL")
        elif len(urls) != 1:
            raise ConfigError(f"{where} ({name}) needs exactly one of base_url and url_prefix")
        else:
            url = entry[urls[0]]
            problem = plain_http_url_problem(url)
            if problem:
                raise ConfigError(f"{where} ({name}): {urls[0]} {url!r} {problem}")
            if urls[0] == "url_prefix" and not url.endswith((":", "/")):
                raise ConfigError(f"{where} ({name}): url_prefix {url!r} must end with ':' or '/'")
        checked.append({key: entry[key] for key in ("name", "provider", "base_url", "url_prefix") if key in entry})
        if "key_env" in entry:
            checked[-1]["key_env"] = _key_variables(entry, provider, f"{where} ({name})")
    return checked


def _key_variables(entry, provider, where) -> list[str]:
    """The checked ``key_env`` of an endpoint entry, always a list (empty: no credentials)."""
    names = entry.get("key_env", [])
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) and _KEY_VARIABLE_NAME.fullmatch(n) for n in names):
        raise ConfigError(f"{where}: key_env must be an environment variable name or a list of them "
                          "(letters, digits and _)")
    if names and provider == "offline":
        raise ConfigError(f"{where}: the offline stand-in sends nothing and takes no key_env")
    if SERVER_SECRET_VARIABLES & set(names):
        raise ConfigError(f"{where}: key_env may not name the server's own secrets "
                          f"{sorted(SERVER_SECRET_VARIABLES & set(names))}")
    return list(dict.fromkeys(names))
