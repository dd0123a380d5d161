"""The LLM pairwise judge: a re-grade-only run over a finished run whose judge compares two
conditions' answers of each task, in both orders, through the one engine.

Against the local LLM server (real HTTP): planning makes both orders of every pair whose answers
differ, and nothing else; each order is one journaled slot paid once, a resumed run sends nothing
twice; the pairwise prompt's reply is parsed into the verdicts the analysis counts; the seal binds the
source run, its answers and the pairs. The numbers themselves: tests/test_pairwise_judge_stats.py.
"""
import json

import pytest
from django.core.management import call_command

from experiments.analysis.pairwise_verdicts import compared_pairs, judged_pairs, verdicts
from experiments.core.slot_keys import PairwiseJudgeKey, parse_slot_key
from experiments.execution import control
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.journal import slot_execute
from experiments.execution.policy import RunError
from experiments.execution.sealing import protocol_settings, seal_mismatches
from experiments.models import ModelCall, Prediction, Protocol, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import FUSION, ONE_SHOT, QUESTION_ONLY, Roles, Sleeps, build_cohort, make_run, openai_model
from tests.engine_helpers import user_text

ANSWERS = ["Beta answer.", "Gamma answer.", "", "Alpha answer.", "Delta answer."]
PAIRS = [[QUESTION_ONLY, ONE_SHOT], [ONE_SHOT, FUSION]]


def section(text: str, heading: str) -> str:
    return text.split(f"[{heading}]", 1)[1].split("\n\n[", 1)[0]


def answer_or_verdict(request):
    """Generation answers in turn; the pairwise judge prefers an answer with "Alpha", else side A
    (a judge with a position bias), and says so in a fenced JSON object (parsed as a bare one)."""
    text = user_text(request)
    if "[ANSWER A]" not in text:
        answer_or_verdict.count += 1
        return ANSWERS[answer_or_verdict.count % len(ANSWERS)]
    return answer_or_verdict.judge(section(text, "ANSWER A"), section(text, "ANSWER B"))


def biased_judge(a: str, b: str) -> str:
    preferred = "A" if "Alpha" in a and "Alpha" not in b else "B" if "Alpha" in b and "Alpha" not in a else "A"
    return "```json\n" + json.dumps({"preferred": preferred, "rationale": "test verdict"}) + "\n```"


answer_or_verdict.count = -1
answer_or_verdict.judge = biased_judge


@pytest.fixture(autouse=True)
def granted(cast):
    from experiments.models import EndpointGrant
    EndpointGrant.objects.create(endpoint="test-loopback", user=cast["owner"])


@pytest.fixture
def roles(server):
    answer_or_verdict.count, answer_or_verdict.judge = -1, biased_judge
    return Roles(server, answer=answer_or_verdict)


@pytest.fixture
def source(project, cast, server, roles, http):
    cohort = build_cohort(project, sessions=3, targets=2, name="pairwise-judge")
    run = make_run(project, cohort, conditions=[QUESTION_ONLY, ONE_SHOT, FUSION], generator=openai_model(server),
                   name="source")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    return run


def pairwise(source, user, server, pairs=PAIRS):
    protocol = control.regrade_create(source=source, user=user, judge=openai_model(server), pairs=pairs)
    run = Run.objects.create(protocol=protocol)
    control.run_start(run=run)
    return run


def expected_orders(source):
    """(task, sha shown as A, sha shown as B) of both orders of every pair whose answers differ."""
    finals = {(p.condition, p.task_id): p.answer_sha256 for p in Prediction.objects.filter(
        run=source, label="final", status=Prediction.Status.OK).exclude(answer_sha256="")}
    out = set()
    for x, y in PAIRS:
        for (condition, task), sha in finals.items():
            other = finals.get((y, task))
            if condition == x and other is not None and other != sha:
                out |= {(task, sha, other), (task, other, sha)}
    return out


def test_both_orders_are_planned_and_each_is_paid_once(project, cast, server, roles, http, source):
    before = len(server.requests)
    run = pairwise(source, cast["owner"], server)
    assert run.protocol.kind == Protocol.Kind.PAIRWISE and run.phase == Phase.JUDGING
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED

    slots = Slot.objects.filter(run=run)
    keys = {parse_slot_key(s.key) for s in slots}
    assert all(isinstance(k, PairwiseJudgeKey) for k in keys)
    orders = {(k.task_id, k.sha_a, k.sha_b) for k in keys}
    assert orders == expected_orders(source) and len(orders) > 0
    assert all((t, b, a) in orders for t, a, b in orders)  # every order has its other
    assert {s.phase for s in slots} == {Phase.JUDGING} and {s.role for s in slots} == {Slot.Role.JUDGE}
    calls = ModelCall.objects.filter(slot__run=run)
    assert calls.count() == slots.count() == len(server.requests) - before  # one request per slot, no other
    assert all(c.outcome == "ok" and c.attempt == 1 for c in calls)
    assert not Prediction.objects.filter(run=run).exists()  # nothing generated, nothing copied

    # the prompt: the question, the real answer and both answers, in the order the key says
    for slot in slots:
        key = parse_slot_key(slot.key)
        shown = {Prediction.objects.filter(run=source, task_id=key.task_id, answer_sha256=sha).first().text
                 for sha in (key.sha_a, key.sha_b)}
        a_text = Prediction.objects.filter(run=source, task_id=key.task_id, answer_sha256=key.sha_a).first().text
        assert section(slot.user, "ANSWER A").strip() == a_text and len(shown) == 2
        assert "[ACTUAL ANSWER]" in slot.user and "[QUESTION]" in slot.user

    # the replies (fenced JSON over real HTTP) parsed into verdicts, mapped back to the conditions
    got = verdicts(run)
    assert set(got) == {s.key for s in slots} and set(got.values()) <= {"a", "b"}
    seen = set()
    for pair in judged_pairs(run):
        x_text = Prediction.objects.get(run=source, task_id=pair.task, condition=pair.x, label="final").text
        y_text = Prediction.objects.get(run=source, task_id=pair.task, condition=pair.y, label="final").text
        if "Alpha" in x_text and "Alpha" not in y_text:
            assert (pair.x_as_a, pair.y_as_a) == ("a", "b")  # X preferred in both orders
            seen.add("x preferred")
        elif "Alpha" not in x_text and "Alpha" not in y_text:
            assert (pair.x_as_a, pair.y_as_a) == ("a", "a")  # the side wins: position bias
            seen.add("side")
        elif "Alpha" in y_text:
            assert (pair.x_as_a, pair.y_as_a) == ("b", "a")  # Y preferred in both orders
            seen.add("y preferred")
    assert seen == {"x preferred", "y preferred", "side"}  # both cases were met

    summary = run.analysis["pairwise_judge"]
    assert [[r["x"], r["y"]] for r in summary["rows"]] == [p for p in PAIRS if any(
        (x, y) == tuple(p) for x, y, *_ in compared_pairs(source, PAIRS))]
    assert sum(r["verdicts"] for r in summary["rows"]) == 2 * len(judged_pairs(run))
    assert summary["stand_in"] is False

    run_inline(run.pk, client=http, sleep=Sleeps())  # finished: nothing is sent again
    assert len(server.requests) - before == slots.count()
    assert run_drive(run.pk).slot_ids == ()


def test_an_interrupted_pairwise_run_resumes_without_sending_twice(project, cast, server, roles, http, source):
    run = pairwise(source, cast["owner"], server)
    step = run_drive(run.pk)
    assert step.phase == Phase.JUDGING and len(step.slot_ids) == len(expected_orders(source))
    first_half = step.slot_ids[: len(step.slot_ids) // 2]
    for slot_id in first_half:
        slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="test", sleep=Sleeps())
    control.run_pause(run=run, user=cast["owner"], reason="interrupted")
    control.run_resume(run=run, user=cast["owner"], reason="go on")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    per_slot = list(Slot.objects.filter(run=run).values_list("calls__attempt", flat=True))
    assert per_slot == [1] * len(step.slot_ids)  # every slot paid once, none twice


def test_a_late_receipt_of_an_earlier_attempt_never_replaces_the_settling_verdict(
        project, cast, server, roles, http, source):
    # A worker dies mid-request (its lease runs out: the slot is unknown); the owner re-issues the slot, whose
    # second attempt settles it; then the dead worker's receipt arrives, ok too, with the other verdict.
    from experiments.core.llm import wire
    from experiments.execution import journal as journal_rules, policy
    from tests.engine_helpers import journal
    from tests.test_unknown_decisions import _reserve_and_die
    run = pairwise(source, cast["owner"], server)
    lost = Slot.objects.get(pk=run_drive(run.pk).slot_ids[0])
    _reserve_and_die(lost)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.PAUSED
    control.run_reissue_unknown(run=run, user=cast["owner"], reason="the worker was killed")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    dead, settling = journal(lost)
    settled = verdicts(run)[lost.key]
    assert settled in ("a", "b") and settling.attempt == 2
    late = "```json\n" + json.dumps({"preferred": {"a": "B", "b": "A"}[settled], "rationale": "late"}) + "\n```"
    completed = policy.Decision(retry=False, wait_s=0.0, justification="completed")
    outcome = wire.Outcome(wire.OutcomeKind.OK, http_status=200, text=late, finish_reason="stop")
    assert journal_rules._record(dead.pk, outcome, completed) is False  # kept, settles nothing
    assert [call.outcome for call in journal(lost)] == ["ok", "ok"]
    assert verdicts(run)[lost.key] == settled


def test_the_seal_binds_the_pairs_and_the_source_answers(project, cast, server, roles, http, source):
    run = pairwise(source, cast["owner"], server)
    protocol = run.protocol
    assert protocol_settings(protocol)["pairwise_pairs"] == PAIRS
    assert protocol.seal["regrade"]["source_run"] == source.pk
    assert sorted(protocol.seal["prompts"]) == ["pairwise_judge_system", "pairwise_judge_user"]
    assert seal_mismatches(protocol) == []
    Prediction.objects.filter(run=source, status=Prediction.Status.OK).update(text="changed", answer_sha256="0" * 64)
    assert any("answers of run" in p for p in seal_mismatches(protocol))


@pytest.mark.parametrize("pairs, message", [
    ([[ONE_SHOT, ONE_SHOT]], "is not a pair"),
    ([[ONE_SHOT, "no-such-condition"]], "is not a pair"),
    ([[ONE_SHOT, FUSION], [FUSION, ONE_SHOT]], "listed twice"),
    ([], "at least one pair"),
])
def test_bad_pairs_are_refused_and_nothing_is_created(project, cast, server, roles, http, source, pairs, message):
    count = Protocol.objects.count()
    with pytest.raises(RunError, match=message):
        control.regrade_create(source=source, user=cast["owner"], judge=openai_model(server), pairs=pairs)
    assert Protocol.objects.count() == count


def test_the_command_makes_a_pairwise_judge_of_every_pair_of_conditions(project, cast, server, roles, http, source):
    out = call_command("regrade_run", "--run", str(source.pk), "--user", cast["owner"].username, "--same-judge",
                       "--pairwise-conditions", FUSION, QUESTION_ONLY, ONE_SHOT)
    protocol = Protocol.objects.get(kind=Protocol.Kind.PAIRWISE)
    assert protocol.pairwise_pairs == [[QUESTION_ONLY, ONE_SHOT], [QUESTION_ONLY, FUSION], [ONE_SHOT, FUSION]]
    assert "pairwise judge" in out and "both orders" in out


def test_an_unusable_reply_is_a_missing_verdict_never_a_guess(project, cast, server, roles, http, source):
    """Replies over real HTTP that break the format (prose, an unknown verdict) are recorded once and
    counted as missing verdicts; the judge is not asked again."""
    answer_or_verdict.judge = lambda a, b: (
        "I prefer A." if "Gamma" in a else '{"preferred": "C"}' if "Gamma" in b else '{"preferred": "tie"}')
    run = run_inline(pairwise(source, cast["owner"], server).pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    got = verdicts(run)
    slots = list(Slot.objects.filter(run=run))
    assert set(got) == {s.key for s in slots} and None in got.values() and "tie" in got.values()
    rows = run.analysis["pairwise_judge"]["rows"]
    missing = sum(value is None for value in got.values())
    assert sum(r["missing_verdicts"] for r in rows) >= missing > 0
    assert ModelCall.objects.filter(slot__run=run).count() == len(slots)  # none asked twice


def test_structured_output_for_a_grade_is_refused_for_a_pairwise_judge(project, cast, server, roles, http, source):
    judge = {**openai_model(server), "structured_output": True}
    with pytest.raises(RunError, match="A, B or tie"):
        control.regrade_create(source=source, user=cast["owner"], judge=judge, pairs=PAIRS)


def test_judge_sample_refuses_a_pairwise_judge(project, cast, server, roles, http, source):
    from django.core.management import CommandError
    run = pairwise(source, cast["owner"], server)
    with pytest.raises(CommandError, match="not a re-grade"):
        call_command("judge_sample", str(run.pk))


def test_the_owner_makes_a_pairwise_judge_from_the_run_page(
        client, project, cast, server, roles, http, source, monkeypatch, django_capture_on_commit_callbacks):
    from django.urls import reverse

    from experiments.execution import progress
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    client.force_login(cast["owner"])
    url = reverse("run_regrade", args=[project.slug, source.pk])
    assert 'id="regrade-pairwise"' in client.get(reverse("run_detail", args=[project.slug, source.pk])).content.decode()
    count = Protocol.objects.count()
    page = client.post(url, {"regrade-judge_choice": "same", "regrade-pairwise_conditions": [ONE_SHOT]})
    assert "choose two or more conditions" in page.content.decode() and Protocol.objects.count() == count
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(url, {"regrade-judge_choice": "same",
                                     "regrade-pairwise_conditions": [FUSION, QUESTION_ONLY, ONE_SHOT]})
    run = Run.objects.latest("pk")
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[project.slug, run.pk])
    assert run.protocol.kind == Protocol.Kind.PAIRWISE and run.protocol.regrade_of == source
    assert run.protocol.pairwise_pairs == [[QUESTION_ONLY, ONE_SHOT], [QUESTION_ONLY, FUSION], [ONE_SHOT, FUSION]]
    assert (run.status, run.phase) == (Run.Status.RUNNING, Phase.JUDGING) and len(callbacks) == 1
    # the pairwise run's own page offers no re-grade of it (it has no answers of its own)
    run_inline(run.pk, client=http, sleep=Sleeps())
    assert 'id="regrade-form"' not in client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
