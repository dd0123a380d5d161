"""The run page's counters at any size: on PostgreSQL the tallies the database keeps
(`RunTally`, filled by triggers, folded when read) equal a count of the rows after every kind of
change — a whole offline run, status changes one by one and in bulk, receipts with and without
usage, a late receipt, deletions — and the run page's query count does not grow with the run."""
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from experiments.data.sessions import cohort_draw
from experiments.execution import progress
from experiments.execution.reservation import phase_recoveries
from experiments.execution.run_counts import counted, reserved_attempts, run_counts
from experiments.models import ModelCall, Run, RunTally, Slot
from experiments.models.runs import Phase
from tests.test_pages_runs import finished_run, make_protocol, started_run


@pytest.fixture
def cohort(imported):
    return cohort_draw(project=imported, name="c1", size=2, seed=1)


def assert_tallies_are_the_counts(run):
    tallied = run_counts(run)
    assert tallied == counted(run)
    assert run_counts(run) == tallied  # folding again changes nothing
    # everything folded: at most one row per run, phase and status, and no delta left over
    assert not RunTally.objects.filter(run_id=run.pk, folded=False).exists()
    # what a reservation reads under the run's lock (HTTP ceilings, the recovery allowance): the
    # tally and the recoveries' index, equal to the calls of the run's slots counted through the slots
    calls = ModelCall.objects.filter(slot__run=run)
    attempts = dict(calls.values_list("slot__phase").annotate(n=Count("*")).order_by())
    assert reserved_attempts(run) == attempts
    for phase in Phase.values:
        assert phase_recoveries(run.pk, phase) == calls.filter(slot__phase=phase, basis=ModelCall.Basis.RECOVERY).count()


def test_a_whole_offline_run_is_tallied_as_counted(imported, cast, cohort):
    protocol = make_protocol(imported, cohort, "sealed", sealed=True, user=cast["owner"])
    run = finished_run(protocol)
    slots, calls = run_counts(run)
    assert sum(n for by_status in slots.values() for n in by_status.values()) == run.slots.count() > 0
    assert sum(c["attempts"] for c in calls.values()) == ModelCall.objects.filter(slot__run=run).count()
    assert set(calls) == {Phase.MEMORIES, Phase.GENERATION, Phase.JUDGING}
    assert_tallies_are_the_counts(run)
    # a second run on the same cohort keeps its own tallies
    other = finished_run(make_protocol(imported, cohort, "again", sealed=True, user=cast["owner"]))
    assert_tallies_are_the_counts(other)
    assert_tallies_are_the_counts(run)


def test_status_changes_receipts_and_deletions_are_tallied_as_counted(imported, cast, cohort):
    protocol = make_protocol(imported, cohort, "sealed", sealed=True, user=cast["owner"])
    run = started_run(protocol)
    now = timezone.now()
    slots = Slot.objects.bulk_create([
        Slot(run=run, phase=Phase.GENERATION if i < 8 else Phase.JUDGING, key=f"k{i}", role=Slot.Role.GENERATOR,
             system="s", user="u", request_sha256="0" * 64) for i in range(12)])
    assert_tallies_are_the_counts(run)
    # one by one, as the engine does: reserved, then answered (with usage, without, in part)
    calls = []
    for i, slot in enumerate(slots[:6]):
        Slot.objects.filter(pk=slot.pk).update(status=Slot.Status.IN_FLIGHT)
        calls.append(ModelCall.objects.create(slot=slot, run=run, phase=slot.phase, attempt=1, reserved_at=now,
                                              lease_until=now + timedelta(seconds=60),
                                              basis=ModelCall.Basis.FIRST))
    assert_tallies_are_the_counts(run)
    usage = [dict(input_tokens=10, output_tokens=3, reasoning_tokens=None, total_tokens=13),
             dict(input_tokens=None, output_tokens=None, reasoning_tokens=None, total_tokens=None),
             dict(input_tokens=7, output_tokens=0, reasoning_tokens=2, total_tokens=9)]
    for i, call in enumerate(calls[:3]):
        ModelCall.objects.filter(pk=call.pk).update(finished_at=now, outcome="ok", **usage[i])
        Slot.objects.filter(pk=call.slot_id).update(status=Slot.Status.OK)
    assert_tallies_are_the_counts(run)
    _, by_phase = run_counts(run)
    assert by_phase[Phase.GENERATION]["unreported"] == 1
    assert by_phase[Phase.GENERATION]["input_tokens"] == 17 and by_phase[Phase.GENERATION]["reasoning_tokens"] == 2
    # a recovery, then a late receipt that rewrites an attempt's usage
    ModelCall.objects.create(slot=slots[3], run=run, phase=slots[3].phase, attempt=2, reserved_at=now,
                             lease_until=now, basis=ModelCall.Basis.RECOVERY, finished_at=now, outcome="transient")
    ModelCall.objects.filter(pk=calls[0].pk).update(input_tokens=None, reasoning_tokens=5, total_tokens=None)
    assert_tallies_are_the_counts(run)
    # in bulk, several statuses in one statement, and nothing changed by an update that moves no status
    Slot.objects.filter(run=run, status=Slot.Status.IN_FLIGHT).update(status=Slot.Status.UNKNOWN)
    Slot.objects.filter(run=run, phase=Phase.JUDGING).update(status=Slot.Status.HELD)
    Slot.objects.filter(run=run).update(dispatched_at=now)
    assert_tallies_are_the_counts(run)
    # deletions (a slot with its calls), several statements within one transaction
    from django.db import transaction
    with transaction.atomic():
        Slot.objects.filter(pk=slots[0].pk).delete()
        Slot.objects.filter(pk=slots[11].pk).update(status=Slot.Status.PENDING)
    assert_tallies_are_the_counts(run)
    slot_counts, _ = run_counts(run)
    assert slot_counts[Phase.JUDGING] == {Slot.Status.HELD: 3, Slot.Status.PENDING: 1}


def test_deltas_folded_by_one_look_are_seen_once_by_the_next(imported, cast, cohort):
    protocol = make_protocol(imported, cohort, "sealed", sealed=True, user=cast["owner"])
    run = started_run(protocol)
    Slot.objects.bulk_create([Slot(run=run, phase=Phase.GENERATION, key=f"k{i}", role=Slot.Role.GENERATOR,
                                   system="s", user="u", request_sha256="0" * 64) for i in range(5)])
    first, _ = run_counts(run)
    Slot.objects.filter(run=run, key="k0").update(status=Slot.Status.OK)
    # appended (one pending less, one answered more), not yet folded
    assert RunTally.objects.filter(run_id=run.pk, folded=False).count() == 2
    second, _ = run_counts(run)
    assert first == {Phase.GENERATION: {Slot.Status.PENDING: 5}}
    assert second == {Phase.GENERATION: {Slot.Status.PENDING: 4, Slot.Status.OK: 1}}
    assert RunTally.objects.filter(run_id=run.pk, folded=True).count() == 2


def test_the_run_page_and_its_poll_make_as_many_queries_for_many_slots_as_for_few(
        client, imported, cast, cohort):
    protocol = make_protocol(imported, cohort, "sealed", sealed=True, user=cast["owner"])
    run = started_run(protocol)
    Run.objects.filter(pk=run.pk).update(phase=Phase.GENERATION)
    client.force_login(cast["owner"])
    pages = [reverse("run_detail", args=[imported.slug, run.pk]), reverse("run_progress", args=[imported.slug, run.pk])]
    now = timezone.now()

    def grow(n, start):
        slots = Slot.objects.bulk_create([
            Slot(run=run, phase=Phase.GENERATION, key=f"g{start + i}", role=Slot.Role.GENERATOR, system="s",
                 user="u", request_sha256="0" * 64, status=Slot.Status.OK if i % 2 else Slot.Status.PENDING)
            for i in range(n)])
        ModelCall.objects.bulk_create([
            ModelCall(slot=s, run=run, phase=s.phase, attempt=1, reserved_at=now - timedelta(seconds=30),
                      lease_until=now, finished_at=now - timedelta(seconds=i % 50), outcome="ok", input_tokens=5)
            for i, s in enumerate(slots) if s.status == Slot.Status.OK])

    def queries(url):
        from django.test.utils import CaptureQueriesContext
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    grow(10, 0)
    few = [queries(url) for url in pages]
    grow(2000, 10)
    assert [queries(url) for url in pages] == few
    assert progress.run_progress(Run.objects.get(pk=run.pk))["phases"][1]["total"] == 2010
