"""The two ready-made protocols of the two-call designs through real Redis and real rqworker
processes, not the inline driver: `development-attempts` (App. F) and `representations` (App. K)
on the offline stand-in, every slot a job a worker process takes from its queue, each call sent
once, and the calls of each phase as the estimate announced (the representations' generation at
most: the stand-in writes the same text for every memory kind, whose answers then share a call).

The Redis database of REDIS_URL is flushed before and after (as in test_engine_queue)."""
import pytest

from experiments.execution.control import run_start
from experiments.execution.jobs import run_enqueue
from experiments.execution.protocol_templates import protocol_estimate, protocol_from_template
from experiments.execution.sealing import protocol_seal
from experiments.models import ModelCall, Prediction, Project, Run, Slot
from tests.engine_helpers import build_cohort
from tests.test_engine_queue import Workers, live_database, redis_connection, wait_for, worker_env  # noqa: F401 - fixtures


@pytest.mark.slow
@pytest.mark.parametrize("template", ["development-attempts", "representations"])
def test_a_template_run_finishes_through_real_worker_processes(live_database, redis_connection, tmp_path,  # noqa: F811
                                                               template):
    redis_connection.flushdb()
    workers = Workers(worker_env(live_database), tmp_path)
    try:
        project = Project.objects.create(slug=f"q-{template}", name=f"{template} through the queue")
        cohort = build_cohort(project, sessions=3, targets=2, name="queue")
        protocol, _ = protocol_from_template(template=template, cohort=cohort)
        estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
        protocol = protocol_seal(protocol=protocol, user=None)
        run = Run.objects.create(protocol=protocol)
        run_start(run=run)
        workers.start()
        workers.start()
        run_enqueue(run.pk)
        run = wait_for(lambda: Run.objects.filter(pk=run.pk, status__in=[Run.Status.FINISHED, Run.Status.PAUSED,
                                                                          Run.Status.STOPPED]).first(),
                       180, f"the {template} run to end", workers)
        assert run.status == Run.Status.FINISHED, f"{run.status}: {run.status_reason}\n{workers.logs()}"
    finally:
        workers.kill_all()
        redis_connection.flushdb()

    slots = Slot.objects.filter(run=run)
    assert all(slot.status == Slot.Status.OK and slot.calls.count() == 1 for slot in slots)  # each sent once
    calls = {phase: ModelCall.objects.filter(slot__run=run, slot__phase=phase).count()
             for phase in ("memories", "generation", "decisions", "judging")}
    assert calls["memories"] == estimate["memories"] and calls["decisions"] == estimate["decisions"]
    assert calls["generation"] <= estimate["generation"] and calls["judging"] <= estimate["judging"]
    if template == "development-attempts":
        assert calls["generation"] == estimate["generation"]
    finals = Prediction.objects.filter(run=run, label="final")
    assert finals.count() == 6 * len(protocol.conditions)
    assert not finals.exclude(status__in=["ok", "empty"]).exists()
    assert set(run.analysis["conditions"]) >= set(protocol.conditions)
