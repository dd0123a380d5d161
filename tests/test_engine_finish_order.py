"""A run is finished by its analysis, before its robustness tables and before its project's report is queued.

The paper report reads the project's finished runs, and another worker's lane may start the report
job the moment it is queued: were the run marked finished only by a later drive (as before), that
report could leave it out, with no second rebuild queued for it. And the tables, which never hold a
run back, no longer delay its finish. A run paused while its analysis ran is finished by the drive
once resumed, as before.
"""
from experiments.execution import driver
from experiments.execution.concurrency import NoLimiter
from experiments.execution.driver import run_analyze, run_drive
from experiments.execution.journal import slot_execute
from experiments.models import Run
from experiments.models.runs import Phase
from tests.engine_helpers import QUESTION_ONLY, Roles, build_cohort, make_run, openai_model


def _analysis_due(project, server, http, name):
    """A run whose calls are all done, standing at its analysis phase."""
    Roles(server)
    run = make_run(project, build_cohort(project, sessions=2, targets=2, name=name), name=name,
                   conditions=[QUESTION_ONLY], generator=openai_model(server))
    while (step := run_drive(run.pk, redispatch_after_s=0)).slot_ids:
        for slot_id in step.slot_ids:
            slot_execute(slot_id, limiter=NoLimiter(), client=http, worker="test")
    assert step.analyze
    run.refresh_from_db()
    return run


def test_the_run_is_finished_before_its_tables_and_its_report(project, server, http, monkeypatch):
    run = _analysis_due(project, server, http, "finish-order")
    assert (run.phase, run.status) == (Phase.ANALYSIS, Run.Status.RUNNING)
    seen = {}

    def status_at(what):
        def record(run):
            seen[what] = Run.objects.values_list("status", "phase").get(pk=run.pk)
        return record

    monkeypatch.setattr(driver, "_tables_after", status_at("tables"))
    monkeypatch.setattr(driver, "report_after_run", status_at("report"))
    run_analyze(run.pk)

    finished = (Run.Status.FINISHED, Phase.DONE)
    assert seen == {"tables": finished, "report": finished}
    run.refresh_from_db()
    assert run.finished_at is not None and run.analysis
    assert run_drive(run.pk).slot_ids == ()  # a later drive finds nothing left to do
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED


def test_a_run_paused_during_its_analysis_is_finished_by_the_drive_once_resumed(project, server, http):
    run = _analysis_due(project, server, http, "paused-analysis")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.PAUSED)
    run_analyze(run.pk)
    run.refresh_from_db()
    assert (run.phase, run.status, run.finished_at) == (Phase.DONE, Run.Status.PAUSED, None)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run_drive(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.finished_at is not None
