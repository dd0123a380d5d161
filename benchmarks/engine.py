"""Engine throughput through the real queue: calls per second against the ideal.

A local LLM server (tests/llm_fake_server.py) answers every request after 200 ms; the
protocol's in-flight cap is 8, so no engine can do better than 8 / 0.2 s = 40 calls/s.
N `rqworker` processes serve the queues; a run of a few hundred slots (base generation
then judging, question-only, one answer and one judge call per task) goes through them.

Printed per configuration (worker class × number of workers):
- calls/s over the whole run (first reservation → run finished) and per phase, against 40/s;
- the overhead per call: 8 × wall / calls − 0.2 s (what each in-flight place spends on
  something other than the server's 200 ms), split into
    * in `send` beyond the server's delay (HTTP client and the fake server),
    * database work inside the reservation (reserve committed → outcome committed, minus send),
    * the place empty (between one attempt's outcome and the next reservation: the limiter,
      the queue, job start-up, the reservation's own transaction, the driver at phase ends).

Levels: `--levels 8:0.2 32:0.2 128:1` runs, for each K:L, a server answering after L
seconds and a protocol capping K requests in flight, served by `--processes` multi-slot workers
(`MultiSlotWorker`, ceil(K / processes) + `--spare` slots each), and prints throughput against
the ideal K / L and the CPU time per call of every process involved: the workers (their
scheduler included), the PostgreSQL backends of the benchmark's database and PostgreSQL's own
background processes, and Redis. Redis is a private `redis-server` the script starts (so no
other user's traffic is counted); `--shared-redis` uses REDIS_URL instead. Under each level,
`engine_breakdown` prints where a place's time went per call (the send beyond L, the journal
around the send, the places empty in each phase's first round, steady middle and last round), the
rows each engine table wrote per call, the WAL flushes per call, the CPU per call in the middle half of
each phase (a call's cost once the run is under way), and, where the server preloads `pg_stat_statements` and
the database has the extension, the statements that took most of PostgreSQL's time per call.

    .venv/bin/python benchmarks/engine.py --levels 8:0.2 32:0.2 128:1 --processes 4
    .venv/bin/python benchmarks/engine.py --slots 1000000 --first-request [--whole]  # first request of a large phase
    .venv/bin/python benchmarks/engine.py --slots 100000 --seal-check    # a phase boundary's seal check
    .venv/bin/python benchmarks/engine.py --starvation --analysis-seconds 60 --tasks 200 [--starvation-class multi]

Phases are sized by `--phase-seconds` (default 20 s at the ideal rate: 800 calls per phase at
K=8, 3,200 at K=32, 2,560 at K=128): each phase's last round leaves every place idle for about
L/2 (nothing left to send), which is 2.5 % of a 20 s phase at L = 1 s and must not dominate as it
did with 25 rounds (0.5-1.2 % per round of L). `--spare` 6 slots per process keep a few slot
threads waiting in each process, so a place freed by an answer goes to one of them.

What each change did, with the figures measured on this machine, is in `engine-results.md`
beside this script. The figures follow the machine: on 4 Dec 2026 (20:20 UTC) one 2-core machine
gave K=8 96.3-96.9 %, K=32 95.0-96.3 %, K=128 94.0-95.6 % of K/L over the whole run with 4.0-6.1
ms of CPU per call; another, whose speed varied twofold within hours, gave 94.5-95.3 %,
91.4-94.3 %, 92.6-94.5 % with 6.1-8.8 ms at its faster times (4-5 Dec, 23:48-00:45 UTC, the
code of commit bda90d4). Compare two versions only in runs taken together.

    createdb -h 127.0.0.1 -U postgres bench_engine     # once (the script also creates it)
    .venv/bin/python benchmarks/engine.py                        # PostgreSQL bench_engine, Redis db 14
    .venv/bin/python benchmarks/engine.py --workers 8 12 16 --classes simple fork --tasks 400

The database and Redis database 14 are emptied first; do not point them at real data.

The older per-configuration mode (`--workers`, `--classes`) compares worker classes at K=8
(`engine-results.md`: rq's forking Worker reaches 28 %; run workers with a SimpleWorker class).
"""
import argparse
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_engine")


def private_redis() -> subprocess.Popen | None:
    """A redis-server of the benchmark's own on a free port (its CPU is then the benchmark's alone)."""
    if "--shared-redis" in sys.argv or not shutil.which("redis-server"):
        return None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--loglevel", "warning"], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    return process


REDIS_PROCESS = private_redis()
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("SECRET_KEY", "benchmark-only")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
# The benchmark's model server is local: allow loopback endpoints for it (and its workers) only.
os.environ.setdefault("OWNWORDS_LLM_ENDPOINTS",
                      '[{"name": "bench-local", "url_prefix": "http://127.0.0.1:"}, {"name": "offline", "provider": "offline"}]')

DELAY_S = 0.2
CAP = 8
IDEAL = CAP / DELAY_S
QUEUES = ["default", "memories", "generation", "decisions", "judging", "analysis"]
WORKER_CLASSES = {"simple": "rq.worker.SimpleWorker", "fork": "rq.worker.Worker",
                  "resilient": "experiments.execution.workers.ResilientSimpleWorker",
                  "multi": "experiments.execution.workers.MultiSlotWorker"}


from engine_breakdown import (CpuTimeline, middle_cpu, place_time, rows_written, statement_costs,  # noqa: E402
                              statements_reset, table_counters, wal_counters, wal_flushes)
from page_setup import cpu_seconds, ensure_database, speed_check  # noqa: E402

ensure_database(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

import django_rq  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from rq import Worker  # noqa: E402
from rq.registry import StartedJobRegistry  # noqa: E402

from experiments.execution.jobs import run_enqueue
from experiments.models import ModelCall, Project, Run, Slot  # noqa: E402
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, make_run, openai_model  # noqa: E402
from tests.llm_fake_server import running_fake_llm  # noqa: E402


def pids_named(*names) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in names:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def family(pids) -> list[int]:
    """These processes and every process below them (a worker's scheduler)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = list(pids), list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def postgres_pids(shared: bool = False) -> list[int]:
    """The backends of the benchmark's database (its own work), or with `shared` PostgreSQL's
    background processes (WAL writer, checkpointer, …), which also work for every other database
    of a shared server: shown apart, not in the total."""
    with connection.cursor() as cursor:
        # Not this script's own backend: its polling for the run's end is not the engine's work.
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE "
                       + ("datname IS NULL" if shared else "datname = current_database() AND pid <> pg_backend_pid()"))
        return [pid for (pid,) in cursor.fetchall()]


def redis_pids() -> list[int]:
    return [REDIS_PROCESS.pid] if REDIS_PROCESS is not None else pids_named("redis-server")


def start_workers(n: int, worker_class: str, log_dir: Path, slots: int = 1) -> list[subprocess.Popen]:
    env = {**os.environ, "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1", "OWNWORDS_WORKER_SLOTS": str(slots)}
    processes = []
    for i in range(n):
        command = [sys.executable, "manage.py", "rqworker", *QUEUES, "--worker-class",
                   WORKER_CLASSES[worker_class], "--verbosity", "0"]
        if i == 0:
            command.append("--with-scheduler")
        log = open(log_dir / f"worker-{worker_class}-{i}.log", "wb")
        processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        log.close()
    redis = django_rq.get_connection("default")
    deadline = time.monotonic() + 60
    while len(Worker.all(connection=redis)) < n:
        if time.monotonic() > deadline:
            raise SystemExit("workers did not start; see " + str(log_dir))
        time.sleep(0.1)
    return processes


def stop_workers(processes) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(run: Run, cap: int = CAP, delay_s: float = DELAY_S, timeline: CpuTimeline | None = None) -> dict:
    calls = list(ModelCall.objects.filter(slot__run=run).values_list(
        "slot__phase", "reserved_at", "finished_at", "elapsed_s", "outcome"))
    assert all(outcome == "ok" for *_, outcome in calls), "every call should have succeeded"
    place = place_time([row[:4] for row in calls], cap, delay_s)
    start = min(c[1] for c in calls)
    end = run.finished_at
    wall = (end - start).total_seconds()
    send = sum(e for *_, e, _ in calls)
    n = len(calls)
    phases, spans = {}, {}
    for phase in ("generation", "judging"):
        rows = [c for c in calls if c[0] == phase]
        spans[phase] = (min(c[1] for c in rows), max(c[2] for c in rows))
        span = (spans[phase][1] - spans[phase][0]).total_seconds()
        phases[phase] = (len(rows), len(rows) / span)
    place_s = cap * wall / n  # time one in-flight place spends per call
    return {
        "calls": n, "wall": wall, "rate": n / wall, "phases": phases,
        "overhead_ms": (place_s - delay_s) * 1000,
        "send_extra_ms": (send / n - delay_s) * 1000,
        # Within the phases, each place's time not spent in a send (between an answer and the
        # next send: the journal's statements, the hand-over, a job's start; and each phase's
        # first and last round).
        "idle_ms": (cap * sum((b - a).total_seconds() for a, b in spans.values()) - send) / n * 1000,
        "median_send_ms": statistics.median(e for *_, e, _ in calls) * 1000,
        # between phases: the last answer recorded → the first judge call reserved (the driver
        # plans the judging and enqueues it); the last judge call → the run finished (analysis)
        "between_s": (spans["judging"][0] - spans["generation"][1]).total_seconds(),
        "tail_s": (end - spans["judging"][1]).total_seconds(),
        "place": place,
        # CPU per call in each phase's middle half, from the CPU read while the calls ran (`one_level`).
        "middles": middle_cpu(timeline, spans, calls) if timeline is not None else {},
    }


def wait_finished(run: Run, log_dir: Path) -> None:
    deadline = time.monotonic() + 600
    while True:
        run.refresh_from_db()
        if run.status == Run.Status.FINISHED:
            return
        if run.status != Run.Status.RUNNING or time.monotonic() > deadline:
            raise SystemExit(f"run {run.pk} is {run.status} ({run.status_reason}); see {log_dir}")
        time.sleep(0.05)


def wait_queues_idle(log_dir: Path) -> None:
    """Until no job waits on any queue or runs on any worker: a finished run's post-run work (its
    robustness tables, its project's paper report, on the analysis lane) is not the next run's."""
    redis = django_rq.get_connection("default")
    deadline = time.monotonic() + 600
    idle_since = None
    # Idle for a whole second: a job just popped is on no queue and not yet in its started registry.
    while idle_since is None or time.monotonic() - idle_since < 1.0:
        busy = any(django_rq.get_queue(name, connection=redis).count
                   or StartedJobRegistry(name, connection=redis).get_job_ids(cleanup=False) for name in QUEUES)
        idle_since = None if busy else (idle_since or time.monotonic())
        if time.monotonic() > deadline:
            raise SystemExit(f"the queues did not fall idle; see {log_dir}")
        time.sleep(0.05)


def wait_calls_done(run: Run, log_dir: Path) -> None:
    deadline = time.monotonic() + 600
    while Run.objects.filter(pk=run.pk, phase__in=("memories", "generation", "decisions", "judging"),
                             status=Run.Status.RUNNING).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run.pk} did not get through its calls; see {log_dir}")
        time.sleep(0.05)


def one_configuration(server, project, cohorts, n_workers: int, worker_class: str, log_dir: Path, index: int):
    def new_run(cohort, label):
        return make_run(project, cohort, conditions=[QUESTION_ONLY], name=f"bench-{label}-{index}",
                        generator=openai_model(server, timeout_s=10.0), concurrency={"openai": CAP},
                        bootstrap={"draws": 1000})

    warm_up, measured = new_run(cohorts[0], "warm-up"), new_run(cohorts[1], f"{worker_class}-{n_workers}")
    processes = start_workers(n_workers, worker_class, log_dir)
    try:
        # A short run first, so every worker has imported the engine and holds its connections:
        # the figures are a long run's steady state, not a worker's start-up.
        run_enqueue(warm_up.pk)
        wait_finished(warm_up, log_dir)
        wait_queues_idle(log_dir)  # measured from here: the warm-up's tables and report are built
        groups = {"workers": [p.pid for p in processes], "redis": pids_named("redis-server"),
                  "server+bench": [os.getpid()]}
        cpu_before = {name: cpu_seconds(pids) for name, pids in groups.items()}
        postgres_before = {pid: cpu_seconds([pid]) for pid in pids_named("postgres")}
        run_enqueue(measured.pk)
        wait_finished(measured, log_dir)
        cpu = {name: cpu_seconds(pids) - cpu_before[name] for name, pids in groups.items()}
        cpu["postgres (all)"] = sum(cpu_seconds([pid]) - postgres_before.get(pid, 0.0)
                                    for pid in pids_named("postgres"))
    finally:
        stop_workers(processes)
    assert not Slot.objects.filter(run=measured).exclude(status=Slot.Status.OK).exists()
    result = measure(measured)
    result["cpu_ms"] = {name: seconds / result["calls"] * 1000 for name, seconds in cpu.items()}
    return result


def one_level(server, project, cohorts, cap: int, delay_s: float, processes: int, slots: int, log_dir: Path,
              index: int, worker_class: str = "multi") -> dict:
    """K = cap requests in flight against a server answering after delay_s, served by
    `processes` multi-slot workers of `slots` slots each."""
    def new_run(cohort, label):
        return make_run(project, cohort, conditions=[QUESTION_ONLY], name=f"bench-{label}-{index}",
                        generator=openai_model(server, timeout_s=delay_s + 10.0), concurrency={"openai": cap},
                        bootstrap={"draws": 1000})

    server.default_delay_s = delay_s
    warm_up, measured = new_run(cohorts[0], "warm-up"), new_run(cohorts[1], f"K{cap}")
    workers = start_workers(processes, worker_class, log_dir, slots=slots)
    try:
        run_enqueue(warm_up.pk)
        wait_finished(warm_up, log_dir)
        wait_queues_idle(log_dir)  # measured from here: the warm-up's tables and report are built
        worker_pids = family([p.pid for p in workers])
        pg_before = {pid: cpu_seconds([pid]) for pid in postgres_pids()}
        groups = {"workers": worker_pids, "redis": redis_pids(), "server+bench": [os.getpid()],
                  "pg shared": postgres_pids(shared=True)}
        before = {name: {pid: cpu_seconds([pid]) for pid in pids} for name, pids in groups.items()}
        with_statements = statements_reset()
        counters = table_counters()
        wal_before = wal_counters()
        timeline = CpuTimeline({"workers": worker_pids, "postgres": list(pg_before), "redis": groups["redis"]},
                               cpu_seconds)
        with timeline:
            run_enqueue(measured.pk)
            # CPU is counted from the run's start until its last call is recorded (the phase moves on
            # to the analysis): both phases' calls and the planning between them, not the statistics.
            wait_calls_done(measured, log_dir)
        cpu = {name: sum(cpu_seconds([pid]) - before[name][pid] for pid in pids) for name, pids in groups.items()}
        cpu["postgres"] = sum(cpu_seconds([pid]) - pg_before.get(pid, 0.0) for pid in set(postgres_pids()) | set(pg_before))
        wal_after = wal_counters()  # over the same span as the CPU: the calls, not the analysis
        wait_finished(measured, log_dir)
    finally:
        stop_workers(workers)  # their backends exit and so report their last table counts
    assert not Slot.objects.filter(run=measured).exclude(status=Slot.Status.OK).exists()
    result = measure(measured, cap, delay_s, timeline)
    # The analysis's writes (after the calls) are counted here too: a few rows per run, not per call.
    result["rows"] = rows_written(counters, table_counters(), result["calls"])
    result["statements"] = statement_costs(result["calls"]) if with_statements else None
    result["wal"] = wal_flushes(wal_before, wal_after, result["calls"])
    result["cpu_ms"] = {name: seconds / result["calls"] * 1000 for name, seconds in cpu.items()}
    result["cpu_total_ms"] = sum(result["cpu_ms"][name] for name in ("workers", "postgres", "redis"))
    return result


def levels_main(args):
    redis = django_rq.get_connection("default")
    redis.flushdb()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    project = Project.objects.create(slug="bench-engine", name="Engine benchmark")
    log_dir = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    print(f"database: PostgreSQL {connection.pg_version} {connection.settings_dict['NAME']}; redis {os.environ['REDIS_URL']}"
          f"{' (private)' if REDIS_PROCESS else ''}; {args.processes} {WORKER_CLASSES[args.level_class]} processes")
    print(f"{'K':>4} {'L s':>5} {'slots':>5} {'calls':>5} {'wall s':>7} {'calls/s':>8} {'ideal':>6} {'of ideal':>8} "
          f"{'gen':>6} {'judge':>6} {'CPU ms/call':>11}  (workers / postgres / redis; model server and script)")
    summary = []
    index = 0
    try:
        with running_fake_llm() as server:
            Roles(server)
            for level in args.levels:
                cap_text, _, delay_text = level.partition(":")
                cap, delay_s = int(cap_text), float(delay_text or DELAY_S)
                ideal = cap / delay_s
                # Enough calls per phase for `--phase-seconds` at the ideal rate: each phase's last
                # round leaves places idle for about L/2 (nothing left to send), a cost that must be
                # small beside the phase, as it is in a real run of thousands of calls.
                tasks = cap * args.rounds if args.rounds else math.ceil(ideal * args.phase_seconds / 5) * 5
                slots = math.ceil(cap / args.processes) + args.spare
                # The warm-up run has a call for every slot thread of every worker, so each has
                # started and opened its database connection before the measured run.
                warm_sessions = max(2, math.ceil(args.processes * slots / 5))
                cohorts = [build_cohort(project, sessions=warm_sessions, targets=5, name=f"bench-warm-{cap}-{index}"),
                           build_cohort(project, sessions=tasks // 5, targets=5, name=f"bench-{cap}-{index}")]
                for _ in range(args.repeat):
                    index += 1
                    speed_before = speed_check()
                    m = one_level(server, project, cohorts, cap, delay_s, args.processes, slots, log_dir, index,
                                  args.level_class)
                    phase_rates = [m["phases"][p][1] / ideal for p in ("generation", "judging")]
                    cpu = m["cpu_ms"]
                    speed = f"speed check {speed_before:.2f} -> {speed_check():.2f} s"
                    print(f"{cap:>4} {delay_s:>5.2f} {slots:>5} {m['calls']:>5} {m['wall']:>7.2f} {m['rate']:>8.1f} "
                          f"{ideal:>6.0f} {m['rate'] / ideal:>8.1%} {phase_rates[0]:>6.1%} {phase_rates[1]:>6.1%} "
                          f"{m['cpu_total_ms']:>11.1f}  ({cpu['workers']:.1f} / {cpu['postgres']:.1f} / "
                          f"{cpu['redis']:.1f}; {cpu['server+bench']:.1f}; PostgreSQL's background "
                          f"processes {cpu['pg shared']:.1f}); {speed}", flush=True)
                    print(f"{'':>10} per call and place: send beyond L {m['send_extra_ms']:.1f} ms, place not "
                          f"sending within the phases {m['idle_ms']:.1f} ms; between phases {m['between_s']:.2f} s, "
                          f"analysis tail {m['tail_s']:.2f} s", flush=True)
                    for phase, part in m["place"].items():
                        print(f"{'':>10} {phase}, ms per call: send beyond L {part['send_extra']:.1f}, around the "
                              f"send {part['around_send']:.1f}, places empty {part['idle_first']:.1f} (first round) "
                              f"+ {part['idle_steady']:.1f} (steady) + {part['idle_last']:.1f} (last round)")
                    print(f"{'':>10} rows per call: {m['rows']}")
                    print(f"{'':>10} WAL flushes: {m['wal']}")
                    middles = ", ".join(f"{phase} {sum(part.values()):.1f} ({part['workers']:.1f} / "
                                        f"{part['postgres']:.1f} / {part['redis']:.1f})"
                                        for phase, part in m["middles"].items())
                    print(f"{'':>10} the phases' middle halves, CPU ms per call (workers / postgres / redis): "
                          f"{middles}")
                    if m["statements"] is None:
                        print(f"{'':>10} statements: pg_stat_statements is not loaded in this database's server")
                    for line in m["statements"] or ():
                        print(f"{'':>12}{line}")
                    summary.append((cap, delay_s, m["rate"] / ideal, phase_rates, m["cpu_total_ms"]))
    finally:
        redis.flushdb()
    print("of ideal = calls/s over the whole run (first reservation → run finished, both phases, the planning "
          "between them and the analysis) ÷ K/L; gen, judge = each phase's calls/s (first reservation → last "
          "outcome) ÷ K/L. CPU ms/call = user+system CPU of the workers (and their scheduler), the "
          "benchmark database's PostgreSQL backends and Redis from the run's start to its last call's "
          "record (both phases and the planning between them; not the analysis) ÷ its calls (the local "
          "model server with this script, and PostgreSQL's background processes shared with other "
          "databases, shown apart). speed check = seconds for sum(i*i for i in range(10**7)) before and after "
          "the level (the issue's machine: 0.61 s).")
    by_level: dict = {}
    for cap, delay_s, whole, phase, cpu in summary:
        by_level.setdefault((cap, delay_s), []).append((whole, phase, cpu))
    for (cap, delay_s), rows in by_level.items():
        wholes, phases_, cpus = zip(*rows)
        every_phase = [rate for rates in phases_ for rate in rates]
        print(f"K={cap} L={delay_s:g}s over {len(rows)} runs: of ideal best {max(wholes):.1%} median "
              f"{statistics.median(wholes):.1%} (phases: best {max(every_phase):.1%} median "
              f"{statistics.median(every_phase):.1%}); CPU ms/call best {min(cpus):.1f} "
              f"median {statistics.median(cpus):.1f}")


def big_cohort(project, tasks: int, base_sessions: int = 200):
    """A cohort of `tasks` tasks in a few seconds: a small cohort imported as usual, its tasks copied
    into task sets of their own (same sessions and turns, so the same prompts, each copy its own
    task and so its own slot) by two INSERT … SELECT statements, and its task list hashed as a
    seal hashes it."""
    from experiments.execution.kind_table import cohort_task_list_sha256
    from experiments.models import Cohort, Task, TaskSet

    base = build_cohort(project, sessions=base_sessions, targets=5, name="bench-first-base")
    base_set = base.task_set or Task.objects.filter(cohort_entries__cohort=base).first().task_set
    per_copy = base.cohort_tasks.count()
    copies = math.ceil(tasks / per_copy)
    sets = TaskSet.objects.bulk_create([
        TaskSet(project=project, min_pairs=base_set.min_pairs, min_targets=base_set.min_targets,
                max_targets=base_set.max_targets, derived_at=base_set.derived_at, fixed_list_sha256=f"bench-copy-{i}")
        for i in range(copies)])
    columns = [f.column for f in Task._meta.concrete_fields if f.column not in ("id", "task_set_id")]
    cohort = Cohort.objects.create(project=project, task_set=base_set, name=f"bench-first-{tasks}", seed=0,
                                   requested_size=tasks,
                                   rule={"benchmark": "copies of a small cohort"}, task_list_sha256="")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Task._meta.db_table} (task_set_id, {', '.join(columns)}) "
            f"SELECT s.id, {', '.join('t.' + c for c in columns)} FROM {Task._meta.db_table} t "
            f"JOIN {base.cohort_tasks.model._meta.db_table} ct ON ct.task_id = t.id AND ct.cohort_id = %s "
            f"CROSS JOIN unnest(%s::bigint[]) AS s(id)", [base.pk, [ts.pk for ts in sets]])
        cursor.execute(
            f"INSERT INTO {base.cohort_tasks.model._meta.db_table} (cohort_id, task_id, position) "
            f"SELECT %s, id, row_number() OVER (ORDER BY id) - 1 FROM {Task._meta.db_table} "
            f"WHERE task_set_id = ANY(%s::bigint[]) ORDER BY id LIMIT %s",
            [cohort.pk, [ts.pk for ts in sets], tasks])
        cursor.execute("ANALYZE")
    Cohort.objects.filter(pk=cohort.pk).update(task_list_sha256=cohort_task_list_sha256(cohort))  # (save refuses)
    return Cohort.objects.get(pk=cohort.pk)


def first_request_main(args):
    """`--slots N --first-request`: the time from a run's start to its first request, for a base
    generation phase of N slots (question-only: one slot per task), through one multi-slot worker;
    and, for comparison, the time the whole phase takes to plan at once (what the drive did under
    the run's lock before generation was planned in parts)."""
    from experiments.execution import driver, generation_parts
    from experiments.execution.planning import plan_generation

    redis = django_rq.get_connection("default")
    redis.flushdb()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    project = Project.objects.create(slug="bench-engine", name="Engine benchmark")
    log_dir = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    load = os.getloadavg()
    started = time.monotonic()
    cohort = big_cohort(project, args.slots)
    print(f"cohort of {cohort.cohort_tasks.count()} tasks built in {time.monotonic() - started:.1f} s "
          f"(load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})", flush=True)
    with running_fake_llm() as server:
        server.default_delay_s = DELAY_S
        Roles(server)
        processes = start_workers(1, "multi", log_dir, slots=8)
        try:
            started = time.monotonic()
            run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=openai_model(server),
                           concurrency={"openai": 8})
            sealed_s = time.monotonic() - started
            load = os.getloadavg()
            enqueued = time.time()
            run_enqueue(run.pk)
            deadline = time.monotonic() + 600
            first = None
            while first is None and time.monotonic() < deadline:
                first = ModelCall.objects.filter(slot__run=run).order_by("reserved_at").values_list(
                    "reserved_at", flat=True).first()
                time.sleep(0.05)
            if first is None:
                raise SystemExit("no request within 600 s; see " + str(log_dir))
            to_first = first.timestamp() - enqueued
            print(f"slots {args.slots}: first request {to_first:.2f} s after the run was enqueued "
                  f"(seal and start before it: {sealed_s:.1f} s; load average {load[0]:.2f} {load[1]:.2f} "
                  f"{load[2]:.2f}); first part {driver._first_part(run)} tasks, parts up to "
                  f"{generation_parts.PART_MAX}", flush=True)
            time.sleep(args.watch)
            planned = Slot.objects.filter(run=run, phase="generation").count()
            print(f"after {args.watch:.0f} s more: {planned} slots planned, "
                  f"{ModelCall.objects.filter(slot__run=run).count()} requests", flush=True)
        finally:
            stop_workers(processes)
    if args.whole:
        whole = make_run(project, cohort, name="bench-whole", conditions=[QUESTION_ONLY], generator=openai_model(server),
                         concurrency={"openai": 8})
        whole.phase = "generation"
        whole.save(update_fields=["phase"])
        load = os.getloadavg()
        started = time.monotonic()
        plan_generation(whole)
        print(f"the whole phase planned at once (before: under the run's lock, before any request): "
              f"{time.monotonic() - started:.1f} s (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})",
              flush=True)
    redis.flushdb()


def _median_ms(checks) -> float:
    return statistics.median(checks) * 1000


def _seal_checks(protocol, move, repeat: int) -> tuple[float, float]:
    """Median ms of a seal check with every hash stored, and after `move()` moved an epoch (the
    hash unchanged, computed again as every check did before the epochs)."""
    from experiments.execution.sealing import seal_mismatches

    stored, moved = [], []
    for _ in range(repeat):
        move()
        started = time.perf_counter()
        assert seal_mismatches(protocol, code=False) == []
        moved.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert seal_mismatches(protocol, code=False) == []
        stored.append(time.perf_counter() - started)
    return _median_ms(stored), _median_ms(moved)


def _importing_protocol(project, cohort, offline):
    """A sealed protocol importing every memory of its cohort's sessions from a source run past its
    memories phase (the memories and their slots written here, as the engine would have)."""
    from experiments.execution.memory_imports import memory_requests
    from experiments.execution.planning import task_inputs
    from experiments.execution.sealing import protocol_seal
    from experiments.data.sessions import cohort_tasks
    from experiments.models import Memory, Run, Slot
    from experiments.models.runs import Phase
    from tests.engine_helpers import ONE_SHOT, make_protocol

    source = Run.objects.create(protocol=protocol_seal(protocol=make_protocol(
        project, cohort, conditions=[ONE_SHOT], generator=offline, name="bench-memory-source"), user=None),
        phase=Phase.GENERATION)
    importing = make_protocol(project, cohort, conditions=[ONE_SHOT], generator=offline, name="bench-importing")
    importing.memory_import_runs = [source.pk]
    importing.save()
    first_task = {}
    for task in cohort_tasks(cohort):
        first_task.setdefault(task.session_id, task)
    inputs = task_inputs(list(first_task.values()))
    needed = memory_requests(importing, {sid: inputs[t.pk] for sid, t in first_task.items()})
    slots = Slot.objects.bulk_create([
        Slot(run=source, phase=Phase.MEMORIES, key=f"bench-memory|{sid}|{kind}|{words}", role=Slot.Role.GENERATOR,
             system="", user="", request_sha256=sha256, status=Slot.Status.OK)
        for (sid, kind, words), sha256 in needed.items()])
    Memory.objects.bulk_create([Memory(run=source, session_id=sid, kind=kind, words=words, slot=slot,
                                       text=f"what session {sid} says, in {words} words")
                                for ((sid, kind, words), _), slot in zip(needed.items(), slots)])
    importing = protocol_seal(protocol=importing, user=None)
    assert importing.seal["memory_imports"]["imported"] == len(needed) > 0
    return importing, source


def _survey_protocol(size: int, offline):
    """A sealed survey protocol over a sample of `size` respondents: the bundled synthetic sample
    imported, its respondents copied (their pids and personas numbered; the JSON blocks no hash reads
    left empty) into one sample. (Its list hashed by loading the respondents, as `survey_list_sha256`
    does, took 17 GB here at 100,000: the database hashes it, `sample_list_sha256_hashed_there`.)"""
    from experiments.core.survey.prompt import SCREENER_ONLY
    from experiments.execution.kind_table import sample_list_sha256_hashed_there
    from experiments.models import Cohort, SurveyRespondent, SurveySampleMember, SurveyStudy
    from tests.survey_helpers import SAMPLE

    project = Project.objects.create(slug="bench-survey", name="Survey seal benchmark")
    call_command("import_survey", str(SAMPLE), "--project", project.slug, "--name", "twin", "--synthetic",
                 stdout=open(os.devnull, "w"))
    study = SurveyStudy.objects.get(project=project)
    table, members = SurveyRespondent._meta.db_table, SurveySampleMember._meta.db_table
    copies = math.ceil(size / SurveyRespondent.objects.filter(study=study).count())
    cohort = Cohort.objects.create(project=project, task_set=None, name=f"bench-survey-{size}", seed=0,
                                   requested_size=size, rule={"kind": "survey sample", "study": study.name,
                                                              "sample": "benchmark"}, task_list_sha256="")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (study_id, pid, persona_text, persona_json, earlier_json, wave4_json, location) "
            f"SELECT study_id, pid || '-' || g, persona_text || ' ' || g, '{{}}', '{{}}', wave4_json, location "
            f"FROM {table} CROSS JOIN generate_series(1, %s) g WHERE study_id = %s", [copies, study.pk])
        cursor.execute(
            f"INSERT INTO {members} (cohort_id, respondent_id, position) SELECT %s, id, "
            f"row_number() OVER (ORDER BY id) - 1 FROM {table} WHERE study_id = %s AND pid LIKE '%%-%%' "
            f"ORDER BY id LIMIT %s", [cohort.pk, study.pk, size])
        cursor.execute("ANALYZE")
    Cohort.objects.filter(pk=cohort.pk).update(task_list_sha256=sample_list_sha256_hashed_there(cohort))
    cohort = Cohort.objects.get(pk=cohort.pk)
    return make_run(project, cohort, conditions=[SCREENER_ONLY], generator=offline).protocol, cohort


def seal_check_main(args):
    """`--slots N --seal-check`: a phase boundary's seal check, each hash read as stored (nothing it
    reads changed since: a row per hash) and after an epoch moved (a row written again unchanged:
    the hash computed again, as every check did before the epochs), of
    - an interview protocol over a cohort of N tasks (the task list hash);
    - a protocol over that cohort importing its sessions' memories from an earlier run (the task list
      hash and the imported memories' digest: every task's inputs, every memory and its request);
    - a survey protocol over a sample of N respondents (the respondent list hash)."""
    from django.db.models import F

    from experiments.models import Memory, SurveyRespondent, Task, Turn

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    project = Project.objects.create(slug="bench-engine", name="Engine benchmark")
    cohort = big_cohort(project, args.slots)
    offline = {"provider": "offline", "base_url": "", "model": "stand-in"}
    run = make_run(project, cohort, conditions=[QUESTION_ONLY], generator=offline)
    turn = Task.objects.filter(cohort_entries__cohort=cohort).values_list("question_turn_id", flat=True).first()
    stored, moved = _seal_checks(run.protocol, lambda: Turn.objects.filter(pk=turn).update(text=F("text")),
                                 args.repeat_checks)
    load = os.getloadavg()
    print(f"seal check at a phase boundary, {cohort.cohort_tasks.count()} tasks (median of {args.repeat_checks}; load "
          f"average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}): stored hash {stored:.1f} ms, "
          f"hashed again (the epoch moved; every check before) {moved:.1f} ms", flush=True)

    importing, source = _importing_protocol(project, cohort, offline)
    memory = Memory.objects.filter(run=source).values_list("pk", flat=True).first()
    stored, moved = _seal_checks(importing, lambda: Memory.objects.filter(pk=memory).update(text=F("text")),
                                 args.repeat_checks)
    load = os.getloadavg()
    print(f"  importing {importing.seal['memory_imports']['imported']} memories over the same {args.slots} tasks "
          f"(load average {load[0]:.2f}): stored hashes {stored:.1f} ms, the memories' digest computed again "
          f"(a source memory written again unchanged) {moved:.1f} ms", flush=True)

    survey, sample = _survey_protocol(args.slots, offline)
    respondent = sample.survey_members.values_list("respondent_id", flat=True).first()
    stored, moved = _seal_checks(
        survey, lambda: SurveyRespondent.objects.filter(pk=respondent).update(persona_text=F("persona_text")),
        args.repeat_checks)
    load = os.getloadavg()
    print(f"  a survey protocol over {sample.survey_members.count()} respondents (load average {load[0]:.2f}): "
          f"stored hash {stored:.1f} ms, the respondent list hashed again (a respondent written again "
          f"unchanged) {moved:.1f} ms", flush=True)


ANALYSIS_STANDIN = "tests.test_engine_lanes.long_analysis"  # a sleep on the analysis queue, named as such


def starvation_main(args):
    """One worker process of the class the pages print (`jobs.WORKER_COMMAND`: ResilientSimpleWorker with
    its analysis lane, one slot) or a MultiSlotWorker of --cap slots, no scheduler, K = --cap: a stand-in
    for a long analysis of another run (a sleep of --analysis-seconds on the analysis queue,
    `tests.test_engine_lanes.long_analysis`) starts first, then a run of --tasks question-only tasks
    (two phases, L = --delay). Prints how its calls went
    while the analysis held the lane: answers, rate against K/L, the longest wait between two answers."""
    redis = django_rq.get_connection("default")
    redis.flushdb()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    project = Project.objects.create(slug="bench-starvation", name="Starvation benchmark")
    cohort = build_cohort(project, sessions=max(1, args.tasks // 5), targets=5, name="bench-starvation")
    log_dir = Path(tempfile.mkdtemp(prefix="bench-starvation-"))
    print(f"database: PostgreSQL {connection.pg_version} {connection.settings_dict['NAME']}; "
          f"redis {os.environ['REDIS_URL']}")
    slots = args.cap if args.starvation_class == "multi" else 1
    print(f"one {WORKER_CLASSES[args.starvation_class]} process, {slots} slot(s), the run's K {args.cap}; "
          f"a {args.analysis_seconds:.0f} s stand-in "
          f"analysis of another run ({ANALYSIS_STANDIN}: a sleep) holds the analysis lane; the run: "
          f"{cohort.cohort_tasks.count()} tasks x 2 phases, server latency {args.delay * 1000:.0f} ms")
    processes = []
    try:
        with running_fake_llm() as server:
            server.default_delay_s = args.delay
            Roles(server)
            run = make_run(project, cohort, conditions=[QUESTION_ONLY], name="bench-starvation",
                           generator=openai_model(server, timeout_s=args.delay + 10.0),
                           concurrency={"openai": args.cap}, bootstrap={"draws": 1000})
            env = {**os.environ, "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1",
                   "OWNWORDS_WORKER_SLOTS": str(args.cap)}
            log = open(log_dir / "worker.log", "wb")
            processes.append(subprocess.Popen(
                [sys.executable, "manage.py", "rqworker", *QUEUES, "--worker-class",
                 WORKER_CLASSES[args.starvation_class], "--verbosity", "0"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            log.close()
            django_rq.get_queue("analysis").enqueue(ANALYSIS_STANDIN, args.analysis_seconds,
                                                   job_timeout=args.analysis_seconds + 60)
            deadline = time.monotonic() + 60
            while redis.get("test:lanes:analysis-started") is None:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the stand-in analysis did not start; see {log_dir}")
                time.sleep(0.05)
            analysis_started = float(redis.get("test:lanes:analysis-started"))
            enqueued = time.time()
            run_enqueue(run.pk)
            wait_calls_done(run, log_dir)
            calls_done = time.time()
            analysis_ended = redis.get("test:lanes:analysis-ended")
            wait_finished(run, log_dir)
    finally:
        stop_workers(processes)
        redis.flushdb()
    received = sorted(t.timestamp() for t in ModelCall.objects.filter(slot__run=run).values_list(
        "finished_at", flat=True))
    first = min(t.timestamp() for t in ModelCall.objects.filter(slot__run=run).values_list("reserved_at", flat=True))
    ended = float(analysis_ended) if analysis_ended is not None else received[-1]
    # What one process can carry: K/L with the multi-slot class, one slot (1/L) with the simple one.
    ideal = (args.cap if args.starvation_class == "multi" else 1) / args.delay
    print(f"first request {first - enqueued:.2f} s after the run was enqueued "
          f"({enqueued - analysis_started:.2f} s into the analysis); all calls done {calls_done - enqueued:.1f} s "
          f"after the enqueue; the most one process carries: {ideal:.0f} calls/s")
    for label, start, stop in (("while the analysis held the lane", first, min(ended, received[-1])),
                               ("after it ended", ended, received[-1])):
        inside = [t for t in received if start < t <= stop]
        if stop - start > 1 and inside:
            gaps = [b - a for a, b in zip([start, *inside], inside)]
            print(f"  {label}: {len(inside)} answers in {stop - start:.1f} s, {len(inside) / (stop - start):.1f} "
                  f"calls/s = {len(inside) / (stop - start) / ideal:.0%} of that; the longest wait between two "
                  f"answers {max(gaps):.2f} s")
    print(f"the run finished {run.finished_at.timestamp() - calls_done:.1f} s after its last call "
          f"(its own analysis waits for the lane, then runs)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[12, 16])
    parser.add_argument("--classes", nargs="+", choices=list(WORKER_CLASSES), default=["resilient"])
    parser.add_argument("--tasks", type=int, default=200, help="tasks in the cohort (two calls each)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--levels", nargs="+", metavar="K:L",
                        help="multi-slot mode: requests in flight K and server latency L (s), e.g. 8:0.2 32:0.2 128:1")
    parser.add_argument("--processes", type=int, default=4, help="multi-slot worker processes (with --levels)")
    parser.add_argument("--level-class", choices=list(WORKER_CLASSES), default="multi",
                        help="worker class with --levels (resilient: the single-slot workers of before multi-slot)")
    parser.add_argument("--spare", type=int, default=6, help="slots per worker beyond ceil(K / processes)")
    parser.add_argument("--phase-seconds", type=float, default=20.0,
                        help="calls per phase = K / L × this (with --levels): the ideal duration of each phase")
    parser.add_argument("--rounds", type=int, default=0,
                        help="calls per phase = rounds × K instead of --phase-seconds (with --levels)")
    parser.add_argument("--shared-redis", action="store_true", help="use REDIS_URL, not a private redis-server")
    parser.add_argument("--slots", type=int, default=0, help="with --first-request: slots of the generation phase")
    parser.add_argument("--first-request", action="store_true",
                        help="time from a run's start to the first request of a --slots generation phase")
    parser.add_argument("--whole", action="store_true", help="with --first-request: also time planning it at once")
    parser.add_argument("--watch", type=float, default=10.0, help="with --first-request: seconds to watch after")
    parser.add_argument("--seal-check", action="store_true",
                        help="time a phase boundary's seal check of a --slots task cohort, stored and hashed again")
    parser.add_argument("--repeat-checks", type=int, default=5, help="with --seal-check")
    parser.add_argument("--starvation", action="store_true",
                        help="one worker process, a long stand-in analysis of another run, a run's calls meanwhile")
    parser.add_argument("--analysis-seconds", type=float, default=60.0, help="with --starvation")
    parser.add_argument("--cap", type=int, default=8, help="with --starvation: requests in flight (K)")
    parser.add_argument("--starvation-class", choices=("resilient", "multi"), default="resilient",
                        help="with --starvation: the printed command's class (one slot) or the multi-slot one")
    parser.add_argument("--delay", type=float, default=0.2, help="with --starvation: server latency (L, s)")
    args = parser.parse_args()
    if args.starvation:
        return starvation_main(args)
    if args.seal_check:
        return seal_check_main(args)
    if args.first_request:
        return first_request_main(args)
    if args.levels:
        return levels_main(args)

    redis = django_rq.get_connection("default")
    redis.flushdb()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    project = Project.objects.create(slug="bench-engine", name="Engine benchmark")
    cohorts = [build_cohort(project, sessions=4, targets=5, name="bench-warm-up"),
               build_cohort(project, sessions=args.tasks // 5, targets=5, name="bench")]
    cohort = cohorts[1]
    log_dir = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    print(f"database: PostgreSQL {connection.pg_version} {connection.settings_dict['NAME']}; redis {os.environ['REDIS_URL']}")
    print(f"server delay {DELAY_S * 1000:.0f} ms, cap {CAP} in flight: ideal {IDEAL:.0f} calls/s; "
          f"{cohort.cohort_tasks.count()} tasks → {2 * cohort.cohort_tasks.count()} calls per run")
    print(f"{'workers':>16} {'calls':>5} {'wall s':>7} {'calls/s':>8} {'of ideal':>8} {'gen/s':>6} {'judge/s':>7} "
          f"{'overhead/call':>13} {'send+':>6} {'idle':>6} {'between':>7} {'tail':>5}")
    try:
        with running_fake_llm() as server:
            server.default_delay_s = DELAY_S
            Roles(server)
            index = 0
            for worker_class in args.classes:
                for n in args.workers:
                    for _ in range(args.repeat):
                        index += 1
                        m = one_configuration(server, project, cohorts, n, worker_class, log_dir, index)
                        print(f"{worker_class + ' × ' + str(n):>16} {m['calls']:>5} {m['wall']:>7.2f} "
                              f"{m['rate']:>8.1f} {m['rate'] / IDEAL:>8.0%} {m['phases']['generation'][1]:>6.1f} "
                              f"{m['phases']['judging'][1]:>7.1f} {m['overhead_ms']:>10.1f} ms "
                              f"{m['send_extra_ms']:>6.1f} {m['idle_ms']:>6.1f} "
                              f"{m['between_s']:>6.2f}s {m['tail_s']:>4.2f}s",
                              flush=True)
                        print(" " * 17 + "CPU per call: " + ", ".join(
                            f"{name} {ms:.1f} ms" for name, ms in m["cpu_ms"].items()), flush=True)
    finally:
        redis.flushdb()
    print("overhead/call = 8 × wall / calls − 200 ms; send+ = time in send beyond the server's 200 ms; "
          "idle = a place not sending within the phases (the journal's statements, the hand-over, job start, "
          "each phase's first and last round). All in ms per call. between = last answer → "
          "first judge call (the driver plans and enqueues the judging); tail = last judge call → run finished "
          "(analysis).")


if __name__ == "__main__":
    try:
        main()
    finally:
        if REDIS_PROCESS is not None:
            REDIS_PROCESS.terminate()
