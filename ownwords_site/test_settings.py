"""Settings for the test suite: production settings (DEBUG off) plus test-only defaults.

DATABASE_URL and REDIS_URL come from the environment (CI: the machine's servers); without them the
suite runs on the embedded PostgreSQL and Redis under var/, as the demo does (pytest-django makes
its own test database on that server).
"""
import os
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
if not os.environ.get("REDIS_URL"):
    from ownwords_site import embedded
    # A Redis database of its own (15), never the demo's 0: the tests empty theirs, and a demo
    # worker on the same database would take the tests' jobs.
    os.environ["REDIS_URL"] = embedded.redis_url(Path(__file__).resolve().parent.parent / "var", db=15)


def _redis_db_per_xdist_worker(url: str, worker: str | None) -> str:
    """Under pytest-xdist each test process gets a Redis database of its own (gw0 the given one,
    gw1 the one below, …): the tests' rq workers listen on fixed queue names and would otherwise
    take each other's jobs for slots of another test database."""
    if not worker or not worker.startswith("gw"):
        return url
    from urllib.parse import urlsplit, urlunsplit
    parts = urlsplit(url)
    db = int(parts.path.lstrip("/") or 0) - int(worker[2:])
    if db < 0:
        raise RuntimeError(f"REDIS_URL {url}: too few Redis databases below it for xdist worker {worker}")
    return urlunsplit(parts._replace(path=f"/{db}"))


# Once per test process: the rq workers a test starts inherit both the moved REDIS_URL and
# PYTEST_XDIST_WORKER, and must not move it again.
if os.environ.get("OWNWORDS_TEST_REDIS_FOR") != os.environ.get("PYTEST_XDIST_WORKER", ""):
    os.environ["REDIS_URL"] = _redis_db_per_xdist_worker(os.environ["REDIS_URL"], os.environ.get("PYTEST_XDIST_WORKER"))
    os.environ["OWNWORDS_TEST_REDIS_FOR"] = os.environ.get("PYTEST_XDIST_WORKER", "")

from ownwords_site.settings import *  # noqa: E402,F401,F403

# Hashing passwords properly is slow and tests create many users.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The tests' own LLM server (tests/llm_fake_server.py, any port on the loopback address) and the
# reserved example names of RFC 6761 that some tests seal but never call. Tests only: a server
# allows exactly what its administrator lists in OWNWORDS_LLM_ENDPOINTS.
# key_env: the only variables a key for that endpoint is read from (the tests set them, never a real key).
LLM_ENDPOINTS = [  # noqa: F405
    *LLM_ENDPOINTS,  # noqa: F405
    {"name": "test-loopback", "url_prefix": "http://127.0.0.1:", "key_env": [
        "OWNWORDS_TEST_FAKE_LLM_KEY", "OWNWORDS_TEST_ANTHROPIC_KEY", "OTHER_TEST_KEY", "OWNWORDS_PAGE_TEST_KEY"]},
    {"name": "test-example-openai", "provider": "openai", "url_prefix": "https://api.example.test/"},
    {"name": "test-example-gemini", "provider": "gemini", "url_prefix": "https://gemini.example.test/"},
]

# Tests never run collectstatic: static files come from the finders under their own names (the
# production storage, hashed and compressed, is checked in tests/test_static_files.py).
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True  # looks files up per request: no STATIC_ROOT needed
