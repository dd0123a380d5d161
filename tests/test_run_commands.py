"""Management commands for protocols and runs: create, seal, start, pause, resume and
report from a shell; bad input gets a CommandError with a clear message and changes nothing."""
import json

import pytest
from django.core.management import CommandError, call_command


from experiments.execution import progress
from experiments.models import Amendment, Protocol, Run
from experiments.data.sessions import cohort_draw
from tests.conftest import UNRUNNABLE

MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


@pytest.fixture
def cohort(imported, cast):
    return cohort_draw(project=imported, name="c1", size=2, seed=1)


def spec(**overrides):
    value = {
        "name": "pilot", "cohort": "c1", "conditions": [MEMORY, OWNWORDS], "generator": OFFLINE, "judge": OFFLINE,
        "concurrency": {"offline": 4},
        "retry_policy": {"max_recoveries_per_slot": 1, "cooldown_s": 5},
        "contrasts": [f"{OWNWORDS} - {MEMORY} [family] [interval above zero]",
                      {"name": "reverse", "terms": {MEMORY: 1, OWNWORDS: -1}}],
        "bootstrap": {"seed": 3, "draws": 500},
    }
    value.update(overrides)
    return value


def write(tmp_path, value) -> str:
    path = tmp_path / "protocol.json"
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return str(path)


def create(tmp_path, **overrides) -> Protocol:
    call_command("protocol_create", write(tmp_path, spec(**overrides)), project="alpha")
    return Protocol.objects.get(name=overrides.get("name", "pilot"))


def sealed_protocol(tmp_path) -> Protocol:
    protocol = create(tmp_path)
    call_command("protocol_seal", str(protocol.pk))
    protocol.refresh_from_db()
    return protocol


# --- protocol_create ----------------------------------------------------------------------------

def test_protocol_create_reads_a_json_file_and_says_what_to_do_next(tmp_path, cohort, cast):
    out = call_command("protocol_create", write(tmp_path, spec()), project="alpha", user="analyst-user")
    protocol = Protocol.objects.get(name="pilot")
    assert out == (f"protocol 'pilot' (id {protocol.pk}) created in project 'alpha': 2 conditions, 2 contrasts, "
                   f"not sealed. Seal it with: manage.py protocol_seal {protocol.pk}")
    assert protocol.cohort == cohort and protocol.created_by == cast["analyst"]
    assert protocol.contrasts == [
        {"name": f"{OWNWORDS} - {MEMORY}", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": True,
         "criterion": "interval_above_zero"},
        {"name": "reverse", "terms": {MEMORY: 1, OWNWORDS: -1}, "family": False, "criterion": None},
    ]
    assert protocol.retry_policy == {"max_recoveries_per_slot": 1, "cooldown_s": 5}
    assert not protocol.is_sealed()


@pytest.mark.parametrize("value, message", [
    ("{not json", "is not UTF-8 JSON"),
    ("[1, 2]", "expected a JSON object"),
    (spec(model="x"), "unknown keys model (allowed: name, cohort, conditions"),
    ({k: v for k, v in spec().items() if k != "judge"}, "missing judge"),
    (spec(cohort="nope"), "no cohort named 'nope' in project 'alpha'"),
    (spec(conditions=[UNRUNNABLE], contrasts=[]), f"{UNRUNNABLE} is not runnable yet"),
    (spec(conditions=["nonsense"], contrasts=[]), "unknown condition 'nonsense'"),
    (spec(generator={**OFFLINE, "api_key_env": "sk-live-abcdef"}), "looks like an API key itself"),
    (spec(judge={**OFFLINE, "colour": "red"}), "judge: unknown model settings: colour"),
    (spec(judge={"provider": "openai", "model": "x"}), "judge: model settings"),
    (spec(contrasts=[f"whole-record - {MEMORY}"]), "uses whole-record, which is not among the protocol's conditions"),
    (spec(contrasts=[f"{OWNWORDS} + {MEMORY}"]), "must sum to zero"),
    (spec(contrasts=["a - b [sometimes]"]), "unknown marker"),
    (spec(concurrency={"openai": 0}), "the in-flight cap must be a whole number ≥ 1"),
    (spec(retry_policy={"retries": 3}), "retry_policy: unknown key 'retries'"),
    (spec(bootstrap={"draws": 5}), "bootstrap draws: must be a whole number ≥ 100"),
])
def test_protocol_create_refuses_bad_input_clearly_and_creates_nothing(tmp_path, cohort, value, message,
                                                                        unrunnable_condition):
    with pytest.raises(CommandError, match=None) as error:
        call_command("protocol_create", write(tmp_path, value), project="alpha")
    assert message in str(error.value)
    assert not Protocol.objects.exists()


def test_protocol_create_refuses_a_missing_file_an_unknown_project_a_taken_name_and_a_non_member(tmp_path, cohort):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("protocol_create", str(tmp_path / "missing.json"), project="alpha")
    with pytest.raises(CommandError, match="no project 'beta'"):
        call_command("protocol_create", write(tmp_path, spec()), project="beta")
    with pytest.raises(CommandError, match="'viewer-user' is not an owner or analyst"):
        call_command("protocol_create", write(tmp_path, spec()), project="alpha", user="viewer-user")
    create(tmp_path)
    with pytest.raises(CommandError, match="has a protocol named 'pilot' already"):
        call_command("protocol_create", write(tmp_path, spec()), project="alpha")


def test_a_key_pasted_into_the_json_is_not_repeated_in_the_error(tmp_path, cohort):
    key = "sk-live-0123456789abcdefSECRET"
    with pytest.raises(CommandError) as error:
        call_command("protocol_create", write(tmp_path, spec(judge={**OFFLINE, "api_key_env": key})), project="alpha")
    assert key not in str(error.value)


# --- protocol_seal ------------------------------------------------------------------------------

def test_protocol_seal_prints_the_seal_and_refuses_twice(tmp_path, cohort):
    protocol = create(tmp_path)
    out = call_command("protocol_seal", str(protocol.pk), user="owner-user")
    protocol.refresh_from_db()
    assert protocol.is_sealed() and protocol.sealed_by.username == "owner-user"
    assert f"task list  {protocol.seal['task_list_sha256']}" in out
    assert f"prompt judge_user  {protocol.seal['prompts']['judge_user']}" in out
    with pytest.raises(CommandError, match="sealed already"):
        call_command("protocol_seal", str(protocol.pk))
    with pytest.raises(CommandError, match="no protocol with id 999"):
        call_command("protocol_seal", "999")


# --- run_start ------------------------------------------------------------------------------------

def test_run_start_inline_finishes_the_run_and_prints_its_id(tmp_path, cohort):
    protocol = sealed_protocol(tmp_path)
    out = call_command("run_start", str(protocol.pk), inline=True)
    run = Run.objects.get()
    assert out.startswith(f"run {run.pk} of 'pilot' ran inline and is finished")
    assert run.status == Run.Status.FINISHED and run.inline
    assert run.analysis["contrasts"][0]["draws"] == 500


def test_run_start_goes_through_the_queue_by_default(tmp_path, cohort, monkeypatch, django_capture_on_commit_callbacks):
    protocol = sealed_protocol(tmp_path)
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        out = call_command("run_start", str(protocol.pk))
    run = Run.objects.get()
    assert out == (f"run {run.pk} of 'pilot' started through the queue; follow it with: "
                   f"manage.py run_report {run.pk}")
    assert run.status == Run.Status.RUNNING and not run.inline and not run.slots.exists()
    assert len(callbacks) == 1  # the driver job, enqueued on commit


def test_run_start_without_a_queue_starts_nothing_and_points_at_inline(tmp_path, cohort, monkeypatch):
    protocol = sealed_protocol(tmp_path)
    monkeypatch.setattr(progress, "queue_reachable", lambda: False)
    with pytest.raises(CommandError, match="no queue is reachable.*or use --inline"):
        call_command("run_start", str(protocol.pk))
    assert not Run.objects.exists()


def test_run_start_refuses_an_unsealed_protocol_and_leaves_no_run(tmp_path, cohort):
    protocol = create(tmp_path)
    with pytest.raises(CommandError, match="the run did not start: the protocol is not sealed"):
        call_command("run_start", str(protocol.pk), inline=True)
    assert not Run.objects.exists()


def test_run_start_refuses_when_a_prompt_file_changed_since_sealing(tmp_path, cohort):
    protocol = sealed_protocol(tmp_path)
    Protocol.objects.filter(pk=protocol.pk).update(
        seal={**protocol.seal, "prompts": {**protocol.seal["prompts"], "judge_user": "0" * 64}})
    with pytest.raises(CommandError, match="prompt file judge_user changed"):
        call_command("run_start", str(protocol.pk), inline=True)
    assert not Run.objects.exists()


# --- run_pause, run_resume ----------------------------------------------------------------------

def test_pause_and_resume_need_a_reason(tmp_path, cohort):
    with pytest.raises(CommandError, match="--reason"):
        call_command("run_pause", "1")
    with pytest.raises(CommandError, match="--reason"):
        call_command("run_resume", "1")


def test_a_queued_run_paused_then_resumed_inline_finishes_with_both_amendments(tmp_path, cohort, monkeypatch):
    protocol = sealed_protocol(tmp_path)
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    call_command("run_start", str(protocol.pk))
    run = Run.objects.get()
    out = call_command("run_pause", str(run.pk), reason="checking costs", user="owner-user")
    assert out.startswith(f"run {run.pk} paused (amendment ")
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED
    with pytest.raises(CommandError, match="not paused: the run is paused, not running"):
        call_command("run_pause", str(run.pk), reason="again")
    out = call_command("run_resume", str(run.pk), reason="costs fine", inline=True, user="owner-user")
    assert "resumed inline" in out and out.endswith("is finished")
    assert list(Amendment.objects.values_list("kind", "reason", "created_by__username")) == [
        ("pause", "checking costs", "owner-user"), ("resume", "costs fine", "owner-user")]


def test_only_those_who_may_spend_pause_or_resume_and_refusals_change_nothing(tmp_path, cohort, monkeypatch):
    protocol = sealed_protocol(tmp_path)
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    call_command("run_start", str(protocol.pk))
    run = Run.objects.get()
    # An offline protocol: analysts may pause it as they may start it (the paid matrix:
    # tests/test_spend_permissions.py); viewers never.
    with pytest.raises(CommandError, match="'viewer-user' may not do this"):
        call_command("run_pause", str(run.pk), reason="x", user="viewer-user")
    with pytest.raises(CommandError, match="give a reason"):
        call_command("run_pause", str(run.pk), reason="   ")
    with pytest.raises(CommandError, match="not resumed: the run is running"):
        call_command("run_resume", str(run.pk), reason="x", inline=True)
    with pytest.raises(CommandError, match="no run with id 999"):
        call_command("run_pause", "999", reason="x")
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and not Amendment.objects.exists()


def test_resume_without_a_queue_changes_nothing(tmp_path, cohort, monkeypatch):
    protocol = sealed_protocol(tmp_path)
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    call_command("run_start", str(protocol.pk))
    run = Run.objects.get()
    call_command("run_pause", str(run.pk), reason="x")
    monkeypatch.setattr(progress, "queue_reachable", lambda: False)
    with pytest.raises(CommandError, match="no queue is reachable"):
        call_command("run_resume", str(run.pk), reason="y")
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED and Amendment.objects.count() == 1


# --- run_report ---------------------------------------------------------------------------------

def test_run_report_of_a_finished_run_shows_phases_amendments_and_the_analysis(tmp_path, cohort):
    protocol = sealed_protocol(tmp_path)
    call_command("run_start", str(protocol.pk), inline=True)
    run = Run.objects.get()
    out = call_command("run_report", str(run.pk))
    assert out.startswith(f"run {run.pk} of protocol 'pilot' (cohort c1): finished, phase done (inline)")
    assert "circuit: closed" in out
    assert "offline stand-in: the generator and judge of this run is the offline stand-in" in out
    generation = next(line for line in out.splitlines() if line.startswith("Base generation"))
    total = run.slots.filter(phase="generation").count()
    assert generation.split() == ["Base", "generation", str(total), str(total), "0", "0", "0", "0", "0",
                                  str(total), "0"]
    assert "amendments: none" in out
    assert "analysis (10 tasks" in out and f"{MEMORY}  " in out
    contrast = next(line for line in out.splitlines() if line.startswith("reverse"))
    assert contrast.split()[1] == "10/10"


def test_run_report_of_a_running_run_has_no_analysis_yet(tmp_path, cohort, monkeypatch):
    protocol = sealed_protocol(tmp_path)
    monkeypatch.setattr(progress, "queue_reachable", lambda: True)
    call_command("run_start", str(protocol.pk))
    call_command("run_pause", str(Run.objects.get().pk), reason="look first")
    out = call_command("run_report", str(Run.objects.get().pk))
    assert "paused, phase memories" in out and "reason: Paused by" in out
    assert "pause: look first" in out and "analysis" not in out
    with pytest.raises(CommandError, match="no run with id 999"):
        call_command("run_report", "999")
