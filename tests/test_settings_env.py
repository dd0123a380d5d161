"""Settings helpers fail loudly on bad values."""
import subprocess
import sys
from pathlib import Path

import pytest

from ownwords_site.env import ConfigError, database_from_url, env_bool, env_int, env_list

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


def test_database_urls(tmp_path):
    assert database_from_url("sqlite:///var/x.sqlite3", base_dir=tmp_path)["NAME"] == str(tmp_path / "var/x.sqlite3")
    assert database_from_url("sqlite:////abs/x.db", base_dir=tmp_path)["NAME"] == "/abs/x.db"
    pg = database_from_url("postgres://postgres:p%40ss@127.0.0.1:5432/test", base_dir=tmp_path)
    assert pg == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "test",
        "USER": "postgres",
        "PASSWORD": "p@ss",
        "HOST": "127.0.0.1",
        "PORT": "5432",
    }
    for bad in ("mysql://x/y", "postgres://host/", "sqlite://"):
        with pytest.raises(ConfigError):
            database_from_url(bad, base_dir=tmp_path)


def run_settings(env):
    code = "import ownwords_site.settings as s; print(s.DEBUG)"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True
    )


def test_secret_key_is_required_when_debug_is_off():
    result = run_settings({})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr
    assert run_settings({"SECRET_KEY": "k"}).stdout.strip() == "False"
    assert run_settings({"DEBUG": "1"}).stdout.strip() == "True"


def test_a_bad_database_url_stops_start_up():
    result = run_settings({"SECRET_KEY": "k", "DATABASE_URL": "oracle://x/y"})
    assert result.returncode != 0 and "scheme must be sqlite or postgres" in result.stderr
