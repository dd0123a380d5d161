"""The paper report's items on the workflows and representations (`analysis.report_items_workflows`):
App. F's development attempts and App. K's representations run anew, each checked on a small run whose
grades are known by hand (the fake server's judge grades "Alpha" 3 and anything else 1)."""
import numpy as np
import pytest

from experiments.analysis.report_items_workflows import development_attempts, representations
from experiments.core.report_table import Missing, ReportTable
from experiments.core.stats.paired import paired_bootstrap
from experiments.execution.control import regrade_create, run_start
from experiments.execution.driver import run_inline
from experiments.models import ModelCall, Run, Slot
from tests.engine_helpers import ONE_SHOT, Roles, Sleeps, build_cohort, make_run, openai_model, user_text

NOTES_RECORD = "whole-record+notes(120w)"
PRUNED = "memory(concrete,100w)+pruned"
PROFILE = "memory(profile,100w)+one-shot"
TRAIT = "memory(trait,100w)+one-shot"


def _notes_request(request) -> bool:
    return "[TASK]\nWrite notes of at most" in user_text(request)


def _prune_request(request) -> bool:
    return "[DRAFT REPLY]" in user_text(request)


def test_the_development_attempts_table_on_a_hand_computed_run(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="attempts-table")
    notes_text = " ".join(f"n{i}" for i in range(130))

    def answer(request):
        text = user_text(request)
        if _prune_request(request):
            return "Alpha kept." if "part 0" in text else "Beta kept."  # session 0: grade 3; session 1: grade 1
        if "[NOTES ON WHAT BEARS" in text:
            return "Alpha from notes."
        if "[EARLIER IN THE INTERVIEW" in text:
            return "Beta from the record."
        return "Alpha answer."

    Roles(server, answer=answer, memory=lambda r: notes_text if _notes_request(r) else "Likes gardening.")
    assert isinstance(development_attempts(project, []), Missing)
    run = make_run(project, cohort, conditions=[ONE_SHOT, NOTES_RECORD, PRUNED, "whole-record"],
                   generator=openai_model(server), bootstrap={"seed": 20260919, "draws": 400})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    missing = development_attempts(project, [])
    assert missing.template == "development-attempts"

    table = development_attempts(project, [run])
    assert isinstance(table, ReportTable)
    rows = {row[0].split(" − ")[0] + " | " + row[2]: row for row in table.rows}
    assert len(table.rows) == 3  # no notes-from-memory condition in this run: its row is left out
    person = np.array([0, 0, 1, 1])
    # hand-computed: one-shot 3,3,3,3; whole record 1,1,1,1; notes 3,3,3,3; pruned 3,3,1,1 (normalized /3)
    notes_vs_record = rows["notes from the whole record, then an answer | whole-record"]
    assert notes_vs_record[3:6] == (1.0, pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert notes_vs_record[6:] == (pytest.approx(2 / 3), pytest.approx(2 / 3), 4, 2)
    notes_vs_memory = rows["notes from the whole record, then an answer | " + ONE_SHOT]
    assert notes_vs_memory[3:8] == (1.0, 1.0, 0.0, 0.0, 0.0)
    pruned = rows["pruned one-shot draft | " + ONE_SHOT]
    expected = paired_bootstrap(person, np.array([0, 0, -2, -2]) / 3, seed=20260919, draws=400)
    assert pruned[3:5] == (pytest.approx(2 / 3), 1.0)
    assert pruned[5] == pytest.approx(-1 / 3) == expected.estimate
    assert (pruned[6], pruned[7]) == (expected.lo, expected.hi) and expected.lo < expected.hi
    assert pruned[8:] == (4, 2)
    assert table.inputs.runs == (run.pk,) and table.inputs.seeds == (20260919,) and table.inputs.draws == 400
    assert table.inputs.offline_runs == ()
    notes = " ".join(table.notes)
    assert "Notes: median 130 words over 4 notes calls; 4 cut at the 120-word cap" in notes
    assert "median answer length 2 words for the draft, 2 after the edit (4 tasks with both)" in notes
    assert "raised 0 tasks from grade 0 and lowered 0 to grade 0, of 4 with both grades" in notes
    assert "notes_record_user" in notes and "prune_layout" in notes  # prompts written here, said
    assert "offline stand-in" not in notes

    # A late receipt of an earlier attempt (kept by the journal, settling nothing) is not a notes reply.
    slot = Slot.objects.filter(run=run, key__startswith="notes|").order_by("pk").first()
    settling = ModelCall.objects.get(slot=slot)
    ModelCall.objects.filter(pk=settling.pk).update(attempt=2, basis=ModelCall.Basis.AMENDMENT)
    ModelCall.objects.create(slot=slot, run=run, phase=slot.phase, attempt=1, reserved_at=settling.reserved_at,
                             lease_until=settling.reserved_at, finished_at=settling.finished_at,
                             outcome=ModelCall.Outcome.OK, text="Short notes.",
                             error="arrived after the reservation's lease ran out; the slot stays unknown")
    again = " ".join(development_attempts(project, [run]).notes)
    assert "Notes: median 130 words over 4 notes calls; 4 cut at the 120-word cap" in again

    # A re-grade of the run (its conditions, another judge's grades) never stands in for it.
    regrade = Run.objects.create(protocol=regrade_create(source=run, user=None))
    run_start(run=regrade)
    assert run_inline(regrade.pk, client=http, sleep=Sleeps()).status == Run.Status.FINISHED
    assert development_attempts(project, [run, regrade]).inputs.runs == (run.pk,)


def test_the_representations_table_on_a_hand_computed_run(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="representations-table")

    def memory(request):
        text = user_text(request)
        return ("Big Five: openness high." if "28 entries" in text else "Trait notes." if "general terms" in text
                else "Concrete notes.")

    def answer(request):
        text = user_text(request)
        if "Big Five: openness high." in text:
            return "Alpha profile." if "part 0" in text else "Beta profile."  # 3, 3, 1, 1
        return "Alpha answer." if "Concrete notes." in text else "Beta answer."  # concrete 3s; trait, screener 1s

    Roles(server, memory=memory, answer=answer)
    run = make_run(project, cohort, conditions=["screener-only", ONE_SHOT, TRAIT, PROFILE],
                   generator=openai_model(server), bootstrap={"seed": 20260917, "draws": 400})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    assert isinstance(representations(project, []), Missing)
    assert representations(project, []).template == "representations"
    table = representations(project, [run])
    rows = {row[1]: row for row in table.rows}
    assert [row[1] for row in table.rows] == ["screener-only", ONE_SHOT, TRAIT, PROFILE]
    assert rows["screener-only"][2:5] == (None, pytest.approx(1 / 3), None)
    assert rows[ONE_SHOT][2:7] == (2.0, 1.0, pytest.approx(2 / 3), pytest.approx(2 / 3), pytest.approx(2 / 3))
    assert rows[TRAIT][2:5] == (2.0, pytest.approx(1 / 3), 0.0)
    expected = paired_bootstrap(np.array([0, 0, 1, 1]), np.array([2, 2, 0, 0]) / 3, seed=20260917, draws=400)
    assert rows[PROFILE][2:5] == (4.0, pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert rows[PROFILE][4:] == (expected.estimate, expected.lo, expected.hi, 4, 2)
    assert table.inputs.seeds == (20260917,) and table.inputs.draws == 400
    assert "memory_profile_user" in " ".join(table.notes)
