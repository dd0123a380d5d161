"""The seal check at a phase boundary is constant in the cohort's size: the cohort's task list hash,
a survey sample's respondent list hash and the imported memories' hash are read as last computed
while nothing they read has changed (epochs per project that the statements changing it move on,
migration 0032).

- a hash read is the hash computed, and read again it costs one query (no hashing of the list);
- a change of a turn's text, a person's label, a task's cut, a cohort entry, a respondent or a
  sample member moves the project's epoch: the next check computes the hash again and the seal
  check says the task list changed; a change of a source memory says the imported memories changed;
- a change elsewhere (a project's name, another project's turns) does not;
- two projects' imports in two concurrent transactions do not wait on each other (real PostgreSQL,
  two connections, a lock timeout); two writers of one project do, and both changes are seen;
- a memory written while its run's phase advances: the advance waits for the memory's commit, or
  the memory's write waits for the advance and then moves the "memories" epoch (two connections);
- a hash stored by other code (another code version) is computed again, not read;
- a cohort is drawn from its own project's task set only.
"""
import threading
import time

import psycopg
import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from experiments.core.tasks import TaskRule
from experiments.data.sessions import CohortError, cohort_draw, sessions_import
from experiments.execution import kind_table
from experiments.execution.kind_table import (cohort_task_list_sha256, cohort_task_list_sha256_checked,
                                              sample_list_sha256_hashed_there, survey_list_sha256_checked)
from experiments.execution.sealing import protocol_seal, seal_mismatches
from experiments.execution.survey_planning import survey_list_sha256
from experiments.execution.task_list_sql import seal_check_read, task_list_epoch
from experiments.models import Cohort, CohortTask, Memory, Person, Project, Slot, SurveyRespondent, Task, Turn
from experiments.models.runs import Phase
from tests.conftest import parsed_session, qa_turns
from tests.engine_helpers import ONE_SHOT, QUESTION_ONLY, build_cohort, make_protocol, make_run, openai_model
from tests.test_memory_imports import first_run  # noqa: F401  (a fixture: a finished run that wrote memories)
from tests.test_survey_run import survey_sample  # noqa: F401  (a fixture: an imported survey sample)

OFFLINE = {"provider": "offline", "base_url": "", "model": "stand-in"}
LOCK_TIMEOUT = "3s"


@pytest.fixture
def cohort(db):
    project = Project.objects.create(slug="epoch", name="Epoch")
    return build_cohort(project, sessions=3, targets=2, name="epoch")


def test_the_hash_read_is_the_hash_computed_and_read_again_costs_one_query(cohort):
    full = cohort_task_list_sha256(cohort)
    assert full == cohort.task_list_sha256  # as drawn
    assert cohort_task_list_sha256_checked(cohort) == full
    with CaptureQueriesContext(connection) as queries:
        assert cohort_task_list_sha256_checked(cohort) == full
    assert len(queries) == 1 and "experiments_project_epoch" in queries[0]["sql"]


@pytest.mark.parametrize("change", ["turn text", "person label", "task cut", "cohort entry"])
def test_a_change_of_what_the_hash_reads_moves_the_epoch_and_is_seen(cohort, change):
    before = cohort_task_list_sha256_checked(cohort)
    epoch = task_list_epoch(cohort.project_id)
    task = Task.objects.filter(cohort_entries__cohort=cohort).order_by("pk").first()
    if change == "turn text":
        Turn.objects.filter(pk=task.question_turn_id).update(text="A question nobody asked")
    elif change == "person label":
        Person.objects.filter(pk=task.session.person_id).update(label="someone-else")
    elif change == "task cut":
        Task.objects.filter(pk=task.pk).update(cut=task.cut - 1)
    else:
        CohortTask.objects.filter(cohort=cohort, task=task).delete()
    assert task_list_epoch(cohort.project_id) > epoch
    after = cohort_task_list_sha256_checked(cohort)
    assert after != before and after == cohort_task_list_sha256(cohort)


def test_a_change_elsewhere_leaves_the_epoch(cohort):
    cohort_task_list_sha256_checked(cohort)
    epoch = task_list_epoch(cohort.project_id)
    Project.objects.filter(pk=cohort.project_id).update(name="Epoch, renamed")
    other = build_cohort(Project.objects.create(slug="other", name="Other"), sessions=1, name="other")
    Turn.objects.filter(session__project=other.project).update(text="Another project's turn")
    assert task_list_epoch(cohort.project_id) == epoch
    with CaptureQueriesContext(connection) as queries:
        cohort_task_list_sha256_checked(cohort)
    assert len(queries) == 1


def test_a_changed_turn_after_sealing_fails_the_seal_check(cohort):
    run = make_run(cohort.project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE)
    assert seal_mismatches(run.protocol, code=False) == []  # read from the stored hash
    task = Task.objects.filter(cohort_entries__cohort=cohort).first()
    Turn.objects.filter(pk=task.answer_turn_id).update(text="Not what was said")
    problems = seal_mismatches(run.protocol, code=False)
    assert len(problems) == 1 and problems[0].startswith("the task list changed")


# --- the survey sample's respondent list ---------------------------------------------------------

@pytest.mark.parametrize("change", ["persona", "wave 4", "member dropped", "members reordered"])
def test_a_survey_samples_hash_is_read_stored_and_every_change_is_seen(survey_sample, change):  # noqa: F811
    _, sample = survey_sample
    full = survey_list_sha256(sample)
    assert survey_list_sha256_checked(sample) == full
    with CaptureQueriesContext(connection) as queries:
        assert survey_list_sha256_checked(sample) == full
    assert len(queries) == 1
    members = list(sample.survey_members.order_by("position"))
    respondent = SurveyRespondent.objects.filter(pk=members[0].respondent_id)
    if change == "persona":
        respondent.update(persona_text=respondent.get().persona_text + " ")
    elif change == "wave 4":
        respondent.update(wave4_json={"changed": True})
    elif change == "member dropped":
        members[-1].delete()
    else:
        first, last = members[0], members[-1]
        sample.survey_members.filter(pk=first.pk).update(position=10**6)
        sample.survey_members.filter(pk=last.pk).update(position=first.position)
        sample.survey_members.filter(pk=first.pk).update(position=last.position)
    after = survey_list_sha256_checked(sample)
    assert after != full and after == survey_list_sha256(sample)


def test_the_sample_hashed_in_the_database_is_the_hash_sealing_computes(survey_sample):  # noqa: F811
    _, sample = survey_sample
    assert sample_list_sha256_hashed_there(sample) == survey_list_sha256(sample) == sample.task_list_sha256
    respondent = SurveyRespondent.objects.filter(pk=sample.survey_members.first().respondent_id)
    respondent.update(persona_text="Zoë, née Ørsted — 東京 🐝", wave4_json='{"q": "ça va?"}')  # beyond ASCII
    assert sample_list_sha256_hashed_there(sample) == survey_list_sha256(sample) != sample.task_list_sha256


# --- the imported memories -------------------------------------------------------------------------

@pytest.fixture
def importing(project, server, first_run):  # noqa: F811
    protocol = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT],
                             generator=openai_model(server), name="importing")
    protocol.memory_import_runs = [first_run.pk]
    protocol.save()
    protocol = protocol_seal(protocol=protocol, user=None)
    assert protocol.seal["memory_imports"]["imported"] == 3
    assert seal_mismatches(protocol, code=False) == []  # computes and stores the digest's hash
    return protocol


def test_the_imported_memories_hash_read_again_costs_no_hashing(importing, first_run):  # noqa: F811
    with CaptureQueriesContext(connection) as queries:
        assert seal_mismatches(importing, code=False) == []
    # the project's epochs and the stored hashes (task list, memories), the import sources' runs: no memory read
    assert not any("experiments_memory" in q["sql"] or "experiments_turn" in q["sql"] for q in queries)
    assert len(queries) <= 4, [q["sql"] for q in queries]


@pytest.mark.parametrize("change", ["text", "deleted", "added", "request"])
def test_every_change_of_an_imported_memory_is_seen(importing, first_run, change):  # noqa: F811
    memories = Memory.objects.filter(run=first_run).order_by("pk")
    if change == "text":
        memories.filter(pk=memories[0].pk).update(text="rewritten afterwards")
    elif change == "deleted":
        memories.filter(pk=memories[0].pk).delete()
    elif change == "added":  # a memory the source run did not have: the same request, another length
        source = memories[0]
        Memory.objects.filter(pk=source.pk).update(words=99)
        Memory.objects.create(run=first_run, session_id=source.session_id, kind=source.kind, words=source.words,
                              text="written later", slot=source.slot)
    else:
        Slot.objects.filter(pk=memories[0].slot_id).update(request_sha256="0" * 64)
    assert any("imported memories changed" in p for p in seal_mismatches(importing, code=False))


# --- two projects' imports, two connections --------------------------------------------------------

def _import(project, name: str):
    parsed = [parsed_session(f"{name}-{i}", qa_turns(8, answer=f"Answer {i}", question=f"Question {i}?"))
              for i in range(2)]
    sessions_import(project=project, parsed=parsed, source_format="jsonl", source_file=f"{name}.jsonl",
                    task_rule=TaskRule(min_pairs=8, min_targets=1, max_targets=1))


def _open_import(project, name: str, started: threading.Event, release: threading.Event, failures: list):
    """In its own connection: an import into `project`, its transaction held open until `release`."""
    try:
        with transaction.atomic():
            _import(project, name)
            started.set()
            assert release.wait(30)
    except Exception as exc:  # noqa: BLE001  (reported to the test's thread)
        failures.append(exc)
        started.set()
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_two_projects_imports_in_concurrent_transactions_do_not_wait_and_both_are_seen():
    a, b = (build_cohort(Project.objects.create(slug=s, name=s), sessions=2, name=s) for s in ("pa", "pb"))
    before = {c.pk: cohort_task_list_sha256_checked(c) for c in (a, b)}
    started, release, failures = threading.Event(), threading.Event(), []
    holder = threading.Thread(target=_open_import, args=(a.project, "late-a", started, release, failures))
    holder.start()
    try:
        assert started.wait(30) and not failures
        # Project b, another connection, while a's import holds its transaction (and a's epoch row) open.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            _import(b.project, "late-b")
            Turn.objects.filter(pk=_first_question(b)).update(text="b's question, edited")
        # One project, a third connection: it waits for a's transaction (the lock timeout ends the wait).
        with _connect() as third:
            third.execute("SET lock_timeout = '300ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                third.execute("UPDATE experiments_turn SET text = text || '.' WHERE session_id IN "
                              "(SELECT id FROM experiments_session WHERE project_id = %s)", [a.project_id])
    finally:
        release.set()
        holder.join(30)
    assert not failures, failures
    # b's edit is seen; a's import (sessions outside the cohort) moved a's epoch and left its hash
    assert cohort_task_list_sha256_checked(b) != before[b.pk]
    assert cohort_task_list_sha256_checked(b) == cohort_task_list_sha256(b)
    epoch = task_list_epoch(a.project_id)
    assert cohort_task_list_sha256_checked(a) == before[a.pk] == cohort_task_list_sha256(a)
    Turn.objects.filter(pk=_first_question(a)).update(text="a's question, edited")
    assert task_list_epoch(a.project_id) > epoch
    assert cohort_task_list_sha256_checked(a) != before[a.pk]
    assert cohort_task_list_sha256_checked(a) == cohort_task_list_sha256(a)


def _first_question(cohort) -> int:
    return Task.objects.filter(cohort_entries__cohort=cohort).order_by("pk").values_list(
        "question_turn_id", flat=True)[0]


def _connect() -> psycopg.Connection:
    """Another connection to the test database (its own transactions)."""
    settings = connection.settings_dict
    return psycopg.connect(dbname=settings["NAME"], host=settings["HOST"] or None, port=settings["PORT"] or None,
                           user=settings["USER"] or None, password=settings["PASSWORD"] or None)


# --- a memory written while its run's phase advances, two connections --------------------------------

@pytest.fixture
def writing_memories(cohort):
    """A run in its memories phase with one memory (committed: the test's connections see it)."""
    run = make_run(cohort.project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE)
    assert run.phase == Phase.MEMORIES
    task = Task.objects.filter(cohort_entries__cohort=cohort).first()
    memory = Memory.objects.create(run=run, session_id=task.session_id, kind="concrete", words=50, text="so far")
    return run, memory


def _memories_epoch(project_id: int) -> int:
    return seal_check_read(project_id, "", 0).memories_epoch


ADVANCE = "UPDATE experiments_run SET phase = 'generation' WHERE id = %s"
WRITE = "UPDATE experiments_memory SET text = 'written at the boundary' WHERE id = %s"


@pytest.mark.django_db(transaction=True)
def test_a_phase_advance_waits_for_a_memory_written_in_its_phase(writing_memories):
    run, memory = writing_memories
    epoch = _memories_epoch(run.protocol.project_id)
    with _connect() as writer, _connect() as driver:
        writer.execute(WRITE, [memory.pk])  # its transaction open (psycopg's default), the run's row held
        driver.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            driver.execute(ADVANCE, [run.pk])
        driver.rollback()
        writer.commit()  # nothing of a run in its memories phase is imported: no epoch moves
        driver.execute(ADVANCE, [run.pk])
        driver.commit()
    assert _memories_epoch(run.protocol.project_id) == epoch


@pytest.mark.django_db(transaction=True)
def test_a_memory_written_while_the_phase_advances_waits_and_moves_the_epoch(writing_memories):
    run, memory = writing_memories
    epoch = _memories_epoch(run.protocol.project_id)
    failures = []

    def write(pid: list):
        try:
            with _connect() as writer:
                pid.append(writer.info.backend_pid)
                writer.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
                writer.execute(WRITE, [memory.pk])  # waits for the advance, then reads the phase it committed
                writer.commit()
        except Exception as exc:  # noqa: BLE001  (reported to the test's thread)
            failures.append(exc)

    with _connect() as driver:
        driver.execute(ADVANCE, [run.pk])  # not committed yet
        pid = []
        thread = threading.Thread(target=write, args=(pid,))
        thread.start()
        assert _waits_for_a_lock(driver, pid), failures
        driver.commit()
    thread.join(30)
    assert not failures, failures
    assert Memory.objects.get(pk=memory.pk).text == "written at the boundary"
    assert _memories_epoch(run.protocol.project_id) > epoch


def _waits_for_a_lock(observer: psycopg.Connection, pid: list) -> bool:
    """Whether the backend whose id `pid` receives comes to wait for a lock (within a few seconds)."""
    for _ in range(100):
        if pid and observer.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                                    [pid[0]]).fetchone() == (True,):
            return True
        time.sleep(0.02)
    return False


# --- the code's version, the cohort's project --------------------------------------------------------

def test_a_hash_stored_by_other_code_is_computed_again(cohort, monkeypatch):
    full = cohort_task_list_sha256_checked(cohort)
    # As another canonical form would have stored it, at the project's current epochs:
    monkeypatch.setattr(kind_table, "code_version", lambda: "0123456789abcdef-before-the-deploy")
    kind_table.checked_sha256("task list", cohort.pk, cohort.project_id, lambda: "an older canonical form")
    assert cohort_task_list_sha256_checked(cohort) == "an older canonical form"  # that code reads its own
    monkeypatch.undo()
    assert cohort_task_list_sha256_checked(cohort) == full == cohort_task_list_sha256(cohort)
    with CaptureQueriesContext(connection) as queries:
        assert cohort_task_list_sha256_checked(cohort) == full
    assert len(queries) == 1


def test_a_survey_samples_hash_stored_by_other_code_is_computed_again(survey_sample, monkeypatch):  # noqa: F811
    _, sample = survey_sample
    full = survey_list_sha256_checked(sample)
    monkeypatch.setattr(kind_table, "code_version", lambda: "0123456789abcdef-before-the-deploy")
    kind_table.checked_sha256("survey list", sample.pk, sample.project_id, lambda: "an older canonical form")
    monkeypatch.undo()
    assert survey_list_sha256_checked(sample) == full == survey_list_sha256(sample)


def test_a_cohort_is_drawn_from_its_own_projects_task_set_only(cohort):
    other = Project.objects.create(slug="elsewhere", name="Elsewhere")
    with pytest.raises(CohortError, match=f"task set {cohort.task_set_id} belongs to another project"):
        cohort_draw(project=other, name="borrowed", size=1, seed=1, task_set=cohort.task_set)
    assert not Cohort.objects.filter(project=other).exists()
