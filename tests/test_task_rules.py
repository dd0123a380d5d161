"""The App. G task rule on hand-built sessions, at its boundaries."""
import pytest

from experiments.core.interviews.records import INTERVIEWER as I, PARTICIPANT as P
from experiments.core.tasks import TaskRule, derive_targets, substantive_pairs

Q19 = "Why did you do it?" + "x"  # 19 characters, with "?"
Q20 = "Why did you do that?"  # 20 characters
A4 = "one two three four"
A5 = "one two three four five"


def indexed(*pairs):
    return [(i, speaker, text) for i, (speaker, text) in enumerate(pairs)]


def test_question_lengths_at_the_boundary():
    assert len(Q19) == 19 and len(Q20) == 20
    assert substantive_pairs(indexed((I, Q19), (P, A5))) == []
    assert substantive_pairs(indexed((I, Q20), (P, A5))) == [(0, 1)]


def test_answer_word_counts_at_the_boundary():
    assert substantive_pairs(indexed((I, Q20), (P, A4))) == []
    assert substantive_pairs(indexed((I, Q20), (P, "one  two\nthree\tfour   five"))) == [(0, 1)]


def test_a_question_needs_a_question_mark():
    assert substantive_pairs(indexed((I, "Tell me about your work please."), (P, A5))) == []


def test_the_answer_must_follow_immediately_and_be_the_participant():
    assert substantive_pairs(indexed((I, Q20), (I, "And another thing here?"), (P, A5))) == [(1, 2)]
    assert substantive_pairs(indexed((P, Q20), (P, A5))) == []
    assert substantive_pairs(indexed((I, Q20), (I, A5))) == []


def session_with(n_pairs):
    turns = []
    for k in range(n_pairs):
        turns += [(I, f"Question number {k} for you today?"), (P, f"My answer number {k} is this one")]
    return indexed(*turns)


@pytest.mark.parametrize(
    "pairs, eligible, first_target_pair",
    [(11, False, None), (12, True, 6), (13, True, 6), (20, True, 10)],
)
def test_eligibility_and_the_second_half_under_the_paper_rule(pairs, eligible, first_target_pair):
    targets = derive_targets(session_with(pairs))
    assert bool(targets) is eligible
    if eligible:
        assert len(targets) == 5
        assert targets[0].pair_number == first_target_pair == pairs // 2
        # cut = the question's turn index; the reference answer follows it
        assert targets[0].question_index == 2 * first_target_pair
        assert [t.answer_index - t.question_index for t in targets] == [1] * 5


def test_a_second_half_shorter_than_min_targets_is_not_eligible():
    # 9 pairs: second half holds pairs 4..8 (5 pairs)
    assert len(derive_targets(session_with(9), TaskRule(min_pairs=9, min_targets=5, max_targets=5))) == 5
    assert derive_targets(session_with(9), TaskRule(min_pairs=9, min_targets=6, max_targets=6)) == []


def test_max_targets_takes_the_first_second_half_pairs():
    targets = derive_targets(session_with(16), TaskRule(min_pairs=8, min_targets=3, max_targets=3))
    assert [t.pair_number for t in targets] == [8, 9, 10]


def test_pairs_are_numbered_over_substantive_pairs_only():
    turns = []
    for k in range(12):
        turns += [(I, f"Question number {k} for you today?"), (P, f"My answer number {k} is this one")]
        turns += [(I, "Okay."), (P, "Sure")]  # not substantive
    targets = derive_targets(indexed(*turns))
    assert targets[0].pair_number == 6
    assert targets[0].question_index == 6 * 4


def test_invalid_thresholds_are_refused():
    with pytest.raises(ValueError):
        TaskRule(min_pairs=0)
    with pytest.raises(ValueError):
        TaskRule(min_targets=5, max_targets=4)
