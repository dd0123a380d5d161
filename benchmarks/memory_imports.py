"""Benchmark of memory imports on PostgreSQL: what sealing and planning cost when a
protocol imports the memories of an earlier run instead of writing them.

    .venv/bin/python benchmarks/memory_imports.py                  # database bench_memory_imports (dropped, rebuilt)
    SESSIONS=5000 .venv/bin/python benchmarks/memory_imports.py

Do not point it at real data: the database is dropped first. It imports SESSIONS synthetic
sessions (default 2,000; 10 substantive pairs each), draws them all into a cohort, plans the
memories of a first run (concrete and trait, 100 words) and fills them as if written, then seals a
second protocol importing that run and plans its memories phase. Printed: wall and CPU seconds of
the seal (the import digest: every session's writing request hashed) and of the planning (the
imported memories copied, no slot), and how many memories were imported and how many slots remain.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_memory_imports")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("SECRET_KEY", "benchmark-only")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
SESSIONS = int(os.environ.get("SESSIONS", 2_000))

name = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
for command in ("dropdb", "createdb"):
    subprocess.run([command, "-h", "127.0.0.1", "-U", "postgres", name], capture_output=True)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from experiments.core.interviews.records import ParsedSession, ParsedTurn  # noqa: E402
from experiments.core.slot_keys import parse_slot_key  # noqa: E402
from experiments.core.tasks import TaskRule  # noqa: E402
from experiments.data.sessions import cohort_draw, sessions_import  # noqa: E402
from experiments.execution.planning import plan_memories  # noqa: E402
from experiments.execution.sealing import protocol_seal  # noqa: E402
from experiments.models import Memory, Project, Protocol, Run, Slot  # noqa: E402
from experiments.models.runs import Phase  # noqa: E402

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
CONDITIONS = ["memory(concrete,100w)+one-shot", "memory(trait,100w)+one-shot"]


def timed(label, step):
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    print(f"{label}: {time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} s CPU")
    return result


def main():
    call_command("migrate", verbosity=0)
    project = Project.objects.create(slug="bench", name="bench")
    parsed = [
        ParsedSession(session_id=f"s{i:06d}", person_id=f"p{i:06d}", study_id=f"study{i % 4}", language="en",
                      screener=(("Age?", str(20 + i % 50)),), location=f"line {i + 1}",
                      turns=tuple(turn for k in range(10) for turn in (
                          ParsedTurn("interviewer", f"Could you tell me more about topic {k} of your work?"),
                          ParsedTurn("participant", f"Session {i} says that topic {k} matters because of the long "
                                                    "evenings I spend composing. It is a habit now."))))
        for i in range(SESSIONS)
    ]
    rule = TaskRule(min_pairs=10, min_targets=5, max_targets=5)
    sessions_import(project=project, parsed=parsed, source_format="jsonl", source_file="bench.jsonl", task_rule=rule)
    cohort = cohort_draw(project=project, name="all", size=SESSIONS, seed=1)
    first = protocol_seal(protocol=Protocol.objects.create(project=project, cohort=cohort, name="first",
                                                           conditions=CONDITIONS, generator=OFFLINE, judge=OFFLINE),
                          user=None)
    run = Run.objects.create(protocol=first, status=Run.Status.RUNNING)
    plan_memories(run)
    slots = list(Slot.objects.filter(run=run, phase=Phase.MEMORIES).values_list("pk", "key"))
    keys = [(pk, parse_slot_key(text)) for pk, text in slots]
    Memory.objects.bulk_create([Memory(run=run, session_id=key.session_id, kind=key.memory_kind,
                                       words=key.words, text=f"memory {pk}", slot_id=pk)
                                for pk, key in keys], batch_size=5000)
    Slot.objects.filter(run=run).update(status=Slot.Status.OK)
    Run.objects.filter(pk=run.pk).update(phase=Phase.GENERATION)
    print(f"{SESSIONS} sessions, {len(slots)} memories in the first run")

    second = Protocol.objects.create(project=project, cohort=cohort, name="second", conditions=CONDITIONS,
                                     generator=OFFLINE, judge=OFFLINE, memory_import_runs=[run.pk])
    second = timed("seal with the import digest", lambda: protocol_seal(protocol=second, user=None))
    reused = Run.objects.create(protocol=second, status=Run.Status.RUNNING)
    timed("plan the memories phase (imports copied)", lambda: plan_memories(reused))
    print(f"imported {Memory.objects.filter(run=reused, imported_from__isnull=False).count()} memories, "
          f"{Slot.objects.filter(run=reused).count()} memory slots left to send")
    plain = Protocol.objects.create(project=project, cohort=cohort, name="plain", conditions=CONDITIONS,
                                    generator=OFFLINE, judge=OFFLINE)
    timed("seal without imports (for comparison)", lambda: protocol_seal(protocol=plain, user=None))


if __name__ == "__main__":
    main()
