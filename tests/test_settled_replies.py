"""Planning reads a slot's reply from the call that settled it (`journal_reads.settled_calls`): the
MemGPT-style archive queries (App. H) and Mem0's extraction answers. A late receipt of an earlier
attempt (kept by the journal, settling nothing) is never taken for the reply, whatever order the rows
come back in (before, a dict of every completed call kept whichever came last: right only while an
index on (slot, attempt) happened to order them)."""

from datetime import timedelta

from django.utils import timezone

from experiments.core.slot_keys import Mem0Key
from experiments.execution import mem0_planning, planning
from experiments.execution.driver import run_inline
from experiments.models import ModelCall, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import ONE_SHOT, Roles, Sleeps, build_cohort, make_run, openai_model, user_text

MEMGPT = "memgpt-style(B=|memory|)"
LATE = "arrived after the reservation's lease ran out"


def _reissue_with_a_late_first_attempt(slot: Slot, late_text: str) -> ModelCall:
    """The slot's settling call becomes its attempt 2 (an owner's amendment); a late receipt of attempt 1,
    with other text, is kept beside it, as the journal keeps one. Returns the settling call."""
    settling = ModelCall.objects.get(slot=slot)
    ModelCall.objects.filter(pk=settling.pk).update(attempt=2, basis=ModelCall.Basis.AMENDMENT)
    ModelCall.objects.create(slot=slot, run=slot.run, phase=slot.phase, attempt=1, reserved_at=settling.reserved_at,
                             lease_until=settling.reserved_at, finished_at=settling.finished_at,
                             outcome=ModelCall.Outcome.OK, text=late_text, error=LATE)
    return settling


def test_the_archive_queries_are_the_settling_calls_reply(project, server, http):
    cohort = build_cohort(project, sessions=1, targets=2, name="settled-archive")
    Roles(server, answer=lambda r: '{"queries": ["garden"]}' if "[CORE MEMORY]" in user_text(r) else "Alpha answer.")
    run = run_inline(make_run(project, cohort, conditions=[MEMGPT, ONE_SHOT], generator=openai_model(server)).pk,
                     client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    first, second = Slot.objects.filter(run=run, key__startswith="archive|").order_by("pk")
    settling = _reissue_with_a_late_first_attempt(first, '{"queries": ["a late and other query"]}')
    replies = planning._archive_replies(run)
    assert replies == {first.key: settling.text, second.key: ModelCall.objects.get(slot=second).text}
    assert replies[first.key] == '{"queries": ["garden"]}'


def test_mem0s_extraction_answer_is_the_settling_calls_reply(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=1, name="settled-mem0")
    run = make_run(project, cohort, conditions=[ONE_SHOT], generator=openai_model(server))
    sessions = sorted(set(cohort.cohort_tasks.values_list("task__session_id", flat=True)))
    now = timezone.now()
    answered, unknown = [Slot.objects.create(run=run, phase=Phase.MEMORIES, key=str(Mem0Key(session_id=s)),
                                             role=Slot.Role.GENERATOR, session_id=s, system="s", user="u",
                                             request_sha256="0" * 64, status=status)
                         for s, status in zip(sessions, (Slot.Status.OK, Slot.Status.UNKNOWN))]
    for slot in (answered, unknown):
        ModelCall.objects.create(slot=slot, run=run, phase=slot.phase, attempt=1, reserved_at=now,
                                 lease_until=now + timedelta(seconds=60), finished_at=now,
                                 outcome=ModelCall.Outcome.OK, text='{"facts": ["settled"]}',
                                 basis=ModelCall.Basis.FIRST)
    _reissue_with_a_late_first_attempt(answered, '{"facts": ["late"]}')
    answers = mem0_planning._answers(run)
    assert answers[answered.session_id] == (answered, '{"facts": ["settled"]}')
    assert answers[unknown.session_id] == (unknown, None)  # a slot left unknown has no answer, late receipt or not
