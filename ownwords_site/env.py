"""Tiny, loud readers of environment variables for settings.

A bad value stops start-up with a message naming the variable, rather than
silently falling back to a default nobody asked for.
"""
import os
from urllib.parse import unquote, urlsplit


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


def env_int(name, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None


def env_list(name, default=()):
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url, *, base_dir):
    """Translate DATABASE_URL into a Django DATABASES entry.

    Supported: ``sqlite:///relative/path``, ``sqlite:////absolute/path`` and
    ``postgres://user:password@host:port/name`` (also ``postgresql://``).
    """
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise ConfigError(f"DATABASE_URL={url!r} names no SQLite file")
        full = path if path.startswith("/") else str(base_dir / path)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": full,
            "OPTIONS": {
                # The web server and a queue worker write to the same file: WAL lets
                # readers go on during a write, IMMEDIATE takes the write lock up front
                # (no lock-upgrade deadlock), and a writer waits up to 20 s for another.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
        }
    if parts.scheme in ("postgres", "postgresql"):
        name = parts.path.lstrip("/")
        if not name:
            raise ConfigError(f"DATABASE_URL={url!r} names no database")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(name),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
        }
    raise ConfigError(f"DATABASE_URL={url!r}: scheme must be sqlite or postgres")
