"""The tables a phase's planning fills have the planner's statistics once a part is planned, and a
generation answer's receipt then looks its candidates up through its task, whatever the run holds.

Without statistics (a fresh or just-planned table; this machine's PostgreSQL runs with autovacuum
off) every estimate is one row, the indexes tie, and the receipt's copied-label lookup
(`outcomes.result_statements`) walked the run's predictions in label order to find none: 120-140
buffers per generation receipt in the engine benchmark instead of 64, growing with the run.
`run_plan_part` gathers them after each part, `run_drive` after a phase it planned whole
(`statistics_sql.refresh_planned_statistics`). The lookup's buffers are read from EXPLAIN
(ANALYZE, BUFFERS) of the receipt's statement as the journal runs it, in a transaction rolled back,
after a thousand predictions of the same condition are added to the run's other tasks.
"""
import json
import math

import pytest
from django.db import connection, transaction

from experiments.execution.driver import run_drive, run_plan_part
from experiments.execution.slot_reads import slot_for_execution
from experiments.execution.outcomes import result_statements
from experiments.execution.statistics_sql import PLANNED_TABLES, refresh_planned_statistics
from experiments.models import Prediction, Project, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, build_cohort, make_run

pytestmark = pytest.mark.django_db
ADDED = 1000  # predictions of the same condition on the run's other tasks
LOOKUP_PAGES = 10  # an index descent and the task's few rows


def _scans_of(plan: dict, alias: str) -> list[dict]:
    found = [plan] if plan.get("Alias") == alias else []
    for child in plan.get("Plans", ()):
        found += _scans_of(child, alias)
    return found


def candidate_lookup_buffers(slot: Slot) -> int:
    """Shared buffers the receipt's copied-label lookup (the scan aliased `c`) touched."""
    *before, (answer, params) = result_statements(slot, "An answer.")
    ctes = "".join(f", result{i} AS ({sql})" for i, (sql, _) in enumerate(before))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) WITH moved AS (SELECT 1 AS id){ctes} {answer}",
                       [value for _, values in before for value in values] + params)
        plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    plan = json.loads(plan) if isinstance(plan, str) else plan
    scans = _scans_of(plan[0]["Plan"], "c")
    assert scans, "the statement has no candidate lookup"
    return sum(scan["Shared Hit Blocks"] + scan["Shared Read Blocks"] for scan in scans)


def statistics_missing() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s) AND reltuples < 0", [list(PLANNED_TABLES)])
        return sorted(name for (name,) in cursor.fetchall())


@pytest.fixture
def unanalyzed():
    """The planned tables as a fresh database has them: never analyzed (rolled back with the test)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE relname = ANY(%s)", [list(PLANNED_TABLES)])


def test_a_planned_part_leaves_statistics_and_the_lookup_reads_the_task_not_the_run(unanalyzed):
    project = Project.objects.create(slug="lookups", name="Lookups")
    run = make_run(project, build_cohort(project, sessions=30, targets=5, name="lookups"),
                   conditions=[QUESTION_ONLY], generator={"provider": "offline", "base_url": "", "model": "stand-in"})
    run_drive(run.pk, windowed=True)  # the first part, under the run's lock
    assert statistics_missing() == sorted(PLANNED_TABLES)
    run_plan_part(run.pk, windowed=True)  # the next part, as the lane's job plans it
    assert statistics_missing() == []
    slot = slot_for_execution(Slot.objects.filter(run=run, phase=Phase.GENERATION).order_by("pk").first().pk)
    assert candidate_lookup_buffers(slot) <= LOOKUP_PAGES
    others = list(Prediction.objects.filter(run=run).exclude(task_id=slot.task_id))
    labels_each = math.ceil(ADDED / len(others))
    Prediction.objects.bulk_create([
        Prediction(run=run, task_id=p.task_id, condition=p.condition, label=f"other-{i}", status=p.status)
        for p in others for i in range(labels_each)])
    assert Prediction.objects.filter(run=run, condition=QUESTION_ONLY).count() > ADDED
    # Walking the condition's predictions of the run read 249 buffers here.
    assert candidate_lookup_buffers(slot) <= LOOKUP_PAGES, "the lookup read the condition's predictions of the run"


def test_statistics_are_gathered_again_only_once_a_table_outgrew_them(unanalyzed):
    assert refresh_planned_statistics() == sorted(PLANNED_TABLES)  # never analyzed
    assert refresh_planned_statistics() == []  # nothing grew since


def test_a_phase_planned_whole_by_the_drive_leaves_statistics(unanalyzed):
    # 30 tasks: base generation is planned in one part by the drive, under the run's lock, and no
    # `run_plan_part` follows; the drive gathers them itself once its transaction is over.
    project = Project.objects.create(slug="whole", name="Whole")
    run = make_run(project, build_cohort(project, sessions=6, targets=5, name="whole"),
                   conditions=[QUESTION_ONLY], generator={"provider": "offline", "base_url": "", "model": "stand-in"})
    step = run_drive(run.pk, windowed=True)
    assert step.slot_ids and not step.plan_rest
    assert statistics_missing() == []
    assert run_drive(run.pk, windowed=True).seal_checked is False  # a later look plans nothing, so gathers nothing
