"""Sealing: hashes fixed before any request; a run refuses to start (or to plan its next
phase) once a prompt file, the cohort's tasks or the settings changed (paper App. B.2)."""
import hashlib
import shutil

import pytest

from experiments.core import prompts
from experiments.execution import kind_table, sealing
from experiments.execution.concurrency import NoLimiter
from experiments.execution.policy import RunError
from experiments.execution.driver import run_drive, run_inline
from experiments.execution.control import run_start
from experiments.execution.journal import slot_execute
from experiments.models import Protocol, Run, Slot, Turn
from experiments.models.runs import Phase
from experiments.data.sessions import canonical_task_list, cohort_tasks
from tests.conftest import UNRUNNABLE
from tests.engine_helpers import ONE_SHOT, QUESTION_ONLY, SELECTION, build_cohort, make_protocol

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


@pytest.fixture
def prompt_dir(tmp_path, monkeypatch):
    """A private copy of prompts/ that the whole process reads (experiments.core.prompts.PROMPTS_DIR)."""
    copy = tmp_path / "prompts"
    shutil.copytree(prompts.PROMPTS_DIR, copy)
    monkeypatch.setattr(prompts, "PROMPTS_DIR", copy)
    return copy


@pytest.fixture
def cohort(project):
    return build_cohort(project, sessions=1, targets=2)


def sealed(project, cohort, **settings):
    protocol = make_protocol(project, cohort, **{"conditions": [QUESTION_ONLY], "generator": OFFLINE, **settings})
    return sealing.protocol_seal(protocol=protocol, user=None)


def new_run(protocol):
    return Run.objects.create(protocol=protocol)


def test_the_seal_records_every_prompt_the_task_list_the_settings_and_the_code(project, cohort, cast):
    protocol = make_protocol(project, cohort, conditions=[ONE_SHOT, SELECTION], generator=OFFLINE)
    protocol = sealing.protocol_seal(protocol=protocol, user=cast["owner"])
    protocol.refresh_from_db()
    assert protocol.is_sealed() and protocol.sealed_by == cast["owner"]
    seal = protocol.seal
    assert set(seal["prompts"]) == {
        "generation_system", "answer_memory_user", "memory_concrete_system", "memory_concrete_user",
        "selection_instruction", "decision_layout", "judge_system", "judge_user",
    }
    for name, digest in seal["prompts"].items():
        assert digest == hashlib.sha256((prompts.PROMPTS_DIR / f"{name}.txt").read_bytes()).hexdigest()
    assert seal["task_list_sha256"] == cohort.task_list_sha256 == hashlib.sha256(
        canonical_task_list(cohort_tasks(cohort)).encode()).hexdigest()
    assert len(seal["settings_sha256"]) == 64
    assert seal["code_version"] == sealing.code_version()
    with pytest.raises(RunError, match="sealed already"):
        sealing.protocol_seal(protocol=protocol, user=None)


def test_a_sealed_protocol_is_read_only(project, cohort):
    draft = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE)
    draft.name = "renamed before sealing"
    draft.save()  # a draft can change
    protocol = sealing.protocol_seal(protocol=draft, user=None)
    protocol = Protocol.objects.get(pk=protocol.pk)
    protocol.concurrency = {"offline": 64}
    with pytest.raises(ValueError, match="read-only"):
        protocol.save()
    assert Protocol.objects.get(pk=protocol.pk).concurrency == {}


def test_an_unsealed_protocol_does_not_run(project, cohort):
    run = new_run(make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE))
    with pytest.raises(RunError, match="not sealed"):
        run_start(run=run)


@pytest.mark.parametrize("changes, problem", [
    ({"conditions": []}, "choose at least one condition"),
    ({"conditions": ["no-such-condition"]}, "unknown condition 'no-such-condition'"),
    ({"conditions": [UNRUNNABLE]}, f"{UNRUNNABLE} is not runnable yet"),
    ({"conditions": [QUESTION_ONLY, QUESTION_ONLY]}, "a condition is listed twice"),
    ({"generator": {**OFFLINE, "temperatur": 0.2}}, "generator: unknown model settings: temperatur"),
    ({"judge": {"provider": "azure", "base_url": "", "model": "m"}}, "judge: model settings: provider must be"),
    ({"generator": {**OFFLINE, "timeout_s": -1}}, "generator: model settings: max_output_tokens and timeout_s"),
    ({"generator": {**OFFLINE, "timeout_s": "soon"}}, "generator: model settings:"),
    ({"retry_policy": {"max_retries": 5}}, "unknown retry setting 'max_retries'"),
    ({"retry_policy": {"phase_allowance": -1}}, "retry setting phase_allowance must be a non-negative integer"),
    ({"concurrency": {"openai": 0}}, "the in-flight cap of openai must be a positive integer"),
    ({"bootstrap": {"draws": 0}}, "bootstrap draws must be a positive integer"),
    ({"contrasts": [{"name": "c", "terms": {ONE_SHOT: 1}}]}, f"contrast 'c' uses '{ONE_SHOT}'"),
    ({"contrasts": [{"name": "c"}]}, "contrast 'c' needs terms"),
    ({"contrasts": [{"terms": {QUESTION_ONLY: 1}}]}, "contrast 1 needs a name"),
])
def test_sealing_refuses_what_cannot_run(project, cohort, changes, problem, unrunnable_condition):
    protocol = make_protocol(project, cohort, **{"conditions": [QUESTION_ONLY], "generator": OFFLINE, **changes})
    if "retry_policy" in changes:  # make_protocol adds the tests' cooldown; keep only the bad setting
        Protocol.objects.filter(pk=protocol.pk).update(retry_policy=changes["retry_policy"])
        protocol.refresh_from_db()
    assert any(problem in p for p in sealing.protocol_problems(protocol)), sealing.protocol_problems(protocol)
    with pytest.raises(RunError, match=None) as refused:
        sealing.protocol_seal(protocol=protocol, user=None)
    assert problem in str(refused.value)
    assert not Protocol.objects.get(pk=protocol.pk).is_sealed()


def test_a_changed_prompt_file_stops_a_run_from_starting(project, cohort, prompt_dir):
    protocol = sealed(project, cohort)
    run = new_run(protocol)
    judge_user = prompt_dir / "judge_user.txt"
    original = judge_user.read_bytes()
    judge_user.write_bytes(original.replace(b"[PREDICTED ANSWER]", b"[PREDICTED REPLY]"))
    with pytest.raises(RunError, match="the seal no longer matches: prompt file judge_user changed"):
        run_start(run=run)
    assert Run.objects.get(pk=run.pk).status == Run.Status.CREATED
    judge_user.write_bytes(original + b"\n")  # even a trailing line break is a change
    with pytest.raises(RunError, match="prompt file judge_user changed"):
        run_start(run=run)
    judge_user.write_bytes(original)
    run_start(run=run)
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING


def test_a_prompt_file_changed_during_a_run_stops_it_before_the_next_phase_is_built(project, cohort, prompt_dir):
    run = new_run(sealed(project, cohort))
    run_start(run=run)
    step = run_drive(run.pk)
    assert step.phase == Phase.GENERATION
    import httpx

    with httpx.Client() as client:
        for slot_id in step.slot_ids:
            slot_execute(slot_id, limiter=NoLimiter(), client=client)
    (prompt_dir / "judge_system.txt").write_text("Grade generously.\n")
    run = run_inline(run.pk)
    assert run.status == Run.Status.STOPPED
    # Checked before each phase is built, also one without requests (no decision conditions here).
    assert run.status_reason == ("Stopped before planning decisions: the seal no longer matches: "
                                 "prompt file judge_system changed")
    assert not Slot.objects.filter(run=run, phase=Phase.JUDGING).exists()


def test_a_changed_task_stops_a_run_from_starting(project, cohort):
    run = new_run(sealed(project, cohort))
    task = cohort_tasks(cohort)[0]
    Turn.objects.filter(pk=task.answer_turn_id).update(text="A corrected reference answer, five words or more.")
    with pytest.raises(RunError, match="the task list changed"):
        run_start(run=run)


def test_a_cohort_whose_tasks_changed_cannot_be_sealed(project, cohort):
    protocol = make_protocol(project, cohort, conditions=[QUESTION_ONLY], generator=OFFLINE)
    task = cohort_tasks(cohort)[0]
    Turn.objects.filter(pk=task.question_turn_id).update(text="A different question, is it not?")
    with pytest.raises(RunError, match="the cohort's tasks no longer match its recorded hash"):
        sealing.protocol_seal(protocol=protocol, user=None)


@pytest.mark.parametrize("field, value", [
    ("retry_policy", {"cooldown_s": 0.0, "phase_allowance": 999}),
    ("concurrency", {"offline": 2}),
    ("judge", {**OFFLINE, "max_output_tokens": 4096}),
    ("contrasts", [{"name": "new", "terms": {QUESTION_ONLY: 1}}]),
    ("bootstrap", {"draws": 201}),
])
def test_changed_settings_stop_a_run_from_starting(project, cohort, field, value):
    protocol = sealed(project, cohort)
    run = new_run(protocol)
    Protocol.objects.filter(pk=protocol.pk).update(**{field: value})  # past the read-only guard
    with pytest.raises(RunError, match="the settings changed"):
        run_start(run=run)


def test_another_code_version_stops_a_run_from_starting(project, cohort, monkeypatch):
    run = new_run(sealed(project, cohort))
    monkeypatch.setattr(sealing, "code_version", lambda: "0123456789abcdef-other")
    with pytest.raises(RunError, match="the code version changed"):
        run_start(run=run)


def test_a_condition_removed_from_the_registry_is_a_mismatch_not_a_crash(project, cohort, monkeypatch):
    from experiments.core import conditions

    protocol = sealed(project, cohort)
    registry = dict(conditions.CONDITIONS)
    del registry[QUESTION_ONLY]
    monkeypatch.setattr(conditions, "CONDITIONS", registry)
    assert sealing.seal_mismatches(protocol, code=False) == [
        "prompt file answer_question_only_user changed",  # no longer used by any condition
        "prompt file generation_system changed",
        f"the settings changed ({protocol.seal['settings_sha256'][:12]} → "
        f"{sealing.protocol_hashes(protocol)['settings_sha256'][:12]})",
    ]


def test_the_task_list_hash_the_database_computes_is_the_canonical_one_for_any_text(project):
    """The seal check hashes question and answer texts in the database (PostgreSQL) or here: the
    same sha256 of the same UTF-8 bytes as `canonical_task_list`, whatever the text holds."""
    cohort = build_cohort(project, sessions=2, targets=2, name="unicode")
    texts = ["Grüße, ça va? «Oui» — 你好 🌱", "line one\nline two\u2028\u0301é\t\"quoted\" \\ back", "ﬁ ẞ 𝔘𝔫𝔦", ""]
    turn_ids = [turn_id for task in cohort_tasks(cohort) for turn_id in (task.question_turn_id, task.answer_turn_id)]
    for i, turn_id in enumerate(turn_ids):
        Turn.objects.filter(pk=turn_id).update(text=texts[i % len(texts)] + f" {i}")
    expected = hashlib.sha256(canonical_task_list(cohort_tasks(cohort)).encode()).hexdigest()
    assert kind_table.cohort_task_list_sha256(cohort) == expected
    assert expected != cohort.task_list_sha256  # the texts did change: the hash follows them
