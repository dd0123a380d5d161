"""Memories built once, reused (paper App. G): a later protocol imports the sealed memories of an
earlier run instead of paying for them again; the seal names the source run and the hashes;
memories not covered are written as usual; the run page counts the imported ones."""
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from experiments.core.canonical import sha256_text
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.policy import RunError
from experiments.execution.sealing import protocol_seal, seal_mismatches
from experiments.models import Memory, ModelCall, Protocol, Run, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import ONE_SHOT, Roles, Sleeps, build_cohort, make_protocol, make_run, openai_model

TRAIT_ONE_SHOT = "memory(trait,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"


@pytest.fixture
def first_run(project, server, http):
    """A finished run that wrote the concrete memory of each of three sessions."""
    cohort = build_cohort(project, sessions=3, targets=1, name="imports")
    run = make_run(project, cohort, conditions=[ONE_SHOT], generator=openai_model(server), name="first")
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED
    assert Memory.objects.filter(run=run, text__isnull=False).count() == 3
    return run


def memory_calls(run) -> int:
    return ModelCall.objects.filter(slot__run=run, slot__phase=Phase.MEMORIES).count()


def test_a_second_run_imports_every_memory_it_shares_and_writes_only_the_others(project, server, http, first_run):
    roles = Roles(server)
    protocol = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT, OWNWORDS, TRAIT_ONE_SHOT],
                             generator=openai_model(server), name="second")
    protocol.memory_import_runs = [first_run.pk]
    protocol.save()
    protocol = protocol_seal(protocol=protocol, user=None)
    digest = protocol.seal["memory_imports"]
    assert digest["runs"] == [first_run.pk] and digest["imported"] == 3 and digest["needed"] == 6
    sources = {m.pk: m for m in Memory.objects.filter(run=first_run)}
    for entry in digest["memories"]:
        source = sources[entry["source_memory"]]
        assert entry["source_run"] == first_run.pk and entry["kind"] == "concrete"
        assert entry["text_sha256"] == sha256_text(source.text)
        assert entry["request_sha256"] == source.slot.request_sha256

    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == Run.Status.FINISHED, run.status_reason
    # zero calls for the imported concrete memories; the trait ones (not covered) were written
    assert roles.kinds["memory"] == 3 and memory_calls(run) == 3
    assert not Slot.objects.filter(run=run, phase=Phase.MEMORIES, key__contains="|concrete|").exists()
    imported = Memory.objects.filter(run=run, imported_from__isnull=False)
    assert imported.count() == 3 and all(m.slot_id is None and m.kind == "concrete" for m in imported)
    for memory in imported:
        assert memory.text == memory.imported_from.text and memory.imported_from.run_id == first_run.pk
    # the answers over imported memories are the ones the source run's memory gives: same messages
    first_user = set(Slot.objects.filter(run=first_run, phase=Phase.GENERATION).values_list("user", flat=True))
    second_user = set(Slot.objects.filter(run=run, phase=Phase.GENERATION).values_list("user", flat=True))
    assert first_user <= second_user


def test_the_run_page_counts_the_imported_memories(project, server, http, first_run, cast):
    protocol = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT],
                             generator=openai_model(server), name="page")
    protocol.memory_import_runs = [first_run.pk]
    protocol.save()
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert memory_calls(run) == 0
    browser = Client()
    browser.force_login(cast["viewer"])  # counts only
    page = browser.get(f"/p/{project.slug}/runs/{run.pk}/").content.decode()
    assert "<strong>3</strong> memories imported from" in page and f"run {first_run.pk}</a>" in page


def test_other_generator_settings_import_nothing(project, server, first_run):
    protocol = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT],
                             generator=openai_model(server, temperature=0.5), name="warmer")
    protocol.memory_import_runs = [first_run.pk]
    protocol.save()
    protocol = protocol_seal(protocol=protocol, user=None)
    assert protocol.seal["memory_imports"]["imported"] == 0


def test_a_key_variable_name_is_not_a_generator_difference(project, server, first_run):
    protocol = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT],
                             generator=openai_model(server, api_key_env="OTHER_TEST_KEY"), name="other-key")
    protocol.memory_import_runs = [first_run.pk]
    protocol.save()
    assert protocol_seal(protocol=protocol, user=None).seal["memory_imports"]["imported"] == 3


def test_import_sources_are_checked_before_sealing(project, server, first_run, cast):
    cohort = first_run.protocol.cohort
    for runs, message in [([999_999], "not a run of this project"), ([first_run.pk, first_run.pk], "listed twice"),
                          (["1"], "list of run ids")]:
        protocol = make_protocol(project, cohort, conditions=[ONE_SHOT], generator=openai_model(server),
                                 name=f"bad-{len(Protocol.objects.all())}")
        protocol.memory_import_runs = runs
        protocol.save()
        with pytest.raises(RunError, match=message):
            protocol_seal(protocol=protocol, user=None)
        assert not Protocol.objects.get(pk=protocol.pk).is_sealed()


def test_a_changed_source_memory_breaks_the_seal(project, server, first_run):
    protocol = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT],
                             generator=openai_model(server), name="tamper")
    protocol.memory_import_runs = [first_run.pk]
    protocol.save()
    protocol = protocol_seal(protocol=protocol, user=None)
    assert seal_mismatches(protocol, code=False) == []
    Memory.objects.filter(run=first_run).update(text="rewritten afterwards")
    assert any("imported memories changed" in p for p in seal_mismatches(protocol, code=False))


def test_the_estimate_before_sealing_leaves_out_the_imported_memories(project, server, first_run, cast):
    protocol = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT, TRAIT_ONE_SHOT],
                             generator=openai_model(server), name="estimated")
    protocol.memory_import_runs = [first_run.pk]
    protocol.save()
    browser = Client()
    browser.force_login(cast["owner"])
    response = browser.get(f"/p/{project.slug}/protocols/{protocol.pk}/")
    memories = response.context["estimate"].phases[0]
    assert memories.calls == 3 and "3 imported from earlier runs: no call" in memories.notes
    assert "3 imported from earlier runs" in response.content.decode()


def test_a_run_that_imported_passes_its_memories_on_naming_the_run_that_wrote_them(project, server, http,
                                                                                   first_run):
    second = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT], generator=openai_model(server),
                           name="relay")
    second.memory_import_runs = [first_run.pk]
    second.save()
    second = protocol_seal(protocol=second, user=None)
    relay = Run.objects.create(protocol=second)
    run_start(run=relay)
    relay = run_inline(relay.pk, client=http, sleep=Sleeps())
    third = make_protocol(project, first_run.protocol.cohort, conditions=[ONE_SHOT], generator=openai_model(server),
                          name="third")
    third.memory_import_runs = [relay.pk]
    third.save()
    digest = protocol_seal(protocol=third, user=None).seal["memory_imports"]
    assert digest["imported"] == 3
    assert {(e["source_run"], e["written_by_run"]) for e in digest["memories"]} == {(relay.pk, first_run.pk)}
    originals = set(Memory.objects.filter(run=first_run).values_list("pk", flat=True))
    assert {e["source_memory"] for e in digest["memories"]} == originals


@pytest.mark.parametrize("value, message", [
    ('"5"', "list of run ids"), ("null", "list of run ids"), ("[true]", "list of run ids"),
    ("[1.5]", "list of run ids"), ('{"run": 1}', "list of run ids"), ("[987654]", "not a run of this project"),
])
def test_protocol_create_refuses_bad_memory_imports(project, server, first_run, tmp_path, value, message):
    spec = tmp_path / "p.json"
    spec.write_text('{"name": "cli", "cohort": "imports", "conditions": ["%s"], "generator": {"provider": "offline", '
                    '"base_url": "", "model": "m"}, "judge": {"provider": "offline", "base_url": "", "model": "m"}, '
                    '"memory_import_runs": %s}' % (ONE_SHOT, value))
    with pytest.raises(CommandError, match=message):
        call_command("protocol_create", str(spec), project=project.slug)
    assert not Protocol.objects.filter(name="cli").exists()
