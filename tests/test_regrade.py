"""Re-grade-only runs (paper App. H) against the real local LLM server.

A finished run's distinct answers are judged again by a second judge (here Gemini's wire format,
the source run being graded over the OpenAI one) or by the same judge: exactly one journaled
call per distinct (task, answer sha256), none for empty answers, never a generation; the seal
binds the source run, its answer list and the judge; the run page compares the two judges.
"""
import hashlib
import json
import os

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.analysis.grades import final_grades
from experiments.core.canonical import canonical_json
from experiments.core.slot_keys import parse_slot_key
from experiments.core.stats import quadratic_kappa
from experiments.execution import control, progress
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.journal import slot_execute
from experiments.execution.policy import RunError
from experiments.execution.sealing import protocol_settings, seal_mismatches
from experiments.models import Grade, ModelCall, Prediction, Protocol, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import (
    FUSION, ONE_SHOT, QUESTION_ONLY, Roles, Sleeps, build_cohort, gemini_model, make_run, openai_model,
)
from tests.llm_fake_server import running_fake_llm
from tests.test_engine_queue import live_database, redis_connection  # noqa: F401 (fixtures of the queue test)

CONTRAST = {"name": "fusion - one-shot", "terms": {FUSION: 1, ONE_SHOT: -1}, "family": False, "criterion": None}
SECOND = {"name": "one-shot - question", "terms": {ONE_SHOT: 1, QUESTION_ONLY: -1}, "family": False,
          "criterion": None}
ANSWERS = ["Alpha answer.", "Beta answer.", "", "Gamma answer.", "Alpha answer."]


def judge_text(request):
    """The first judge (OpenAI wire) and the second (Gemini wire) grade by different rules."""
    predicted = json.dumps(request.json)  # the whole body: the predicted answer is in it
    if request.wire_format == "gemini":
        score = 2 if "Alpha" in predicted.split("PREDICTED ANSWER", 1)[1] else (
            0 if "Beta" in predicted.split("PREDICTED ANSWER", 1)[1] else 1)
    else:
        score = 3 if "Alpha" in predicted.split("PREDICTED ANSWER", 1)[1] else 1
    return json.dumps({"score": score, "rationale": "test grade"})


@pytest.fixture(autouse=True)
def granted(cast):
    """The administrator's grant for the tests' paid endpoint (tests/test_endpoint_grants.py: without one)."""
    from experiments.models import EndpointGrant
    EndpointGrant.objects.create(endpoint="test-loopback", user=cast["owner"])


@pytest.fixture
def roles(server):
    return Roles(server, answer=ANSWERS, judge=judge_text)


@pytest.fixture
def source(project, cast, server, roles, http):
    cohort = build_cohort(project, sessions=3, targets=2, name="regrade")
    run = make_run(project, cohort, conditions=[QUESTION_ONLY, ONE_SHOT, FUSION], generator=openai_model(server),
                   contrasts=[CONTRAST, SECOND], name="source")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    return run


def distinct_answers(run, *, empty=False):
    statuses = [Prediction.Status.OK] + ([Prediction.Status.EMPTY] if empty else [])
    return set(Prediction.objects.filter(run=run, status__in=statuses).values_list("task_id", "answer_sha256"))


def regrade(source, user, server, **judge_changes):
    protocol = control.regrade_create(source=source, user=user, judge=gemini_model(server, **judge_changes))
    run = Run.objects.create(protocol=protocol)
    control.run_start(run=run)
    return run


# --- the engine: one judge call per distinct answer, nothing else -------------------------------

def test_a_regrade_calls_the_judge_once_per_distinct_answer_and_generates_nothing(
        project, cast, server, roles, http, source):
    assert Prediction.objects.filter(run=source, status=Prediction.Status.EMPTY).exists()  # an operational zero
    before_requests, before_kinds = len(server.requests), dict(roles.kinds)
    run = regrade(source, cast["owner"], server)
    assert run.phase == Phase.JUDGING  # straight to its one phase
    run = run_inline(run.pk, client=http, sleep=Sleeps())

    assert run.status == Run.Status.FINISHED
    expected = distinct_answers(source)  # non-empty ones: an empty answer is graded by rule
    slots = Slot.objects.filter(run=run)
    assert {s.phase for s in slots} == {Phase.JUDGING} and {s.role for s in slots} == {Slot.Role.JUDGE}
    assert {(s.task_id, parse_slot_key(s.key).answer_sha) for s in slots} == expected
    calls = ModelCall.objects.filter(slot__run=run)
    assert calls.count() == len(expected) == slots.count()
    assert all(c.basis == ModelCall.Basis.FIRST and c.outcome == "ok" for c in calls)
    new = server.requests[before_requests:]
    assert len(new) == len(expected) and {r.wire_format for r in new} == {"gemini"}
    grown = {k: roles.kinds[k] - before_kinds.get(k, 0) for k in roles.kinds}
    assert {k: n for k, n in grown.items() if n} == {"judge": len(expected)}  # no generation of any kind
    # Every graded answer of the source is graded here, empty ones as operational zeros again.
    grades = {(g.task_id, g.answer_sha256): g for g in Grade.objects.filter(run=run)}
    assert set(grades) == distinct_answers(source, empty=True)
    empty_sha = hashlib.sha256(b"").hexdigest()
    assert all(g.status == Grade.Status.OPERATIONAL_ZERO and g.slot_id is None
               for key, g in grades.items() if key[1] == empty_sha)
    # The predictions are the source's, copied: same answers, no request of this run wrote them.
    copied = Prediction.objects.filter(run=run)
    assert copied.count() == Prediction.objects.filter(run=source).count()
    assert not copied.exclude(slot=None).exists()
    assert sorted(copied.values_list("task_id", "condition", "label", "status", "answer_sha256")) == sorted(
        Prediction.objects.filter(run=source).values_list("task_id", "condition", "label", "status", "answer_sha256"))

    run_inline(run.pk, client=http, sleep=Sleeps())  # again: finished, nothing is sent
    assert len(server.requests) == before_requests + len(expected)
    assert run_drive(run.pk).slot_ids == ()


def test_an_interrupted_regrade_resumes_without_calling_again(project, cast, server, roles, http, source):
    run = regrade(source, cast["owner"], server)
    step = run_drive(run.pk)
    assert step.phase == Phase.JUDGING and len(step.slot_ids) == len(distinct_answers(source))
    first_half = step.slot_ids[: len(step.slot_ids) // 2]
    for slot_id in first_half:
        slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="test", sleep=Sleeps())
    control.run_pause(run=run, user=cast["owner"], reason="interrupted")
    for slot_id in step.slot_ids:  # a paused run sends nothing, whoever asks
        slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="test", sleep=Sleeps())
    assert ModelCall.objects.filter(slot__run=run).count() == len(first_half)
    control.run_resume(run=run, user=cast["owner"], reason="go on")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    per_slot = list(Slot.objects.filter(run=run).values_list("calls__attempt", flat=True))
    assert per_slot == [1] * len(step.slot_ids)  # every slot paid once, none twice


def test_the_seal_binds_the_source_run_its_answer_list_and_the_judge(project, cast, server, source):
    judge = gemini_model(server)
    protocol = control.regrade_create(source=source, user=cast["owner"], judge=judge)
    assert protocol.is_sealed() and protocol.regrade_of == source and protocol.sealed_by == cast["owner"]
    seal = protocol.seal["regrade"]
    graded = Prediction.objects.filter(run=source, status__in=["ok", "empty"]).select_related("task__session")
    answers = sorted({(p.task.session.external_id, p.task.position, p.answer_sha256) for p in graded})
    lines = "".join(canonical_json({"session": s, "position": pos, "answer_sha256": sha}) + "\n"
                    for s, pos, sha in answers)
    assert seal["source_run"] == source.pk
    assert seal["answers_sha256"] == hashlib.sha256(lines.encode()).hexdigest()
    assert seal["answers"] == len(answers) == len(distinct_answers(source, empty=True))
    empty = set(Prediction.objects.filter(run=source, status="empty").values_list("task_id", "answer_sha256"))
    assert seal["operational_zeros"] == len(empty) > 0 and seal["judge"] == judge
    assert set(protocol.seal["prompts"]) == {"judge_system", "judge_user"}  # nothing else is sent
    assert protocol_settings(protocol)["regrade_of"] == source.pk and protocol_settings(protocol)["judge"] == judge
    assert "regrade" not in source.protocol.seal and "regrade_of" not in protocol_settings(source.protocol)
    # Same cohort, conditions and analysis as the source: its contrasts are read again.
    for field in ("cohort_id", "conditions", "contrasts", "bootstrap", "generator", "retry_policy"):
        assert getattr(protocol, field) == getattr(source.protocol, field)

    # A source answer changed after sealing: the re-grade no longer starts.
    run = Run.objects.create(protocol=protocol)
    Prediction.objects.filter(run=source, status="ok").update(answer_sha256="0" * 64)
    assert any(p.startswith(f"the answers of run {source.pk} changed") for p in seal_mismatches(protocol))
    with pytest.raises(RunError, match="the seal no longer matches"):
        control.run_start(run=run)


def test_the_same_judge_again_is_a_retest(project, cast, server, roles, http, source):
    protocol = control.regrade_create(source=source, user=cast["owner"])
    assert protocol.judge == source.protocol.judge and "retest" in protocol.name
    run = Run.objects.create(protocol=protocol)
    control.run_start(run=run)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    judges = run.analysis["judges"]
    assert judges["same_judge"] and judges["agreement"]["exact"]["estimate"] == 1.0  # a deterministic judge
    assert judges["agreement"]["kappa"]["estimate"] == pytest.approx(1.0)


# --- judge against judge ------------------------------------------------------------------------

def test_judge_agreement_is_computed_on_the_shared_items_and_shown_to_every_reader(
        client, project, cast, server, roles, http, source):
    run = run_inline(regrade(source, cast["owner"], server).pk, client=http, sleep=Sleeps())
    first = dict(((g.task_id, g.answer_sha256), g.score) for g in Grade.objects.filter(run=source, status="ok"))
    second = dict(((g.task_id, g.answer_sha256), g.score) for g in Grade.objects.filter(run=run, status="ok"))
    shared = sorted(set(first) & set(second))
    a, b = [first[k] for k in shared], [second[k] for k in shared]
    agreement = run.analysis["judges"]["agreement"]
    assert agreement["n_pairs"] == len(shared) == len(distinct_answers(source))
    assert agreement["n_people"] == 3 and agreement["draws"] == 200
    assert agreement["kappa"]["estimate"] == pytest.approx(quadratic_kappa(a, b))
    assert agreement["exact"]["estimate"] == pytest.approx(sum(x == y for x, y in zip(a, b)) / len(a))
    assert agreement["within_one"]["estimate"] == pytest.approx(sum(abs(x - y) <= 1 for x, y in zip(a, b)) / len(a))
    for name in ("exact", "within_one", "kappa", "alpha"):
        assert set(agreement[name]) == {"estimate", "lo", "hi"}
    assert sum(map(sum, agreement["confusion"])) == len(shared)
    assert set(agreement) == {"n_pairs", "n_people", "draws", "seed", "confusion", "exact", "within_one", "kappa",
                              "alpha", "tails"}

    kappa = f"{agreement['kappa']['estimate']:.3f}"
    for who in ("owner", "analyst", "viewer"):
        client.force_login(cast[who])
        body = client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
        assert "Judge against judge" in body and "Quadratic-weighted κ" in body and kappa in body
        assert 'id="judge-contrasts"' in body and CONTRAST["name"] in body
        assert "Alpha answer" not in body  # numbers, never text
    client.force_login(cast["rater"])
    assert client.get(reverse("run_detail", args=[project.slug, run.pk])).status_code == 403


def test_contrasts_under_the_second_judge_are_on_its_dashboard_beside_the_first(
        client, project, cast, server, roles, http, source):
    run = run_inline(regrade(source, cast["owner"], server).pk, client=http, sleep=Sleeps())
    first = {c["name"]: c for c in source.analysis["contrasts"]}
    second = {c["name"]: c for c in run.analysis["contrasts"]}
    assert set(second) == {CONTRAST["name"], SECOND["name"]}
    assert all("estimate" in c for c in second.values())
    # The first judge gives Alpha 3 and the rest 1, the second Alpha 2, Beta 0: the numbers differ.
    assert final_grades(run) != final_grades(source)
    assert any(second[n]["estimate"] != first[n]["estimate"] for n in second)
    client.force_login(cast["viewer"])
    body = client.get(reverse("run_dashboard", args=[project.slug, run.pk])).content.decode()
    assert CONTRAST["name"] in body and f"{second[CONTRAST['name']]['estimate']:.4f}" in body
    detail = client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
    table = detail.split('id="judge-contrasts"', 1)[1].split("</table>", 1)[0]
    for c in (first[CONTRAST["name"]], second[CONTRAST["name"]]):  # 0.500 under the first, 0.389 the second
        assert f"{c['estimate']:.3f}" in table


def test_the_agreement_statistics_on_known_ratings():
    from experiments.analysis import judges

    a = [0, 1, 2, 3, 3, 2, 1, 0, 2, 2, 1, 3]
    b = [0, 1, 1, 3, 2, 2, 1, 1, 2, 3, 0, 3]
    people = ["p1", "p1", "p2", "p2", "p3", "p3", "p4", "p4", "p5", "p5", "p6", "p6"]
    result = judges.agreement_bootstrap(a, b, people, draws=500, seed=11)
    assert result.kappa.estimate == pytest.approx(quadratic_kappa(a, b))
    assert result.exact.estimate == pytest.approx(7 / 12) and result.within_one.estimate == 1.0
    assert (result.n_pairs, result.n_people) == (12, 6)
    assert result.confusion[1] == [1, 2, 0, 0] and sum(map(sum, result.confusion)) == 12
    for name in ("exact", "kappa", "alpha"):
        interval = getattr(result, name)
        assert interval.lo <= interval.estimate <= interval.hi
    assert judges.agreement_bootstrap(a, b, people, draws=500, seed=11).as_dict() == result.as_dict()
    # One grade from both judges: κ is undefined, and stored as null, not NaN.
    assert judges._finite(judges.agreement_bootstrap([2, 2], [2, 2], ["p", "q"], draws=50, seed=1)
                          .as_dict())["kappa"]["estimate"] is None


# --- creating a re-grade: the owner's form and the command ----------------------------------------

def judge_post(server, **changes):
    data = {"regrade-judge_choice": "other", "judge-provider": "gemini", "judge-base_url": server.gemini_base_url,
            "judge-model": "gemini-test-flash", "judge-max_output_tokens": "400", "judge-token_param":
            "max_completion_tokens", "judge-timeout_s": "5", "judge-concurrency": "3"}
    data.update(changes)
    return data


def test_the_owner_regrades_from_the_run_page_through_the_queue(
        client, project, cast, server, source, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    client.force_login(cast["owner"])
    page = client.get(reverse("run_detail", args=[project.slug, source.pk])).content.decode()
    assert 'id="regrade-form"' in page and "Re-grade with another judge" in page
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("run_regrade", args=[project.slug, source.pk]),
                               judge_post(server, **{"judge-structured_output": "on"}))
    run = Run.objects.latest("pk")
    assert response.status_code == 302 and response.url == reverse("run_detail", args=[project.slug, run.pk])
    protocol = run.protocol
    assert protocol.regrade_of == source and protocol.is_sealed() and protocol.created_by == cast["owner"]
    assert protocol.judge["provider"] == "gemini" and protocol.judge["structured_output"] is True
    assert protocol.concurrency["gemini"] == 3
    assert (run.status, run.phase, run.created_by) == (Run.Status.RUNNING, Phase.JUDGING, cast["owner"])
    assert len(callbacks) == 1 and not Slot.objects.filter(run=run).exists()  # nothing ran in the request
    # The source run's page lists it; the new run's page names its source.
    assert f"run {run.pk}</a>" in client.get(reverse("run_detail", args=[project.slug, source.pk])).content.decode()
    assert 'id="regrade-of"' in client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()

    with django_capture_on_commit_callbacks(execute=False):
        client.post(reverse("run_regrade", args=[project.slug, source.pk]), {"regrade-judge_choice": "same"})
    retest = Run.objects.latest("pk").protocol
    assert retest.judge == source.protocol.judge and retest.regrade_of == source


@pytest.mark.parametrize("who, status", [("analyst", 403), ("viewer", 403), ("rater", 403), ("outsider", 404)])
def test_only_an_owner_can_regrade(client, project, cast, server, source, monkeypatch, who, status):
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    client.force_login(cast[who])
    protocols = Protocol.objects.count()
    assert client.post(reverse("run_regrade", args=[project.slug, source.pk]), judge_post(server)).status_code == status
    assert client.get(reverse("run_regrade", args=[project.slug, source.pk])).status_code == status
    assert Protocol.objects.count() == protocols
    if status == 403 and who != "rater":
        page = client.get(reverse("run_detail", args=[project.slug, source.pk])).content.decode()
        assert 'id="regrade-form"' not in page


@pytest.mark.parametrize("case", ["running source", "no queue", "unknown provider", "pasted key"])
def test_bad_input_on_the_page_creates_nothing_and_says_why(client, project, cast, server, source, monkeypatch, case):
    monkeypatch.setattr(progress, "queue_reachable", lambda: case != "no queue")
    target, data = source, judge_post(server)
    if case == "running source":
        target = make_run(project, source.protocol.cohort, conditions=[QUESTION_ONLY],
                          generator=openai_model(server), name="still running")
    elif case == "unknown provider":
        data["judge-provider"] = "azure"
    elif case == "pasted key":
        data["judge-api_key_env"] = "sk-proj-0123456789abcdefABCDEF0123456789"
    client.force_login(cast["owner"])
    protocols, runs = Protocol.objects.count(), Run.objects.count()
    response = client.post(reverse("run_regrade", args=[project.slug, target.pk]), data)
    body = response.content.decode()
    assert response.status_code == 200 and (Protocol.objects.count(), Run.objects.count()) == (protocols, runs)
    assert {"running source": "only a finished run can be re-graded", "no queue": "No queue is reachable",
            "unknown provider": "Select a valid choice", "pasted key": "looks like an API key"}[case] in body
    assert "sk-proj-0123456789" not in body


def test_the_command_regrades_inline_with_another_judge_or_the_same(project, cast, server, roles, source):
    before = len(server.requests)
    out = call_command("regrade_run", "--run", str(source.pk), "--user", "owner-user", "--provider", "gemini",
                       "--base-url", server.gemini_base_url, "--model", "gemini-test-flash", "--timeout-s", "5",
                       "--cap", "2", "--inline")
    run = Run.objects.latest("pk")
    assert run.protocol.regrade_of == source and run.status == Run.Status.FINISHED and run.inline
    assert run.protocol.concurrency["gemini"] == 2
    assert f"re-grades {len(distinct_answers(source, empty=True))} answers of run {source.pk}" in out
    assert "ran inline and is finished" in out
    assert len(server.requests) - before == len(distinct_answers(source)) == ModelCall.objects.filter(
        slot__run=run).count()

    out = call_command("regrade_run", "--run", str(source.pk), "--user", "owner-user", "--same-judge")
    protocol = Protocol.objects.latest("pk")
    assert protocol.is_sealed() and protocol.judge == source.protocol.judge and not protocol.runs.exists()
    assert f"manage.py run_start {protocol.pk}" in out


@pytest.mark.parametrize("case, message", [
    ("non-owner", "'analyst-user' is not an owner of project 'alpha'"),
    ("running source", "only a finished run can be re-graded"),
    ("unknown provider", "provider must be one of"),
    ("no judge", "choose the judge"),
    ("both", "--same-judge re-grades with the source run's judge as it is"),
    ("offline structured", "structured output is not supported by provider 'offline'"),
    ("no such run", "no run with id 999999"),
])
def test_bad_input_to_the_command_creates_nothing(project, cast, server, source, case, message):
    run_id, user, extra = source.pk, "owner-user", ["--provider", "gemini", "--model", "m",
                                                   "--base-url", server.gemini_base_url]
    if case == "non-owner":
        user = "analyst-user"
    elif case == "running source":
        run_id = make_run(project, source.protocol.cohort, conditions=[QUESTION_ONLY],
                          generator=openai_model(server), name="still running").pk
    elif case == "unknown provider":
        extra = ["--provider", "azure", "--model", "m"]
    elif case == "no judge":
        extra = []
    elif case == "both":
        extra = ["--same-judge", "--provider", "gemini"]
    elif case == "offline structured":
        extra = ["--provider", "offline", "--model", "offline-stand-in", "--structured-output"]
    elif case == "no such run":
        run_id = 999999
    protocols, runs = Protocol.objects.count(), Run.objects.count()
    with pytest.raises(CommandError, match=None) as refused:
        call_command("regrade_run", "--run", str(run_id), "--user", user, *extra)
    assert message in str(refused.value)
    assert (Protocol.objects.count(), Run.objects.count()) == (protocols, runs)


# --- through the queue ----------------------------------------------------------------------------

@pytest.mark.slow
def test_a_regrade_runs_through_the_queue_workers_with_one_call_per_answer(
        live_database, redis_connection, tmp_path, http):
    """The same journal under real rq workers: the judging queue, then analysis, nothing else."""
    from django.conf import settings as django_settings

    from experiments.execution.jobs import run_enqueue
    from experiments.models import Project
    from tests.test_engine_queue import Workers, wait_for

    redis_connection.flushdb()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ownwords_site.test_settings", "DATABASE_URL": live_database,
           "REDIS_URL": django_settings.REDIS_URL, "PYTHONUNBUFFERED": "1"}
    workers = Workers(env, tmp_path)
    try:
        with running_fake_llm() as server:
            Roles(server, answer=ANSWERS, judge=judge_text)
            project = Project.objects.create(slug="queued", name="Queued re-grade")
            cohort = build_cohort(project, sessions=2, targets=2, name="queued")
            source = run_inline(make_run(project, cohort, conditions=[QUESTION_ONLY, ONE_SHOT],
                                         generator=openai_model(server, timeout_s=2.0), name="queued").pk,
                                client=http, sleep=Sleeps())
            before = len(server.requests)
            protocol = control.regrade_create(source=source, user=None,
                                              judge=gemini_model(server, timeout_s=2.0))
            run = Run.objects.create(protocol=protocol)
            control.run_start(run=run)
            workers.start()
            run_enqueue(run.pk)
            run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).first(), 90,
                           "the re-grade to finish", workers)
            sent = server.requests[before:]
        expected = distinct_answers(source)
        assert len(sent) == len(expected) == ModelCall.objects.filter(slot__run=run).count()
        assert {r.wire_format for r in sent} == {"gemini"}
        assert run.analysis["judges"]["agreement"]["n_pairs"] == len(expected)
    finally:
        workers.kill_all()
        redis_connection.flushdb()
