"""PostgreSQL's CPU per engine call, from one backend: the journal's own statements, replayed in-process.

A run of `--tasks` tasks (question-only: one answer and one judge's grade per task) goes through its
generation and judging phases; every slot is reserved and received by the journal's real functions,
as a worker's slot thread calls them (`reservation.reserve_named_first`: the reservation's call insert
and slot update, and the slot's read, or `slot_reads.prepare` and `journal._reserve` with `read-first`; `journal._decide_and_record`: the receipt's one
statement, with the prediction of an answer or the grade of a judge). Nothing is sent: the answer
is made here. The backend serving this process is read from /proc/<pg_backend_pid()>/stat before
and after each phase: its user + system CPU per call is PostgreSQL's share of the engine's work for
a call, without the workers, Redis or the other helpers' load on a shared machine (CPU time, not
wall time). The Python side is not counted.

Variants alternate round by round on the same database, so that a shared machine's changing speed
falls on all of them alike:

- `now`: the triggers as the migrations leave them;
- `before`: the engine tables' triggers and indexes as they were before experiments 0035-0037 and
  annotations 0012-0013 (those migrations' reverse SQL, applied in this session, and their forward SQL
  again after); `before-tally` (0035), `before-epochs` (0012-0013), `before-index` (0036),
  `before-run-indexes` (0037): only those reverted;
- `read-first`: as `now`, each slot read before its reservation (as a job naming only its slot; the
  others are named as `jobs.slot_job_id` names them, read in their reservation);
- `untriggered`: every user trigger of the slot, call, prediction and grade tables disabled (ALTER
  TABLE ... DISABLE TRIGGER USER; the foreign keys' checks stay): what the triggers cost in all;
- `none`: no trigger at all, foreign keys' checks included (`session_replication_role = replica`);
- `off=<table>.<trigger>[+...]`: those triggers disabled for the round (enabled again after it): what each
  costs per call;
- `drop=<index>[+<index>...]`: those indexes dropped for the round (in this benchmark's database
  only) and created again after it, from their own definitions: what each costs per call;
- `ff=<table>:<percent>[+...]`: the table's fillfactor for the round (reset after): room on a page
  for an update that may be HOT. Only pages filled during the round leave it. Both may be joined
  with a comma: `drop=model_call_phase,ff=experiments_modelcall:80`.

    .venv/bin/python benchmarks/engine_statements.py --tasks 200 --rounds 6
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_pgtrig .venv/bin/python benchmarks/engine_statements.py

The database (default bench_engine_statements, created if missing) is emptied first; do not point it
at real data. The clock tick is 10 ms: a phase of 200 calls at ~1.5 ms is ~30 ticks, so rounds are
repeated and the median and spread printed.
"""
import argparse
import importlib
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_engine_statements")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("SECRET_KEY", "benchmark-only")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
os.environ.setdefault("OWNWORDS_LLM_ENDPOINTS",
                      '[{"name": "bench-local", "url_prefix": "http://127.0.0.1:"}, {"name": "offline", "provider": "offline"}]')

from page_setup import cpu_seconds, ensure_database  # noqa: E402

ensure_database(os.environ["DATABASE_URL"])

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from experiments.execution.driver import run_drive  # noqa: E402
from experiments.execution.journal import _decide_and_record  # noqa: E402
from experiments.execution.policy import sending_role  # noqa: E402
from experiments.models import Project, Slot  # noqa: E402
from tests.engine_helpers import QUESTION_ONLY, build_cohort, make_run, openai_model  # noqa: E402
from tests.llm_fake_server import running_fake_llm  # noqa: E402
from tests.receipt_helpers import _reserved  # noqa: E402

# The migrations whose reverse SQL gives the triggers as they were before them ("before").
CHANGES = {"tally": ["experiments.migrations.0035_tally_fewer_deltas"],
           "epochs": ["annotations.migrations.0012_results_epochs_row_filters",
                      "annotations.migrations.0013_results_epochs_bulk_predictions"],
           "index": ["experiments.migrations.0036_drop_model_call_finished"],
           "run-indexes": ["experiments.migrations.0037_drop_grade_tally_run_indexes"]}
# In the order they were applied ("before" reverses them all, last first).
APPLIED = [name for names in CHANGES.values() for name in names]
ENGINE_TABLES = ("experiments_slot", "experiments_modelcall", "experiments_prediction", "experiments_grade")


def backend_cpu_s() -> float:
    """user + system CPU of the PostgreSQL backend serving this process's connection (it has no children)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    return cpu_seconds([pid])


def _sql(statements) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _changes(variant: str) -> list:
    """The migrations whose reverse SQL makes the variant ("before", "before-tally", ...), in the order applied."""
    if not variant.startswith("before"):
        return []
    names = APPLIED if variant == "before" else CHANGES[variant.split("-", 1)[1]]
    return [importlib.import_module(name) for name in APPLIED if name in names]


def set_fillfactor(variant: str) -> None:
    """A `ff=` variant's fillfactors, set before the round's run is made (its slots and predictions
    are inserted then); `set_back` resets them."""
    for part in _parts(variant, "ff="):
        table, percent = part.split(":")
        _sql([f"ALTER TABLE {table} SET (fillfactor = {int(percent)})"])


_DROPPED = {}  # index name → its definition, while a `drop=` variant has it dropped


def _parts(variant: str, prefix: str) -> list:
    """The items of the variant's `drop=` or `ff=` part (a variant may join both with a comma)."""
    return [item for part in variant.split(",") if part.startswith(prefix)
            for item in part[len(prefix):].split("+")]


def set_variant(variant: str) -> None:
    """Put the triggers in the variant's state (DDL, committed at once; `set_back` undoes it)."""
    _sql(["SET session_replication_role = " + ("replica" if variant == "none" else "origin")])
    for name in _parts(variant, "drop="):
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
            _DROPPED[name] = cursor.fetchone()[0]
        _sql([f'DROP INDEX "{name}"'])
    if variant == "untriggered":
        _sql([f"ALTER TABLE {table} DISABLE TRIGGER USER" for table in ENGINE_TABLES])
    _sql([f"ALTER TABLE {item.split('.')[0]} DISABLE TRIGGER {item.split('.')[1]}" for item in _parts(variant, "off=")])
    for module in reversed(_changes(variant)):
        _sql(module.BACKWARD)


def set_back(variant: str) -> None:
    for name in _parts(variant, "drop="):
        _sql([_DROPPED.pop(name)])
    for part in _parts(variant, "ff="):
        _sql([f"ALTER TABLE {part.split(':')[0]} RESET (fillfactor)"])
    if variant == "untriggered":
        _sql([f"ALTER TABLE {table} ENABLE TRIGGER USER" for table in ENGINE_TABLES])
    _sql([f"ALTER TABLE {item.split('.')[0]} ENABLE TRIGGER {item.split('.')[1]}" for item in _parts(variant, "off=")])
    for module in _changes(variant):
        _sql(module.FORWARD)


def one_phase(slot_ids, named: tuple[int, str] | None = None) -> float:
    """The backend's CPU seconds for reserving and receiving these slots, one after another
    (`named`: run id and role, as a slot job names its slot; None: each slot read first)."""
    before = backend_cpu_s()
    for slot_id in slot_ids:
        policy, slot, reservation, outcome = _reserved(slot_id, "bench", named)
        _decide_and_record(policy, slot.run, slot, reservation, outcome)
    return backend_cpu_s() - before


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per run (calls per phase)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--variants", nargs="+", default=["before", "now", "untriggered"],
                        help="before, before-tally, before-epochs, before-index, before-run-indexes, now, "
                             "read-first, untriggered, none, drop=<index>[+<index>], ff=<table>:<percent>[+...]")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    project = Project.objects.create(slug="bench-statements", name="Engine statements")
    sessions = max(1, args.tasks // 10)
    cohort = build_cohort(project, sessions=sessions, targets=args.tasks // sessions, name="statements")
    variants = args.variants
    figures = {(v, phase): [] for v in variants for phase in ("generation", "judging")}
    with open("/proc/loadavg") as load:
        print(f"database {connection.settings_dict['NAME']}, PostgreSQL {connection.pg_version}; "
              f"{args.tasks} tasks; load {load.read().split()[:3]}")
    with running_fake_llm() as server:  # never asked: the answers are made here; its URL makes the protocol valid
        for round_number in range(args.rounds):
            order = variants if round_number % 2 == 0 else list(reversed(variants))
            for variant in order:
                set_fillfactor(variant)
                run = make_run(project, cohort, conditions=[QUESTION_ONLY], name=f"r{round_number}-v{variants.index(variant)}",
                               generator=openai_model(server), bootstrap={"draws": 10})
                set_variant(variant)
                spent = {}  # phase → [CPU seconds, calls] (the driver may hand a phase out in parts)
                try:
                    while (step := run_drive(run.pk)).slot_ids:
                        slot_ids = sorted(step.slot_ids)
                        phase = Slot.objects.get(pk=slot_ids[0]).phase
                        seconds, calls = spent.setdefault(phase, [0.0, 0])
                        named = None if variant == "read-first" else (run.pk, sending_role(phase))
                        spent[phase] = [seconds + one_phase(slot_ids, named), calls + len(slot_ids)]
                    for phase, (seconds, calls) in spent.items():
                        figures[(variant, phase)].append(seconds / calls * 1000)
                finally:
                    set_back(variant)
                    _sql(["SET session_replication_role = origin"])
            print(f"round {round_number + 1}: " + ", ".join(
                f"{v} {figures[(v, 'generation')][-1]:.2f}/{figures[(v, 'judging')][-1]:.2f}" for v in variants),
                flush=True)
    print("\nPostgreSQL backend CPU per call, ms (median [min-max] over rounds); generation answer / judge grade")
    for variant in variants:
        parts = []
        for phase in ("generation", "judging"):
            values = figures[(variant, phase)]
            parts.append(f"{phase} {statistics.median(values):.3f} [{min(values):.2f}-{max(values):.2f}]")
        both = [g + j for g, j in zip(figures[(variant, "generation")], figures[(variant, "judging")])]
        print(f"  {variant:13s} " + "; ".join(parts) + f"; mean of the two {statistics.median(both) / 2:.3f}")
    if "now" in variants:
        # A round's variants ran minutes apart; their difference within the round is steadier than
        # the medians on a machine whose speed drifts.
        print("\nPaired by round, the variant minus `now`, ms per call (median): generation / judging / mean")
        for variant in variants:
            if variant != "now":
                differences = [[a - b for a, b in zip(figures[(variant, phase)], figures[("now", phase)])]
                               for phase in ("generation", "judging")]
                print(f"  {variant:13s} {statistics.median(differences[0]):+.3f} / {statistics.median(differences[1]):+.3f}"
                      f" / {statistics.median([(g + j) / 2 for g, j in zip(*differences)]):+.3f}")
    with open("/proc/loadavg") as load:
        print(f"load {load.read().split()[:3]}")


if __name__ == "__main__":
    main()
