"""The answer rewrites of the wording controls (beyond the paper): the exact messages of the judge-
invariance paraphrase and the length rewrite on a hand-made answer, the length target, and the
invariance statistics on a hand-computed case and against scikit-learn's quadratic κ."""
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from experiments.core.paraphrase import assemble_answer_paraphrase, assemble_length_rewrite, length_target
from experiments.core.stats.agreement_stats import agreement_bootstrap
from experiments.core.stats.invariance import judge_invariance

SYSTEM = "You rewrite a simulated research-interview reply as instructed. Output only the rewritten reply."
QUESTION, ANSWER = "How do you use AI when composing?", "I use it {sometimes} for sketches."


def test_the_judge_invariance_paraphrase_call():
    sent = assemble_answer_paraphrase(QUESTION, ANSWER)
    assert sent.system == SYSTEM
    assert sent.user == (
        f"[QUESTION]\n{QUESTION}\n\n[REPLY]\n{ANSWER}\n\n[TASK]\nRewrite the reply in other words, keeping every "
        "claim, detail and qualification it makes and adding nothing: use other words and other sentence structures "
        "wherever you can, but keep names, numbers and technical terms, the first person and about the same length. "
        "Output only the rewritten reply.")
    assert (sent.evidence, sent.evidence_chars) == (ANSWER, len(ANSWER))
    assert [ref.name for ref in sent.prompt_refs] == ["rewrite_answer_system", "paraphrase_answer_user"]


def test_the_length_rewrite_call():
    sent = assemble_length_rewrite(QUESTION, ANSWER, 40)
    assert sent.system == SYSTEM
    assert sent.user == (
        f"[QUESTION]\n{QUESTION}\n\n[REPLY]\n{ANSWER}\n\n[TASK]\nRewrite the reply to about 40 words, in the same "
        "first-person voice. If it is longer, keep its most important content and drop the least important; if it is "
        "shorter, say the same content more fully, without adding any claim, detail or example it does not make. "
        "Output only the rewritten reply.")
    assert [ref.name for ref in sent.prompt_refs] == ["rewrite_answer_system", "length_rewrite_user"]
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ValueError):
            assemble_length_rewrite(QUESTION, ANSWER, bad)


def test_the_length_target_is_the_median_word_count_rounded_half_up():
    assert length_target(["a b c", "a", "a b c d e"]) == 3
    assert length_target(["a b", "a b c"]) == 3  # 2.5 rounds up
    assert length_target(["a", "a b", None, "a b c d"]) == 2  # median of 1, 2, 4 (None left out)
    assert length_target([""]) == 1  # at least one word
    with pytest.raises(ValueError):
        length_target([None])


ORIGINAL = [3, 2, 1, 0, 3, 2]
PARAPHRASED = [3, 2, 2, 0, 2, 2]
PERSONS = ["p1", "p1", "p2", "p2", "p3", "p3"]


def test_the_invariance_statistics_on_a_hand_computed_case():
    result = judge_invariance(ORIGINAL, PARAPHRASED, PERSONS, draws=2000, seed=7)
    assert (result.n_pairs, result.n_people) == (6, 3)
    assert result.changed.estimate == pytest.approx(2 / 6)
    assert (result.up, result.down) == (pytest.approx(1 / 6), pytest.approx(1 / 6))
    # quadratic κ by hand: observed disagreement 2 (two pairs one grade apart), expected Σ a_i b_j (i-j)² / n = 70/6
    assert result.kappa.estimate == pytest.approx(1 - 2 / (70 / 6))
    assert result.kappa.estimate == pytest.approx(
        cohen_kappa_score(ORIGINAL, PARAPHRASED, weights="quadratic", labels=[0, 1, 2, 3]))
    # the share changed is 1 − exact agreement, its interval the exact agreement's mirrored, same draws
    exact = agreement_bootstrap(ORIGINAL, PARAPHRASED, PERSONS, draws=2000, seed=7).exact
    assert (result.changed.lo, result.changed.hi) == (pytest.approx(1 - exact.hi), pytest.approx(1 - exact.lo))
    assert 0 <= result.changed.lo <= result.changed.estimate <= result.changed.hi <= 1
    assert result.kappa == agreement_bootstrap(ORIGINAL, PARAPHRASED, PERSONS, draws=2000, seed=7).kappa


def test_an_invariant_judge_changes_nothing_and_random_cases_match_sklearn():
    same = judge_invariance(ORIGINAL, ORIGINAL, PERSONS, draws=500, seed=1)
    assert (same.changed.estimate, same.changed.lo, same.changed.hi, same.up, same.down) == (0, 0, 0, 0, 0)
    assert same.kappa.estimate == pytest.approx(1.0)
    rng = np.random.default_rng(3)
    for _ in range(5):
        a, b = rng.integers(0, 4, 40), rng.integers(0, 4, 40)
        result = judge_invariance(a, b, rng.integers(0, 10, 40), draws=200, seed=2)
        assert result.kappa.estimate == pytest.approx(cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3]))
        assert result.changed.estimate == pytest.approx(float(np.mean(a != b)))
