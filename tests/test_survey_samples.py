"""A further survey sample of new respondents (App. H, Table 23's second sample): drawn from the
study's seeded order, never holding a respondent of the samples it excludes, and recording them."""
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.records import SurveyImportError
from experiments.core.survey.targets import further_sample, respondent_samples, seeded_order
from experiments.data.surveys import draw_further_sample, study_samples, survey_import
from experiments.models import Cohort, Project, SurveySampleMember
from tests.survey_helpers import SAMPLE

SEED = 7


def pids_of(cohort):
    return list(SurveySampleMember.objects.filter(cohort=cohort).order_by("position")
                .values_list("respondent__pid", flat=True))


@pytest.fixture
def study(db):
    project = Project.objects.create(slug="svy-samples", name="Survey samples")
    result = survey_import(project=project, name="twin", respondents=read_survey_path(SAMPLE), sources=["s"],
                           synthetic=True, seed=SEED, sizes=(2, 3))
    return result.study


def test_further_sample_takes_the_next_new_pids_of_the_seeded_order():
    pids = [f"p{i}" for i in range(10)]
    order = seeded_order(pids, seed=3)
    first, second = respondent_samples(pids, seed=3, sizes=(2, 3))
    assert further_sample(pids, seed=3, size=4, exclude=first + second) == order[5:9]
    # excluding only the first sample: the second sample's respondents are new to it
    assert further_sample(pids, seed=3, size=3, exclude=first) == order[2:5]
    # a gap in the exclusions is skipped over, the order kept
    assert further_sample(pids, seed=3, size=2, exclude=[order[0], order[2]]) == [order[1], order[3]]
    with pytest.raises(ValueError, match="only 5 of the 10"):
        further_sample(pids, seed=3, size=6, exclude=first + second)
    with pytest.raises(ValueError, match="size of at least 1"):
        further_sample(pids, seed=3, size=0, exclude=[])


def test_a_second_sample_never_holds_a_respondent_of_the_excluded_samples(study):
    earlier = study_samples(study)
    assert [c.name for c in earlier] == ["twin development", "twin reported"]
    second = draw_further_sample(study=study, name="twin second", size=4, excluded=earlier)
    taken = set(pids_of(second))
    for cohort in earlier:
        assert not taken & set(pids_of(cohort))
    everyone = list(study.respondents.values_list("pid", flat=True))
    assert pids_of(second) == seeded_order(everyone, seed=SEED)[5:9]  # the next positions of the same order
    assert second.seed == SEED and second.requested_size == 4 and second.task_set_id is None
    assert second.rule["excludes"] == ["twin development", "twin reported"]
    assert set(second.excluded_cohorts.all()) == set(earlier)
    assert len(second.task_list_sha256) == 64
    # a third sample excluding all three: the rest, and still none of theirs
    third = draw_further_sample(study=study, name="twin third", size=3, excluded=study_samples(study))
    assert set(pids_of(third)) == set(everyone) - set().union(*(set(pids_of(c)) for c in study_samples(study)[:3]))


def test_a_sample_too_large_or_badly_named_is_refused_and_nothing_stored(study):
    before = Cohort.objects.count()
    with pytest.raises(SurveyImportError, match="only 7 of the 12"):
        draw_further_sample(study=study, name="too many", size=8, excluded=study_samples(study))
    with pytest.raises(SurveyImportError, match="exists in this project already"):
        draw_further_sample(study=study, name="twin reported", size=1, excluded=[])
    other = Project.objects.create(slug="svy-other", name="Other")
    foreign = survey_import(project=other, name="twin", respondents=read_survey_path(SAMPLE), sources=["s"],
                            seed=SEED, sizes=(2, 3)).samples[0]
    with pytest.raises(SurveyImportError, match="is not a sample of the survey study"):
        draw_further_sample(study=study, name="mixed", size=1, excluded=[foreign])
    assert Cohort.objects.count() == before + 2  # the other project's two samples only


def test_the_command_draws_excluding_every_earlier_sample_by_default(study):
    out = call_command("survey_sample", "--project", "svy-samples", "--study", "twin", "--name", "twin second",
                       "--size", "2")
    assert "excluding 'twin development', 'twin reported'" in out
    second = Cohort.objects.get(name="twin second")
    assert not set(pids_of(second)) & set(pids_of(Cohort.objects.get(name="twin reported")))
    out = call_command("survey_sample", "--project", "svy-samples", "--study", "twin", "--name", "after dev",
                       "--size", "2", "--exclude", "twin development")
    assert pids_of(Cohort.objects.get(name="after dev")) == pids_of(Cohort.objects.get(name="twin reported"))[:2]
    with pytest.raises(CommandError, match="not a sample"):
        call_command("survey_sample", "--project", "svy-samples", "--study", "twin", "--name", "x", "--size", "1",
                     "--exclude", "nope")


@pytest.mark.django_db
def test_a_run_on_the_second_sample_with_all_conditions_in_one_pass(client, project, cast):
    """Every condition, the memory plus the whole persona included, selectable, sealed, run on the
    offline stand-in in one pass, analysed with every pair and the second sample's criteria,
    dashboarded, and Table 23 of the paper report read from the cached numbers."""
    from django.urls import reverse

    from experiments.analysis.report_items_survey import table22, table23
    from experiments.core.survey.prompt import MEMORY, MEMORY_PLUS_WHOLE_PERSONA, SURVEY_CONDITIONS, WHOLE_PERSONA
    from experiments.execution.driver import run_inline
    from experiments.core.report_table import Missing
    from experiments.models import Slot, SurveyAnswer
    from tests.engine_helpers import make_run
    study = survey_import(project=project, name="twin", respondents=read_survey_path(SAMPLE), sources=["s"],
                          synthetic=True, seed=SEED, sizes=(2, 3)).study
    second = draw_further_sample(study=study, name="twin second", size=4, excluded=study_samples(study))
    offline = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
    conditions = list(SURVEY_CONDITIONS)
    run = make_run(project, second, conditions=conditions, generator=offline, bootstrap={"draws": 300})
    assert "survey_answer_memory_persona_user" in run.protocol.seal["prompts"]
    run = run_inline(run.pk)
    assert run.phase == "done", run.status_reason
    assert Slot.objects.filter(run=run, phase="generation").count() == 4 * len(conditions)  # one pass
    assert SurveyAnswer.objects.filter(run=run, condition=MEMORY_PLUS_WHOLE_PERSONA, status="ok").count() == 4
    analysis = run.analysis
    pairs = {(c["first"], c["second"]) for c in analysis["contrasts"]}
    assert len(pairs) == 15 and (MEMORY_PLUS_WHOLE_PERSONA, WHOLE_PERSONA) in pairs  # every pair, once
    assert [c["label"] for c in analysis["criteria"]] == [
        "second sample: accuracy vs memory", "second sample: deviation vs memory",
        "second sample: accuracy vs OwnWords", "second sample: accuracy vs whole persona"]
    rows = {row["condition"]: row for row in analysis["means"]}
    assert rows[MEMORY_PLUS_WHOLE_PERSONA]["items"] > 0
    client.force_login(cast["viewer"])
    page = client.get(reverse("survey_dashboard", args=[project.slug, run.pk])).content.decode()
    assert "memory + whole persona" in page and "second sample: accuracy vs memory" in page
    table = table23(project, [run])
    assert table.inputs.runs == (run.pk,) and table.inputs.cohorts == (second.pk,) and table.inputs.draws == 300
    by_label = {row[0]: row for row in table.rows}
    cached = {(c["first"], c["second"], c["metric"]): c for c in analysis["contrasts"]}
    row = by_label["memory + whole persona − written memory"]
    acc, dev = cached[(MEMORY_PLUS_WHOLE_PERSONA, MEMORY, "accuracy")], cached[(MEMORY_PLUS_WHOLE_PERSONA, MEMORY, "deviation")]
    assert row[9:] == (acc["estimate"], acc["lo"], acc["hi"], dev["estimate"], dev["lo"], dev["hi"])
    mean_row, cached_mean = by_label["memory + whole persona"], rows[MEMORY_PLUS_WHOLE_PERSONA]
    assert mean_row[1:7] == tuple(cached_mean[k] for k in ("accuracy", "accuracy_lo", "accuracy_hi", "deviation",
                                                           "deviation_lo", "deviation_hi"))
    assert mean_row[2] <= mean_row[1] <= mean_row[3]
    assert len(table.rows) == len(rows) + 15
    assert isinstance(table22(project, [run]), Missing)  # a further sample is Table 23's, not Table 22's


@pytest.mark.django_db
def test_the_study_page_draws_a_further_sample_for_owners_and_analysts(client, project, cast):
    from django.urls import reverse
    study = survey_import(project=project, name="twin", respondents=read_survey_path(SAMPLE), sources=["s"],
                         synthetic=True, seed=SEED, sizes=(2, 3)).study
    page_url = reverse("survey_study", args=[project.slug, study.pk])
    draw_url = reverse("survey_sample_draw", args=[project.slug, study.pk])
    development, reported = study_samples(study)
    client.force_login(cast["viewer"])
    assert 'id="further-sample"' not in client.get(page_url).content.decode()
    assert client.post(draw_url, {"name": "v", "size": 1, "exclude": [development.pk]}).status_code == 403
    client.force_login(cast["rater"])
    assert client.post(draw_url, {"name": "r", "size": 1}).status_code == 403
    client.force_login(cast["analyst"])
    assert 'id="further-sample"' in client.get(page_url).content.decode()
    response = client.post(draw_url, {"name": "twin second", "size": 4, "exclude": [development.pk, reported.pk]})
    assert response.status_code == 302 and response.url == page_url
    second = Cohort.objects.get(project=project, name="twin second")
    assert not set(pids_of(second)) & (set(pids_of(development)) | set(pids_of(reported)))
    assert second.created_by == cast["analyst"]
    page = client.get(page_url).content.decode()
    assert "new respondents, none of them in twin development, twin reported" in page
    before = Cohort.objects.count()
    response = client.post(draw_url, {"name": "too many", "size": 99, "exclude": [development.pk]}, follow=True)
    assert "No sample drawn" in response.content.decode() and Cohort.objects.count() == before
