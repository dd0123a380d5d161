"""Pickers (App. F) on hand-built pools, ties included; the reranker plug-in with its example."""
import random

import numpy as np
import pytest

from experiments.core import pickers
from experiments.core.candidates import derive_column, derived_problem, parse_derived
from experiments.core.contrasts import contrast_problems
from experiments.core.rankers import (
    ENTRY_POINT_GROUP, PairRMRanker, RankerError, load_ranker, ranked_pick,
)


def lcs_table(a, b):
    """The textbook dynamic programme, to check the bit-parallel one."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def test_bit_parallel_lcs_equals_the_dynamic_programme():
    rng = random.Random(7)
    for _ in range(3000):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 15))]
        b = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]
        assert pickers.lcs_length(a, b) == lcs_table(a, b)


def test_similarities_by_hand():
    # tokens {a, b, c} and {a, b, d}: overlap 2, F1 = 2·2 / (3 + 3)
    assert pickers.token_f1("A b, c", "a B d") == pytest.approx(2 / 3)
    # multiset overlap: "a a b" and "a b b" share one a and one b
    assert pickers.token_f1("a a b", "a b b") == pytest.approx(2 / 3)
    # LCS of "a b c d" and "a c d" is 3: F1 = 2·3 / (4 + 3)
    assert pickers.rouge_l("a b c d", "a c d") == pytest.approx(6 / 7)
    assert pickers.rouge_l("a b c", "c b a") == pytest.approx(2 / 6)
    # "abcde" has grams abcd, bcde; "abcdx" abcd, bcdx: cosine 1/2
    assert pickers.char_gram_cosine("abcde", "ABCDX") == pytest.approx(0.5)
    assert pickers.char_gram_cosine("a  b\tc d", "a b c d") == pytest.approx(1.0)
    # outside the Basic Multilingual Plane the dictionary path gives the same measure
    assert pickers.char_gram_cosine("😀bcde", "😀bcdx") == pytest.approx(0.5)
    assert pickers.char_gram_cosine("ab", "ab") == pytest.approx(1.0)
    assert pickers.char_gram_cosine("ab", "abc") == 0.0
    for measure in (pickers.token_f1, pickers.rouge_l, pickers.char_gram_cosine):
        assert measure("", "") == 1.0 and measure("", "words here") == 0.0


def test_consensus_picks_the_central_candidate():
    pool = ["the cat sat on the mat", "the cat sat on a mat today", "dogs bark loudly at night"]
    # the first two agree with each other; the third agrees with neither
    for name in pickers.SIMILARITIES:
        assert pickers.consensus_pick(pool, name) in (0, 1)
    # b1 is the longer of the pair; cosine/F1 centralities of b0 and b1 differ, the dog never wins
    f1 = pickers.similarity_matrix(pool, "token-f1")
    scores = [(f1[0][1] + f1[0][2]) / 2, (f1[1][0] + f1[1][2]) / 2, (f1[2][0] + f1[2][1]) / 2]
    assert pickers.consensus_pick(pool, "token-f1") == int(np.argmax(scores))


def test_ties_go_to_the_lowest_slot():
    assert pickers.consensus_pick(["same words", "same words", "same words"], "rouge-l") == 0
    # three mutually unrelated texts: every centrality is 0
    assert pickers.consensus_pick(["alpha", "beta", "gamma"], "token-f1") == 0
    # b1 and b2 identical, b0 unrelated: b1 and b2 tie, b1 wins
    assert pickers.consensus_pick(["unrelated", "x y z", "x y z"], "char-4gram-cosine") == 1
    assert pickers.length_pick(["one two", "three four", "five six"], "shortest") == 0
    assert pickers.length_pick(["one two", "three four", "five six"], "longest") == 0
    assert pickers.length_pick(["one two", "three four", "five six"], "median") == 1
    assert pickers.length_pick(["a b c", "a", "a b"], "shortest") == 1
    assert pickers.length_pick(["a b c", "a", "a b"], "longest") == 0
    assert pickers.length_pick(["a b c", "a", "a b"], "median") == 2
    assert pickers.length_pick(["a b", "a", "c d"], "median") == 0


def test_the_fused_answer_votes_but_is_never_picked():
    pool = ["red apples grow here", "green pears grow there", "blue plums fall down"]
    # alone, no candidate is more central than b0; the fused answer repeats b2's words
    assert pickers.consensus_pick(pool, "token-f1") == 0
    assert pickers.consensus_pick(pool, "token-f1", extra_voters=["blue plums fall down"]) == 2


def test_task_picks_within_with_fused_and_across_memories():
    concrete = ["red apples grow here", "green pears grow there", "blue plums fall down"]
    trait = ["blue plums fall down today", "nothing alike", "other words entirely"]
    picks = pickers.task_picks([concrete, trait], ["blue plums fall down", None])
    assert picks[0]["consensus token-f1 + fused"] == 2
    assert picks[1]["consensus token-f1 + fused"] is None            # no fused answer in that pool
    # across both pools, concrete b2 and trait b0 agree most
    assert picks[0]["cross-memory consensus token-f1"] == picks[1]["cross-memory consensus token-f1"] == (0, 2)
    assert set(picks[0]) == set(pickers.POOL_RULES) | set(pickers.CROSS_MEMORY)
    # an incomplete pool: no rule picks from it, and no cross-memory rule runs
    partial = pickers.task_picks([concrete, None], [None, None])
    assert partial[1] == {} and "cross-memory consensus rouge-l" not in partial[0]
    assert partial[0]["consensus rouge-l"] == pickers.consensus_pick(concrete, "rouge-l")


def test_the_example_ranker_through_the_plug_in_point():
    ranker = load_ranker("experiments.core.rankers:QuestionOverlapRanker")
    assert (ranker.name, ranker.version) == ("question-overlap", "1")
    assert load_ranker("experiments.core.rankers.QuestionOverlapRanker").name == "question-overlap"
    question = "What music do you compose for films?"
    candidates = ["I like walking.", "I compose music for films.", "Music, mostly."]
    assert ranker.rank(question, candidates, {}) == [1, 2, 0]
    assert ranked_pick(ranker, question, candidates) == 1
    # ties keep the lower index first
    assert ranker.rank("nothing shared", ["a", "b", "c"], {}) == [0, 1, 2]


class _Broken:
    name, version = "broken", "0"

    def rank(self, question, candidates, context):
        return [0, 0, 1]


class _Nameless:
    def rank(self, question, candidates, context):
        return [0, 1, 2]


@pytest.mark.parametrize("spec, message", [
    ("", "dotted path"),
    ("no_such_module_xyz:Ranker", "cannot import"),
    ("experiments.core.rankers:Missing", "has no 'Missing'"),
    ("tests.test_pickers:_Nameless", "needs a non-empty string 'name'"),
    ("not-an-entry-point", ENTRY_POINT_GROUP),
])
def test_a_ranker_that_cannot_load_says_why(spec, message):
    with pytest.raises(RankerError, match=message):
        load_ranker(spec)


class _Failing:
    name, version = "failing", "2"

    def rank(self, question, candidates, context):
        raise RuntimeError(f"could not rank {candidates[0]}")


def test_a_ranking_that_is_not_a_permutation_is_refused():
    with pytest.raises(RankerError, match="not an ordering"):
        ranked_pick(load_ranker("tests.test_pickers:_Broken"), "q", ["a", "b", "c"])
    # a plug-in that fails is named, without its message (which may quote a candidate)
    with pytest.raises(RankerError, match=r"failing 2 failed \(RuntimeError\)$"):
        ranked_pick(load_ranker("tests.test_pickers:_Failing"), "q", ["secret text", "b", "c"])


def test_pairrm_without_a_checkpoint_says_what_it_needs(monkeypatch, tmp_path):
    monkeypatch.delenv("OWNWORDS_PAIRRM_PATH", raising=False)
    with pytest.raises(RankerError, match="OWNWORDS_PAIRRM_PATH"):
        PairRMRanker()
    with pytest.raises(RankerError, match="llm-blender"):
        PairRMRanker(str(tmp_path))          # a folder, but the package is not installed here


def test_derived_columns_by_hand():
    grades = np.array([[0, 3, 1, np.nan], [2, 3, 1, 1], [1, 0, 1, 2]], dtype=float)
    assert np.array_equal(derive_column("b1", grades), [2, 3, 1, 1])
    mean = derive_column("candidate-mean", grades)
    assert mean[:3].tolist() == [1, 2, 1] and np.isnan(mean[3])
    oracle = derive_column("oracle", grades)
    assert oracle[:3].tolist() == [2, 3, 1] and np.isnan(oracle[3])


def test_contrasts_may_name_a_pool_s_derived_conditions():
    conditions = ["memory(concrete,100w)+one-shot", "memory(concrete,100w)+fusion(3)"]
    assert parse_derived("memory(concrete,100w)+oracle") == ("memory(concrete,100w)", "oracle")
    assert parse_derived("memory(concrete,100w)+one-shot") is None
    good = [{"name": "oracle gap", "terms": {"memory(concrete,100w)+oracle": 1, "memory(concrete,100w)+fusion(3)": -1}}]
    assert contrast_problems(good, conditions) == []
    bad = [{"name": "trait", "terms": {"memory(trait,100w)+b1": 1, "memory(concrete,100w)+one-shot": -1}}]
    assert "neither its fusion nor its selection" in contrast_problems(bad, conditions)[0]
    assert derived_problem("memory(trait,100w)+b2", conditions)
