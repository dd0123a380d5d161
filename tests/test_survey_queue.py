"""A survey run through real Redis and real rqworker processes, not the inline driver:
memories, one answer call per respondent and condition, and the analysis, each a job that a
worker process takes from the queues, against the tests' local LLM server over real HTTP.

The Redis database of REDIS_URL is flushed before and after (as in test_engine_queue)."""
from collections import Counter

import pytest
from django.core.management import call_command

from experiments.core.survey.prompt import MEMORY, OWNWORDS, SCREENER_ONLY
from experiments.execution.jobs import run_enqueue
from experiments.models import Cohort, Project, Run, Slot, SurveyAnswer, SurveyItem, SurveyMemory
from tests.engine_helpers import Roles, make_run, openai_model
from tests.survey_helpers import SAMPLE
from tests.test_engine_queue import Workers, live_database, redis_connection, wait_for, worker_env  # noqa: F401 - fixtures
from tests.test_survey_run import survey_reply

CONDITIONS = [SCREENER_ONLY, MEMORY, OWNWORDS]
MEMORY_TEXT = "Votes, reads the news, shops carefully."


@pytest.mark.slow
def test_a_survey_run_finishes_through_real_worker_processes(live_database, redis_connection, tmp_path,  # noqa: F811
                                                               server):
    redis_connection.flushdb()
    workers = Workers(worker_env(live_database), tmp_path)
    try:
        project = Project.objects.create(slug="svyq", name="Survey through the queue")
        call_command("import_survey", str(SAMPLE), "--project", "svyq", "--name", "twin", "--synthetic")
        cohort = Cohort.objects.get(name="twin development")
        n = cohort.survey_members.count()
        roles = Roles(server, answer=survey_reply, memory=lambda request: MEMORY_TEXT)
        run = make_run(project, cohort, conditions=CONDITIONS, generator=openai_model(server),
                       bootstrap={"draws": 200})
        workers.start()
        workers.start()
        run_enqueue(run.pk)
        run = wait_for(lambda: Run.objects.filter(pk=run.pk, status__in=[Run.Status.FINISHED, Run.Status.PAUSED,
                                                                          Run.Status.STOPPED]).first(),
                       180, "the survey run to end", workers)
        assert run.status == Run.Status.FINISHED, f"{run.status}: {run.status_reason}\n{workers.logs()}"
        requests = Counter(request.body for request in server.requests)
    finally:
        workers.kill_all()
        redis_connection.flushdb()

    # Exactly the calls of a survey run, each sent once: a memory per respondent, an answer per
    # respondent and condition, no judge.
    slots = Slot.objects.filter(run=run)
    assert slots.filter(phase="memories").count() == n
    assert slots.filter(phase="generation").count() == n * len(CONDITIONS)
    assert not slots.exclude(phase__in=["memories", "generation"]).exists()
    assert all(slot.status == Slot.Status.OK and slot.calls.count() == 1 for slot in slots)
    assert roles.kinds["memory"] == n and roles.kinds["judge"] == 0
    assert sum(requests.values()) == slots.count() and set(requests.values()) == {1}
    # What the workers stored: memories, answers parsed per item, the analysis.
    assert list(SurveyMemory.objects.filter(run=run).values_list("text", flat=True).distinct()) == [MEMORY_TEXT]
    answers = SurveyAnswer.objects.filter(run=run)
    assert answers.count() == n * len(CONDITIONS) and set(answers.values_list("status", flat=True)) == {"ok"}
    for answer in answers.filter(condition=SCREENER_ONLY):
        assert [entry[:2] for entry in answer.items] == [[1, None]] * SurveyItem.objects.filter(
            respondent=answer.respondent).count()
    assert answers.get(condition=MEMORY, respondent=answers.first().respondent).items[0][:2] == [None, "missing"]
    rows = {row["condition"]: row for row in run.analysis["means"]}
    assert run.analysis["kind"] == "survey" and set(CONDITIONS) <= set(rows)
    assert rows[MEMORY]["problems"] == {"missing": n} and rows[SCREENER_ONLY]["unscored"] == 0
