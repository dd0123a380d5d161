"""The README's two commands on a fresh clone with nothing configured, as a newcomer runs them.

    python3 tests/fresh_clone_check.py [PYTEST ARGS...]      (.ci/run runs it; takes a few minutes)

1. Clones this repository (its committed HEAD) into a temporary folder and runs `bin/setup-env`
   there (the one step that needs the package registry).
2. In a network namespace of its own (`unshare --net`, root), where only a loopback device exists
   and the machine's PostgreSQL and Redis cannot be reached, with no DATABASE_URL or REDIS_URL:
   - `bin/test -n 2` on the given slice of the suite (default below): it must pass, on the
     embedded PostgreSQL and Redis under the clone's var/;
   - `bin/demo`: the demo run must finish through the queue (two rq workers, not inline), the
     site must answer, and Ctrl-C (SIGINT to its process group, as a terminal sends) must stop
     the workers, the web server and both embedded servers;
   - `bin/demo` again: it reuses the data (no second import), and stops cleanly again.
Prints each step's time; exits non-zero at the first failure.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SLICE = ["tests/test_one_engine.py", "tests/test_settings_env.py",
                 "tests/test_engine_queue.py", "tests/test_engine_faults.py", "tests/test_concurrency_handover.py", "tests/test_task_grades.py",
                 "tests/test_paper_protocols.py", "tests/test_mem0.py", "tests/test_import_concurrent.py",
                 "tests/test_explorer.py"]
DEMO_READY_S = 600
STOP_S = 60


def say(text: str) -> None:
    print(f"[fresh clone] {text}", flush=True)


def isolated(command: str) -> list[str]:
    """`command` in a new network namespace with only its loopback up: the machine's servers on
    127.0.0.1:5432 and :6379 are out of reach, as on a newcomer's machine."""
    return ["unshare", "--net", "bash", "-c", f"ip link set lo up && {command}"]


def clean_env() -> dict:
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "REDIS_URL", "OWNWORDS_WITH_MEM0", "VIRTUAL_ENV", "PYTEST_XDIST_WORKER",
                          "DJANGO_SETTINGS_MODULE", "PYTEST_CURRENT_TEST")}
    return env


def server_processes(clone: Path) -> list[str]:
    """postgres, redis-server, rq workers and the web server started from the clone."""
    port_file = clone / "var" / "redis" / "port"
    redis_address = f"127.0.0.1:{port_file.read_text().strip()}" if port_file.exists() else None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if not command:
            continue  # a zombie
        if str(clone) in command or cwd.startswith(str(clone)) or (
                redis_address and "redis-server" in command and redis_address in command):
            found.append(f"{entry.name}: {command}")
    return found


def check_isolation() -> None:
    probe = ("python3 -c \"import socket,sys\n"
             "for port in (5432, 6379):\n"
             "    s = socket.socket(); s.settimeout(1)\n"
             "    sys.exit(1) if s.connect_ex(('127.0.0.1', port)) == 0 else None\"")
    done = subprocess.run(isolated(probe), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the isolated namespace still reaches a server on 5432 or 6379: {done.stderr}")
    say("isolated: 127.0.0.1:5432 and :6379 refuse connections inside the namespace")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_demo(clone: Path, env: dict, label: str) -> str:
    """bin/demo until the site answers; then Ctrl-C; returns its output. Checks what the demo did."""
    port = free_port()
    log = clone / "var" / f"demo-{label}.log"
    log.parent.mkdir(exist_ok=True)
    started = time.monotonic()
    # The namespace's shell `exec`s bin/demo, so that SIGINT to the process group reaches it as a
    # terminal's Ctrl-C would. A session of its own: the signal reaches nothing of ours.
    with open(log, "w") as out:
        demo = subprocess.Popen(isolated(f"PORT={port} exec bash bin/demo"), cwd=clone, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while "Open http://" not in log.read_text():
            if demo.poll() is not None:
                raise SystemExit(f"bin/demo ({label}) exited with {demo.returncode}:\n{log.read_text()[-4000:]}")
            if time.monotonic() - started > DEMO_READY_S:
                raise SystemExit(f"bin/demo ({label}) not ready after {DEMO_READY_S} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        ready = time.monotonic() - started
        # The web server listens in the demo's namespace: ask from inside it.
        in_namespace = ["nsenter", f"--net=/proc/{demo.pid}/ns/net"]
        answered = subprocess.run(
            [*in_namespace, "python3", "-c",
             # "Open http://..." is printed just before the web server starts listening.
             "import time, urllib.request\n"
             "for attempt in range(150):\n"
             "    try:\n"
             f"        print(urllib.request.urlopen('http://127.0.0.1:{port}/accounts/login/').status); break\n"
             "    except OSError:\n"
             "        time.sleep(0.2)\n"],
            capture_output=True, text=True)
        if answered.stdout.strip() != "200":
            raise SystemExit(f"the demo site did not answer 200: {answered.stdout} {answered.stderr}")
        # Served as production serves it: DEBUG off, so an unknown page is the site's own 404, never
        # Django's debug page with the URL list.
        missing = subprocess.run(
            [*in_namespace, "python3", "-c",
             "import urllib.error, urllib.request\n"
             "try:\n"
             f"    urllib.request.urlopen('http://127.0.0.1:{port}/no-such-page/')\n"
             "except urllib.error.HTTPError as e:\n"
             "    print(e.code, 'URLconf' in e.read().decode())\n"],
            capture_output=True, text=True)
        if missing.stdout.strip() != "404 False":
            raise SystemExit(f"the demo did not serve with DEBUG off: {missing.stdout} {missing.stderr}")
        runs = subprocess.run(
            [*in_namespace, ".venv/bin/python", "manage.py", "shell", "--no-imports", "-c",
             "from experiments.models import Run; "
             "print(sorted((r.status, r.inline) for r in Run.objects.filter(protocol__project__slug='demo')))"],
            cwd=clone, env={**env, "DATABASE_URL": demo_database_url(clone), "REDIS_URL": demo_redis_url(clone),
                            "DEBUG": "1"}, capture_output=True, text=True)
        if runs.returncode != 0 or "('finished', False)" not in runs.stdout or "True" in runs.stdout:
            raise SystemExit(f"the demo run did not finish through the queue: {runs.stdout} {runs.stderr}")
        say(f"bin/demo ({label}): site answered after {ready:.1f} s; demo runs (status, inline): {runs.stdout.strip()}")
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            raise SystemExit(f"bin/demo ({label}) did not stop within {STOP_S} s of Ctrl-C")
    deadline = time.monotonic() + 10
    while (left := server_processes(clone)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        raise SystemExit(f"after Ctrl-C these processes of bin/demo ({label}) remain: {left}")
    say(f"bin/demo ({label}): Ctrl-C stopped the workers, the web server, PostgreSQL and Redis")
    return log.read_text()


def demo_database_url(clone: Path) -> str:
    """The demo's database on the clone's embedded server (its socket is in the data directory)."""
    sys.path.insert(0, str(REPO))
    from ownwords_site.env import database_url
    return database_url({"USER": "postgres", "NAME": "ownwords", "HOST": str(clone / "var" / "pgdata")})


def demo_redis_url(clone: Path) -> str:
    redis_dir = clone / "var" / "redis"
    return (f"redis://:{(redis_dir / 'password').read_text().strip()}@127.0.0.1:"
            f"{(redis_dir / 'port').read_text().strip()}/0")


def main(pytest_args: list[str]) -> int:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise SystemExit("needs root and unshare (a network namespace where the machine's servers are absent)")
    check_isolation()
    work = Path(tempfile.mkdtemp(prefix="ownwords-fresh-"))
    clone = work / "ownwords"
    env = clean_env()
    try:
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        started = time.monotonic()
        subprocess.run(["bash", "bin/setup-env"], cwd=clone, env=env, check=True)
        say(f"bin/setup-env (the package registry, outside the namespace): {time.monotonic() - started:.0f} s")

        started = time.monotonic()
        tests = subprocess.run(isolated(f"bash bin/test -n 2 -q {' '.join(pytest_args or DEFAULT_SLICE)}"),
                               cwd=clone, env=env)
        say(f"bin/test -n 2 on the embedded servers: exit {tests.returncode} in {time.monotonic() - started:.0f} s")
        if tests.returncode != 0:
            return tests.returncode
        if left := server_processes(clone):
            raise SystemExit(f"bin/test left these processes running: {left}")
        say("bin/test stopped the embedded servers it started")

        first = run_demo(clone, env, "first")
        if "imported 125 sessions" not in first:
            raise SystemExit("the first bin/demo did not import the sample")
        block = first.split("Demo logins", 1)[-1]
        if not all(f"login: {name} /" in block for name in ("demo", "demo-viewer", "demo-rater-1", "demo-rater-2")):
            raise SystemExit(f"the first bin/demo did not print its logins in one block:\n{first[-3000:]}")
        if "demo ratings generated" not in first or "SECRET_KEY" in first:
            raise SystemExit(f"the first bin/demo made no demo ratings, or warned about its key:\n{first[-3000:]}")
        if "demo 'same content?' answers generated" not in first:
            raise SystemExit(f"the first bin/demo made no content-check campaign (its controls run through the "
                             f"queue):\n{first[-3000:]}")
        second = run_demo(clone, env, "second")
        if "sample data not imported again" not in second:
            raise SystemExit("the second bin/demo did not reuse the data")
        say("second bin/demo reused the data")
        return 0
    finally:
        for process in server_processes(clone):
            say(f"left over, killed: {process}")
            os.kill(int(process.split(":")[0]), signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
