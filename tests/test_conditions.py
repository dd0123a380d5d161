"""The condition registry (docs/design.md §4)."""
import dataclasses
import hashlib
import json

import pytest

from experiments.core.conditions import (
    CONDITIONS, MEMORY_LENGTH, get_condition, memory_condition, ownwords_condition, recency_condition,
)
from experiments.core.prompts import all_prompt_names

DESIGN_CONDITIONS = [
    "memory(concrete,100w)+one-shot", "memory(trait,100w)+one-shot",
    "memory(concrete,100w)+fusion(3)", "memory(concrete,100w)+selection(3)",
    "memory(trait,100w)+fusion(3)", "memory(trait,100w)+selection(3)",
    "ownwords(B=|memory|)", "recency(B=|memory|)", "question-free(B=|memory|)",
    "whole-record", "current-dialogue", "memory+ownwords", "memory+whole-record",
    "screener-only", "question-only", "mem0(B=|memory|)", "memgpt-style(B=|memory|)",
]
SWEEP_CONDITIONS = [
    f"{family}(B=|memory(concrete,{w}w)|)" for family in ("ownwords", "recency") for w in (50, 200, 400)
] + [f"memory(concrete,{w}w)+one-shot" for w in (50, 200, 400)]

# Added after the design: Table 15's two cross cells (App. F) and the dense retriever (beyond the paper).
EVIDENCE_CONDITIONS = ["memory(concrete,100w)+raw-header", "question-free(B=|memory|)+memory-header", "dense(B=|memory|)",
                       "memory(concrete,100w)+wrong-person(seed=20260917)"]  # and App. K's wrong-person control


# App. F's development attempts (E.12): notes then an answer (from the record, or the memory), the pruned draft.
WORKFLOW_CONDITIONS = ["whole-record+notes(120w)", "memory(concrete,100w)+notes(120w)", "memory(concrete,100w)+pruned",
                       "memory(profile,100w)+one-shot", "tags(6-10,top-40)+one-shot"]  # and App. K's representations
# The rewrites' drafts; a length target may be the median of any of them.
REWRITE_BASES = ("memory(concrete,100w)+one-shot", "ownwords(B=|memory|)", "whole-record")
# beyond the paper: the evidence in other words; an answer in other words, at 60 words or at another's median
# (core.paraphrase)
PARAPHRASE_CONDITIONS = ["ownwords(B=|memory|)+paraphrased", "recency(B=|memory|)+paraphrased",
                         "whole-record+paraphrased",
                         *(f"{base}+{rewrite}" for rewrite in ("answer-paraphrased", "length(60w)")
                           for base in ("memory(concrete,100w)+one-shot", "ownwords(B=|memory|)", "whole-record")),
                         *(f"{base}+length(median:{other})" for base in REWRITE_BASES for other in REWRITE_BASES)]


def test_the_registry_has_every_condition_of_the_design_and_the_budget_sweep():
    assert set(DESIGN_CONDITIONS + SWEEP_CONDITIONS + EVIDENCE_CONDITIONS + WORKFLOW_CONDITIONS
               + PARAPHRASE_CONDITIONS) == set(CONDITIONS)


def test_registry_keys_are_the_specs_keys():
    for key, condition in CONDITIONS.items():
        assert condition.key == key
        assert get_condition(key) is condition


def test_unknown_condition_names_the_known_ones():
    with pytest.raises(KeyError, match="ownwords"):
        get_condition("ownwords(B=∞)")


def test_conditions_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_condition("whole-record").budget = 10


def test_every_prompt_a_condition_names_exists():
    names = set(all_prompt_names())
    for condition in CONDITIONS.values():
        assert set(condition.prompt_names()) <= names, condition.key


def test_mem0_is_runnable_at_the_memory_budget_and_says_its_search_is_semantic_only():
    condition = get_condition("mem0(B=|memory|)")
    assert condition.runnable and condition.budget == "|memory|" and condition.user_prompt == "answer_raw_user"
    assert "semantic only" in condition.note and "requirements-mem0.txt" in condition.note


def test_every_registered_condition_is_runnable():
    runnable = {key for key, condition in CONDITIONS.items() if condition.runnable}
    assert runnable == set(CONDITIONS)  # Mem0 and MemGPT-style included (App. H)


def test_memgpt_style_names_its_archive_query_prompts():
    assert {"memgpt_query_system", "memgpt_query_user"} <= set(get_condition("memgpt-style(B=|memory|)").prompt_names())


def test_workflows_and_candidate_slots():
    assert get_condition("memory(concrete,100w)+one-shot").candidates == 1
    fusion = get_condition("memory(concrete,100w)+fusion(3)")
    selection = get_condition("memory(trait,100w)+selection(3)")
    assert (fusion.workflow, fusion.candidates, fusion.decision_instruction) == ("fusion", 3, "fusion_instruction")
    assert (selection.workflow, selection.candidates, selection.decision_instruction) == (
        "selection", 3, "selection_instruction")
    # Fusion and selection candidates use the unchanged memory answering prompt (App. E).
    assert fusion.user_prompt == selection.user_prompt == "answer_memory_user"
    assert fusion.decision_layout == selection.decision_layout == "decision_layout"


def test_budget_rules():
    memory = "m" * 687
    assert get_condition("ownwords(B=|memory|)").resolve_budget(memory) == 687
    assert get_condition("memory+ownwords").resolve_budget(memory) == 687
    assert get_condition("whole-record").resolve_budget(None) is None
    assert ownwords_condition(700).resolve_budget(None) == 700
    with pytest.raises(ValueError, match="no memory"):
        get_condition("recency(B=|memory|)").resolve_budget(None)


def test_the_budget_sweep_ties_each_budget_to_its_memory():
    condition = get_condition("ownwords(B=|memory(concrete,400w)|)")
    assert (condition.memory_kind, condition.memory_words, condition.budget) == ("concrete", 400, MEMORY_LENGTH)


def test_screener_is_shown_to_every_condition_but_question_only():
    without = {key for key, condition in CONDITIONS.items() if not condition.with_screener}
    assert without == {"question-only"}


def test_factories_build_parameterised_conditions():
    assert ownwords_condition(700).key == "ownwords(B=700)"
    assert ownwords_condition(700).memory_kind is None
    assert recency_condition(MEMORY_LENGTH, "trait", 100).key == "recency(B=|memory(trait,100w)|)"
    assert memory_condition("trait", 50, "fusion").key == "memory(trait,50w)+fusion(3)"


@pytest.mark.parametrize("build", [
    lambda: memory_condition("vivid", 100),
    lambda: memory_condition("concrete", 0),
    lambda: memory_condition("concrete", 100, "debate"),
    lambda: ownwords_condition(-1),
    lambda: ownwords_condition("700"),
    lambda: recency_condition(True),
])
def test_factories_reject_bad_parameters(build):
    with pytest.raises(ValueError):
        build()


def test_canonical_json_is_sorted_compact_and_hashable():
    condition = get_condition("ownwords(B=|memory|)")
    text = condition.canonical_json()
    spec = json.loads(text)
    assert list(spec) == sorted(spec)
    assert ", " not in text and ": " not in text
    assert spec["budget"] == "|memory|" and spec["evidence"] == "ownwords"
    assert "note" not in spec  # descriptive only; rewording it must not break a seal
    assert condition.spec_sha256() == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_canonical_json_is_stable_and_distinct_per_condition():
    assert ownwords_condition().canonical_json() == get_condition("ownwords(B=|memory|)").canonical_json()
    hashes = {condition.spec_sha256() for condition in CONDITIONS.values()}
    assert len(hashes) == len(CONDITIONS)


def test_canonical_json_of_a_known_condition_is_pinned():
    assert get_condition("whole-record").canonical_json() == (
        '{"auxiliary_prompts":[],"budget":null,"candidates":1,"decision_instruction":null,'
        '"decision_layout":null,"evidence":"whole-record","key":"whole-record","memory_kind":null,'
        '"memory_words":null,"runnable":true,"system_prompt":"generation_system",'
        '"user_prompt":"answer_raw_user","with_screener":true,"workflow":"one-shot"}'
    )
