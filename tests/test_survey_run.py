"""A survey run end to end through the engine, against the tests' local LLM server:
memories, one answer call per respondent and condition, answers parsed per item (failures
recorded, never redrawn), scored without a judge."""
import json
import re

import pytest
from django.core.management import call_command

from experiments.core.slot_keys import parse_slot_key
from experiments.core.survey.prompt import (
    MEMORY, MEMORY_PLUS_OWNWORDS, MEMORY_PLUS_WHOLE_PERSONA, OWNWORDS, SCREENER_ONLY, WHOLE_PERSONA,
)
from experiments.core.survey.scores import HUMAN_RETEST
from experiments.execution.driver import run_inline
from experiments.execution.sealing import protocol_problems
from experiments.models import Cohort, Run, Slot, SurveyAnswer, SurveyItem, SurveyMemory
from tests.engine_helpers import Roles, make_protocol, make_run, openai_model, user_text
from tests.survey_helpers import SAMPLE

ALL = [SCREENER_ONLY, MEMORY, OWNWORDS, MEMORY_PLUS_OWNWORDS, WHOLE_PERSONA, MEMORY_PLUS_WHOLE_PERSONA]


MEMORY_BLOCK = "[A DESCRIPTION OF THIS RESPONDENT]"
EXCERPT_BLOCK = "[RETRIEVED ANSWERS BY THIS RESPONDENT]"
PERSONA_BLOCK = "EARLIER SURVEY ANSWERS]"


def survey_reply(request) -> str:
    """Every item answered 1, except: memory + whole persona's reply is not JSON; the memory
    condition leaves item 1 out; the whole-persona condition answers item 1 with a string, item 2
    out of range and adds an item that does not exist."""
    text = user_text(request)
    numbers = [int(n) for n in re.findall(r"^(\d+)\. ", text.split("[SURVEY QUESTIONS]")[1], flags=re.M)]
    if MEMORY_BLOCK in text and PERSONA_BLOCK in text:
        return "I cannot answer that."
    answers = {str(n): 1 for n in numbers}
    if MEMORY_BLOCK in text and EXCERPT_BLOCK not in text:
        del answers["1"]
    if PERSONA_BLOCK in text and MEMORY_BLOCK not in text:
        answers["1"], answers["2"], answers["999"] = "1", 99, 1
    return json.dumps(answers)


@pytest.fixture
def survey_sample(db):
    from experiments.models import Project
    project = Project.objects.create(slug="svy", name="Survey")
    call_command("import_survey", str(SAMPLE), "--project", "svy", "--name", "twin", "--synthetic")
    return project, Cohort.objects.get(name="twin development")


@pytest.mark.django_db(transaction=True)
def test_survey_run_end_to_end(server, survey_sample):
    project, cohort = survey_sample
    roles = Roles(server, answer=survey_reply, memory=lambda request: "Votes, reads the news, shops carefully.")
    run = make_run(project, cohort, conditions=ALL, generator=openai_model(server), bootstrap={"draws": 200})
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    n = cohort.survey_members.count()
    # one memory call per respondent, one answer call per respondent and condition, nothing else
    assert Slot.objects.filter(run=run, phase="memories").count() == n
    assert Slot.objects.filter(run=run, phase="generation").count() == n * len(ALL)
    assert not Slot.objects.filter(run=run, phase__in=["decisions", "judging"]).exists()
    assert roles.kinds["memory"] == n and roles.kinds["judge"] == 0
    assert SurveyMemory.objects.filter(run=run, text__isnull=False).count() == n
    answers = SurveyAnswer.objects.filter(run=run)
    assert answers.count() == n * len(ALL)
    for answer in answers:
        items = SurveyItem.objects.filter(respondent=answer.respondent).count()
        assert len(answer.items) == items
    whole = answers.filter(condition=WHOLE_PERSONA).first()
    assert whole.items[0][:2] == [None, "not-an-integer"] and whole.items[1][:2] == [None, "out-of-range"]
    assert whole.items[2][:2] == [1, None] and whole.extra == ["999"]
    assert answers.filter(condition=MEMORY).first().items[0][:2] == [None, "missing"]
    unparsable = answers.filter(condition=MEMORY_PLUS_WHOLE_PERSONA).first()
    assert unparsable.error == "malformed-json" and {entry[1] for entry in unparsable.items} == {"missing"}
    # the screener-only answers were all usable: every item scored, none redrawn
    assert all(entry[0] == 1 for answer in answers.filter(condition=SCREENER_ONLY) for entry in answer.items)
    assert all(slot.calls.count() == 1 for slot in Slot.objects.filter(run=run))
    summary = run.analysis
    assert summary["kind"] == "survey" and summary["synthetic"]
    rows = {row["condition"]: row for row in summary["means"]}
    assert set(rows) == {*ALL, HUMAN_RETEST}
    assert rows[WHOLE_PERSONA]["problems"] == {"not-an-integer": n, "out-of-range": n}
    assert rows[MEMORY]["problems"] == {"missing": n}
    assert rows[MEMORY_PLUS_WHOLE_PERSONA]["items"] == 0 and rows[MEMORY_PLUS_WHOLE_PERSONA]["unscored"] > 0
    assert rows[SCREENER_ONLY]["unscored"] == 0
    assert rows[HUMAN_RETEST]["reference"] and rows[HUMAN_RETEST]["accuracy"] is not None
    # every condition against screener only, plus the paper's criterion contrasts, in both metrics
    pairs = {(c["first"], c["second"], c["metric"]) for c in summary["contrasts"]}
    assert (OWNWORDS, MEMORY, "deviation") in pairs and (WHOLE_PERSONA, SCREENER_ONLY, "accuracy") in pairs
    # a condition without one scored item has no contrast: said so, not dropped silently
    assert any(e.startswith(MEMORY_PLUS_WHOLE_PERSONA) for e in summary["errors"])
    assert {c["label"] for c in summary["criteria"]} == {"primary", "secondary"}
    assert all(isinstance(c["met"], bool) for c in summary["criteria"])


@pytest.mark.django_db
def test_survey_protocol_refuses_interview_conditions_and_needs_a_sample(survey_sample, server):
    project, cohort = survey_sample
    protocol = make_protocol(project, cohort, conditions=[SCREENER_ONLY, "question-only"],
                             generator=openai_model(server))
    problems = protocol_problems(protocol)
    assert any("never both" in p for p in problems)


@pytest.mark.django_db(transaction=True)
def test_survey_protocol_from_the_command_its_criterion_and_its_seal(server, survey_sample, tmp_path):
    from experiments.execution.sealing import seal_mismatches
    from experiments.models import Protocol, SurveyRespondent
    project, cohort = survey_sample
    spec = {"name": "svy-cli", "cohort": cohort.name, "conditions": [SCREENER_ONLY, MEMORY, OWNWORDS],
            "generator": openai_model(server), "judge": openai_model(server), "retry_policy": {"cooldown_s": 0},
            "contrasts": [{"name": "primary", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": False,
                           "criterion": "interval_above_zero"}], "bootstrap": {"draws": 200}}
    path = tmp_path / "protocol.json"
    path.write_text(json.dumps(spec))
    call_command("protocol_create", str(path), "--project", project.slug)
    protocol = Protocol.objects.get(name="svy-cli")
    call_command("protocol_seal", str(protocol.pk))
    protocol.refresh_from_db()
    assert protocol.is_sealed() and "survey_answer_system" in protocol.seal["prompts"]
    assert "judge_system" not in " ".join(protocol.seal["prompts"])
    Roles(server, answer=survey_reply)
    run = Run.objects.create(protocol=protocol)
    from experiments.execution.control import run_start
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED
    # the protocol's contrast and its criterion, evaluated on normalized deviation
    assert [(c["first"], c["second"]) for c in run.analysis["contrasts"]] == [(OWNWORDS, MEMORY)] * 2
    [criterion] = run.analysis["criteria"]
    assert criterion["metric"] == "deviation" and criterion["rule"] == "below-zero"
    report = call_command("run_report", str(run.pk))
    assert "survey analysis (4 respondents, SYNTHETIC" in report and criterion["sentence"] in report
    # a respondent changed after sealing: the seal no longer holds
    member = SurveyRespondent.objects.get(pk=cohort.survey_members.first().respondent_id)
    SurveyRespondent.objects.filter(pk=member.pk).update(persona_text=member.persona_text + " ")
    assert any("task list changed" in p for p in seal_mismatches(protocol, code=False))


@pytest.mark.django_db(transaction=True)
def test_a_failed_memory_leaves_its_conditions_missing_without_a_call(server, survey_sample):
    """A memory call that fails after its recoveries is recorded as failed (never re-sent); that
    respondent's memory conditions are missing without a call, their screener-only answer is asked."""
    from tests.llm_fake_server import Reply
    project, cohort = survey_sample
    Roles(server, answer=survey_reply)
    run = make_run(project, cohort, conditions=[SCREENER_ONLY, MEMORY], generator=openai_model(server),
                   bootstrap={"draws": 200})
    server.script(Reply(503, b""), Reply(503, b""), Reply(503, b""))  # the first memory call and its two recoveries
    run = run_inline(run.pk, sleep=lambda s: None)
    assert run.status == Run.Status.FINISHED, run.status_reason
    failed = Slot.objects.get(run=run, phase="memories", status=Slot.Status.FAILED)
    assert failed.calls.count() == 3
    respondent_id = parse_slot_key(failed.key).respondent_id
    assert SurveyMemory.objects.get(run=run, respondent_id=respondent_id).text is None
    missing = SurveyAnswer.objects.get(run=run, respondent_id=respondent_id, condition=MEMORY)
    assert (missing.status, missing.error, missing.slot_id) == ("missing", "memory missing", None)
    assert SurveyAnswer.objects.get(run=run, respondent_id=respondent_id, condition=SCREENER_ONLY).status == "ok"
    n = cohort.survey_members.count()
    assert Slot.objects.filter(run=run, phase="generation").count() == 2 * n - 1
    rows = {row["condition"]: row for row in run.analysis["means"]}
    assert rows[MEMORY]["people"] == n - 1 and rows[SCREENER_ONLY]["people"] == n


def test_the_offline_stand_in_answers_every_survey_item_with_one_of_its_options():
    from experiments.core.llm.offline import offline_reply
    from experiments.core.survey.answers import parse_survey_answer
    from experiments.core.survey.ownwords import whole_persona
    from experiments.core.survey.prompt import assemble_survey
    from experiments.core.survey.reader import read_survey_path
    from experiments.core.survey.screener import screener_text
    from experiments.core.survey.targets import target_items
    respondent = read_survey_path(SAMPLE)[0]
    items = target_items(respondent)
    for condition, evidence in ((SCREENER_ONLY, {}), (WHOLE_PERSONA, {"persona": whole_persona(respondent)})):
        sent = assemble_survey(condition, items, screener=screener_text(respondent), **evidence)
        reply = offline_reply(sent.system, sent.user)
        parsed = parse_survey_answer(reply, [len(i.options) for i in items])
        assert parsed.error is None and parsed.answered == len(items) and not parsed.extra
        assert reply == offline_reply(sent.system, sent.user)  # deterministic
