"""What the benchmarks share: a scratch PostgreSQL database, Django set up to serve its pages in this
process and COPY for their bulk rows (pages.py, run_page.py); a database made when missing
(`ensure_database`: engine.py, receipts.py, survey_app.py); a process's CPU time from /proc
(`cpu_seconds`: engine.py, engine_statements.py); the machine's speed just now
(`speed_check`: engine.py, lighthouse.py).

    from page_setup import REUSE, copy, django_on_scratch_database  # beside the script
    django_on_scratch_database("bench_pages")                      # before importing Django's modules

REUSE=1 keeps the database a previous run built (the scripts migrate it); otherwise it is dropped and
created again: do not point DATABASE_URL at real data.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REUSE = os.environ.get("REUSE") == "1"  # measure the database a previous run built (migrated first)


def django_on_scratch_database(default_name: str) -> None:
    """The environment's defaults (DATABASE_URL: database `default_name` on the local server), the
    database dropped and created again unless REUSE=1, then Django set up."""
    os.environ.setdefault("DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{default_name}")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/14")
    os.environ.setdefault("SECRET_KEY", "benchmark-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    name = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
    if not REUSE:
        for command in ("dropdb", "createdb"):
            subprocess.run([command, "-h", "127.0.0.1", "-U", "postgres", name], capture_output=True)

    import django
    from django.conf import settings

    django.setup()
    # The pages' {% static %} tags without a collectstatic run (production's storage reads its manifest).
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database `url` names when it does not exist (a host and port, or the
    embedded server's socket directory)."""
    import psycopg
    from psycopg import sql

    from ownwords_site.env import database_from_url

    target = database_from_url(url)
    with psycopg.connect(host=target["HOST"] or None, port=target["PORT"] or None, user=target["USER"] or "postgres",
                         password=target["PASSWORD"] or None, dbname="postgres", autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (target["NAME"],)).fetchone():
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(target["NAME"])))


def speed_check() -> float:
    """Seconds this machine takes for `sum(i*i for i in range(10**7))` just now: the speed check quoted
    beside the engine's figures (a shared machine's speed varies twofold within hours)."""
    started = time.perf_counter()
    sum(i * i for i in range(10**7))
    return time.perf_counter() - started


def cpu_seconds(pids) -> float:
    """user + system CPU time of these processes (Linux /proc), children that exited included."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def copy(table: str, columns: str, rows) -> None:
    """Write `rows` into `table` with COPY (what is measured is the reading, not the writing)."""
    from django.db import connection

    with connection.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as out:
        for row in rows:
            out.write_row(row)
