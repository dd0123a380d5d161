"""The LLM pairwise judge's numbers on hand-computed cases (`experiments.core.pairwise_judge`), its
reply parser (`parsers.parse_pairwise`) and the offline stand-in's pairwise verdict."""
import json

import numpy as np
import pytest

from experiments.core.llm.offline import OFFLINE_LABEL, offline_reply
from experiments.core.pairwise_judge import (
    HumanPreference, JudgedPair, cohen_kappa, combined, human_agreement, judge_rows, order_outcomes,
)
from experiments.core.parsers import parse_pairwise
from experiments.core.stats.paired import paired_bootstrap

SEED, DRAWS = 7, 4_000
# Person p1 has tasks 1 and 2, person p2 task 3.
CASE = [
    JudgedPair(task=1, person="p1", x="X", y="Y", x_as_a="a", y_as_a="b"),  # X in both orders
    JudgedPair(task=2, person="p1", x="X", y="Y", x_as_a="a", y_as_a="a"),  # A in both: the side wins
    JudgedPair(task=3, person="p2", x="X", y="Y", x_as_a="tie", y_as_a=None),  # one order only, a tie
]


def test_orders_map_to_the_answers_and_combine_by_the_stated_rule():
    assert [order_outcomes(p) for p in CASE] == [("x", "x"), ("x", "y"), ("tie", None)]
    assert [combined(p) for p in CASE] == ["x", "tie", "tie"]
    assert combined(JudgedPair(task=9, person="p", x="X", y="Y", x_as_a="tie", y_as_a="a")) == "y"  # tie beside Y
    assert combined(JudgedPair(task=9, person="p", x="X", y="Y", x_as_a=None, y_as_a=None)) is None
    with pytest.raises(ValueError):
        JudgedPair(task=9, person="p", x="X", y="Y", x_as_a="x", y_as_a=None)


def test_win_rates_position_bias_and_consistency_on_a_hand_case():
    row, = judge_rows(CASE, seed=SEED, draws=DRAWS)
    assert (row["x"], row["y"], row["tasks"], row["judged_tasks"], row["both_orders"]) == ("X", "Y", 3, 3, 2)
    assert (row["verdicts"], row["missing_verdicts"]) == (5, 1)
    assert (row["x_votes"], row["y_votes"], row["tie_votes"]) == (3, 1, 1)
    assert row["combined"] == {"x": 1, "y": 0, "tie": 2}
    assert (row["a_both"], row["b_both"]) == (1, 0)
    # per task shares of its verdicts, then the task-weighted mean: X (1 + 1/2 + 0) / 3, Y (0 + 1/2 + 0) / 3
    assert row["x_wins"]["estimate"] == pytest.approx(0.5)
    assert row["y_wins"]["estimate"] == pytest.approx(1 / 6)
    assert row["ties"]["estimate"] == pytest.approx(1 / 3)
    # A picked among decisive verdicts: 1 of 2 (task 1), 2 of 2 (task 2); task 3 has none → (1/2 + 1) / 2,
    # from one person only
    assert row["first_position_wins"] == {"estimate": 0.75, "lo": 0.75, "hi": 0.75}
    # both orders on tasks 1 and 2, one person: the side followed on one, consistent on the other
    assert row["follows_side"] == {"estimate": 0.5, "lo": 0.5, "hi": 0.5}
    assert row["consistent"] == {"estimate": 0.5, "lo": 0.5, "hi": 0.5}
    # the intervals are the project's whole-person bootstrap, exactly
    reference = paired_bootstrap(np.array(["p1", "p1", "p2"]), np.array([1, 0.5, 0]), seed=SEED, draws=DRAWS)
    assert row["x_wins"] == {"estimate": reference.estimate, "lo": reference.lo, "hi": reference.hi}


def test_a_pair_without_both_orders_has_no_position_bias_figure():
    row, = judge_rows([CASE[2]], seed=SEED, draws=DRAWS)
    assert row["both_orders"] == 0 and row["follows_side"] is None and row["consistent"] is None


def test_agreement_with_people_on_a_hand_case():
    ratings = [
        HumanPreference(task=1, person="p1", x="X", y="Y", outcome="x"),
        HumanPreference(task=1, person="p1", x="X", y="Y", outcome="x"),
        HumanPreference(task=2, person="p1", x="X", y="Y", outcome="y"),
        HumanPreference(task=2, person="p1", x="X", y="Y", outcome="tie"),
        HumanPreference(task=3, person="p2", x="X", y="Y", outcome="tie"),
        HumanPreference(task=4, person="p2", x="X", y="Y", outcome="x"),  # the judge did not see task 4
    ]
    row, = human_agreement(ratings, CASE, seed=SEED, draws=DRAWS)
    assert (row["ratings"], row["compared"], row["tasks"]) == (6, 5, 3)
    # judge: x, tie, tie; a task's ratings agree 1, 1/2, 1 → 5/6
    assert row["agreement"]["estimate"] == pytest.approx(5 / 6)
    # observed 4/5; chance (2·2 + 1·0 + 2·3) / 25 = 2/5; κ = (4/5 − 2/5) / (3/5) = 2/3
    assert row["kappa"] == pytest.approx(2 / 3)
    assert row["table"] == [[2, 0, 0], [0, 0, 1], [0, 0, 2]]


def test_kappa_is_undefined_when_chance_agreement_is_one():
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["x", "y"], ["x", "y"]) == 1.0
    assert cohen_kappa(["x", "y"], ["y", "x"]) == -1.0


@pytest.mark.parametrize("text, preferred, error", [
    ('{"preferred": "A", "rationale": "r"}', "a", None),
    ('```json\n{"preferred": "b"}\n```', "b", None),
    ('{"preferred": "Tie"}', "tie", None),
    ('{"preferred": "C"}', None, "unknown-verdict"),
    ('{"preferred": 1}', None, "wrong-type"),
    ('{"score": 3}', None, "missing-field"),
    ('A is better', None, "malformed-json"),
    ('{"preferred": "A", "preferred": "B"}', None, "duplicate-key"),
])
def test_the_pairwise_reply_is_read_strictly(text, preferred, error):
    verdict = parse_pairwise(text)
    assert (verdict.preferred, verdict.error) == (preferred, error)


def test_the_offline_stand_in_prefers_the_answer_closer_to_the_real_one_whatever_its_side():
    def ask(a, b):
        user = (f"[QUESTION]\nWhat do you do on weekends?\n\n[ACTUAL ANSWER]\nI garden and bake bread.\n\n"
                f"[ANSWER A]\n{a}\n\n[ANSWER B]\n{b}\n\nStep 1: compare.")
        return json.loads(offline_reply("system", user))
    close, far = "I garden and bake.", "I watch football."
    assert ask(close, far)["preferred"] == "A" and ask(far, close)["preferred"] == "B"
    assert ask(far, far)["preferred"] == "tie"
    assert ask(close, far)["rationale"].startswith(OFFLINE_LABEL)
    assert parse_pairwise(json.dumps(ask(close, far))).preferred == "a"
