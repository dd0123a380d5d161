"""The prespecified-criteria language: validation with clear messages, and verdicts by hand."""
import pytest

from experiments.core.criteria import CriteriaError, check_criteria, criteria_problems, evaluate_criteria
from experiments.core.paper_tables import latex, latex_escape, planned_rows

CONTRASTS = [{"name": "fusion - one-shot", "family": True}, {"name": "fusion - selection", "family": True},
             {"name": "fusion - whole", "family": True}, {"name": "fusion - dialogue", "family": True},
             {"name": "post hoc", "family": False}]
BEATS_ALL = {"name": "fusion beats all four comparators",
             "all": [{"contrast": c, "interval": "family", "above": 0}
                     for c in ("fusion - one-shot", "fusion - selection", "fusion - whole", "fusion - dialogue")]}


def figures(**family_lo):
    rows = {}
    for c in CONTRASTS:
        lo = family_lo.get(c["name"].replace(" - ", "_").replace(" ", "_"), 0.01)
        rows[c["name"]] = {"name": c["name"], "family": c["family"], "estimate": 0.02, "lo": lo + 0.001,
                           "hi": 0.05, "family_lo": lo if c["family"] else None,
                           "family_hi": 0.06 if c["family"] else None, "bound_lo": -0.01, "bound_hi": 0.04,
                           "person_weighted": -0.003}
    return rows


def test_every_family_interval_above_zero_is_met_and_one_below_is_not():
    assert evaluate_criteria([BEATS_ALL], figures())[0]["verdict"] == "met"
    verdict = evaluate_criteria([BEATS_ALL], figures(fusion_whole=-0.001))[0]
    assert verdict["verdict"] == "not met"
    assert [t["verdict"] for t in verdict["tests"]] == ["met", "met", "not met", "met"]
    assert "fusion - whole: family interval [-0.0010, +0.0600] above +0" in verdict["tests"][2]["text"]


def test_below_any_estimates_and_bounds_by_hand():
    rows = figures()
    criteria = [
        {"name": "deviation lower", "contrast": "post hoc", "interval": "pointwise", "below": 0.06},   # hi 0.05 < 0.06
        {"name": "not below", "contrast": "post hoc", "interval": "pointwise", "below": 0.05},         # 0.05 < 0.05: no
        {"name": "person-weighted sign", "contrast": "post hoc", "estimate": "person", "below": 0},     # -0.003
        {"name": "full plan", "contrast": "post hoc", "interval": "bounds", "above": 0},               # -0.01
        {"name": "either", "any": [{"contrast": "post hoc", "interval": "bounds", "above": 0},
                                   {"contrast": "post hoc", "estimate": "task", "above": 0.019}]},
    ]
    got = {v["name"]: v["verdict"] for v in evaluate_criteria(criteria, rows)}
    assert got == {"deviation lower": "met", "not below": "not met", "person-weighted sign": "met",
                   "full plan": "not met", "either": "met"}


def test_a_missing_figure_leaves_the_criterion_undecided_unless_another_part_decides():
    rows = figures()
    rows["fusion - whole"].update(estimate=None, lo=None, hi=None, family_lo=None, family_hi=None)
    assert evaluate_criteria([BEATS_ALL], rows)[0]["verdict"] == "not decided"
    rows["fusion - one-shot"]["family_lo"] = -0.5
    assert evaluate_criteria([BEATS_ALL], rows)[0]["verdict"] == "not met"


@pytest.mark.parametrize("criteria, message", [
    ({"name": "x"}, "must be a list"),
    ([{"contrast": "post hoc", "interval": "pointwise", "above": 0}], "needs a name"),
    ([{"name": "x", "contrast": "nope", "interval": "pointwise", "above": 0}], "'nope' is not a planned contrast"),
    ([{"name": "x", "contrast": "post hoc", "interval": "family", "above": 0}], "not in the family"),
    ([{"name": "x", "contrast": "post hoc", "interval": "weird", "above": 0}], "interval must be one of"),
    ([{"name": "x", "contrast": "post hoc", "interval": "pointwise", "estimate": "task", "above": 0}],
     "exactly one of \"interval\""),
    ([{"name": "x", "contrast": "post hoc", "interval": "pointwise", "above": 0, "below": 1}], "exactly one of \"above\""),
    ([{"name": "x", "contrast": "post hoc", "interval": "pointwise", "above": "0"}], "must be a finite number"),
    ([{"name": "x", "contrast": "post hoc", "interval": "pointwise", "above": float("nan")}], "finite number"),
    ([{"name": "x", "contrast": "post hoc", "interval": "pointwise", "above": True}], "finite number"),
    ([{"name": "x", "contrast": "post hoc", "interval": "pointwise", "above": 0, "colour": "red"}], "unknown fields colour"),
    ([{"name": "x", "all": []}], "non-empty list"),
    ([{"name": "x", "all": [{"any": [{"all": [{"any": [{"all": [BEATS_ALL["all"][0]]}]}]}]}]}], "nest at most"),
    ([{"name": "x", "all": [BEATS_ALL["all"][0]], "any": [BEATS_ALL["all"][0]]}], "stands alone"),
    ([BEATS_ALL, BEATS_ALL], "used twice"),
    ([{"name": "x", "whatever": 1}], "a rule is"),
])
def test_bad_criteria_get_a_clear_message(criteria, message):
    problems = criteria_problems(criteria, CONTRASTS)
    assert problems and any(message in p for p in problems), problems
    with pytest.raises(CriteriaError, match="."):
        check_criteria(criteria, CONTRASTS)


def test_good_criteria_have_no_problems():
    assert criteria_problems([BEATS_ALL], CONTRASTS) == []
    assert criteria_problems([], CONTRASTS) == []


def test_planned_rows_and_latex_by_hand():
    dashboard = {"contrasts": [{"name": "a_b & c", "estimate": -0.0123, "lo": -0.02, "hi": -0.004, "n_tasks": 1768,
                                "people": 188, "lost": 0, "planned": 1768, "family": True,
                                "family_lo": -0.025, "family_hi": 0.001}]}
    rows = planned_rows(dashboard)
    assert [(r["row"], r["lo"], r["hi"]) for r in rows] == [("95% interval", -0.02, -0.004),
                                                            ("family interval", -0.025, 0.001)]
    text = latex(rows)
    assert r"a\_b \& c & 95\% interval & $-$0.0123 & [$-$0.0200, $-$0.0040] & 1{,}768 & 188 \\" in text
    assert latex_escape("50% of $x") == r"50\% of \$x"
