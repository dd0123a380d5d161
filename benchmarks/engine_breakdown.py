"""Where an engine benchmark run's time and writes go, per call: read from the database after the run.

`benchmarks/engine.py --levels` prints these under each level's figures:

- **a place's time** per call, from the calls' own rows (each reserved at `reserved_at`, sent for
  `elapsed_s`, its receipt begun at `finished_at`): the send beyond the server's L; the journal
  around the send (from the reservation's start to its send, and from the answer to the receipt's
  start: the reservation statement, the waits for the GIL and the CPU); and the places empty, split
  into the phase's first round (before K calls were first in flight at once), its steady middle,
  and its last round (after K were last in flight at once);
- **rows written** per call on the engine's tables (PostgreSQL's `pg_stat_user_tables` counters,
  read before and after the run: inserts, updates and how many of those were HOT, i.e. wrote no
  index entry);
- **the phases' middles**: the CPU per call of the workers, PostgreSQL's backends and Redis in the middle half
  of each phase (read every 0.25 s on a thread of the script, `CpuTimeline`), without the planning, the phase
  boundaries and each phase's first and last rounds: what a call costs once a run is under way;
- **WAL flushes** per call (PostgreSQL's `pg_stat_wal`, 14 and later: the whole server's, so on a shared
  server other databases' commits count too): how many times a commit made the WAL durable, and, where the
  server sets `track_wal_io_timing`, the wall time of each (the disk's fsync under the benchmark's load, which
  the committing backend and every backend whose commit waits for it spend asleep);
- **statements** per call, when the database has the `pg_stat_statements` extension and the server
  preloads it (`shared_preload_libraries`; this machine's shared server does not, so the script
  says so and goes on): each statement's calls, time inside PostgreSQL (wall time, waits included),
  shared buffers touched and WAL records and bytes written, per engine call.

The counters are the database's: they include the writes of any other client of the benchmark's
database during the run (there is none but the workers and this script). For the statements, a
private cluster beside the shared server will do (as postgres; the benchmark's CPU figures read
the backends of its database through `pg_stat_activity`, whichever server):

    /usr/lib/postgresql/15/bin/initdb -D /tmp/pg2/data -U postgres --auth=trust
    /usr/lib/postgresql/15/bin/pg_ctl -D /tmp/pg2/data -l /tmp/pg2/log start \
        -o "-p 5433 -k /tmp/pg2 -c shared_preload_libraries=pg_stat_statements -c autovacuum=off"
    createdb -h 127.0.0.1 -p 5433 -U postgres bench_engine
    psql -h 127.0.0.1 -p 5433 -U postgres -d bench_engine -c "CREATE EXTENSION pg_stat_statements"
    DATABASE_URL=postgres://postgres@127.0.0.1:5433/bench_engine .venv/bin/python benchmarks/engine.py --levels 32:0.2
"""
from __future__ import annotations

import re
import threading
import time
from itertools import accumulate, pairwise

from django.db import DatabaseError, connection

ENGINE_TABLES = ("experiments_slot", "experiments_modelcall", "experiments_prediction", "experiments_grade",
                 "experiments_taskgrades", "experiments_runtally")


def place_time(calls, cap: int, delay_s: float) -> dict[str, dict[str, float]]:
    """Per phase, ms per call: `send_extra` (a send beyond L), `around_send` (reservation start →
    send, and answer → receipt start), `idle_first`, `idle_steady`, `idle_last` (places with no call
    reserved, in the first round, the middle and the last round). `calls`: (phase, reserved_at,
    finished_at, elapsed_s) rows."""
    figures = {}
    for phase in sorted({row[0] for row in calls}):
        rows = [row for row in calls if row[0] == phase]
        n = len(rows)
        # Each reservation +1, each receipt −1, in time order (a receipt before a reservation at the same moment).
        events = sorted([(row[1], 1) for row in rows] + [(row[2], -1) for row in rows])
        in_flight = list(accumulate(step for _, step in events))  # after each event
        full = [when for (when, _), count in zip(events, in_flight) if count >= cap]
        first_full, last_full = (full[0], full[-1]) if full else (events[-1][0], events[-1][0])
        idle = {"first": 0.0, "steady": 0.0, "last": 0.0}
        for ((when, _), (following, _)), count in zip(pairwise(events), in_flight):
            empty = (cap - count) * (following - when).total_seconds()
            idle["first" if when < first_full else "last" if when >= last_full else "steady"] += empty
        busy = sum((row[2] - row[1]).total_seconds() for row in rows)
        sent = sum(row[3] for row in rows)
        figures[phase] = {"send_extra": (sent / n - delay_s) * 1000, "around_send": (busy - sent) / n * 1000,
                          **{f"idle_{part}": seconds / n * 1000 for part, seconds in idle.items()}}
    return figures


class CpuTimeline:
    """The CPU seconds of groups of processes (`read(pids)`), read every `every_s` seconds on a thread of
    this process while the block runs, so that a span of the run can be cut out of them afterwards."""

    def __init__(self, groups: dict[str, list[int]], read, every_s: float = 0.25):
        self.groups, self.read, self.every_s = groups, read, every_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="cpu-timeline")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            self.samples.append((time.time(), {name: self.read(pids) for name, pids in self.groups.items()}))
            if self._stop.wait(self.every_s):
                return

    def between(self, start: float, end: float) -> dict[str, float] | None:
        """Each group's CPU seconds from the last reading at or before `start` to the first at or after
        `end` (epoch seconds), or None when the readings do not cover the span."""
        before = [cpu for when, cpu in self.samples if when <= start]
        after = [cpu for when, cpu in self.samples if when >= end]
        if not before or not after:
            return None
        return {name: after[0][name] - before[-1][name] for name in self.groups}


def middle_cpu(timeline: CpuTimeline, spans: dict, calls) -> dict[str, dict[str, float]]:
    """Per phase, ms of CPU per call of each group in the middle half of the phase (`spans`: phase →
    its first reservation and last receipt), over the calls whose receipt fell in it. `calls`: rows
    that begin (phase, reserved_at, finished_at)."""
    figures = {}
    for phase, (first, last) in spans.items():
        start, end = first + (last - first) / 4, last - (last - first) / 4
        done = sum(1 for row in calls if row[0] == phase and start <= row[2] < end)
        cpu = timeline.between(start.timestamp(), end.timestamp())
        if cpu is not None and done:
            figures[phase] = {name: seconds / done * 1000 for name, seconds in cpu.items()}
    return figures


def table_counters() -> dict[str, tuple[int, int, int]]:
    """(inserts, updates, HOT updates) so far of each engine table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                       "WHERE relname = ANY(%s)", [list(ENGINE_TABLES)])
        return {name: (ins, upd, hot) for name, ins, upd, hot in cursor.fetchall()}


def rows_written(before: dict, after: dict, calls: int) -> str:
    """The engine tables' rows inserted and updated per call between two `table_counters` readings."""
    parts = []
    for table in ENGINE_TABLES:
        ins, upd, hot = (b - a for a, b in zip(before.get(table, (0, 0, 0)), after.get(table, (0, 0, 0))))
        if ins or upd:
            parts.append(f"{table.removeprefix('experiments_')} {ins / calls:.2f} ins {upd / calls:.2f} upd"
                         f" ({hot / calls:.2f} HOT)")
    return ", ".join(parts)


def wal_counters() -> tuple[int, float] | None:
    """(WAL syncs, their ms) so far on the server, or None before PostgreSQL 14 (no `pg_stat_wal`)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT wal_sync, wal_sync_time FROM pg_stat_wal")
            syncs, ms = cursor.fetchone()
    except DatabaseError:
        return None
    return int(syncs), float(ms)


def wal_flushes(before, after, calls: int) -> str:
    """WAL flushes per call between two `wal_counters` readings, and the ms of each when timed."""
    if before is None or after is None:
        return "pg_stat_wal is not available (PostgreSQL 14 and later)"
    syncs, ms = after[0] - before[0], after[1] - before[1]
    timed = (f", {ms / syncs:.2f} ms each (wall)" if ms > 0 and syncs
             else " (their time: set track_wal_io_timing on the server)")
    return f"{syncs / calls:.2f} per call{timed}; the whole server's"


def statements_reset() -> bool:
    """Empty `pg_stat_statements`, if it is there and loaded: True when it is."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'")
            if cursor.fetchone() is None:
                return False
            cursor.execute("SELECT pg_stat_statements_reset()")
        return True
    except DatabaseError:  # installed in the database, not preloaded by the server
        return False


def statement_costs(calls: int, top: int = 8) -> list[str]:
    """The benchmark database's statements that took most time inside PostgreSQL, per engine call."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT calls, total_exec_time + total_plan_time, shared_blks_hit + shared_blks_read, wal_records, "
            "wal_bytes, query FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) ORDER BY total_exec_time + total_plan_time DESC LIMIT %s", [top])
        rows = cursor.fetchall()
    return [f"{n / calls:5.2f}× {ms / calls:6.3f} ms {blocks / calls:6.1f} buffers {wal / calls:5.1f} WAL records "
            f"{int(wal_bytes) / calls:7.0f} B  {_name(query)}" for n, ms, blocks, wal, wal_bytes, query in rows]


def _name(query: str) -> str:
    """A statement's first words, enough to tell the receipt from the reservation."""
    text = re.sub(r"\s+", " ", query).strip()
    return text[:90] + ("…" if len(text) > 90 else "")
