"""The ready-made protocols of the evidence conditions end to end on the offline stand-in: `factorial`
(App. F, Table 15) and `dense-vs-bm25` (beyond the paper) are created in one step, sealed, run through
every phase, and their paper-report items (`analysis.report_items_conditions`) are rendered from the
run; Table 15 is also checked on a small hand-computed case."""
from types import SimpleNamespace

import numpy as np
import pytest

from experiments.analysis import report_items_conditions as items
from experiments.analysis.grades import GradeMatrix, final_grades
from experiments.core.paper_protocols import DENSE, FACTORIAL_CELLS
from experiments.core.report_table import Missing, ReportTable
from experiments.core.stats.paired import paired_bootstrap
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.protocol_templates import protocol_estimate, protocol_from_template
from experiments.execution.sealing import protocol_seal
from experiments.memory_systems import dense_embedder
from experiments.models import ModelCall, Prediction, Run
from tests.engine_helpers import build_cohort

needs_dense = pytest.mark.skipif(dense_embedder.unavailable_reason() is not None,
                                 reason=str(dense_embedder.unavailable_reason()))
CELLS = tuple(FACTORIAL_CELLS.values())  # memory/memory, memory/raw, excerpts/memory, excerpts/raw


def finished_run(project, template: str, *, sessions=3, targets=2):
    cohort = build_cohort(project, sessions=sessions, targets=targets, name=template)
    protocol, made = protocol_from_template(template=template, cohort=cohort)
    estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    return run, made, estimate


def test_the_factorial_runs_end_to_end_and_renders_table_15(project):
    assert isinstance(items.table15(project, []), Missing)
    assert items.table15(project, []).template == "factorial"
    run, made, estimate = finished_run(project, "factorial")
    assert made.conditions == list(CELLS) and not made.unavailable
    tasks = 6
    assert estimate == {"memories": 3, "generation": 4 * tasks, "decisions": 0, "judging": 4 * tasks}
    assert ModelCall.objects.filter(slot__run=run, slot__phase="generation").count() == 4 * tasks
    for key in CELLS:
        predictions = Prediction.objects.filter(run=run, condition=key)
        assert predictions.count() == tasks and all(p.evidence for p in predictions)
    by_task = {key: {p.task_id: p for p in Prediction.objects.filter(run=run, condition=key)} for key in CELLS}
    for task_id, one_shot in by_task[CELLS[0]].items():
        assert by_task[CELLS[1]][task_id].evidence == one_shot.evidence  # the same memory text
        assert by_task[CELLS[2]][task_id].evidence == by_task[CELLS[3]][task_id].evidence  # the same excerpts
        assert len(by_task[CELLS[3]][task_id].evidence) <= by_task[CELLS[3]][task_id].budget == len(one_shot.evidence)

    table = items.table15(project, [run])
    assert isinstance(table, ReportTable)
    assert table.inputs.runs == (run.pk,) and table.inputs.offline_runs == (run.pk,)
    assert table.inputs.seeds == (20260920,) and table.inputs.draws == 100_000
    assert table.inputs.cohorts == (run.protocol.cohort_id,)
    grades = final_grades(run)
    for row, key in zip(table.rows[:4], CELLS):
        assert row[3] == key and row[4] == pytest.approx(np.mean(list(grades[key].values())) / 3)
    names = [row[0] for row in table.rows[4:]]
    assert names[0].startswith("evidence") and names[1].startswith("header") and names[2].startswith("interaction")
    assert any("offline stand-in" in note for note in table.notes)
    assert any("answer_raw_user" in note and "written here" in note for note in table.notes)


def hand_matrix():
    # Four tasks of two people (7, 8); rows are the cells in FACTORIAL_CELLS order; task 4 misses one grade.
    grades = np.array([[1, 2, 0, 3],    # memory, memory header
                       [1, 1, 0, 3],    # memory, raw header
                       [2, 3, 1, np.nan],  # excerpts, memory header
                       [3, 2, 1, 3]])   # excerpts, raw header
    return GradeMatrix(CELLS, np.array([11, 12, 13, 14]), np.array([7, 7, 8, 8]), np.array([1, 1, 1, 1]), grades)


def test_table_15_on_a_hand_computed_case(monkeypatch):
    monkeypatch.setattr(items, "grade_matrix", lambda run, keys: hand_matrix())
    run = SimpleNamespace(pk=5, protocol=SimpleNamespace(
        kind="interview", conditions=list(CELLS), bootstrap={"seed": 3, "draws": 400}, cohort_id=9, seal={},
        generator={"provider": "openai"}, judge={"provider": "openai"}))
    table = items.table15(None, [run])
    # Tasks 11-13 are graded in all four cells (people 7, 7, 8): means (1+2+0)/9, (1+1+0)/9, (2+3+1)/9, (3+2+1)/9.
    assert [row[4] for row in table.rows[:4]] == pytest.approx([3 / 9, 2 / 9, 6 / 9, 6 / 9])
    assert [row[8:] for row in table.rows] == [(3, 2)] * 8
    # Per task, evidence = ((e,m) + (e,r) - (m,m) - (m,r)) / 2 / 3: (3, 2, 2) / 6 -> mean 7/18.
    # header = ((m,r) + (e,r) - (m,m) - (e,m)) / 2 / 3: (1, -2, 0) / 6 -> mean -1/18.
    # interaction = ((e,r) - (m,r) - (e,m) + (m,m)) / 3: (1, 0, 0) / 3 -> 1/9; excerpts raw - memory: (2, 0, 1) / 3 -> 1/3.
    assert [row[5] for row in table.rows[4:]] == pytest.approx([7 / 18, -1 / 18, 1 / 9, 1 / 3])
    interval = paired_bootstrap(np.array([7, 7, 8]), np.array([3, 2, 2]) / 6, seed=3, draws=400)
    assert table.rows[4][6:8] == (interval.lo, interval.hi)
    assert table.inputs.offline_runs == () and not any("stand-in" in note for note in table.notes)
    assert "3 tasks of 2 people graded in all four cells (1 of 4 planned tasks lost)" in table.notes[0]


@needs_dense
def test_dense_versus_bm25_runs_end_to_end_and_renders(project):
    assert items.dense_vs_bm25(project, []).template == "dense-vs-bm25"
    run, made, estimate = finished_run(project, "dense-vs-bm25")
    assert DENSE in made.conditions and not made.unavailable
    assert any(name.startswith("dense ranker sentence-transformers/all-MiniLM-L6-v2")
               for name in run.protocol.seal["prompts"])
    dense = {p.task_id: p for p in Prediction.objects.filter(run=run, condition=DENSE)}
    assert len(dense) == 6 and all(p.evidence and len(p.evidence) <= p.budget for p in dense.values())
    bm25 = {p.task_id: p.evidence for p in Prediction.objects.filter(run=run, condition="ownwords(B=|memory|)")}
    assert any(p.evidence != bm25[task_id] for task_id, p in dense.items())  # the rankers chose differently
    table = items.dense_vs_bm25(project, [run])
    assert isinstance(table, ReportTable)
    assert [row[3] for row in table.rows[:3]] == ["memory(concrete,100w)+one-shot", "ownwords(B=|memory|)", DENSE]
    assert [row[0] for row in table.rows[3:]] == ["dense − OwnWords (BM25)", "dense − memory", "OwnWords − memory"]
    assert table.rows[3][5] == pytest.approx(table.rows[2][4] - table.rows[1][4])
    assert table.inputs.seeds == (20260922,) and table.inputs.offline_runs == (run.pk,)
    assert table.notes[0].startswith("Not in the paper")
    assert any("The seal names the embedding model" in note for note in table.notes)


def test_the_factorials_dashboard_has_its_planned_contrasts_on_the_four_cell_set(project):
    from experiments.analysis.dashboard import dashboard_cached
    run, _, _ = finished_run(project, "factorial", sessions=2, targets=2)
    payload = dashboard_cached(run).payload
    rows = {row["name"].split(":")[0]: row for row in payload["contrasts"]}
    assert set(rows) == {"evidence", "header", "interaction", "excerpts, raw-evidence header − memory one-shot"}
    assert all(row["n_tasks"] == 4 and row["seed"] == 20260920 for row in rows.values())
    table = items.table15(project, [run])
    for name, row in zip(("evidence", "header", "interaction"), table.rows[4:7]):
        assert row[5] == pytest.approx(rows[name]["estimate"])  # the dashboard and the report agree


@needs_dense
def test_a_dense_protocol_sealed_here_says_so_where_its_embedder_is_missing(project, monkeypatch):
    from experiments.execution.sealing import seal_mismatches
    from tests.engine_helpers import make_protocol
    cohort = build_cohort(project, sessions=2, targets=1, name="dense-seal")
    offline = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
    protocol = protocol_seal(protocol=make_protocol(project, cohort, conditions=[DENSE], generator=offline), user=None)
    name = next(n for n in protocol.seal["prompts"] if n.startswith("dense ranker"))
    assert protocol.seal["prompts"][name] == dense_embedder.model_ref()[1]
    assert seal_mismatches(protocol, code=False) == []
    monkeypatch.setattr(dense_embedder, "REQUIRED_MODULES", ("no_such_module_c1",))
    problems = seal_mismatches(protocol, code=False)
    assert problems == [f"{DENSE} cannot run here: {dense_embedder.unavailable_reason()} "
                        "(the protocol was sealed where it could)"]
