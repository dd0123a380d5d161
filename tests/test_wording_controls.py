"""The answer rewrites of the wording controls (beyond the paper): the exact messages of the judge-
invariance paraphrase and the length rewrite on a hand-made answer, the length target, and the
invariance statistics on a hand-computed case and against scikit-learn's quadratic κ."""
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from experiments.analysis.grades import grade_matrix
from experiments.core.condition_families import condition_family
from experiments.core.conditions import ANSWER_PARAPHRASE, FINAL, LENGTH, get_condition, prediction_labels
from experiments.core.estimate import CohortShape, estimate_run
from experiments.core.paraphrase import assemble_answer_paraphrase, assemble_length_rewrite, length_target
from experiments.core.stats.agreement_stats import agreement_bootstrap
from experiments.core.stats.invariance import judge_invariance
from experiments.execution.driver import run_inline
from experiments.models import Prediction, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import Roles, Sleeps, build_cohort, make_run, openai_model, user_text

SYSTEM = "You rewrite a simulated research-interview reply as instructed. Output only the rewritten reply."
QUESTION, ANSWER = "How do you use AI when composing?", "I use it {sometimes} for sketches."


def test_the_judge_invariance_paraphrase_call():
    sent = assemble_answer_paraphrase(QUESTION, ANSWER)
    assert sent.system == SYSTEM
    assert sent.user == (
        f"[QUESTION]\n{QUESTION}\n\n[REPLY]\n{ANSWER}\n\n[TASK]\nRewrite the reply in other words, keeping every "
        "claim, detail and qualification it makes and adding nothing: use other words and other sentence structures "
        "wherever you can, but keep names, numbers and technical terms, the first person and about the same length. "
        "Output only the rewritten reply.")
    assert (sent.evidence, sent.evidence_chars) == (ANSWER, len(ANSWER))
    assert [ref.name for ref in sent.prompt_refs] == ["rewrite_answer_system", "paraphrase_answer_user"]


def test_the_length_rewrite_call():
    sent = assemble_length_rewrite(QUESTION, ANSWER, 40)
    assert sent.system == SYSTEM
    assert sent.user == (
        f"[QUESTION]\n{QUESTION}\n\n[REPLY]\n{ANSWER}\n\n[TASK]\nRewrite the reply to about 40 words, in the same "
        "first-person voice. If it is longer, keep its most important content and drop the least important; if it is "
        "shorter, say the same content more fully, without adding any claim, detail or example it does not make. "
        "Output only the rewritten reply.")
    assert [ref.name for ref in sent.prompt_refs] == ["rewrite_answer_system", "length_rewrite_user"]
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ValueError):
            assemble_length_rewrite(QUESTION, ANSWER, bad)


def test_the_length_target_is_the_median_word_count_rounded_half_up():
    assert length_target(["a b c", "a", "a b c d e"]) == 3
    assert length_target(["a b", "a b c"]) == 3  # 2.5 rounds up
    assert length_target(["a", "a b", None, "a b c d"]) == 2  # median of 1, 2, 4 (None left out)
    assert length_target([""]) == 1  # at least one word
    with pytest.raises(ValueError):
        length_target([None])


ORIGINAL = [3, 2, 1, 0, 3, 2]
PARAPHRASED = [3, 2, 2, 0, 2, 2]
PERSONS = ["p1", "p1", "p2", "p2", "p3", "p3"]


def test_the_invariance_statistics_on_a_hand_computed_case():
    result = judge_invariance(ORIGINAL, PARAPHRASED, PERSONS, draws=2000, seed=7)
    assert (result.n_pairs, result.n_people) == (6, 3)
    assert result.changed.estimate == pytest.approx(2 / 6)
    assert (result.up, result.down) == (pytest.approx(1 / 6), pytest.approx(1 / 6))
    # quadratic κ by hand: observed disagreement 2 (two pairs one grade apart), expected Σ a_i b_j (i-j)² / n = 70/6
    assert result.kappa.estimate == pytest.approx(1 - 2 / (70 / 6))
    assert result.kappa.estimate == pytest.approx(
        cohen_kappa_score(ORIGINAL, PARAPHRASED, weights="quadratic", labels=[0, 1, 2, 3]))
    # the share changed is 1 − exact agreement, its interval the exact agreement's mirrored, same draws
    exact = agreement_bootstrap(ORIGINAL, PARAPHRASED, PERSONS, draws=2000, seed=7).exact
    assert (result.changed.lo, result.changed.hi) == (pytest.approx(1 - exact.hi), pytest.approx(1 - exact.lo))
    assert 0 <= result.changed.lo <= result.changed.estimate <= result.changed.hi <= 1
    assert result.kappa == agreement_bootstrap(ORIGINAL, PARAPHRASED, PERSONS, draws=2000, seed=7).kappa


def test_an_invariant_judge_changes_nothing_and_random_cases_match_sklearn():
    same = judge_invariance(ORIGINAL, ORIGINAL, PERSONS, draws=500, seed=1)
    assert (same.changed.estimate, same.changed.lo, same.changed.hi, same.up, same.down) == (0, 0, 0, 0, 0)
    assert same.kappa.estimate == pytest.approx(1.0)
    rng = np.random.default_rng(3)
    for _ in range(5):
        a, b = rng.integers(0, 4, 40), rng.integers(0, 4, 40)
        result = judge_invariance(a, b, rng.integers(0, 10, 40), draws=200, seed=2)
        assert result.kappa.estimate == pytest.approx(cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3]))
        assert result.changed.estimate == pytest.approx(float(np.mean(a != b)))


# --- the rewrite conditions through the engine ---------------------------------------------------

RECORD = "whole-record"
REWORDED, SHORTENED = f"{RECORD}+answer-paraphrased", f"{RECORD}+length(60w)"


def test_the_rewrite_conditions_share_their_base_call_and_add_one_call_and_one_grade():
    for key, workflow in ((REWORDED, ANSWER_PARAPHRASE), (SHORTENED, LENGTH)):
        condition = get_condition(key)
        assert condition.workflow == workflow and prediction_labels(condition) == ["b0"]
        assert condition_family(condition) == "controls"
        assert condition.user_prompt == get_condition(RECORD).user_prompt
    assert get_condition("memory(concrete,100w)+one-shot+answer-paraphrased").memory_words == 100
    shape = CohortShape(sessions=2, tasks=6, record_chars=2000, question_chars=50, reference_chars=200)
    calls = lambda keys: {p.phase: p.calls for p in estimate_run(  # noqa: E731
        map(get_condition, keys), shape, generator_cap=100, judge_cap=100).phases}
    assert calls([RECORD, REWORDED, SHORTENED]) == {"memories": 0, "generation": 6, "decisions": 12, "judging": 18}


def _rewrite(request) -> str | None:
    text = user_text(request)
    if "Rewrite the reply in other words" in text:
        return "Reworded answer."
    if "Rewrite the reply to about 60 words" in text:
        return "Alpha " + " ".join(["word"] * 59)
    return None


def test_a_run_grades_the_base_answer_and_its_rewrites(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="rewrites")
    Roles(server, answer=lambda r: _rewrite(r) or "Alpha answer.")
    run = make_run(project, cohort, conditions=[RECORD, REWORDED, SHORTENED], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    slots, tasks = Slot.objects.filter(run=run), 4
    assert slots.filter(phase=Phase.GENERATION).count() == tasks  # one base call per task, shared by all three
    assert slots.filter(phase=Phase.DECISIONS).count() == 2 * tasks
    for p in Prediction.objects.filter(run=run, condition__in=[REWORDED, SHORTENED], label="b0"):
        assert p.slot == Prediction.objects.get(run=run, task=p.task, condition=RECORD).slot
    reworded = Prediction.objects.filter(run=run, condition=REWORDED, label=FINAL)
    assert {p.text for p in reworded} == {"Reworded answer."} and reworded.count() == tasks
    for p in reworded:
        assert "[REPLY]\nAlpha answer.\n\n[TASK]\nRewrite the reply in other words" in p.slot.user
        assert p.evidence == "Alpha answer."
    shortened = Prediction.objects.filter(run=run, condition=SHORTENED, label=FINAL)
    assert {len(p.text.split()) for p in shortened} == {60}
    # the stand-in judge: "Alpha" 3, anything else 1 — the paraphrase changed every grade
    matrix = grade_matrix(run, (RECORD, REWORDED, SHORTENED))
    assert matrix.grades.shape[1] == tasks
    assert list(matrix.grades[0]) == [3] * tasks and list(matrix.grades[1]) == [1] * tasks
    assert list(matrix.grades[2]) == [3] * tasks


MEMORY_ONE_SHOT = "memory(concrete,100w)+one-shot"


def _rewrite_by_session(request) -> str | None:
    text = user_text(request)
    if "Rewrite the reply in other words" in text:  # session 0's paraphrases keep the grade, session 1's lose it
        return "Alpha again." if "part 0 of that" in text else "Reworded answer."
    return _rewrite(request)


def test_the_invariance_and_equal_length_tables_on_a_run_by_hand(project, server, http):
    from experiments.analysis.per_run_tables import feeds, per_run_payload
    from experiments.analysis.report_items_controls import (
        contrasts_under_rewrite, judge_invariance_report, judge_invariance_table, length_control_report,
    )
    from experiments.core.report_table import Missing, ReportTable
    assert isinstance(judge_invariance_report(project, []), Missing)
    cohort = build_cohort(project, sessions=2, targets=2, name="invariance")
    Roles(server, answer=lambda r: _rewrite_by_session(r) or "Alpha answer.")
    keys = [MEMORY_ONE_SHOT, RECORD]
    conditions = keys + [f"{k}+answer-paraphrased" for k in keys] + [f"{k}+length(60w)" for k in keys]
    contrast = {"name": "record − memory", "terms": {RECORD: 1, MEMORY_ONE_SHOT: -1}, "family": False,
                "criterion": None}
    run = make_run(project, cohort, conditions=conditions, generator=openai_model(server), contrasts=[contrast],
                   bootstrap={"seed": 11, "draws": 300})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    table = judge_invariance_table(run)
    assert isinstance(table, ReportTable) and [row[0] for row in table.rows] == keys
    original, paraphrased = [3, 3, 3, 3], [3, 3, 1, 1]  # by session: 0, 0, 1, 1
    expected = judge_invariance(original, paraphrased, [0, 0, 1, 1], draws=300, seed=11)
    for row in table.rows:
        assert row[1:3] == (4, 2)
        assert row[3] == pytest.approx(0.5) and (row[6], row[7]) == (0.0, 0.5)
        assert (row[4], row[5]) == (pytest.approx(expected.changed.lo), pytest.approx(expected.changed.hi))
        assert row[8] == pytest.approx(cohen_kappa_score(original, paraphrased, weights="quadratic",
                                                         labels=[0, 1, 2, 3]))
    under = contrasts_under_rewrite(run, ANSWER_PARAPHRASE)
    assert [row[:2] for row in under.rows] == [("record − memory", "as answered"),
                                               ("record − memory", "paraphrase grades")]
    assert [row[2] for row in under.rows] == [0.0, 0.0] and [row[5:7] for row in under.rows] == [(4, 2), (4, 2)]
    length = length_control_report(project, [run])
    assert [row[1] for row in length.rows] == ["as answered", "at 60 words"]
    assert length.rows[1][7] == "60 / 60" and length.rows[0][7] == "2 / 2"
    assert feeds(run) == ["judge_invariance", "contrasts_under_paraphrase", "length_control"]
    payload = per_run_payload(run)
    assert set(payload) == set(feeds(run)) and not any("missing" in item for item in payload.values())


def test_the_answer_controls_template_runs_end_to_end_on_the_offline_stand_in(project):
    from experiments.analysis.report_items_controls import judge_invariance_table
    from experiments.core.report_table import ReportTable
    from experiments.execution.control import run_start
    from experiments.execution.protocol_templates import protocol_estimate, protocol_from_template
    from experiments.execution.sealing import protocol_seal
    from experiments.models import ModelCall
    cohort = build_cohort(project, sessions=2, targets=2, name="answer-controls")
    protocol, instantiated = protocol_from_template(template="answer-controls", cohort=cohort)
    assert len(protocol.conditions) == 9 and not instantiated.unavailable
    estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
    assert estimate == {"memories": 2, "generation": 12, "decisions": 24, "judging": 36}
    run = Run.objects.create(protocol=protocol_seal(protocol=protocol, user=None))
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    for phase in ("memories", "decisions"):
        assert ModelCall.objects.filter(slot__run=run, slot__phase=phase).count() == estimate[phase], phase
    assert ModelCall.objects.filter(slot__run=run, slot__phase="generation").count() <= 12
    table = judge_invariance_table(run)
    assert isinstance(table, ReportTable) and len(table.rows) == 3 and all(row[1] == 4 for row in table.rows)
    assert any("offline stand-in" in note for note in table.notes)  # labelled, never a model result


def test_a_regrade_of_the_rewrites_shows_the_invariance_under_its_judge(project, server, http):
    from experiments.analysis.per_run_tables import AGREEMENT_ITEM, feeds
    from experiments.analysis.report_items_controls import judge_invariance_table
    from experiments.execution import control
    cohort = build_cohort(project, sessions=2, targets=2, name="invariance-regrade")
    Roles(server, answer=lambda r: _rewrite_by_session(r) or "Alpha answer.")
    source = make_run(project, cohort, conditions=[RECORD, REWORDED], generator=openai_model(server),
                      bootstrap={"seed": 11, "draws": 300})
    source = run_inline(source.pk, client=http, sleep=Sleeps())
    protocol = control.regrade_create(source=source, user=None)  # the same judge again: re-grade only
    regrade = Run.objects.create(protocol=protocol)
    control.run_start(run=regrade)
    regrade = run_inline(regrade.pk, client=http, sleep=Sleeps())
    assert regrade.status == Run.Status.FINISHED, regrade.status_reason
    assert not Slot.objects.filter(run=regrade).exclude(phase=Phase.JUDGING).exists()  # nothing generated
    assert feeds(regrade) == [AGREEMENT_ITEM, "judge_invariance", "contrasts_under_paraphrase"]
    assert judge_invariance_table(regrade).rows == judge_invariance_table(source).rows  # a deterministic judge


def test_a_pairwise_judge_over_the_run_takes_over_no_report_item(project, cast):
    # A pairwise judge copies its source's conditions (to name its pairs) but answers and grades nothing: the
    # paper report's controls stay the source's, and the judge feeds no per-run item.
    from experiments.analysis.paper_report_state import report_runs
    from experiments.analysis.per_run_tables import feeds
    from experiments.analysis.report_items_controls import (
        judge_invariance_report, length_control_report, paraphrase_controls,
    )
    from experiments.core.report_table import ReportTable
    from experiments.execution import control
    from experiments.models import Protocol
    from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY, finished_run
    conditions = [MEMORY, OWNWORDS, QUESTION_ONLY, f"{MEMORY}+answer-paraphrased", f"{MEMORY}+length(60w)",
                  f"{OWNWORDS}+length(60w)", f"{OWNWORDS}+paraphrased"]
    source = finished_run(project, people=3, conditions=conditions)
    builders = (judge_invariance_report, length_control_report, paraphrase_controls)
    before = [builder(project, report_runs(project)) for builder in builders]
    assert all(isinstance(table, ReportTable) and table.inputs.runs == (source.pk,) for table in before)
    protocol = control.regrade_create(source=source, user=cast["owner"], pairs=[[MEMORY, QUESTION_ONLY]])
    judge = Run.objects.create(protocol=protocol)
    control.run_start(run=judge)
    judge = run_inline(judge.pk)
    assert judge.status == Run.Status.FINISHED and judge.protocol.kind == Protocol.Kind.PAIRWISE
    assert feeds(judge) == []
    assert [run.pk for run in report_runs(project)] == [source.pk]
    for runs in (report_runs(project), [source, judge]):  # the report's runs, and the judge handed in anyway
        after = [builder(project, runs) for builder in builders]
        assert [(repr(t.rows), t.inputs) for t in after] == [(repr(t.rows), t.inputs) for t in before]
