"""Paper-report items across runs and from the registry (`analysis.report_items_cross_run`): Table 1,
Table 4, Table 16, Table 30 and Figure 3a on small hand-graded offline runs, checked against the
whole-person bootstrap and the registry's rules; Missing, with its template, when the runs are absent."""
import numpy as np
import pytest

from experiments.analysis import report_items_cross_run as items
from experiments.analysis.dashboard import dashboard_refresh
from experiments.core import cross_run_tables as shape
from experiments.core import information_matrix as info
from experiments.core.canonical import sha256_text
from experiments.core.conditions import CONDITIONS, FUSION, SELECTION
from experiments.core.kinds import inferred_kind
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.core.report_table import Missing, ReportFigure, ReportTable
from experiments.core.stats import paired_bootstrap
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.sealing import protocol_seal
from experiments.models import CohortTask, Grade, Memory, Prediction, Protocol, Run
from tests.engine_helpers import build_cohort

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
MEMORY, OWNWORDS, WHOLE = items.MEMORY, items.OWNWORDS, items.WHOLE_RECORD
MEMGPT, RECENCY, DIALOGUE, QUESTION = items.MEMGPT, "recency(B=|memory|)", "current-dialogue", "question-only"
SEED, DRAWS = 5, 400


def finished_run(project, cohort, grades: dict[str, list[int]], *, name, contrasts=(), generator=OFFLINE,
                 judge=OFFLINE) -> Run:
    """An offline run of `grades`' conditions, then each final answer given its own text and the
    hand-chosen grade (grades[condition][cohort position]), and the dashboard computed."""
    conditions = list(grades)
    protocol = Protocol.objects.create(
        project=project, name=name, cohort=cohort, conditions=conditions, kind=inferred_kind(conditions, regrade=False),
        generator=generator, judge=judge, contrasts=list(contrasts), bootstrap={"seed": SEED, "draws": DRAWS})
    run = Run.objects.create(protocol=protocol_seal(protocol=protocol, user=None))
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    Grade.objects.filter(run=run).delete()
    order = list(CohortTask.objects.filter(cohort=cohort).order_by("position").values_list("task_id", flat=True))
    for prediction in Prediction.objects.filter(run=run, label="final"):
        text = f"answer of {prediction.condition} to task {prediction.task_id}"
        prediction.text, prediction.answer_sha256, prediction.status = text, sha256_text(text), Prediction.Status.OK
        prediction.save(update_fields=["text", "answer_sha256", "status"])
        Grade.objects.create(run=run, task_id=prediction.task_id, answer_sha256=prediction.answer_sha256,
                             status=Grade.Status.OK, score=grades[prediction.condition][order.index(prediction.task_id)])
    dashboard_refresh(run)
    return run


def people(cohort) -> np.ndarray:
    return np.array(CohortTask.objects.filter(cohort=cohort).order_by("position")
                    .values_list("task__session__person_id", flat=True))


def expected(cohort, a: list[int], b: list[int]):
    """a − b by hand: the per-task differences /3 and the whole-person bootstrap at the run's seed."""
    diff = (np.array(a, float) - np.array(b, float)) / 3
    return paired_bootstrap(people(cohort), diff, seed=SEED, draws=DRAWS)


def column(table: ReportTable, name: str) -> list:
    return [row[table.columns.index(name)] for row in table.rows]


def runs_of(project):
    return list(Run.objects.filter(protocol__project=project, status=Run.Status.FINISHED).order_by("pk"))


# --- Table 1 ------------------------------------------------------------------------------------

TABLE1_GRADES = {MEMORY: [1, 2, 2, 1], OWNWORDS: [3, 2, 3, 1], MEMGPT: [3, 3, 3, 0], WHOLE: [3, 3, 3, 3]}


def test_table1_on_a_hand_graded_run(project):
    cohort = build_cohort(project, sessions=4, targets=1, name="comparison")
    run = finished_run(project, cohort, TABLE1_GRADES, name="systems", contrasts=[
        {"name": "OwnWords − memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": False, "criterion": None},
        {"name": "whole record − OwnWords", "terms": {WHOLE: 1, OWNWORDS: -1}, "family": False, "criterion": None}])
    table = items.table1(project, runs_of(project))
    assert isinstance(table, ReportTable)
    assert column(table, "Method") == ["OwnWords", "Written memory", "Mem0 as deployed", "MemGPT-style",
                                       "Whole record (no budget)"]
    # Calls per answer from the registry: the memory and MemGPT-style need the memory written (+1).
    assert column(table, "Calls per answer") == ["1", "1 (+1)", "1 (+1)", "2 (+1)", "1"]
    assert column(table, "Score") == pytest.approx([9 / 12, 6 / 12, None, 9 / 12, 1.0])
    # OwnWords − memory: planned, (2 + 0 + 1 + 0) / 3 / 4 = 0.25, the same interval as by hand.
    memory = expected(cohort, TABLE1_GRADES[OWNWORDS], TABLE1_GRADES[MEMORY])
    row = dict(zip(table.columns, table.rows[1]))
    assert (row["OwnWords − method"], row["95% lo"], row["95% hi"]) == (memory.estimate, memory.lo, memory.hi)
    assert memory.estimate == pytest.approx(0.25) and row["Tasks"] == 4
    assert row["Excludes 0"] == ("yes" if memory.lo > 0 else "no")
    # OwnWords − MemGPT-style: not planned, computed here at the run's seed and draws: (0 − 1 + 0 + 1) / 12 = 0.
    memgpt = expected(cohort, TABLE1_GRADES[OWNWORDS], TABLE1_GRADES[MEMGPT])
    row = dict(zip(table.columns, table.rows[3]))
    assert (row["OwnWords − method"], row["95% lo"], row["95% hi"]) == (memgpt.estimate, memgpt.lo, memgpt.hi)
    assert memgpt.estimate == 0 and row["Excludes 0"] == "no"
    # OwnWords − whole record: the planned whole record − OwnWords, negated (its interval's ends swap).
    whole = expected(cohort, TABLE1_GRADES[OWNWORDS], TABLE1_GRADES[WHOLE])
    row = dict(zip(table.columns, table.rows[4]))
    assert row["OwnWords − method"] == pytest.approx(-0.25)
    assert (row["95% lo"], row["95% hi"]) == pytest.approx((whole.lo, whole.hi), abs=1e-12)
    # Mem0 was not in the run: its row is empty and a note says so.
    assert table.rows[2][3:] == (None,) * 6 and any("Mem0 as deployed: not in run" in n for n in table.notes)
    # Context in units of B, from the stored evidence: the memory is B itself, OwnWords fits in B,
    # MemGPT-style shows the memory and excerpts (about 2B), the whole record its own length.
    context = dict(zip(column(table, "Method"), column(table, "Context (B)")))
    assert context["Written memory"] == pytest.approx(1.0)
    assert 0 < context["OwnWords"] <= 1.0 and context["MemGPT-style"] > 1.0
    b = {m.session_id: len(m.text) for m in Memory.objects.filter(run=run, kind="concrete", words=100)}
    whole_ratio = [p.evidence_chars / b[p.task.session_id]
                   for p in Prediction.objects.filter(run=run, condition=WHOLE, label="final").select_related("task")]
    assert len(whole_ratio) == 4 and context["Whole record (no budget)"] == pytest.approx(np.mean(whole_ratio))
    assert table.inputs.runs == (run.pk,) and table.inputs.offline_runs == (run.pk,)
    assert table.inputs.seeds == (SEED,) and table.inputs.draws == DRAWS
    assert f"Offline stand-in: run {run.pk} was answered" in " ".join(table.notes)
    assert f"{run.protocol.cohort.name}: 4 people, 4 tasks" in table.notes[0]
    # A grade changed after the dashboard was computed: the builder says so instead of reading stale numbers.
    Grade.objects.filter(run=run).update(score=0)
    stale = items.table1(project, runs_of(project))
    assert isinstance(stale, Missing) and f"run {run.pk}'s dashboard is not computed" in stale.reason


def test_table1_table16_and_table30_say_what_is_missing(project):
    for builder, template in ((items.table1, "memory-systems"), (items.table16, "memory-systems"),
                              (items.table30, "history-benchmark"), (items.figure3a, "history-benchmark")):
        missing = builder(project, [])
        assert isinstance(missing, Missing) and missing.template == template
    # A run without OwnWords does not feed Table 1; one generator alone does not make Table 30.
    cohort = build_cohort(project, sessions=2, targets=1, name="one")
    finished_run(project, cohort, {MEMORY: [1, 2], DIALOGUE: [2, 2], QUESTION: [0, 1]}, name="single")
    assert items.table1(project, runs_of(project)).template == "memory-systems"
    lonely = items.table30(project, runs_of(project))
    assert isinstance(lonely, Missing) and "differ only in the generator" in lonely.reason


# --- Table 4 ------------------------------------------------------------------------------------

MEMORY_SHOWN = {"memory", "memory+ownwords", "memory+whole-record", "memgpt-style", "memory@raw-header"}
EXCERPTS = {"ownwords", "recency", "question-free", "memory+ownwords", "memgpt-style", "dense",
            "question-free@memory-header"}


def test_table4_is_the_registry_read_by_its_rules(project):
    table = items.table4(project, [])
    assert isinstance(table, ReportTable) and table.inputs.runs == ()
    assert "No condition receives the reference answer (only the judge does)." in table.notes
    keys = column(table, "Condition")
    assert sorted(keys) == sorted(CONDITIONS)                       # every registered condition, once
    common = list(PAPER_PROTOCOLS["common"].conditions)
    assert keys[:len(common)] == common                             # the paper's common experiment first
    paper = {k for t in PAPER_PROTOCOLS.values() for k in t.conditions}
    assert all(k in paper for k in keys[:len(paper)])               # then the other templates' conditions
    for row in table.rows:
        cell = dict(zip(table.columns, row))
        condition = CONDITIONS[cell["Condition"]]
        classified = condition.evidence in info.EVIDENCE_SEES
        assert cell["Screener"] == ("yes" if condition.with_screener else "no")
        assert cell["Question"] == "yes" and cell["Reference answer"] == "no"
        assert cell["Another person's data"] == ("no" if classified else info.NOT_CLASSIFIED)
        if not classified:
            continue
        shown = condition.evidence in MEMORY_SHOWN
        assert (cell["Memory text"] == f"{condition.memory_kind} memory, {condition.memory_words}w") == shown
        assert (cell["Memory text"] != "no") == (shown or condition.evidence == "mem0")
        assert (cell["Verbatim excerpts"] != "no") == (condition.evidence in EXCERPTS)
        if condition.evidence in EXCERPTS:
            assert cell["Verbatim excerpts"].startswith(f"≤ {info.budget_label(condition)}, ")
        assert (cell["Whole record"] != "no") == (condition.evidence in ("whole-record", "memory+whole-record"))
        assert (cell["Current dialogue"] != "no") == (condition.evidence == "current-dialogue")
        if condition.workflow in (FUSION, SELECTION):
            assert cell["Earlier model output"] == "3 candidate answers"
        elif condition.workflow == "one-shot" and condition.evidence != "memgpt-style":
            assert cell["Earlier model output"] == "no"
    rows = {row[0]: dict(zip(table.columns, row)) for row in table.rows}
    assert rows["question-only"]["Screener"] == "no" and rows["screener-only"]["Screener"] == "yes"
    assert rows["ownwords(B=|memory|)"]["Verbatim excerpts"] == "≤ B, BM25 on the question"
    assert rows["ownwords(B=|memory(concrete,50w)|)"]["Verbatim excerpts"].startswith("≤ |concrete memory, 50w|")
    assert rows["mem0(B=|memory|)"]["Memory text"] == "Mem0's stored memories, ≤ B"
    calls = {key: info.calls_per_answer(CONDITIONS[key]) for key in CONDITIONS}
    assert calls["memory(concrete,100w)+one-shot"] == "1 (+1)" and calls["memory(trait,100w)+fusion(3)"] == "4 (+1)"
    assert calls["ownwords(B=|memory|)"] == calls["whole-record"] == calls["question-only"] == "1"
    assert calls["mem0(B=|memory|)"] == "1 (+1)" and calls["memgpt-style(B=|memory|)"] == "2 (+1)"


def test_table4_does_not_guess_an_unknown_evidence(monkeypatch):
    import dataclasses
    stub = dataclasses.replace(CONDITIONS[OWNWORDS], key="novel(B=|memory|)", evidence="novel")
    monkeypatch.setitem(CONDITIONS, stub.key, stub)
    row = dict(zip(info.COLUMNS, info.sees_row(stub)))
    assert row["Screener"] == row["Question"] == "yes"               # read from its prompt's fields
    assert row["Verbatim excerpts"] == row["Another person's data"] == info.NOT_CLASSIFIED
    assert info.information_rows()[-1][0] == "novel(B=|memory|)"      # after the paper's conditions
    notes = " ".join(items.table4(None, []).notes)
    assert "No condition receives another person's data" not in notes and info.NOT_CLASSIFIED in notes


# --- Table 16 -----------------------------------------------------------------------------------

def test_table16_pivots_designs_by_cohort(project):
    first = build_cohort(project, sessions=4, targets=1, name="first")
    second = build_cohort(project, sessions=3, targets=1, name="second")
    a = {MEMORY: [0, 1, 1, 2], OWNWORDS: [3, 3, 3, 2], WHOLE: [3, 3, 3, 3]}
    b = {MEMORY: [2, 2, 1], OWNWORDS: [2, 2, 2], RECENCY: [1, 3, 2]}
    run_a = finished_run(project, first, a, name="confirmation", contrasts=[
        {"name": "OwnWords − memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": False, "criterion": None}])
    run_b = finished_run(project, second, b, name="procedures")
    table = items.table16(project, runs_of(project))
    assert isinstance(table, ReportTable)
    assert table.columns == ("Design", "Length (B)", "Calls", "first (4 people)", "first (4 people): excludes 0",
                             "second (3 people)", "second (3 people): excludes 0")
    rows = {row[0]: row for row in table.rows}
    assert list(rows) == [label for label, _ in items.TABLE16_DESIGNS]
    memory_a, memory_b = expected(first, a[OWNWORDS], a[MEMORY]), expected(second, b[OWNWORDS], b[MEMORY])
    assert rows["Written memory"][3] == memory_a.estimate == pytest.approx(7 / 12)
    assert rows["Written memory"][4] == ("yes" if memory_a.lo > 0 or memory_a.hi < 0 else "no")
    assert rows["Written memory"][5] == memory_b.estimate == pytest.approx(1 / 9)
    recency = expected(second, b[OWNWORDS], b[RECENCY])
    assert rows["Most recent sentences †"][3:] == ("–", "–", recency.estimate,
                                                   "yes" if recency.lo > 0 or recency.hi < 0 else "no")
    assert recency.estimate == pytest.approx(0.0)
    gap = expected(first, a[OWNWORDS], a[WHOLE])                    # −Gap(B): OwnWords − whole record
    assert rows["No budget: whole record (−Gap(B))"][3] == pytest.approx(gap.estimate)
    assert gap.estimate == pytest.approx(-1 / 12) and rows["No budget: whole record (−Gap(B))"][5] == "–"
    assert rows["Mem0 as deployed"][3:] == ("–",) * 4
    assert rows["Written memory"][1] == pytest.approx(1.0) and rows["Written memory"][2] == "1 (+1)"
    assert rows["Most recent sentences †"][2] == "1" and 0 < rows["Most recent sentences †"][1] <= 1
    assert table.inputs.runs == (run_a.pk, run_b.pk) and table.inputs.cohorts == (first.pk, second.pk)
    assert any(f"run {run_b.pk} (computed)" in note for note in table.notes)
    assert any(f"run {run_a.pk} (planned)" in note for note in table.notes)


# --- Table 30 and Figure 3a ---------------------------------------------------------------------

def test_table30_and_figure3a_compare_runs_that_differ_only_in_the_generator(project):
    cohort = build_cohort(project, sessions=4, targets=1, name="history")
    grades = {
        "gen-a": {DIALOGUE: [3, 2, 2, 1], QUESTION: [1, 1, 2, 0]},
        "gen-b": {DIALOGUE: [2, 2, 3, 3], QUESTION: [2, 2, 0, 1]},
    }
    runs = {name: finished_run(project, cohort, g, name=name, generator={**OFFLINE, "model": name})
            for name, g in grades.items()}
    # Another judge: not the same comparison, left out although its generator differs too.
    finished_run(project, cohort, grades["gen-a"], name="other-judge", generator={**OFFLINE, "model": "gen-c"},
                 judge={**OFFLINE, "model": "judge-2"})
    figure = items.figure3a(project, runs_of(project))
    assert isinstance(figure, ReportFigure)
    table = figure.table
    assert column(table, "Run") == [runs["gen-a"].pk, runs["gen-b"].pk]
    assert column(table, "Generator") == ["gen-a (offline)", "gen-b (offline)"]
    for name, row in zip(("gen-a", "gen-b"), table.rows):
        cell = dict(zip(table.columns, row))
        hand = expected(cohort, grades[name][DIALOGUE], grades[name][QUESTION])
        assert (cell["History − question"], cell["95% lo"], cell["95% hi"]) == (hand.estimate, hand.lo, hand.hi)
        assert cell["History"] == pytest.approx(np.mean(grades[name][DIALOGUE]) / 3)
        assert cell["Question alone"] == pytest.approx(np.mean(grades[name][QUESTION]) / 3)
        assert cell["Tasks"] == 4 and cell["People"] == 4
    assert column(table, "History − question") == pytest.approx([4 / 12, 5 / 12])
    bars = figure.figure["data"][0]
    assert bars["x"] == column(table, "Generator") and bars["y"] == column(table, "History − question")
    assert bars["error_y"]["array"] == pytest.approx([r[6] - r[4] for r in table.rows])
    assert table.inputs.runs == (runs["gen-a"].pk, runs["gen-b"].pk) and table.inputs.seeds == (SEED,)
    assert items.table30(project, runs_of(project)).rows == table.rows


def test_generator_groups_ignore_pacing_and_need_two_generators():
    base = {"cohort": 1, "judge": {"model": "j"}, "conditions": ["a", "b"]}
    runs = [{"run": 1, "settings": {**base, "concurrency": {"x": 1}}, "generator": {"model": "g1"}},
            {"run": 2, "settings": {**base, "concurrency": {"x": 4}}, "generator": {"model": "g2"}},
            {"run": 3, "settings": {**base, "judge": {"model": "k"}}, "generator": {"model": "g3"}},
            {"run": 4, "settings": dict(base), "generator": {"model": "g1"}}]
    assert [r["run"] for r in shape.generator_group(runs)] == [1, 2, 4]
    assert shape.generator_group([runs[0], runs[2]]) == []
    negated = shape.planned_difference(
        [{"terms": {"b": 1, "a": -1}, "estimate": 0.1, "lo": -0.2, "hi": 0.3, "n_tasks": 5, "people": 2}], "a", "b")
    assert (negated.estimate, negated.lo, negated.hi, negated.source) == (-0.1, -0.3, 0.2, "planned, negated")
    zero = shape.planned_difference([{"terms": {"b": 1, "a": -1}, "estimate": 0.0, "lo": 0.0, "hi": 0.0,
                                      "n_tasks": 1, "people": 1}], "a", "b")
    assert str(zero.estimate) == "0.0" and f"{zero.lo:+.4f}" == "+0.0000"     # never −0.0000
    assert shape.planned_difference([{"terms": {"a": 1, "c": -1}, "estimate": 0.1}], "a", "b") is None
    assert shape.computed_difference([3.0, 3.0], [0.0, 0.0], [1, 2], [1, 2], seed=1,
                                     draws=shape.CHEAP_PERSON_DRAWS).startswith("not computed here")


# --- the project tables page --------------------------------------------------------------------

@pytest.mark.parametrize("who", ["owner", "viewer"])
def test_the_project_tables_page_shows_the_chosen_runs_tables_from_cached_numbers(client, cast, project, who):
    from django.urls import reverse

    from experiments.models import Turn
    cohort = build_cohort(project, sessions=4, targets=1, name="comparison")
    run = finished_run(project, cohort, TABLE1_GRADES, name="systems", contrasts=[
        {"name": "OwnWords − memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": False, "criterion": None}])
    client.force_login(cast[who])
    body = client.get(reverse("project_tables", args=[project.slug]) + f"?run={run.pk}").content.decode()
    assert 'id="cross-run-table-1"' in body and 'id="cross-run-table-16"' in body
    assert "<td>+0.2500</td>" in body                                   # OwnWords − memory, planned
    # The page runs no bootstrap: MemGPT-style's difference was not planned, so it is left out and said.
    assert f"MemGPT-style: not planned by run {run.pk}: the paper report computes it" in body
    assert 'id="cross-run-table-30"' not in body                         # no question-only run chosen
    for text in Turn.objects.values_list("text", flat=True):
        assert text not in body                                          # numbers only
