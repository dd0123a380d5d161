"""One engine everywhere: PostgreSQL, embedded under var/ by default, never SQLite.

The code keeps no second implementation for another database: no `.vendor` branch anywhere, and the
embedded servers start, answer, are reused and stop cleanly, leaving no process behind."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import redis

from ownwords_site import embedded
from ownwords_site.env import database_from_url

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("experiments", "annotations", "ownwords_site", "benchmarks", "tests")
# A branch on the database's kind may come back only to test an old PostgreSQL version, named here
# with its reason (none today).
VENDOR_ALLOWED: set[str] = set()


def vendor_uses(root: Path = REPO) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr == "vendor":
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_database_vendor_branch_outside_the_allow_list():
    uses = [place for place in vendor_uses() if place.split(":")[0] not in VENDOR_ALLOWED]
    assert uses == [], f"a branch on the database's kind came back (one engine: PostgreSQL): {uses}"


def test_the_guard_sees_a_vendor_branch(tmp_path):
    """The scan above notices one (the check can fail)."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "branchy.py").write_text(
        "from django.db import connection\nif connection.vendor == 'sqlite':\n    pass\n")
    assert vendor_uses(tmp_path) == ["experiments/branchy.py:2"]


def test_sqlite_is_refused_by_the_settings():
    done = subprocess.run([sys.executable, "-c", "import ownwords_site.settings"], cwd=REPO, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "SECRET_KEY": "k",
                                          "DATABASE_URL": "sqlite:///var/x.sqlite3",
                                          "REDIS_URL": os.environ["REDIS_URL"]})
    assert done.returncode != 0 and "the scheme must be postgres" in done.stderr


def _server_processes(var_dir: Path) -> list[str]:
    """Command lines of the running PostgreSQL (its data directory under `var_dir`) and Redis (on the
    port kept under `var_dir`) of these embedded servers."""
    port_file = var_dir / "redis" / "port"
    redis_address = f"127.0.0.1:{port_file.read_text().strip()}" if port_file.exists() else None
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(var_dir) in command or (redis_address and "redis-server" in command and redis_address in command):
            found.append(command)
    return found


@pytest.mark.slow
def test_embedded_servers_start_answer_are_reused_and_stop(tmp_path):
    var_dir = tmp_path / "var"
    started_at = {}
    database = embedded.postgres_url(var_dir)
    address = embedded.redis_url(var_dir, db=3)
    settings = database_from_url(database)
    assert settings["HOST"].startswith(str(var_dir)) and settings["PORT"] == ""  # a socket, no TCP port
    with psycopg.connect(host=settings["HOST"], user="postgres", dbname=settings["NAME"]) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()[0]
        started_at["postgres"] = conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
    assert int(version) >= 180000
    client = redis.Redis.from_url(address)
    assert client.ping() and address.endswith("/3")
    client.set("kept", "1")
    # A second call reuses both servers: same addresses, same PostgreSQL start time.
    assert embedded.postgres_url(var_dir) == database and embedded.redis_url(var_dir, db=3) == address
    with psycopg.connect(host=settings["HOST"], user="postgres", dbname=settings["NAME"]) as conn:
        assert conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0] == started_at["postgres"]
    assert _server_processes(var_dir)
    client.close()

    assert embedded.main(["stop", str(var_dir)]) == 0
    assert not embedded.postgres_running(var_dir) and not embedded.redis_running(var_dir)
    assert _server_processes(var_dir) == []
    # Started again, they keep their data: the database and Redis's snapshot.
    assert embedded.postgres_url(var_dir) == database
    client = redis.Redis.from_url(embedded.redis_url(var_dir, db=3))
    assert client.get("kept") == b"1"
    client.close()
    embedded.main(["stop", str(var_dir)])
    assert _server_processes(var_dir) == []
