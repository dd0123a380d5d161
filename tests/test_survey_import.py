"""Importing survey studies: the command and the owners' page, whole or not at all."""
import json

import pytest
from django.core.management import CommandError, call_command

from experiments.models import (
    Cohort, Project, SurveyExclusion, SurveyItem, SurveyRespondent, SurveySampleMember, SurveyStudy,
)
from experiments.data.surveys import respondent_record, sample_respondents
from experiments.core.survey.reader import read_survey_path
from tests.survey_helpers import FULL_PERSONA_SAMPLE, SAMPLE, bad_answer_rows, decoded, encoded, find_question, jsonl, sample_rows


def _counts():
    return (SurveyStudy.objects.count(), SurveyRespondent.objects.count(), SurveyItem.objects.count(),
            SurveyExclusion.objects.count(), Cohort.objects.count(), SurveySampleMember.objects.count())


@pytest.mark.django_db
def test_import_command_stores_respondents_items_and_two_disjoint_seeded_samples():
    out = call_command("import_survey", str(SAMPLE), "--project", "svy", "--name", "twin", "--synthetic")
    assert "12 respondent(s) imported (SYNTHETIC)" in out
    study = SurveyStudy.objects.get(name="twin")
    assert study.synthetic and study.rows_read == 12
    assert study.respondents.count() == 12
    # every respondent rebuilt from storage is the respondent the core validated
    read = {r.pid: r for r in read_survey_path(SAMPLE)}
    for row in study.respondents.all():
        rebuilt = respondent_record(row)
        assert rebuilt.persona == read[row.pid].persona and rebuilt.wave4 == read[row.pid].wave4
        assert rebuilt.earlier == read[row.pid].earlier
        assert row.items.count() in (80, 84)
    dev, rep = Cohort.objects.get(name="twin development"), Cohort.objects.get(name="twin reported")
    assert dev.task_set is None and dev.requested_size == 4 and rep.requested_size == 8
    dev_pids = {r.pid for r in sample_respondents(dev)}
    rep_pids = {r.pid for r in sample_respondents(rep)}
    assert not dev_pids & rep_pids and len(dev_pids | rep_pids) == 12
    # the same seed gives the same order in another project
    call_command("import_survey", str(SAMPLE), "--project", "svy2", "--name", "twin")
    again = Cohort.objects.get(project__slug="svy2", name="twin development")
    assert [r.pid for r in sample_respondents(again)] == [r.pid for r in sample_respondents(dev)]


@pytest.mark.django_db
def test_full_persona_refused_and_nothing_changes():
    before = _counts()
    with pytest.raises(CommandError, match="full_persona"):
        call_command("import_survey", str(FULL_PERSONA_SAMPLE), "--project", "svy")
    assert _counts() == before
    assert not Project.objects.filter(slug="svy").exists()


@pytest.mark.django_db
def test_bad_answer_names_respondent_and_question_and_changes_nothing(tmp_path):
    rows, pid, qid = bad_answer_rows(3)
    path = tmp_path / "bad.jsonl"
    path.write_text(jsonl(rows))
    before = _counts()
    with pytest.raises(CommandError) as caught:
        call_command("import_survey", str(path), "--project", "svy")
    message = str(caught.value)
    assert f"respondent {pid}" in message and qid in message
    assert "nothing was imported" in message
    assert _counts() == before


@pytest.mark.django_db
def test_leaking_respondent_excluded_with_its_reason_shown(tmp_path):
    rows = sample_rows()
    leaky = decoded(rows[0])
    wave4 = leaky["wave4_Q_wave4_A"]
    leaky["wave1_3_persona_json"].append(json.loads(json.dumps(wave4[0])))
    rows[0] = encoded(leaky)
    path = tmp_path / "leak.jsonl"
    path.write_text(jsonl(rows))
    out = call_command("import_survey", str(path), "--project", "svy", "--name", "leaky")
    assert "11 respondent(s) imported, 1 excluded by the leak check" in out
    assert f"respondent {leaky['pid']}" in out or str(leaky["pid"]) in out
    exclusions = list(SurveyExclusion.objects.all())
    assert exclusions and all(e.pid == str(leaky["pid"]) and e.detail for e in exclusions)
    assert not SurveyRespondent.objects.filter(pid=str(leaky["pid"])).exists()


@pytest.mark.django_db
def test_study_name_in_use_refused():
    call_command("import_survey", str(SAMPLE), "--project", "svy", "--name", "twin")
    before = _counts()
    with pytest.raises(CommandError, match="exists"):
        call_command("import_survey", str(SAMPLE), "--project", "svy", "--name", "twin")
    assert _counts() == before


def test_find_question_helper_is_there():
    assert callable(find_question)
