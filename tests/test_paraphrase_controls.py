"""The evidence-paraphrase control (beyond the paper): its conditions, the exact messages of its two
calls on a hand-made task, the budget rule, the estimate, a run through the engine and the
template end to end on the offline stand-in."""
import pytest

from experiments.core import evidence as ev
from experiments.core.assembly import TaskInput, assemble
from experiments.core.condition_families import condition_family
from experiments.core.conditions import FINAL, PARAPHRASE, get_condition, prediction_labels
from experiments.core.estimate import CohortShape, estimate_run
from experiments.core.evidence import TurnText
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.core.paraphrase import (
    assemble_paraphrase_answer, assemble_paraphrase_request, fit_to_budget, verbatim_evidence,
)
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.protocol_templates import protocol_estimate, protocol_from_template
from experiments.execution.sealing import protocol_seal
from experiments.models import ModelCall, Prediction, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import Roles, Sleeps, build_cohort, make_run, openai_model, user_text

OWNWORDS, RECENCY, RECORD_KEY = "ownwords(B=|memory|)", "recency(B=|memory|)", "whole-record"
PARAPHRASED = {key: f"{key}+paraphrased" for key in (OWNWORDS, RECENCY, RECORD_KEY)}
TASK = TaskInput(
    question="How do you use AI when composing?",
    turns=(TurnText(0, "interviewer", "What do you do?"), TurnText(1, "participant", "I compose film music."),
           TurnText(2, "interviewer", "Anything else?"), TurnText(3, "participant", "I grow tomatoes."),
           TurnText(4, "interviewer", "How do you use AI when composing?")),
    cut=4, record_cut=4, screener=(("Occupation?", "Composer"),))
RECORD = "- I compose film music.\n- I grow tomatoes."
MEMORY = "A film composer who gardens."  # 28 characters: B for the budgeted conditions
SYSTEM = ("You rewrite a research-interview participant's words so that every piece of content is kept and the "
          "wording is changed. Output plain text only.")


def paraphrase_task(chars: int) -> str:
    return ("Rewrite the words above in the first person, as the participant, keeping every fact, experience, opinion, "
            "circumstance and qualification they contain, and nothing else: do not add, drop, soften or strengthen "
            "anything. Change the wording: use other words and other sentence structures wherever you can, but keep "
            "names, numbers and technical terms. Keep the order of the content. "
            f"Use at most {chars} characters. Output only the rewritten text.")


def test_the_conditions_are_their_verbatim_conditions_with_one_call_before():
    for verbatim, key in PARAPHRASED.items():
        condition, base = get_condition(key), get_condition(verbatim)
        assert condition.workflow == PARAPHRASE and condition_family(condition) == "controls"
        assert (condition.evidence, condition.budget, condition.memory_kind, condition.user_prompt) == (
            base.evidence, base.budget, base.memory_kind, base.user_prompt)
        assert condition.prompt_names()[-4:] == ("paraphrase_system", "paraphrase_evidence_user", "generation_system",
                                                 "answer_raw_user")
        assert prediction_labels(condition) == [FINAL]
        assert condition.spec_sha256() != base.spec_sha256()


def test_the_paraphrase_call_of_the_record_sees_the_record_and_its_length_only():
    sent = assemble_paraphrase_request(PARAPHRASED[RECORD_KEY], TASK)
    assert sent.system == SYSTEM
    assert sent.user == f"[THIS PARTICIPANT'S WORDS, verbatim]\n{RECORD}\n\n[TASK]\n{paraphrase_task(len(RECORD))}"
    assert (sent.evidence, sent.evidence_chars, sent.budget) == (RECORD, 42, 42)
    assert [ref.name for ref in sent.prompt_refs] == ["paraphrase_system", "paraphrase_evidence_user"]
    assert TASK.question not in sent.user and "Composer" not in sent.user  # no question, no screener


def test_the_paraphrase_call_of_the_excerpts_sees_them_at_b():
    sent = assemble_paraphrase_request(PARAPHRASED[OWNWORDS], TASK, memory=MEMORY)
    excerpts = ev.ownwords(TASK.record(), TASK.question, len(MEMORY))
    assert excerpts and len(excerpts) <= 28
    assert sent.user == f"[THIS PARTICIPANT'S WORDS, verbatim]\n{excerpts}\n\n[TASK]\n{paraphrase_task(28)}"
    assert sent.budget == 28 and verbatim_evidence(PARAPHRASED[OWNWORDS], TASK, memory=MEMORY) == (excerpts, 28)
    recency = assemble_paraphrase_request(PARAPHRASED[RECENCY], TASK, memory=MEMORY)
    assert recency.evidence == ev.recency(TASK.record(), 28) and recency.budget == 28
    with pytest.raises(ValueError, match="needs the session's concrete memory"):
        assemble_paraphrase_request(PARAPHRASED[OWNWORDS], TASK)
    with pytest.raises(ValueError, match="not a paraphrase condition"):
        assemble_paraphrase_request(OWNWORDS, TASK, memory=MEMORY)


def test_the_answer_is_the_verbatim_call_with_the_paraphrase_in_place_of_the_evidence():
    sent = assemble_paraphrase_answer(PARAPHRASED[RECORD_KEY], TASK, paraphrase="I write scores for films.")
    verbatim = assemble(RECORD_KEY, TASK)
    assert sent.system == verbatim.system
    assert sent.user == verbatim.user.replace(RECORD, "I write scores for films.")
    assert sent.user == ("[SCREENER Q&A]\nQ: Occupation?\nA: Composer\n\n[EARLIER IN THE INTERVIEW, verbatim]\n"
                         "I write scores for films.\n\n[QUESTION]\nHow do you use AI when composing?\n\n"
                         "Answer as this participant would. Write ONLY their reply.")
    assert (sent.evidence, sent.evidence_chars, sent.budget) == ("I write scores for films.", 25, 42)
    assert [ref.name for ref in sent.prompt_refs] == ["generation_system", "answer_raw_user"]


def test_a_paraphrase_over_its_budget_is_cut_at_the_last_whitespace_within_it():
    assert fit_to_budget("  short  ", 10) == fit_to_budget("short", 10)
    fitted = fit_to_budget("short", 5)
    assert (fitted.text, fitted.chars, fitted.cut) == ("short", 5, False)
    fitted = fit_to_budget("one two three", 9)  # "one two t|hree": the word "three" does not fit
    assert (fitted.text, fitted.chars, fitted.budget, fitted.cut) == ("one two", 13, 9, True)
    assert fit_to_budget("one two three", 7).text == "one two"  # a word ending exactly at the budget stays
    assert fit_to_budget("one two\nthree", 10).text == "one two"
    assert fit_to_budget("one   two three", 6).text == "one"  # trailing whitespace of the kept part removed
    assert fit_to_budget("unbreakable", 4).text == "unbr"  # no whitespace within: a hard cut
    assert fit_to_budget("abc", 0).text == "" and fit_to_budget("abc", 0).cut
    for reply in ("a bb ccc dddd", "x" * 50, "word " * 30):
        for budget in range(0, 40):
            assert len(fit_to_budget(reply, budget).text) <= budget
    with pytest.raises(ValueError):
        fit_to_budget("x", -1)


def test_the_estimate_counts_the_paraphrase_call_and_the_answer():
    shape = CohortShape(sessions=2, tasks=6, record_chars=2000, question_chars=50, reference_chars=200)
    calls = lambda keys: {p.phase: p.calls for p in estimate_run(  # noqa: E731
        map(get_condition, keys), shape, generator_cap=100, judge_cap=100).phases}
    assert calls([PARAPHRASED[RECORD_KEY]]) == {"memories": 0, "generation": 6, "decisions": 6, "judging": 6}
    # the verbatim condition and its paraphrase do not share a base call
    assert calls([OWNWORDS, PARAPHRASED[OWNWORDS]]) == {"memories": 2, "generation": 12, "decisions": 6,
                                                        "judging": 12}


def _paraphrase_request(request) -> bool:
    return "[THIS PARTICIPANT'S WORDS, verbatim]" in user_text(request)


def test_a_run_plans_two_calls_per_task_and_cuts_the_paraphrase_at_the_budget(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="paraphrase")
    long_reply = " ".join(f"word{i}" for i in range(400))  # far over any budget here
    Roles(server, answer=lambda r: long_reply if _paraphrase_request(r) else "Alpha answer.")
    run = make_run(project, cohort, conditions=[RECORD_KEY, PARAPHRASED[RECORD_KEY], PARAPHRASED[OWNWORDS]],
                   generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    slots, tasks = Slot.objects.filter(run=run), 4
    assert slots.filter(phase=Phase.MEMORIES).count() == 2
    assert slots.filter(phase=Phase.GENERATION, key__startswith="paraphrase|").count() == 2 * tasks
    assert slots.filter(phase=Phase.GENERATION).count() == 3 * tasks
    assert slots.filter(phase=Phase.DECISIONS).count() == 2 * tasks
    # every slot sent once (the record's paraphrase request is the same for the tasks of one session:
    # shared within a task only, as every base call)
    assert all(s.calls.count() == 1 for s in slots) and len(server.requests) == slots.count()
    for key in (PARAPHRASED[RECORD_KEY], PARAPHRASED[OWNWORDS]):
        answers = Prediction.objects.filter(run=run, condition=key, label=FINAL)
        assert answers.count() == tasks and {p.status for p in answers} == {"ok"}
        for p in answers:
            requests = Slot.objects.filter(run=run, task=p.task, key__startswith="paraphrase|")
            budgets = {int(r.user.split("Use at most ", 1)[1].split(" ", 1)[0]): r.user for r in requests}
            assert p.budget in budgets
            verbatim = budgets[p.budget].split("verbatim]\n", 1)[1].split("\n\n[TASK]", 1)[0]
            if key == PARAPHRASED[RECORD_KEY]:
                assert p.budget == len(verbatim)  # no budget: the verbatim record's own length
            else:
                assert len(verbatim) <= p.budget  # the excerpts fit B
            assert p.evidence == fit_to_budget(long_reply, p.budget).text and 0 < p.evidence_chars <= p.budget
            assert f"verbatim]\n{p.evidence}\n\n[QUESTION]" in p.slot.user and p.slot.phase == Phase.DECISIONS
    assert run.analysis["conditions"][PARAPHRASED[RECORD_KEY]]["mean"] == 1.0


def test_the_template_runs_end_to_end_on_the_offline_stand_in(project):
    assert "paraphrase-controls" in PAPER_PROTOCOLS
    cohort = build_cohort(project, sessions=2, targets=2, name="paraphrase-template")
    protocol, instantiated = protocol_from_template(template="paraphrase-controls", cohort=cohort)
    assert len(protocol.conditions) == 7 and not instantiated.unavailable
    estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
    assert estimate == {"memories": 2, "generation": 28, "decisions": 12, "judging": 28}
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    calls = lambda phase: ModelCall.objects.filter(slot__run=run, slot__phase=phase).count()  # noqa: E731
    assert calls("memories") == 2 and calls("decisions") == 12
    assert calls("generation") <= 28 and Slot.objects.filter(run=run, key__startswith="paraphrase|").count() >= 8
    assert calls("judging") <= 28
    finals = Prediction.objects.filter(run=run, condition__endswith="+paraphrased", label=FINAL)
    assert finals.count() == 12 and all(p.evidence_chars <= p.budget for p in finals)
    assert set(run.analysis["conditions"]) >= set(protocol.conditions)


def test_the_report_table_on_a_run_by_hand(project, server, http):
    from experiments.analysis.report_items_controls import paraphrase_controls
    from experiments.core.paper_report_catalog import catalog_item
    from experiments.core.report_table import Missing, ReportTable
    assert isinstance(paraphrase_controls(project, []), Missing)
    item = catalog_item("Paraphrase controls")
    assert not item.in_paper and item.builder.endswith("report_items_controls:paraphrase_controls")
    cohort = build_cohort(project, sessions=2, targets=2, name="paraphrase-report")
    long_reply = " ".join(f"word{i}" for i in range(400))
    # verbatim answers "Alpha" (grade 3), paraphrased ones not (grade 1): verbatim − paraphrased = 2/3 on every task
    Roles(server, answer=lambda r: long_reply if _paraphrase_request(r) else
          "Other answer." if "word0 word1" in user_text(r) else "Alpha answer.")
    run = make_run(project, cohort, conditions=[RECORD_KEY, PARAPHRASED[RECORD_KEY]], generator=openai_model(server),
                   bootstrap={"seed": 5, "draws": 200})
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    table = paraphrase_controls(project, [run])
    assert isinstance(table, ReportTable)
    [row] = table.rows
    assert row[:3] == ("whole-record: verbatim − paraphrased", RECORD_KEY, PARAPHRASED[RECORD_KEY])
    assert row[3] == 1.0 and row[4] == pytest.approx(1 / 3)
    assert row[5] == pytest.approx(2 / 3) and row[6] == pytest.approx(2 / 3) and row[7] == pytest.approx(2 / 3)
    assert row[8:] == (4, 2)
    assert any("4 of 4 replies were over their budget and cut" in note for note in table.notes)
    assert table.inputs.seeds == (5,) and table.inputs.draws == 200

    # Late receipts (kept by the journal, settling nothing) are no replies: one of an earlier attempt of a
    # slot an owner re-issued (its attempt 2 settled it), one of a slot left unknown.
    from experiments.analysis.report_items_controls import paraphrase_cuts
    late = "arrived after the reservation's lease ran out; the slot stays unknown"
    reissued, unknown = Slot.objects.filter(run=run, key__startswith="paraphrase|").order_by("pk")[:2]
    settling = ModelCall.objects.get(slot=reissued)
    ModelCall.objects.filter(pk=settling.pk).update(attempt=2, basis=ModelCall.Basis.AMENDMENT)
    ModelCall.objects.create(slot=reissued, run=run, phase=reissued.phase, attempt=1, reserved_at=settling.reserved_at,
                             lease_until=settling.reserved_at, finished_at=settling.finished_at,
                             outcome=ModelCall.Outcome.OK, text="Short.", error=late)
    Slot.objects.filter(pk=unknown.pk).update(status=Slot.Status.UNKNOWN)
    ModelCall.objects.filter(slot=unknown).update(error=late)
    assert paraphrase_cuts(run)[:2] == (3, 3)


def test_the_task_page_shows_the_paraphrase_call_with_the_verbatim_evidence(client, project, cast, server, http):
    import html

    from django.urls import reverse
    cohort = build_cohort(project, sessions=1, targets=1, name="paraphrase-page")
    Roles(server, answer=lambda r: "I mostly speak of my garden." if _paraphrase_request(r) else "Alpha answer.")
    run = make_run(project, cohort, conditions=[RECORD_KEY, PARAPHRASED[RECORD_KEY]], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    final = Prediction.objects.get(run=run, condition=PARAPHRASED[RECORD_KEY], label=FINAL)
    request = Slot.objects.get(run=run, key__startswith="paraphrase|")
    verbatim = request.user.split("verbatim]\n", 1)[1].split("\n\n[TASK]", 1)[0]
    client.force_login(cast["owner"])
    response = client.get(reverse("prediction_detail", args=[project.slug, run.pk, final.task_id]))
    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    assert "paraphrase (the first call: the verbatim evidence it was given" in text
    assert verbatim in text and "I mostly speak of my garden." in text  # the verbatim and its rewording
    assert "answer from the paraphrase" in text
