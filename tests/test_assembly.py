"""Message assembly: the exact messages per condition, and what each may and may not see."""

import dataclasses

import pytest

from experiments.core.assembly import (Assembled, TaskInput, assemble, assemble_archive_queries, assemble_judge,
                                       assemble_memory_request, judge_assembler)
from experiments.core.conditions import CONDITIONS, get_condition, ownwords_condition
from experiments.core.evidence import INTERVIEWER, PARTICIPANT, RankedMemories, TurnText, question_free, recency
from experiments.core.parsers import selection_payload
from experiments.core.prompts import PromptRef, load_prompt, prompt_sha256
from experiments.core.workflows import assemble_notes_request, assemble_prune

REFERENCE = "REFERENCE-SENTINEL I never let it write melodies."
LATER = "LATER-SENTINEL Nothing else."
SPOKEN = [
    (INTERVIEWER, "Welcome! Could you tell me about your work?"),
    (PARTICIPANT, "I compose music for films. I also teach piano on weekends."),
    (INTERVIEWER, "What tools do you use when composing?"),
    (PARTICIPANT, "Mostly Logic Pro. Sometimes I sketch on paper first."),
    (INTERVIEWER, "How has AI changed your composing process?"),  # the earliest target: record_cut
    (PARTICIPANT, "AFTER-RECORD-CUT It speeds up orchestration drafts."),
    (INTERVIEWER, "Do you use AI when you teach piano?"),  # this task's question: cut
    (PARTICIPANT, REFERENCE),
    (INTERVIEWER, "Anything else you would like to add?"),
    (PARTICIPANT, LATER),
]
TURNS = tuple(TurnText(i, speaker, text) for i, (speaker, text) in enumerate(SPOKEN))
TASK = TaskInput(
    question=TURNS[6].text, turns=TURNS, cut=6, record_cut=4,
    screener=(("What is your occupation?", "Composer"),),
)
MEMORY = "Composer; teaches piano; uses Logic Pro."  # 40 characters: B = 40
RECORD = "- I compose music for films. I also teach piano on weekends.\n- Mostly Logic Pro. Sometimes I sketch on paper first."
SCREENER = "[SCREENER Q&A]\nQ: What is your occupation?\nA: Composer\n\n"
QUESTION = "[QUESTION]\nDo you use AI when you teach piano?\n\nAnswer as this participant would. Write ONLY their reply."
# Mem0's memories of the session (extraction order) ranked for the question: a 27-character one first.
RANKED = RankedMemories(("Teaches piano on weekdays", "Composes for films and TV", "Owns a cat"), (1, 2, 0))
CANDIDATES = ["I do, a little.", "", "Never for teaching {really}."]


def ref(name):
    return PromptRef(name, prompt_sha256(name))


def test_task_record_is_bounded_by_the_sessions_earliest_cut():
    assert TASK.record() == RECORD


def test_ownwords_messages_exactly():
    sent = assemble("ownwords(B=|memory|)", TASK, memory=MEMORY)
    # BM25 for "use ai teach piano": only "I also teach piano on weekends." (31 chars) scores;
    # with B = 40 nothing else fits beside it.
    assert sent == Assembled(
        system=load_prompt("generation_system"),
        user=SCREENER + "[EARLIER IN THE INTERVIEW, verbatim]\nI also teach piano on weekends.\n\n" + QUESTION,
        evidence="I also teach piano on weekends.",
        evidence_chars=31,
        prompt_refs=(ref("generation_system"), ref("answer_raw_user")),
        budget=40,
    )


def test_memory_one_shot_messages_exactly():
    sent = assemble("memory(concrete,100w)+one-shot", TASK, memory=MEMORY)
    assert sent.system == load_prompt("generation_system")
    assert sent.user == SCREENER + "[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n" + MEMORY + "\n\n" + QUESTION
    assert (sent.evidence, sent.evidence_chars, sent.budget) == (MEMORY, 40, None)
    assert sent.prompt_refs == (ref("generation_system"), ref("answer_memory_user"))


def test_whole_record_is_the_permitted_record():
    sent = assemble("whole-record", TASK)
    assert sent.evidence == RECORD
    assert sent.evidence_chars == len(RECORD)
    assert "AFTER-RECORD-CUT" not in sent.user
    assert sent.user == SCREENER + "[EARLIER IN THE INTERVIEW, verbatim]\n" + RECORD + "\n\n" + QUESTION


def test_whole_record_is_capped_at_12000_characters():
    long_turns = tuple(TurnText(i, PARTICIPANT if i % 2 else INTERVIEWER, "word " * 400) for i in range(20))
    task = TaskInput(question="Q?", turns=long_turns, cut=20, record_cut=20)
    assert assemble("whole-record", task).evidence_chars == 12_000


def test_current_dialogue_sees_both_speakers_up_to_the_question():
    sent = assemble("current-dialogue", TASK)
    assert sent.evidence.startswith("Interviewer: Welcome!")
    assert sent.evidence.endswith("Participant: AFTER-RECORD-CUT It speeds up orchestration drafts.")
    assert TASK.question not in sent.evidence
    assert sent.user.count(TASK.question) == 1  # in the [QUESTION] block only


def test_recency_and_question_free_use_their_builders():
    recent = assemble("recency(B=|memory|)", TASK, memory=MEMORY)
    assert recent.evidence == recency(RECORD, 40) == "Sometimes I sketch on paper first."
    free = assemble("question-free(B=|memory|)", TASK, memory=MEMORY)
    assert free.evidence == question_free(RECORD, 40)


def test_a_fixed_budget_needs_no_memory():
    sent = assemble(ownwords_condition(31), TASK)
    assert (sent.evidence, sent.budget) == ("I also teach piano on weekends.", 31)


def test_memory_plus_ownwords_shows_both_blocks():
    sent = assemble("memory+ownwords", TASK, memory=MEMORY)
    assert sent.user == (
        SCREENER + "[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n" + MEMORY + "\n\n"
        "[EXCERPTS FROM EARLIER IN THE INTERVIEW, verbatim]\nI also teach piano on weekends.\n\n" + QUESTION
    )
    assert sent.evidence == MEMORY + "\n\nI also teach piano on weekends."
    assert sent.evidence_chars == 40 + 2 + 31
    assert sent.budget == 40


def test_memory_plus_whole_record_shows_both_blocks():
    sent = assemble("memory+whole-record", TASK, memory=MEMORY)
    assert sent.user == (
        SCREENER + "[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n" + MEMORY + "\n\n"
        "[EARLIER IN THE INTERVIEW, verbatim]\n" + RECORD + "\n\n" + QUESTION
    )
    assert sent.evidence == MEMORY + "\n\n" + RECORD


def test_screener_only_and_question_only():
    screener_only = assemble("screener-only", TASK)
    assert screener_only.user == SCREENER + QUESTION
    question_only = assemble("question-only", TASK)
    assert question_only.user == QUESTION
    assert screener_only.evidence == question_only.evidence == ""
    assert question_only.evidence_chars == 0


def test_a_missing_screener_is_shown_as_none():
    task = TaskInput(question=TASK.question, turns=TURNS, cut=6, record_cut=4)
    assert assemble("screener-only", task).user.startswith("[SCREENER Q&A]\n(none)\n\n[QUESTION]")


def test_fusion_and_selection_candidates_are_the_one_shot_prompt():
    one_shot = assemble("memory(concrete,100w)+one-shot", TASK, memory=MEMORY)
    for key in ("memory(concrete,100w)+fusion(3)", "memory(concrete,100w)+selection(3)"):
        base = assemble(key, TASK, memory=MEMORY)
        assert (base.system, base.user) == (one_shot.system, one_shot.user)


@pytest.mark.parametrize("workflow", ["fusion", "selection"])
def test_decision_call_layout(workflow):
    key = f"memory(trait,100w)+{workflow}(3)"
    base = assemble(key, TASK, memory=MEMORY)
    decision = assemble(key, TASK, memory=MEMORY, candidates=CANDIDATES)
    assert decision.system == load_prompt("generation_system")
    assert decision.user == (
        base.user + "\n\n[DECISION TASK]\n" + load_prompt(f"{workflow}_instruction")
        + "\n\n[ANONYMOUS CANDIDATES]\n" + selection_payload(CANDIDATES)
    )
    assert "Never for teaching {really}." in decision.user  # braces in candidates survive
    assert decision.prompt_refs == (
        ref("generation_system"), ref("answer_memory_user"),
        ref(f"{workflow}_instruction"), ref("decision_layout"),
    )
    assert decision.evidence == MEMORY


def test_no_condition_sees_the_reference_answer_or_anything_after_the_question():
    for key, condition in CONDITIONS.items():
        if not condition.runnable:
            continue
        calls = [assemble(condition, TASK, memory=MEMORY, **_extra(condition))]
        if condition.evidence == "memgpt-style":
            calls.append(assemble_archive_queries(condition, TASK, memory=MEMORY))
        if condition.candidates > 1:
            calls.append(assemble(condition, TASK, memory=MEMORY, candidates=CANDIDATES))
        if condition.workflow == "notes":  # App. F's first call
            calls.append(assemble_notes_request(condition, TASK, memory=MEMORY))
        if condition.workflow == "prune":  # App. F's second call
            calls.append(assemble_prune(condition, TASK, memory=MEMORY, draft="A draft."))
        for sent in calls:
            text = sent.system + sent.user
            assert "REFERENCE-SENTINEL" not in text, key
            assert "LATER-SENTINEL" not in text, key
            assert "Anything else you would like" not in text, key


def _extra(condition) -> dict:
    """What a condition's answering call needs besides the memory: MemGPT-style's parsed queries,
    Mem0's ranked memories."""
    if condition.evidence == "memgpt-style":
        return {"archive_queries": ("how they spend the day",)}
    if condition.evidence == "mem0":
        return {"ranked_memories": RANKED}
    if condition.workflow == "notes":  # App. F: the first call's notes
        return {"notes": "Notes on the question."}
    if condition.evidence == "dense":  # a stand-in embedder: the dense path is tested in test_evidence_conditions
        return {"embed": lambda texts: [[float(len(text)), 1.0] for text in texts]}
    return {}


def test_participant_text_with_braces_is_sent_verbatim():
    turns = (TurnText(0, INTERVIEWER, "Q?"), TurnText(1, PARTICIPANT, "I use {question} and {memory} {{x}}."))
    task = TaskInput(question="Why {not}?", turns=turns, cut=2, record_cut=2)
    sent = assemble("memory+whole-record", task, memory="Likes {screener}.")
    assert "- I use {question} and {memory} {{x}}." in sent.user
    assert "Likes {screener}." in sent.user
    assert "[QUESTION]\nWhy {not}?" in sent.user


def test_every_runnable_condition_assembles_and_names_existing_prompts():
    for key, condition in CONDITIONS.items():
        if condition.runnable:
            sent = assemble(key, TASK, memory=MEMORY, **_extra(condition))
            assert sent.evidence_chars == len(sent.evidence)
            assert all(r.sha256 == prompt_sha256(r.name) for r in sent.prompt_refs)


def test_budgeted_evidence_never_exceeds_the_memorys_length():
    for key, condition in CONDITIONS.items():
        if condition.runnable and condition.evidence in ("ownwords", "recency", "question-free", "mem0", "dense",
                                                         "question-free@memory-header"):
            assert len(assemble(key, TASK, memory=MEMORY, **{"ranked_memories": RANKED, **_extra(condition)}).evidence) \
                <= len(MEMORY), key


def test_a_memory_condition_without_memory_fails():
    with pytest.raises(ValueError, match="memory"):
        assemble("ownwords(B=|memory|)", TASK)
    with pytest.raises(ValueError, match="memory"):
        assemble("memory(concrete,100w)+one-shot", TASK)


@pytest.mark.parametrize("key", ["mem0(B=|memory|)", "memgpt-style(B=|memory|)"])
def test_a_condition_marked_not_runnable_refuses_to_assemble(key):
    # Every registered condition runs today; the guard stays for stubs a team registers first.
    stub = dataclasses.replace(get_condition(key), runnable=False, note="NOT YET RUNNABLE: a stub")
    with pytest.raises(NotImplementedError, match="not runnable"):
        assemble(stub, TASK, memory=MEMORY, **_extra(stub))


def test_candidates_for_a_one_shot_fail():
    with pytest.raises(ValueError, match="one-shot"):
        assemble("ownwords(B=|memory|)", TASK, memory=MEMORY, candidates=CANDIDATES)


def test_unknown_condition_fails():
    with pytest.raises(KeyError):
        assemble("telepathy", TASK)


def test_record_cut_after_the_cut_is_rejected():
    with pytest.raises(ValueError, match="record_cut"):
        TaskInput(question="Q?", turns=TURNS, cut=4, record_cut=6)


# --- Memory writing and judging -------------------------------------------------------

@pytest.mark.parametrize("kind", ["concrete", "trait"])
def test_memory_request(kind):
    sent = assemble_memory_request(kind, 100, TASK)
    assert sent.system == load_prompt(f"memory_{kind}_system")
    assert sent.user.startswith("[EVERYTHING THIS PARTICIPANT HAS SAID, their turns only]\n" + RECORD + "\n\n[TASK]\n")
    assert "in about 100 words" in sent.user
    assert (sent.evidence, sent.evidence_chars) == (RECORD, len(RECORD))
    assert sent.prompt_refs == (ref(f"memory_{kind}_system"), ref(f"memory_{kind}_user"))


@pytest.mark.parametrize("kind, words", [("vivid", 100), ("concrete", 0), ("trait", "100")])
def test_memory_request_rejects_bad_parameters(kind, words):
    with pytest.raises(ValueError):
        assemble_memory_request(kind, words, TASK)


def test_judge_request_sees_question_reference_and_prediction_only():
    sent = assemble_judge("Why {x}?", "Because of cost.", "Price, mostly.")
    assert sent.system == load_prompt("judge_system")
    assert sent.user.startswith(
        "[QUESTION]\nWhy {x}?\n\n[ACTUAL ANSWER]\nBecause of cost.\n\n[PREDICTED ANSWER]\nPrice, mostly.\n\nStep 1:"
    )
    assert (sent.evidence, sent.evidence_chars, sent.budget) == ("", 0, None)
    assert sent.prompt_refs == (ref("judge_system"), ref("judge_user"))


def test_judge_assembler_sends_what_assemble_judge_sends():
    # The planner's way (prompt files read once) must send byte for byte the same requests.
    assemble_one = judge_assembler()
    for question, reference, prediction in [("Why {x}?", "Because of cost.", "Price, mostly."),
                                            ("Qu'est-ce ? {prediction}", "", "ünïcode {question} \\n"),
                                            ("", "[ACTUAL ANSWER]", "")]:
        assert assemble_one(question, reference, prediction) == assemble_judge(question, reference, prediction)
    assert assemble_one("a", "b", "c") != assemble_one("a", "b", "d")


def test_mem0_fills_the_budget_from_its_ranking_and_shows_the_kept_memories_in_extraction_order():
    sent = assemble("mem0(B=|memory|)", TASK, memory=MEMORY, ranked_memories=RANKED)
    # B = 40: "- Composes for films and TV" (27) then "- Owns a cat" (12) fit with one line break (40);
    # the first-extracted memory, ranked last, does not.
    assert sent.evidence == "- Composes for films and TV\n- Owns a cat"
    assert sent.budget == 40 and "[EARLIER IN THE INTERVIEW, verbatim]\n" + sent.evidence in sent.user
    assert assemble("mem0(B=|memory|)", TASK, memory=MEMORY,
                    ranked_memories=RankedMemories(RANKED.memories, (0, 1))).evidence == "- Teaches piano on weekdays"
    assert assemble("mem0(B=|memory|)", TASK, memory=MEMORY, ranked_memories=RankedMemories((), ())).evidence == ""
    with pytest.raises(ValueError, match="ranked memories"):
        assemble("mem0(B=|memory|)", TASK, memory=MEMORY)
