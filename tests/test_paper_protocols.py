"""Ready-made protocols (the paper's experiments): each template's conditions, contrast family and
expected calls on the demo cohort; one command and one click create them; a run of one plans
exactly the calls its estimate announced."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.core.conditions import get_condition
from experiments.core.paper_protocols import PAPER_PROTOCOLS, paper_protocol
from experiments.core.interviews.readers import read_interview_path
from experiments.data.sessions import cohort_draw, sessions_import
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.sealing import protocol_seal
from experiments.memory_systems.availability import condition_unavailable
from experiments.management.commands.demo_setup import DEMO_COHORT, DEMO_RULE, SAMPLE_SOURCES
from experiments.models import ModelCall, Protocol, Run
from experiments.execution.protocol_templates import TemplateError, protocol_estimate, protocol_from_template
from tests.engine_helpers import build_cohort

MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
# Mem0 runs only where requirements-mem0.txt is installed (CI installs it); templates say so otherwise.
MEM0_HERE = condition_unavailable(get_condition("mem0(B=|memory|)")) is None


@pytest.fixture
def demo_cohort(project):
    for fmt, path in SAMPLE_SOURCES:
        sessions_import(project=project, parsed=read_interview_path(path, fmt), source_format=fmt,
                        source_file=path.name, task_rule=DEMO_RULE)
    return cohort_draw(project=project, **DEMO_COHORT)


def expected_calls(template: str, sessions: int, tasks: int) -> dict:
    """The calls of one run by hand (App. B.2): memories per session, base calls with shared pools,
    one decision per fusion / selection / MemGPT-style answer, at most one grade per answer."""
    if template == "common":  # 2 memories; 3 shared candidates each + 2 records; 4 decisions; 6+2 answers + 2 fusions
        return {"memories": 2 * sessions, "generation": 8 * tasks, "decisions": 4 * tasks, "judging": 10 * tasks}
    if template == "confirmation":
        return {"memories": sessions, "generation": 3 * tasks, "decisions": 0, "judging": 3 * tasks}
    if template == "memory-systems" and MEM0_HERE:
        # memory and Mem0's extraction per session; memory, OwnWords, Mem0, the query call,
        # memory+OwnWords and the record per task
        return {"memories": 2 * sessions, "generation": 6 * tasks, "decisions": tasks, "judging": 6 * tasks}
    if template == "memory-systems":  # without Mem0: memory, OwnWords, query call, memory+OwnWords, record
        return {"memories": sessions, "generation": 5 * tasks, "decisions": tasks, "judging": 5 * tasks}
    if template == "development-attempts":  # the one-shot (= the pruned draft), two notes calls, the record;
        # two answers from notes and the pruning; five answers judged (the notes never)
        return {"memories": sessions, "generation": 4 * tasks, "decisions": 3 * tasks, "judging": 5 * tasks}
    if template == "representations":  # concrete, trait, profile and labels per session; four one-shot answers
        # per task and a tag choice per session; the answers from tags; five answers judged per task
        return {"memories": 4 * sessions, "generation": 4 * tasks + sessions, "decisions": tasks, "judging": 5 * tasks}
    if template == "history-benchmark":  # the current dialogue and the question alone: no memory
        return {"memories": 0, "generation": 2 * tasks, "decisions": 0, "judging": 2 * tasks}
    if template == "paraphrase-controls":  # the memory, three verbatim conditions and three paraphrase calls;
        # three answers from the paraphrases; seven answers judged (the paraphrases never)
        return {"memories": sessions, "generation": 7 * tasks, "decisions": 3 * tasks, "judging": 7 * tasks}
    if template == "answer-controls":  # three base calls shared by their rewrites; six rewrites; nine answers judged
        return {"memories": sessions, "generation": 3 * tasks, "decisions": 6 * tasks, "judging": 9 * tasks}
    if template == "length-median-controls":  # three base calls shared by their rewrites; three rewrites; six judged
        return {"memories": sessions, "generation": 3 * tasks, "decisions": 3 * tasks, "judging": 6 * tasks}
    if template == "factorial":  # the memory and question-free excerpts, each under both headers
        return {"memories": sessions, "generation": 4 * tasks, "decisions": 0, "judging": 4 * tasks}
    if template == "wrong-person":  # own memory, another person's (the same memories), the screener reference
        return {"memories": sessions, "generation": 3 * tasks, "decisions": 0, "judging": 3 * tasks}
    if template == "dense-vs-bm25":  # the memory, OwnWords and, where its embedder is installed, dense
        dense = condition_unavailable(get_condition("dense(B=|memory|)")) is None
        return {"memories": sessions, "generation": (2 + dense) * tasks, "decisions": 0, "judging": (2 + dense) * tasks}
    return {"memories": 4 * sessions, "generation": 13 * tasks, "decisions": 0, "judging": 13 * tasks}


def test_each_template_on_the_demo_cohort(demo_cohort):
    sessions = demo_cohort.rule["drawn_sessions"]
    tasks = demo_cohort.cohort_tasks.count()
    assert sessions == 24 and tasks > sessions
    made = {}
    for key in PAPER_PROTOCOLS:
        protocol, instantiated = protocol_from_template(template=key, cohort=demo_cohort)
        made[key] = (protocol, instantiated)
        calls = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
        assert calls == expected_calls(key, sessions, tasks), key
        assert all(get_condition(c).runnable for c in protocol.conditions)
        assert protocol.generator["provider"] == "offline" and not protocol.is_sealed()

    common = made["common"][0]
    assert sorted(common.conditions) == sorted(
        [f"memory({k},100w)+{w}" for k in ("concrete", "trait") for w in ("one-shot", "fusion(3)", "selection(3)")]
        + ["whole-record", "current-dialogue"])
    family = [c for c in common.contrasts if c["family"]]
    assert len(family) == len(common.contrasts) == 8  # App. B.3's eight-contrast family
    fusion, one_shot = "memory(concrete,100w)+fusion(3)", "memory(concrete,100w)+one-shot"
    interaction = next(c for c in family if c["name"].startswith("interaction"))
    assert interaction["terms"] == {fusion: 1, one_shot: -1, "memory(trait,100w)+fusion(3)": -1,
                                    "memory(trait,100w)+one-shot": 1}
    assert {tuple(sorted(c["terms"])) for c in family if len(c["terms"]) == 2} >= {
        tuple(sorted((fusion, "whole-record"))), tuple(sorted((fusion, "current-dialogue"))),
        tuple(sorted((fusion, "memory(concrete,100w)+selection(3)")))}
    assert common.bootstrap == {"seed": 20260918, "draws": 100_000}

    confirmation = made["confirmation"][0]
    assert confirmation.conditions == [MEMORY, OWNWORDS, "whole-record"]
    assert [(c["terms"], c["criterion"]) for c in confirmation.contrasts][0] == (
        {OWNWORDS: 1, MEMORY: -1}, "interval_above_zero")

    systems, instantiated = made["memory-systems"]
    template = PAPER_PROTOCOLS["memory-systems"]
    assert len(template.contrasts) == 6 and "mem0(B=|memory|)" in template.conditions
    assert not any(c["criterion"] or c["family"] for c in template.contrasts)  # declared descriptive
    if MEM0_HERE:
        assert len(systems.contrasts) == 6
    else:  # said, not hidden: Mem0 and its two contrasts left out
        assert "mem0(B=|memory|)" not in systems.conditions and len(systems.contrasts) == 4
        assert len(instantiated.unavailable) == 1 and "mem0(B=|memory|) is unavailable" in instantiated.unavailable[0]
    assert "memgpt-style(B=|memory|)" in systems.conditions

    sweep = made["budget-sweep"][0]
    criteria = [c for c in sweep.contrasts if c["criterion"]]
    assert [c["name"] for c in criteria] == ["mean over budgets: OwnWords − memory",
                                             "mean over budgets: OwnWords − recency", "OwnWords at 400 − at 50 words"]
    assert criteria[0]["terms"]["ownwords(B=|memory(concrete,400w)|)"] == 0.25
    assert criteria[0]["terms"]["memory(concrete,50w)+one-shot"] == -0.25
    assert criteria[2]["terms"] == {"ownwords(B=|memory(concrete,400w)|)": 1, "ownwords(B=|memory(concrete,50w)|)": -1}
    assert sweep.bootstrap["seed"] == 20260924

    with pytest.raises(TemplateError, match="exists already"):
        protocol_from_template(template="common", cohort=demo_cohort, name="common · demo")
    again, _ = protocol_from_template(template="common", cohort=demo_cohort)  # a second click
    assert again.name == "common · demo (2)" and again.conditions == common.conditions
    with pytest.raises(TemplateError, match="no ready-made protocol"):
        protocol_from_template(template="nonsense", cohort=demo_cohort, name="x")


def test_a_run_of_the_confirmation_plans_the_calls_its_estimate_announced(demo_cohort):
    protocol, _ = protocol_from_template(template="confirmation", cohort=demo_cohort)
    estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    for phase in ("memories", "generation", "decisions"):
        assert ModelCall.objects.filter(slot__run=run, slot__phase=phase).count() == estimate[phase], phase
    assert ModelCall.objects.filter(slot__run=run, slot__phase="judging").count() <= estimate["judging"]


def test_the_command_creates_a_template_and_prints_its_estimate(project):
    build_cohort(project, sessions=2, targets=2, name="small")
    out = call_command("protocol_template", "memory-systems", project=project.slug, cohort="small", stdout=StringIO())
    assert "memgpt-style(B=|memory|)" in out and "expected in all:" in out
    assert "expected decisions: 4 calls" in out
    if not MEM0_HERE:
        assert "unavailable: mem0(B=|memory|)" in out
    # The conditions this installation can run (Mem0's only where requirements-mem0.txt is installed).
    runnable = [c for c in paper_protocol("memory-systems").conditions if condition_unavailable(get_condition(c)) is None]
    assert Protocol.objects.get(name="memory-systems · small").conditions == runnable
    with pytest.raises(CommandError, match="no cohort named"):
        call_command("protocol_template", "common", project=project.slug, cohort="nope")
    with pytest.raises(CommandError, match="run 424242 is not a run of this project"):
        call_command("protocol_template", "common", project=project.slug, cohort="small", import_memories=[424242])
    assert not Protocol.objects.filter(name__startswith="common").exists()


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not UTF-8 JSON"),
    ('["a list"]', "the judge settings must be a JSON object"),
    ('{"provider": "openai", "api_key_env": "sk-live-123"}', "judge api_key_env:"),
])
def test_bad_model_settings_files_are_named_and_create_nothing(project, tmp_path, text, message):
    build_cohort(project, sessions=2, targets=2, name="small")
    settings = tmp_path / "judge.json"
    settings.write_text(text, encoding="utf-8")
    with pytest.raises(CommandError, match=message):
        call_command("protocol_template", "common", project=project.slug, cohort="small", judge=str(settings))
    with pytest.raises(CommandError, match="cannot read"):
        call_command("protocol_template", "common", project=project.slug, cohort="small",
                     judge=str(tmp_path / "missing.json"))
    assert not Protocol.objects.exists()


@pytest.mark.parametrize("who, created", [("owner", True), ("analyst", True), ("viewer", False)])
def test_one_click_on_the_project_page(client, project, cast, who, created):
    cohort = build_cohort(project, sessions=2, targets=2, name="small")
    client.force_login(cast[who])
    page = client.get(reverse("project_detail", args=[project.slug])).content.decode()
    assert ('id="paper-protocol-form"' in page) == created
    response = client.post(reverse("protocol_from_template", args=[project.slug]),
                           {"template": "common", "cohort": cohort.pk})
    protocol = Protocol.objects.filter(name="common · small").first()
    assert (protocol is not None) == created
    if created:
        assert response.status_code == 302 and response.url == reverse("protocol_detail", args=[project.slug, protocol.pk])
        detail = client.get(response.url).content.decode()
        assert 'id="estimate-table"' in detail
        assert len(protocol.contrasts) == 8
    else:
        assert response.status_code == 403


def test_a_bad_click_creates_nothing(client, project, cast):
    build_cohort(project, sessions=1, targets=1, name="small")
    client.force_login(cast["owner"])
    # A cohort id that is not a whole number is refused before the view by the input gate (400).
    for data, status in (({"template": "nonsense", "cohort": "1"}, 302), ({"template": "common", "cohort": "x"}, 400),
                         ({}, 302)):
        response = client.post(reverse("protocol_from_template", args=[project.slug]), data)
        assert response.status_code == status
    assert not Protocol.objects.exists()
