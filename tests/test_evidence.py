"""The evidence builders against the paper's procedure (§8, App. F, App. G.1), branch by branch."""
import math

import pytest

from experiments.core.evidence import (
    DIALOGUE_CAP, DIALOGUE_TRUNCATION_MARKER, INTERVIEWER, PARTICIPANT, RECORD_CAP, SCREENER_CAP,
    SCREENER_TRUNCATION_MARKER, STOP_WORDS, TurnText, bm25_scores, current_dialogue, memory_plus_ownwords,
    memory_plus_whole_record, ownwords, question_free, question_free_query, recency, respondent_record,
    screener_block, segments, tok, whole_record,
)


def turns_of(*spoken):
    """(speaker initial, text) pairs -> TurnText with indexes 0, 1, ..."""
    speakers = {"I": INTERVIEWER, "P": PARTICIPANT}
    return tuple(TurnText(i, speakers[who], text) for i, (who, text) in enumerate(spoken))


# --- Stop words and tokens -------------------------------------------------------------

def test_stop_words_are_exactly_the_papers_64():
    # App. F, copied word by word from the paper.
    paper = [
        "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did",
        "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "is", "it",
        "its", "just", "like", "me", "my", "not", "of", "on", "or", "really", "so", "some",
        "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
        "those", "to", "very", "was", "we", "were", "what", "when", "which", "who", "why",
        "will", "with", "would", "you", "your",
    ]
    assert len(paper) == 64
    assert isinstance(STOP_WORDS, frozenset)
    assert STOP_WORDS == frozenset(paper)
    assert len(STOP_WORDS) == 64


def test_tok_lowercases_keeps_apostrophes_and_digits():
    assert tok("I'm SURE we'll ship 2024 builds, don't worry") == [
        "i'm", "sure", "we'll", "ship", "2024", "builds", "don't", "worry"
    ]


def test_tok_drops_one_character_tokens_and_stop_words():
    assert tok("A x I Y 7 the cat and THE dog's bowl") == ["cat", "dog's", "bowl"]


def test_tok_splits_at_anything_outside_a_to_z_0_to_9_and_apostrophe():
    # "é" is not in [a-z]: "café" yields "caf"; hyphens and underscores split.
    assert tok("café well-known snake_case e-mail") == ["caf", "well", "known", "snake", "case", "mail"]


def test_tok_of_empty_text_is_empty():
    assert tok("") == []
    assert tok("   ...  ") == []


# --- The record --------------------------------------------------------------------------

def test_respondent_record_is_participant_turns_prefixed_and_joined_by_newlines():
    turns = turns_of(("I", "Hello?"), ("P", "Hi there."), ("I", "Why?"), ("P", "Because.\n\nReally."))
    assert respondent_record(turns) == "- Hi there.\n- Because.\n\nReally."


def test_respondent_record_cut_keeps_turns_before_the_cut_index():
    turns = turns_of(("I", "Q1?"), ("P", "one"), ("I", "Q2?"), ("P", "two"))
    assert respondent_record(turns, cut=2) == "- one"
    assert respondent_record(turns, cut=3) == "- one"
    assert respondent_record(turns, cut=4) == "- one\n- two"
    assert respondent_record(turns, cut=0) == ""


def test_respondent_record_is_head_capped_at_12000_characters():
    turns = turns_of(*[("P", f"Answer number {i} " + "x" * 500) for i in range(40)])
    full = "\n".join("- " + turn.text for turn in turns)
    assert len(full) > RECORD_CAP == 12_000
    record = respondent_record(turns)
    assert record == full[:12_000]
    assert len(record) == 12_000


def test_respondent_record_under_the_cap_is_whole():
    turns = turns_of(("P", "x" * 11_998))
    assert respondent_record(turns) == "- " + "x" * 11_998  # exactly 12,000: nothing cut


def test_whole_record_is_the_respondent_record():
    turns = turns_of(("I", "Q?"), ("P", "a."), ("I", "Q?"), ("P", "b."))
    assert whole_record(turns, cut=3) == respondent_record(turns, cut=3) == "- a."


# --- Segments --------------------------------------------------------------------------

def test_segments_split_after_sentence_punctuation_and_at_line_breaks():
    record = "- First one. Second!  Third?\tFourth\n- Next turn\n\n\nLast piece"
    assert segments(record) == [
        "- First one.", "Second!", "Third?", "Fourth", "- Next turn", "Last piece"
    ]


def test_segments_need_whitespace_after_the_punctuation():
    # "3.5" and "e.g.x" are not split; a quote after the period blocks the split too.
    assert segments('- Version 3.5 is e.g.x fine. He said "no." Then left') == [
        "- Version 3.5 is e.g.x fine.", 'He said "no." Then left'
    ]


def test_segments_strip_and_drop_empty_pieces():
    assert segments("  - Hi.   \n \n  Bye.  ") == ["- Hi.", "Bye."]
    assert segments("") == []
    assert segments(" \n\n \n ") == []


def test_segments_treat_crlf_as_line_breaks():
    assert segments("- one\r\n- two\r\n\r\nthree") == ["- one", "- two", "three"]


def test_ellipsis_splits_once():
    assert segments("- Well... maybe. Ok") == ["- Well...", "maybe.", "Ok"]


# --- BM25, by hand ----------------------------------------------------------------------

def test_bm25_scores_of_a_three_sentence_record_by_hand():
    record = "- Cats sleep a lot. Dogs chase cats! Birds sing."
    pieces = segments(record)
    assert pieces == ["- Cats sleep a lot.", "Dogs chase cats!", "Birds sing."]
    tokens = [tok(piece) for piece in pieces]
    # "a" is a stop word (and one character): lengths 3, 3, 2; average 8/3.
    assert tokens == [["cats", "sleep", "lot"], ["dogs", "chase", "cats"], ["birds", "sing"]]
    query = tok("Why do cats chase birds?")
    assert query == ["cats", "chase", "birds"]  # "why", "do" are stop words
    # n = 3; n_cats = 2, n_chase = n_birds = 1.
    # idf(cats)  = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6)       = 0.470003629
    # idf(chase) = idf(birds) = ln(1 + 2.5 / 1.5)    = ln(8/3)       = 0.980829253
    # A tf = 1 term is idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * l / avg)):
    #   l = 3: l/avg = 9/8, 1 + 1.2 * 1.09375 = 2.3125, factor 2.2 / 2.3125 = 0.951351351
    #   l = 2: l/avg = 3/4, 1 + 1.2 * 0.8125  = 1.975,  factor 2.2 / 1.975  = 1.113924051
    # s1 ("cats")          = 0.470003629 * 0.951351351                 = 0.447138588
    # s2 ("chase", "cats") = (0.470003629 + 0.980829253) * 0.951351351 = 1.380251823
    # s3 ("birds")         = 0.980829253 * 1.113924051                 = 1.092569294
    assert bm25_scores(tokens, query) == pytest.approx([0.447138588, 1.380251823, 1.092569294], abs=1e-9)


def test_bm25_counts_repeated_query_tokens_each_time():
    tokens = [["cats", "sleep"], ["dogs"]]
    once = bm25_scores(tokens, ["cats"])
    twice = bm25_scores(tokens, ["cats", "cats"])
    assert twice[0] == pytest.approx(2 * once[0])
    assert twice[1] == once[1] == 0.0


def test_bm25_averages_length_over_segments_without_tokens_too():
    # Lengths 2 and 0: average 1, so the first segment's ratio is 2 (not 1 as it would be
    # if the empty segment were left out). n = 2, n_v = 1: idf = ln(1 + 1.5 / 1.5) = ln 2.
    # score = ln 2 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2)) = ln 2 * 2.2 / 3.1
    scores = bm25_scores([["cats", "sleep"], []], ["cats"])
    assert scores == pytest.approx([math.log(2) * 2.2 / 3.1, 0.0])


def test_bm25_with_no_tokens_anywhere_scores_zero_without_dividing_by_zero():
    assert bm25_scores([[], []], ["cats"]) == [0.0, 0.0]
    assert bm25_scores([], ["cats"]) == []
    assert bm25_scores([["cats"]], []) == [0.0]


def test_bm25_scores_identical_segments_exactly_equal():
    scores = bm25_scores([["red", "apples"], ["apples", "red"], ["pears"]], ["apples", "red"])
    assert scores[0] == scores[1]  # exact, not approximate: ties are exact


# --- OwnWords ---------------------------------------------------------------------------

def test_ownwords_returns_the_record_unchanged_when_it_fits():
    record = "- First turn.\n- Second turn has two. Sentences here."
    assert ownwords(record, "anything", len(record)) == record  # line breaks kept
    assert ownwords(record, "anything", len(record) + 500) == record


def test_ownwords_ranks_by_score_and_returns_temporal_order():
    record = "- Cats sleep a lot. Dogs chase cats! Birds sing."
    # Ranking: s2 (1.38), s3 (1.09), s1 (0.45). Budget 28 = |"Dogs chase cats!"| + 1 +
    # |"Birds sing."| = 16 + 1 + 11, so s2 and s3 fit and s1 does not; output in temporal order.
    assert ownwords(record, "Why do cats chase birds?", 28) == "Dogs chase cats! Birds sing."
    assert ownwords(record, "Why do cats chase birds?", 27) == "Dogs chase cats!"


def test_ownwords_skips_a_segment_that_does_not_fit_and_continues():
    record = "- Apples are my favourite fruit in every season. Pears. Apples!"
    # Scores for "apples": the long sentence and "Apples!" both contain it; "Apples!" is
    # shorter, so it ranks first; the long one does not fit in 20 and is skipped, and the
    # walk goes on to "Pears." (score 0), which fits.
    assert ownwords(record, "apples", 20) == "Pears. Apples!"


def test_ownwords_breaks_score_ties_by_earlier_position():
    record = "- Apples red. Apples big. Pears green."
    # "- Apples red." and "Apples big." score exactly the same; the earlier one ranks first.
    assert ownwords(record, "apples", 13) == "- Apples red."
    # With 12 characters the first (13 chars) no longer fits: skipped, the tie partner is kept.
    assert ownwords(record, "apples", 12) == "Apples big."


def test_ownwords_fills_with_zero_score_segments_in_temporal_order():
    record = "- One. Two. Three. Four."
    # No query token occurs: every score is 0, so the ranking is temporal.
    assert ownwords(record, "zebra", 11) == "- One. Two."
    # With 10, "Two." no longer fits after "- One."; nor do the others: only the first.
    assert ownwords(record, "zebra", 10) == "- One."


def test_ownwords_joined_length_counts_the_single_spaces():
    record = "- Aa. Bb. Cc. Dd."
    kept = ownwords(record, "bb cc", 7)  # "Bb. Cc." is exactly 7 characters with its space
    assert kept == "Bb. Cc."
    assert ownwords(record, "bb cc", 6) == "Bb."


def test_ownwords_turn_breaks_become_spaces():
    record = "- Cats purr.\n- Cats nap.\n- Dogs bark."
    assert ownwords(record, "cats", 30) == "- Cats purr. - Cats nap."


def test_ownwords_without_any_fitting_segment_cuts_the_top_ranked_one():
    record = "- Nothing relevant in this sentence. Birds sing in the morning."
    # Neither segment fits in 10 characters; the top-ranked one is the second.
    assert ownwords(record, "birds", 10) == "Birds sing"
    assert ownwords(record, "birds", 0) == ""


def test_ownwords_of_a_record_without_segments_is_empty():
    assert ownwords("", "birds", 0) == ""  # fits: unchanged, and empty
    assert ownwords(" \n \n ", "birds", 2) == ""  # does not fit, but has no segments


@pytest.mark.parametrize("budget", [-1, 1.5, "10", True, None])
def test_ownwords_rejects_a_budget_that_is_not_a_count_of_characters(budget):
    with pytest.raises(ValueError):
        ownwords("- Some text.", "text", budget)


def test_ownwords_never_exceeds_the_budget():
    record = "- " + " ".join(f"Sentence {i} about topic {i % 7}." for i in range(200))
    for budget in (0, 1, 5, 17, 100, 333, 700, 1500):
        assert len(ownwords(record, "topic 3", budget)) <= budget


# --- Recency ----------------------------------------------------------------------------

def test_recency_returns_the_record_unchanged_when_it_fits():
    record = "- One.\n- Two."
    assert recency(record, len(record)) == record


def test_recency_keeps_the_last_whole_segments_that_fit():
    record = "- One. Two. Three. Four."
    assert recency(record, 17) == "Two. Three. Four."
    assert recency(record, 12) == "Three. Four."
    assert recency(record, 11) == "Four."


def test_recency_stops_at_the_first_segment_that_does_not_fit():
    record = "- Hi. This is a much longer middle sentence. End."
    # "End." fits; the middle sentence does not, so recency stops there, although "- Hi."
    # would still fit (OwnWords would skip and continue; recency does not).
    assert recency(record, 10) == "End."
    assert ownwords(record, "zebra", 10) == "- Hi. End."


def test_recency_with_a_last_segment_longer_than_the_budget_keeps_its_final_characters():
    record = "- Short. The final sentence is rather long."
    assert recency(record, 9) == "her long."
    assert recency(record, 0) == ""  # not the whole segment, as s[-0:] would give


def test_recency_of_a_record_without_segments_is_empty():
    assert recency("", 0) == ""
    assert recency("\n\n\n", 1) == ""


def test_recency_rejects_negative_budgets():
    with pytest.raises(ValueError):
        recency("- x.", -5)


# --- Question-free -------------------------------------------------------------------------

def test_question_free_query_is_the_12_most_frequent_tokens_ties_by_first_occurrence():
    record = (
        "- zeta alpha beta beta gamma gamma gamma delta epsilon eta theta iota kappa lambda "
        "mu nu xi omicron zeta"
    )
    # gamma 3; beta 2, zeta 2 (zeta first seen before beta); then the singletons in order of
    # first occurrence, up to 12 tokens in all.
    assert question_free_query(record) == (
        "gamma zeta beta alpha delta epsilon eta theta iota kappa lambda mu"
    )


def test_question_free_query_ignores_stop_words_and_short_tokens():
    assert question_free_query("- The cat and the hat. I a x the cat.") == "cat hat"
    assert question_free_query("") == ""


def test_question_free_is_ownwords_with_the_frequency_query():
    record = "- Music matters. I compose music daily. Film work pays. Music again and music."
    query = question_free_query(record)
    assert query.split()[0] == "music"
    assert question_free(record, 40) == ownwords(record, query, 40)
    assert question_free(record, len(record)) == record


# --- Current dialogue and screener -------------------------------------------------------

def test_current_dialogue_has_both_speakers_before_the_question():
    turns = turns_of(("I", "Hello?"), ("P", "Hi."), ("I", "What do you do?"), ("P", "Secret answer."))
    assert current_dialogue(turns, cut=2) == "Interviewer: Hello?\n\nParticipant: Hi."
    assert "Secret answer" not in current_dialogue(turns, cut=2)
    assert "What do you do" not in current_dialogue(turns, cut=2)


def test_current_dialogue_keeps_its_last_16000_characters_with_a_marker():
    turns = turns_of(*[("I" if i % 2 == 0 else "P", f"turn {i} " + "y" * 300) for i in range(80)])
    full = "\n\n".join(
        ("Interviewer: " if turn.speaker == INTERVIEWER else "Participant: ") + turn.text
        for turn in turns
    )
    assert len(full) > DIALOGUE_CAP == 16_000
    dialogue = current_dialogue(turns, cut=80)
    assert dialogue == DIALOGUE_TRUNCATION_MARKER + "\n" + full[-16_000:]
    assert dialogue.endswith(turns[-1].text)


def test_current_dialogue_of_exactly_16000_characters_is_not_marked():
    text = "z" * (16_000 - len("Participant: "))
    dialogue = current_dialogue(turns_of(("P", text)), cut=1)
    assert len(dialogue) == 16_000
    assert DIALOGUE_TRUNCATION_MARKER not in dialogue


def test_screener_block_formats_pairs():
    assert screener_block([("Age?", "34"), ("Job?", "Composer")]) == "Q: Age?\nA: 34\nQ: Job?\nA: Composer"


def test_screener_block_without_a_screener_says_none():
    assert screener_block(()) == "(none)"


def test_screener_block_keeps_its_first_4000_characters_with_a_marker():
    pairs = [(f"Question {i}?", "a" * 200) for i in range(30)]
    full = "\n".join(f"Q: {q}\nA: {a}" for q, a in pairs)
    assert len(full) > SCREENER_CAP == 4_000
    assert screener_block(pairs) == full[:4_000] + "\n" + SCREENER_TRUNCATION_MARKER


def test_screener_block_of_exactly_4000_characters_is_not_marked():
    answer = "b" * (4_000 - len("Q: Q?\nA: "))
    block = screener_block([("Q?", answer)])
    assert len(block) == 4_000
    assert SCREENER_TRUNCATION_MARKER not in block


# --- Memory combinations -----------------------------------------------------------------

def test_memory_plus_ownwords_uses_the_memorys_length_as_budget():
    record = "- Cats sleep a lot. Dogs chase cats! Birds sing."
    memory = "x" * 28
    parts = memory_plus_ownwords(memory, record, "Why do cats chase birds?")
    assert parts == {"memory": memory, "excerpts": "Dogs chase cats! Birds sing."}


def test_memory_plus_whole_record_has_no_budget():
    record = "- a.\n- b."
    assert memory_plus_whole_record("m", record) == {"memory": "m", "record": record}
