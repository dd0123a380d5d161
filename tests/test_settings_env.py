"""Settings helpers fail loudly on bad values."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ownwords_site.env import (
    ConfigError, database_from_url, database_url, env_bool, env_float, env_int, env_list,
)

ROOT = Path(__file__).resolve().parents[1]


def test_env_bool_accepts_the_usual_spellings_and_refuses_others(monkeypatch):
    for raw, value in [("1", True), ("yes", True), ("ON", True), ("0", False), ("off", False), ("", False)]:
        monkeypatch.setenv("FLAG", raw)
        assert env_bool("FLAG") is value
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ConfigError, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG")


def test_env_int_and_list(monkeypatch):
    monkeypatch.setenv("N", "12")
    assert env_int("N", 3) == 12
    monkeypatch.setenv("N", "twelve")
    with pytest.raises(ConfigError, match="not an integer"):
        env_int("N", 3)
    monkeypatch.setenv("HOSTS", "a.example, b.example,,")
    assert env_list("HOSTS") == ["a.example", "b.example"]


def test_env_float_and_a_minimum(monkeypatch):
    monkeypatch.setenv("S", "0.005")
    assert env_float("S", 0.001) == 0.005
    monkeypatch.delenv("S")
    assert env_float("S", 0.001) == 0.001
    monkeypatch.setenv("S", "fast")
    with pytest.raises(ConfigError, match="S='fast' is not a number"):
        env_float("S", 0.001)
    monkeypatch.setenv("N", "0")
    assert env_int("N", 3, minimum=0) == 0
    with pytest.raises(ConfigError, match="N='0' must be at least 1"):
        env_int("N", 3, minimum=1)


def test_the_engine_knobs_are_read_at_start_up():
    code = ("import ownwords_site.settings as s; print(s.OWNWORDS_WORKER_SLOTS, s.OWNWORDS_WORKER_DB_THREADS, "
            "s.OWNWORDS_WORKER_SWITCH_S, s.OWNWORDS_HAND_OUT_WINDOW, s.OWNWORDS_DB_PREPARE, "
            "s.OWNWORDS_RESERVE_WITH_RECEIPT)")
    env = {"PATH": "/usr/bin:/bin", "SECRET_KEY": "k", "DATABASE_URL": os.environ["DATABASE_URL"],
           "REDIS_URL": os.environ["REDIS_URL"]}
    def start(**knobs):
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              env={**env, **knobs})
    assert start().stdout.split() == ["16", "4", "0.001", "None", "True", "False"]
    assert start(OWNWORDS_WORKER_SLOTS="2").stdout.split()[:2] == ["2", "2"]  # connections: the slots, at most 4
    assert start(OWNWORDS_WORKER_SLOTS="40", OWNWORDS_WORKER_DB_THREADS="16").stdout.split()[:2] == ["40", "16"]
    assert start(OWNWORDS_WORKER_SLOTS="40", OWNWORDS_WORKER_SWITCH_S="0.005", OWNWORDS_HAND_OUT_WINDOW="256",
                 OWNWORDS_DB_PREPARE="0", OWNWORDS_RESERVE_WITH_RECEIPT="1").stdout.split() == [
        "40", "4", "0.005", "256", "False", "True"]
    for name, bad, why in [("OWNWORDS_WORKER_SLOTS", "0", "must be at least 1"),
                           ("OWNWORDS_WORKER_DB_THREADS", "many", "is not an integer"),
                           ("OWNWORDS_WORKER_SWITCH_S", "fast", "is not a number"),
                           ("OWNWORDS_DB_PREPARE", "maybe", "is not a boolean")]:
        refused = start(**{name: bad})
        assert refused.returncode != 0 and f"{name}={bad!r}" in refused.stderr and why in refused.stderr


def test_database_urls():
    pg = database_from_url("postgres://postgres:p%40ss@127.0.0.1:5432/test")
    assert pg == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "test",
        "USER": "postgres",
        "PASSWORD": "p@ss",
        "HOST": "127.0.0.1",
        "PORT": "5432",
        "OPTIONS": {},
    }
    socket = database_from_url("postgres://postgres@/ownwords?host=/srv/var/pg%20data")
    assert (socket["HOST"], socket["PORT"], socket["NAME"]) == ("/srv/var/pg data", "", "ownwords")
    for url in ("postgres://postgres:p%40ss@127.0.0.1:5432/test", "postgres://postgres@/ownwords?host=/srv/var/pg%20data"):
        assert database_from_url(database_url(database_from_url(url))) == database_from_url(url)
    # SQLite is gone: one engine, PostgreSQL, everywhere.
    for bad in ("mysql://x/y", "postgres://host/", "sqlite:///var/x.sqlite3", "postgres://h/db?sslmode=x"):
        with pytest.raises(ConfigError):
            database_from_url(bad)


def run_settings(env):
    code = "import ownwords_site.settings as s; print(s.DEBUG)"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
        # The servers of this test run: settings would start the embedded ones without them.
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": os.environ["DATABASE_URL"],
             "REDIS_URL": os.environ["REDIS_URL"], **env}
    )


def test_secret_key_is_required_when_debug_is_off():
    result = run_settings({})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr
    assert run_settings({"SECRET_KEY": "k"}).stdout.strip() == "False"
    assert run_settings({"DEBUG": "1"}).stdout.strip() == "True"


def test_a_bad_database_url_stops_start_up():
    result = run_settings({"SECRET_KEY": "k", "DATABASE_URL": "oracle://x/y"})
    assert result.returncode != 0 and "the scheme must be postgres" in result.stderr


# --- a server many people share ------------------------------------------------------------------

import json  # noqa: E402
import re  # noqa: E402
import secrets  # noqa: E402

from ownwords_site.env import env_json, llm_endpoints  # noqa: E402


def test_a_wildcard_host_is_refused_outside_debug_unless_explicitly_allowed():
    refused = run_settings({"SECRET_KEY": "k", "ALLOWED_HOSTS": "*"})
    assert refused.returncode != 0 and "ALLOWED_HOSTS=* is refused when DEBUG is off" in refused.stderr
    assert run_settings({"SECRET_KEY": "k", "ALLOWED_HOSTS": "*", "ALLOW_ANY_HOST": "1"}).returncode == 0
    assert run_settings({"DEBUG": "1", "ALLOWED_HOSTS": "*"}).returncode == 0


def test_debug_with_the_built_in_key_warns_on_every_start():
    for _ in range(2):
        started = run_settings({"DEBUG": "1"})
        assert started.returncode == 0
        assert "SECRET_KEY is the built-in demo key" in started.stderr
    assert "built-in demo key" not in run_settings({"DEBUG": "1", "SECRET_KEY": "k"}).stderr
    # The demo key itself, given explicitly with DEBUG off, is no secret either.
    refused = run_settings({"SECRET_KEY": "insecure-local-demo-key-never-use-in-production"})
    assert refused.returncode != 0 and "built-in demo key" in refused.stderr


def test_the_https_switches(monkeypatch):
    code = ("import ownwords_site.settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, getattr(s, 'SECURE_PROXY_SSL_HEADER', None))")
    env = {"PATH": "/usr/bin:/bin", "SECRET_KEY": "k", "DATABASE_URL": os.environ["DATABASE_URL"],
           "REDIS_URL": os.environ["REDIS_URL"]}
    plain = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert plain.stdout.split() == ["False", "False", "False", "0", "None"]
    switched = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env={
        **env, "SECURE_COOKIES": "1", "SECURE_SSL_REDIRECT": "yes", "SECURE_HSTS_SECONDS": "600",
        "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto"})
    assert switched.stdout.strip() == "True True True 600 ('HTTP_X_FORWARDED_PROTO', 'https')"


def test_endpoints_come_inline_or_from_a_file_and_bad_lists_stop_start_up(monkeypatch, tmp_path):
    entries = [{"name": "lab", "provider": "openai", "url_prefix": "http://10.0.0.7:"}]
    monkeypatch.setenv("OWNWORDS_LLM_ENDPOINTS", json.dumps(entries))
    assert llm_endpoints(env_json("OWNWORDS_LLM_ENDPOINTS", [])) == entries
    path = tmp_path / "endpoints.json"
    path.write_text(json.dumps(entries))
    monkeypatch.setenv("OWNWORDS_LLM_ENDPOINTS", str(path))
    assert llm_endpoints(env_json("OWNWORDS_LLM_ENDPOINTS", [])) == entries
    monkeypatch.setenv("OWNWORDS_LLM_ENDPOINTS", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="neither inline JSON nor a readable file"):
        env_json("OWNWORDS_LLM_ENDPOINTS", [])
    for bad, message in [
        ({"name": "x"}, "must be a JSON list"),
        ([{"name": "a", "base_url": "https://a.example/v1"}, {"name": "a", "base_url": "https://b.example/v1"}],
         "used twice"),
        ([{"name": "a"}], "exactly one of base_url and url_prefix"),
        ([{"name": "a", "url_prefix": "https://a.example"}], "must end with ':' or '/'"),
        ([{"name": "a", "base_url": "https://user@a.example/v1"}], "may not contain user information"),
        ([{"name": "a", "base_url": "ftp://a.example/"}], "http:// or https://"),
        ([{"name": "a", "provider": "offline", "base_url": "https://a.example/"}], "has no URL"),
        ([{"name": "a", "base_url": "https://a.example/", "colour": "red"}], "unknown keys"),
    ]:
        with pytest.raises(ConfigError, match=message):
            llm_endpoints(bad)
    result = run_settings({"SECRET_KEY": "k", "OWNWORDS_LLM_ENDPOINTS": '[{"name": "x"}]'})
    assert result.returncode != 0 and "OWNWORDS_LLM_ENDPOINTS: endpoint 1 (x) needs exactly one" in result.stderr


def readme_block(language: str, after: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index(after):]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


def test_check_deploy_is_clean_in_the_documented_production_configuration(tmp_path):
    env = {"PATH": "/usr/bin:/bin"}
    for line in readme_block("env", "**Production.**").splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    assert env["DEBUG"] == "0" and env["SECRET_KEY"].startswith("<")
    env["SECRET_KEY"] = secrets.token_urlsafe(50)  # the placeholder says how to make one
    endpoints = tmp_path / "endpoints.json"
    endpoints.write_text(readme_block("json", "**Provider endpoints.**"))
    env["OWNWORDS_LLM_ENDPOINTS"] = str(endpoints)
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stderr + result.stdout
