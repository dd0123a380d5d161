"""The SQL of the paper report's build lock (`paper_report_build`): one PostgreSQL advisory lock per
project, so two builds of one report never run at once (Rebuild clicked twice, or a queued job and
a request). Session-level, released in `finally`, so no transaction is held open for the build."""
from __future__ import annotations

from contextlib import contextmanager

from django.db import connection

# The two-key form (class, project id): the class keeps these locks apart from any other advisory lock.
_REPORT_LOCK_CLASS = 0x5250  # "RP"


@contextmanager
def report_build_lock(project_id: int, *, wait: bool):
    """Yields True while this session holds the project's lock; with `wait=False`, False at once
    when another build holds it (and nothing is held)."""
    with connection.cursor() as cursor:
        if wait:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [_REPORT_LOCK_CLASS, project_id])
            held = True
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_REPORT_LOCK_CLASS, project_id])
            held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_REPORT_LOCK_CLASS, project_id])
