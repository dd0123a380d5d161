"""The survey items of the paper report (Tables 21, 22, 23) on a small hand-made case: the runs'
cached analyses are written by hand, so every cell below is known without a bootstrap."""
import pytest

from experiments.analysis import report_items_survey as items
from experiments.core.report_table import Missing, ReportTable
from experiments.core.survey.prompt import MEMORY, OWNWORDS, SCREENER_ONLY
from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.scores import HUMAN_RETEST
from experiments.data.surveys import draw_further_sample, study_samples, survey_import
from experiments.models import Project, Protocol, Run
from tests.survey_helpers import SAMPLE

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
CONDITIONS = [SCREENER_ONLY, MEMORY, OWNWORDS]


def mean(condition, accuracy, deviation, people=3, items_=240, reference=False, intervals=None):
    row = {"condition": condition, "label": condition, "accuracy": accuracy, "deviation": deviation,
           "people": people, "items": items_, "unscored": 0, "problems": {}, "reference": reference}
    if intervals:  # runs analysed since the means' intervals are kept
        row.update(zip(("accuracy_lo", "accuracy_hi", "deviation_lo", "deviation_hi"), intervals))
    return row


def diff(first, second, metric, estimate, lo, hi, people=3):
    return {"first": first, "second": second, "metric": metric, "estimate": estimate, "lo": lo, "hi": hi,
            "people": people}


ANALYSIS = {
    "kind": "survey", "synthetic": True, "study": "twin", "respondents": 3, "seed": 20260923, "draws": 500,
    "means": [mean(SCREENER_ONLY, 0.5, 0.25, intervals=(0.45, 0.55, 0.2, 0.3)), mean(MEMORY, 0.55, 0.2),
              mean(OWNWORDS, 0.6, 0.18),
              mean(HUMAN_RETEST, 0.7, 0.1, reference=True)],
    # cached in the protocol's order: memory − screener first, then OwnWords − memory
    "contrasts": [diff(MEMORY, SCREENER_ONLY, "accuracy", 0.05, -0.01, 0.11),
                  diff(MEMORY, SCREENER_ONLY, "deviation", -0.05, -0.08, -0.02),
                  diff(OWNWORDS, MEMORY, "accuracy", 0.05, 0.01, 0.09),
                  diff(OWNWORDS, MEMORY, "deviation", -0.02, -0.04, 0.001)],
    "criteria": [], "errors": [], "metrics": ["accuracy", "deviation"],
}


@pytest.fixture
def samples(db):
    project = Project.objects.create(slug="svy-report", name="Survey report")
    study = survey_import(project=project, name="twin", respondents=read_survey_path(SAMPLE), sources=["s"],
                          synthetic=True, seed=7, sizes=(2, 3)).study
    development, reported = study_samples(study)
    second = draw_further_sample(study=study, name="twin second", size=3, excluded=[development, reported])
    return project, development, reported, second


def finished_run(project, cohort, name, analysis=ANALYSIS, conditions=CONDITIONS, **fields):
    protocol = Protocol.objects.create(project=project, cohort=cohort, name=name, conditions=list(conditions),
                                       kind=Protocol.Kind.SURVEY, generator=OFFLINE, judge=OFFLINE,
                                       bootstrap={"draws": analysis["draws"]}, **fields)
    return Run.objects.create(protocol=protocol, status=Run.Status.FINISHED, analysis=analysis)


@pytest.mark.django_db
def test_table22_hand_checked(samples):
    project, development, reported, second = samples
    run = finished_run(project, reported, "reported")
    table = items.table22(project, [run])
    assert isinstance(table, ReportTable)
    assert table.columns == ("Condition or difference", "Accuracy", "Accuracy 95% lo", "Accuracy 95% hi",
                             "Normalized deviation", "Deviation 95% lo", "Deviation 95% hi", "Respondents", "Items",
                             "Accuracy difference", "Accuracy diff. 95% lo", "Accuracy diff. 95% hi",
                             "Deviation difference", "Deviation diff. 95% lo", "Deviation diff. 95% hi")
    none6 = (None,) * 6
    assert table.rows == (
        ("screener only", 0.5, 0.45, 0.55, 0.25, 0.2, 0.3, 3, 240, *none6),
        ("written memory", 0.55, None, None, 0.2, None, None, 3, 240, *none6),  # analysed before: –
        ("OwnWords (B = |memory|)", 0.6, None, None, 0.18, None, None, 3, 240, *none6),
        ("human test–retest (waves 1–3 answers)", 0.7, None, None, 0.1, None, None, 3, 240, *none6),
        # the paper's order: OwnWords − memory (the primary) before memory − screener
        ("OwnWords (B = |memory|) − written memory", *none6, 3, None, 0.05, 0.01, 0.09, -0.02, -0.04, 0.001),
        ("written memory − screener only", *none6, 3, None, 0.05, -0.01, 0.11, -0.05, -0.08, -0.02),
    )
    assert table.inputs.runs == (run.pk,) and table.inputs.cohorts == (reported.pk,)
    assert table.inputs.seeds == (20260923,) and table.inputs.draws == 500 and table.inputs.offline_runs == (run.pk,)
    assert table.digits["Accuracy"] == 4 and "Accuracy difference" in table.signed and "Accuracy" not in table.signed
    assert any("offline stand-in" in note for note in table.notes)
    assert any("synthetic" in note for note in table.notes)
    # OwnWords − screener is among the paper's differences but not this run's: named, not made up
    assert any("Not computed" in note and "OwnWords (B = |memory|) − screener only" in note for note in table.notes)


@pytest.mark.django_db
def test_table23_takes_the_further_sample_and_table22_does_not(samples):
    project, development, reported, second = samples
    first = finished_run(project, reported, "reported")
    later = finished_run(project, second, "second")
    assert items.table22(project, [first, later]).inputs.runs == (first.pk,)
    table = items.table23(project, [first, later])
    assert table.inputs.runs == (later.pk,) and table.inputs.cohorts == (second.pk,)
    assert table.notes[0] == ("Sample 'twin second': new respondents, none of them in 'twin development', "
                              "'twin reported'.")
    assert isinstance(items.table23(project, [first]), Missing)
    missing = items.table22(project, [later])
    assert isinstance(missing, Missing) and missing.template is None


@pytest.mark.django_db
def test_runs_that_are_not_finished_survey_analyses_are_left_out(samples):
    project, development, reported, second = samples
    pending = finished_run(project, reported, "pending", analysis={**ANALYSIS, "kind": "pending"})
    assert isinstance(items.table22(project, [pending]), Missing)
    assert isinstance(items.table21(project, [pending]), Missing)
    assert isinstance(items.table23(project, []), Missing)


@pytest.mark.django_db
def test_table21_lists_every_run_without_the_screener_hand_checked(samples):
    project, development, reported, second = samples
    with_screener = finished_run(project, reported, "with")
    first = finished_run(project, development, "first without", survey_screener=False)
    shorter = {**ANALYSIS, "draws": 400, "contrasts": ANALYSIS["contrasts"][:1]}  # one metric of one pair only
    later = finished_run(project, reported, "second without", analysis=shorter, survey_screener=False)
    table = items.table21(project, [first, with_screener, later])
    assert table.columns == ("Run", "Respondents", "Difference", "Accuracy", "Accuracy 95% lo", "Accuracy 95% hi",
                             "Normalized deviation", "Deviation 95% lo", "Deviation 95% hi")
    assert table.rows == (
        (first.pk, 3, "OwnWords (B = |memory|) (no screener) − written memory (no screener)",
         0.05, 0.01, 0.09, -0.02, -0.04, 0.001),
        (first.pk, 3, "written memory (no screener) − questions only (no screener)",
         0.05, -0.01, 0.11, -0.05, -0.08, -0.02),
        (later.pk, 3, "written memory (no screener) − questions only (no screener)",
         0.05, -0.01, 0.11, None, None, None),  # –: not computed
    )
    assert table.inputs.runs == (first.pk, later.pk) and table.inputs.cohorts == (development.pk, reported.pk)
    assert table.inputs.draws is None and any("run %d: 400" % later.pk in note for note in table.notes)
    assert table.signed == frozenset(items.NUMBER_COLUMNS) and table.digits["Deviation 95% hi"] == 4
    # Table 22 leaves the runs without the screener out
    assert items.table22(project, [first, with_screener, later]).inputs.runs == (with_screener.pk,)


@pytest.mark.django_db
def test_a_survey_runs_new_analysis_makes_the_report_stale(samples):
    from django.utils import timezone

    from experiments.analysis.paper_report_state import report_inputs_sha256
    project, development, reported, second = samples
    run = finished_run(project, reported, "reported", sealed_at=timezone.now())
    before = report_inputs_sha256(project)
    assert report_inputs_sha256(project) == before
    run.analysis = {**ANALYSIS, "means": ANALYSIS["means"][:2]}  # re-analysed: other numbers
    run.save(update_fields=["analysis"])
    assert report_inputs_sha256(project) != before
