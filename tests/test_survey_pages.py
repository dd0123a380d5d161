"""Survey pages by role: the import page (owners; good and bad input), the study page,
a survey run's dashboard (numbers for owners, analysts and viewers) and a respondent's items with
predicted and recorded options (only roles that read participant text; audited)."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments.core.survey.prompt import MEMORY, OWNWORDS, SCREENER_ONLY
from experiments.execution.driver import run_inline
from experiments.models import AuditEntry, Cohort, SurveyItem, SurveyRespondent, SurveyStudy
from tests.engine_helpers import Roles, make_run, openai_model, user_text
from tests.survey_helpers import SAMPLE, jsonl, sample_rows
from tests.test_survey_import import _counts


def _upload(name, text):
    return SimpleUploadedFile(name, text.encode("utf-8"), content_type="application/octet-stream")


@pytest.mark.django_db
def test_import_page_owner_imports_and_bad_input_changes_nothing(client, project, cast):
    url = reverse("survey_import", args=[project.slug])
    for role in ("analyst", "rater", "viewer"):
        client.force_login(cast[role])
        assert client.get(url).status_code == 403
    client.force_login(cast["owner"])
    assert client.get(url).status_code == 200
    rows = sample_rows()
    bad_rows = list(rows)
    bad_rows[5] = {**rows[5], "wave1_3_persona_json": "{not json"}  # a persona that is not valid JSON
    before = _counts()
    response = client.post(url, {"name": "twin", "files": _upload("bad.jsonl", jsonl(bad_rows))})
    assert response.status_code == 400
    page = response.content.decode()
    assert f"respondent {rows[5]['pid']}" in page and "nothing was imported" in page
    assert _counts() == before
    response = client.post(url, {"name": "twin", "files": _upload("rows.jsonl", SAMPLE.read_text()),
                                 "synthetic": "on"})
    study = SurveyStudy.objects.get(project=project, name="twin")
    assert response.status_code == 302 and response.url == reverse("survey_study", args=[project.slug, study.pk])
    assert study.synthetic and study.respondents.count() == 12
    page = client.get(response.url).content.decode()
    assert 'id="synthetic-label"' in page and "12 imported of 12 read" in page
    # the full_persona configuration is refused on the page too
    from tests.survey_helpers import FULL_PERSONA_SAMPLE
    before = _counts()
    response = client.post(url, {"name": "full", "files": _upload("full.jsonl", FULL_PERSONA_SAMPLE.read_text())})
    assert response.status_code == 400 and "full_persona" in response.content.decode()
    assert _counts() == before


def survey_reply(request) -> str:
    text = user_text(request).split("[SURVEY QUESTIONS]")[1]
    import re
    numbers = [int(n) for n in re.findall(r"^(\d+)\. ", text, flags=re.M)]
    answers = {str(n): 2 for n in numbers}
    answers["1"] = "two"  # a per-item parse failure, shown on the respondent's page
    return json.dumps(answers)


@pytest.mark.django_db(transaction=True)
def test_survey_run_pages_by_role(client, server, project, cast):
    from django.core.management import call_command
    call_command("import_survey", str(SAMPLE), "--project", project.slug, "--name", "twin", "--synthetic")
    cohort = Cohort.objects.get(name="twin development")
    Roles(server, answer=survey_reply)
    run = make_run(project, cohort, conditions=[SCREENER_ONLY, MEMORY, OWNWORDS], generator=openai_model(server),
                   bootstrap={"draws": 200})
    run = run_inline(run.pk)
    assert run.phase == "done", run.status_reason
    respondent = SurveyRespondent.objects.filter(pk__in=cohort.survey_members.values("respondent")).first()
    dashboard = reverse("survey_dashboard", args=[project.slug, run.pk])
    person = reverse("survey_respondent", args=[project.slug, run.pk, respondent.pk])
    persona_line = SurveyItem.objects.filter(respondent=respondent).first().question
    for role in ("owner", "analyst", "viewer"):
        client.force_login(cast[role])
        page = client.get(dashboard).content.decode()
        assert 'id="survey-means"' in page and 'id="human-retest"' in page and 'id="synthetic-label"' in page
        assert "survey:ownwords(B=|memory|) − survey:memory" in page and 'id="survey-criteria"' in page
        assert respondent.persona_text[:40] not in page
        # the paired-difference chart names conditions as the means chart does, never by raw key
        forest = client.get(dashboard).context["forest"]
        labels = {y for trace in forest["data"] for y in trace["y"]}
        assert labels and not any("survey:" in y for y in labels), labels
        # the interview dashboard's address leads here
        assert client.get(reverse("run_dashboard", args=[project.slug, run.pk])).url == dashboard
        # the run page itself works for a survey run, and leads to the survey's pages
        run_page = client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
        assert 'id="survey-links"' in run_page and dashboard in run_page and "Explore predictions" not in run_page
        project_page = client.get(reverse("project_detail", args=[project.slug])).content.decode()
        assert 'id="survey-studies"' in project_page and "(synthetic)" in project_page
    client.force_login(cast["viewer"])
    protocol_page = client.get(reverse("protocol_detail", args=[project.slug, run.protocol.pk])).content.decode()
    n = cohort.survey_members.count()  # one memory call per respondent, one answer per respondent and condition
    assert f'id="estimate-calls">{n + 3 * n}<' in protocol_page and "no judge" in protocol_page
    sample_page = client.get(reverse("cohort_detail", args=[project.slug, cohort.pk]))
    assert sample_page.status_code == 200 and "survey sample" in sample_page.content.decode()
    for role, status in (("owner", 200), ("analyst", 200), ("viewer", 403), ("rater", 403), ("outsider", 404)):
        client.force_login(cast[role])
        assert client.get(person).status_code == status, role
        assert client.get(reverse("survey_respondents", args=[project.slug, run.pk])).status_code == status
    client.force_login(cast["viewer"])
    csv = client.get(reverse("survey_dashboard_csv", args=[project.slug, run.pk, "contrasts"]))
    assert csv.status_code == 200 and csv.content.decode().startswith('"first","second","metric","estimate","lo","hi","people"')
    assert csv.content.decode().count("\r\n") == 1 + len(run.analysis["contrasts"])
    assert client.get(reverse("survey_dashboard_csv", args=[project.slug, run.pk, "nope"])).status_code == 404
    assert client.get(reverse("run_dashboard_csv", args=[project.slug, run.pk, "means"])).url == \
        reverse("survey_dashboard_csv", args=[project.slug, run.pk, "means"])
    client.force_login(cast["rater"])
    assert client.get(dashboard).status_code == 403
    # the interview explorer and task list of a survey run lead to its respondents (no error)
    client.force_login(cast["analyst"])
    respondents = reverse("survey_respondents", args=[project.slug, run.pk])
    assert client.get(reverse("run_explorer", args=[project.slug, run.pk])).url == respondents
    assert client.get(reverse("prediction_list", args=[project.slug, run.pk])).url == respondents
    client.force_login(cast["analyst"])
    before = AuditEntry.objects.count()
    page = client.get(person).content.decode()
    assert AuditEntry.objects.count() == before + 1
    assert persona_line[:30] in page and "not-an-integer" in page and 'id="synthetic-label"' in page
    first = SurveyItem.objects.get(respondent=respondent, number=2)
    assert f"2 = {first.options[1]}" in page  # predicted option beside the recorded one
    assert f"{first.wave4} = {first.options[first.wave4 - 1]}" in page


@pytest.mark.django_db
def test_hostile_pid_of_an_excluded_respondent_is_shown_escaped(client, project, cast):
    from tests.survey_helpers import decoded, encoded
    rows = sample_rows()
    hostile = '<script>alert("pid")</script>' + "x" * 150  # long and hostile: stored and shown as text
    leaky = decoded(rows[0])
    leaky["pid"] = hostile
    leaky["wave1_3_persona_json"].append(json.loads(json.dumps(leaky["wave4_Q_wave4_A"][0])))
    rows[0] = encoded(leaky)
    client.force_login(cast["owner"])
    response = client.post(reverse("survey_import", args=[project.slug]),
                           {"name": "hostile", "files": _upload("rows.jsonl", jsonl(rows))})
    assert response.status_code == 302
    client.force_login(cast["viewer"])
    page = client.get(response.url).content.decode()
    assert "&lt;script&gt;alert(&quot;pid&quot;)&lt;/script&gt;" in page and "<script>alert" not in page
    assert 'id="exclusions"' in page and "11 imported of 12 read" in page


@pytest.mark.django_db
def test_the_protocol_form_offers_survey_conditions_and_makes_a_survey_protocol(client, project, cast):
    from django.core.management import call_command
    from experiments.models import Protocol
    from tests.test_pages_runs import protocol_form_data
    call_command("import_survey", str(SAMPLE), "--project", project.slug, "--name", "twin", "--synthetic")
    cohort = Cohort.objects.get(name="twin development")
    client.force_login(cast["analyst"])
    url = reverse("protocol_create", args=[project.slug])
    body = client.get(url).content.decode()
    assert 'id="family-survey"' in body and f'value="{OWNWORDS}"' in body
    # interview conditions on a survey sample are refused with the reason, nothing stored
    response = client.post(url, protocol_form_data(cohort, conditions=["question-only", SCREENER_ONLY],
                                                    contrasts=[{}, {}, {}]))
    assert response.status_code == 200 and "never both" in response.content.decode()
    assert not Protocol.objects.exists()
    response = client.post(url, protocol_form_data(cohort, conditions=[OWNWORDS, SCREENER_ONLY, MEMORY],
                                                    contrasts=[{}, {}, {}]))
    assert response.status_code == 302, (response.context["editor"].main.errors, response.context["editor"].judge.errors)
    protocol = Protocol.objects.get(name="p-new")
    assert protocol.conditions == [SCREENER_ONLY, MEMORY, OWNWORDS]  # the paper's order


@pytest.fixture
def offline_survey_run(project):
    from django.core.management import call_command
    call_command("import_survey", str(SAMPLE), "--project", project.slug, "--name", "twin", "--synthetic")
    offline = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
    run = make_run(project, Cohort.objects.get(name="twin development"), conditions=[SCREENER_ONLY, OWNWORDS],
                   generator=offline, bootstrap={"draws": 200})
    run = run_inline(run.pk)
    assert run.phase == "done", run.status_reason
    return run


@pytest.mark.django_db
def test_a_survey_run_offers_no_regrade_and_refuses_one(client, project, cast, offline_survey_run):
    """A survey run is scored against the recorded options, not by a judge: no re-grade form on
    its page, and a posted re-grade is refused with a reason and creates nothing."""
    from experiments.models import Protocol, Run
    run = offline_survey_run
    client.force_login(cast["owner"])
    page = client.get(reverse("run_detail", args=[project.slug, run.pk])).content.decode()
    assert 'id="survey-links"' in page and 'id="regrade"' not in page
    before = (Run.objects.count(), Protocol.objects.count())
    response = client.post(reverse("run_regrade", args=[project.slug, run.pk]),
                           {"judge_choice": "same", "name": "survey-regrade"})
    assert response.status_code == 200 and "is a survey run" in response.content.decode()
    assert (Run.objects.count(), Protocol.objects.count()) == before


@pytest.mark.django_db
def test_the_run_page_of_an_offline_survey_run_speaks_of_answers_not_grades(client, project, cast, offline_survey_run):
    """No judge grades a survey run, even when its protocol names the offline judge."""
    from experiments.models import Protocol
    run = offline_survey_run
    assert run.protocol.judge["provider"] == "offline"
    client.force_login(cast["viewer"])
    url = reverse("run_detail", args=[project.slug, run.pk])
    page = client.get(url).content.decode()
    assert "answers\n  of this run come from the offline stand-in" in page and "answers and grades" not in page
    Protocol.objects.filter(pk=run.protocol_id).update(
        generator={"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert 'id="offline-notice"' not in client.get(url).content.decode()  # only the unused judge is offline
