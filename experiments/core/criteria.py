"""Prespecified decision criteria (paper App. B.3, App. L): a small JSON language, checked and evaluated by code.

A protocol may state criteria before sealing; the dashboard says *met*, *not met* or *not
decided* (a figure it needs is missing), never a person.  The language, as JSON:

    [{"name": "fusion beats all four comparators",
      "all": [{"contrast": "fusion - one-shot", "interval": "family", "above": 0},
              {"contrast": "fusion - selection", "interval": "family", "above": 0}]},
     {"name": "OwnWords is not worse", "contrast": "OwnWords - memory", "interval": "pointwise", "above": -0.01}]

A criterion is an object with a ``name`` and one rule; a rule is

* a test: ``{"contrast": NAME, STATISTIC: KIND, "above" | "below": NUMBER}`` where the statistic is
  ``"interval"`` — ``"pointwise"`` (95%), ``"family"`` (Bonferroni) or ``"bounds"`` (the
  deterministic full-plan missing-score bounds) — or ``"estimate"`` — ``"task"`` (the
  task-weighted estimate) or ``"person"`` (person-weighted). An interval is above v when its
  lower end is > v and below v when its upper end is < v; an estimate when it is > v or < v;
* ``{"all": [RULE, ...]}`` (every rule met) or ``{"any": [RULE, ...]}`` (at least one).

Numbers are in the contrast's normalized units (a difference of 0–1 scores). Imports no Django.
"""
from __future__ import annotations

import math

INTERVALS = {"pointwise": ("lo", "hi"), "family": ("family_lo", "family_hi"), "bounds": ("bound_lo", "bound_hi")}
ESTIMATES = {"task": "estimate", "person": "person_weighted"}
SIDES = ("above", "below")
MAX_DEPTH = 4
MAX_TESTS = 100
MET, NOT_MET, UNDECIDED = "met", "not met", "not decided"


class CriteriaError(ValueError):
    """What is wrong with a list of criteria, every problem in one message."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def criteria_problems(criteria, contrasts) -> list[str]:
    """Every problem of ``criteria`` against the protocol's planned ``contrasts``; [] when none."""
    if not isinstance(criteria, list):
        return ["criteria must be a list of objects, each with a name and a rule"]
    by_name = {c.get("name"): c for c in contrasts if isinstance(c, dict)}
    problems, names, tests = [], set(), [0]
    for number, criterion in enumerate(criteria, start=1):
        where = f"criterion {number}"
        if not isinstance(criterion, dict):
            problems.append(f"{where}: must be an object with a name and a rule")
            continue
        name = criterion.get("name")
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{where}: needs a name")
        elif name in names:
            problems.append(f"{where}: the name {name!r} is used twice")
        else:
            names.add(name)
            where = f"criterion {name!r}"
        rule = {k: v for k, v in criterion.items() if k != "name"}
        _rule_problems(rule, where, by_name, problems, 1, tests)
    if tests[0] > MAX_TESTS:
        problems.append(f"at most {MAX_TESTS} tests in all, not {tests[0]}")
    return problems


def _rule_problems(rule, where, contrasts, problems, depth, tests) -> None:
    if not isinstance(rule, dict):
        problems.append(f"{where}: a rule must be an object")
        return
    if depth > MAX_DEPTH:
        problems.append(f"{where}: rules nest at most {MAX_DEPTH} deep")
        return
    combinators = [k for k in ("all", "any") if k in rule]
    if combinators:
        if len(rule) != 1:
            problems.append(f"{where}: “{combinators[0]}” stands alone in its object, found {sorted(rule)}")
            return
        parts = rule[combinators[0]]
        if not isinstance(parts, list) or not parts:
            problems.append(f"{where}: “{combinators[0]}” needs a non-empty list of rules")
            return
        for index, part in enumerate(parts, start=1):
            _rule_problems(part, f"{where}, {combinators[0]}[{index}]", contrasts, problems, depth + 1, tests)
        return
    tests[0] += 1
    if "contrast" not in rule:
        problems.append(f"{where}: a rule is {{\"all\": [...]}}, {{\"any\": [...]}} or a test with "
                        "\"contrast\", \"interval\" or \"estimate\", and \"above\" or \"below\"")
        return
    unknown = set(rule) - {"contrast", "interval", "estimate", *SIDES}
    if unknown:
        problems.append(f"{where}: unknown fields {', '.join(sorted(unknown))}")
    name = rule["contrast"]
    if not isinstance(name, str) or name not in contrasts:
        problems.append(f"{where}: {name!r} is not a planned contrast of the protocol "
                        f"(planned: {', '.join(sorted(map(str, contrasts))) or 'none'})")
    statistics = [k for k in ("interval", "estimate") if k in rule]
    if len(statistics) != 1:
        problems.append(f"{where}: give exactly one of \"interval\" ({', '.join(INTERVALS)}) "
                        f"or \"estimate\" ({', '.join(ESTIMATES)})")
    elif "interval" in rule and rule["interval"] not in INTERVALS:
        problems.append(f"{where}: interval must be one of {', '.join(INTERVALS)}, not {rule['interval']!r}")
    elif "estimate" in rule and rule["estimate"] not in ESTIMATES:
        problems.append(f"{where}: estimate must be one of {', '.join(ESTIMATES)}, not {rule['estimate']!r}")
    elif rule.get("interval") == "family" and name in contrasts and not contrasts[name].get("family"):
        problems.append(f"{where}: {name!r} is not in the family, so it has no family interval")
    sides = [k for k in SIDES if k in rule]
    if len(sides) != 1:
        problems.append(f"{where}: give exactly one of \"above\" or \"below\" with a number")
    else:
        value = rule[sides[0]]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append(f"{where}: {sides[0]} must be a finite number, not {value!r}")


def check_criteria(criteria, contrasts) -> list:
    """``criteria`` if valid, else CriteriaError naming every problem."""
    problems = criteria_problems(criteria, contrasts)
    if problems:
        raise CriteriaError(problems)
    return criteria


def evaluate_criteria(criteria, figures) -> list[dict]:
    """Each criterion's verdict from computed contrast ``figures`` (the dashboard's rows, by name).

    Returns ``[{"name", "verdict": met | not met | not decided, "tests": [{"text", "verdict", "value"}]}]``.
    A test whose figure is absent (no paired tasks, no family interval) is not decided; ``all``
    is met when every part is, not met when any part is not; ``any`` the other way round.
    """
    check_criteria(criteria, list(figures.values()))
    out = []
    for criterion in criteria:
        tests: list[dict] = []
        verdict = _evaluate({k: v for k, v in criterion.items() if k != "name"}, figures, tests)
        out.append({"name": criterion["name"], "verdict": verdict, "tests": tests})
    return out


def _evaluate(rule, figures, tests) -> str:
    if "all" in rule or "any" in rule:
        verdicts = [_evaluate(part, figures, tests) for part in rule.get("all", rule.get("any"))]
        decisive, other = (NOT_MET, MET) if "all" in rule else (MET, NOT_MET)
        if decisive in verdicts:
            return decisive
        return UNDECIDED if UNDECIDED in verdicts else other
    row = figures[rule["contrast"]]
    side = "above" if "above" in rule else "below"
    threshold = float(rule[side])
    if "interval" in rule:
        lo_key, hi_key = INTERVALS[rule["interval"]]
        value = row.get(lo_key if side == "above" else hi_key)
        described = f"{rule['interval']} interval [{_fmt(row.get(lo_key))}, {_fmt(row.get(hi_key))}]"
    else:
        value = row.get(ESTIMATES[rule["estimate"]])
        described = f"{rule['estimate']}-weighted estimate {_fmt(value)}"
    if value is None:
        verdict = UNDECIDED
    else:
        verdict = MET if (value > threshold if side == "above" else value < threshold) else NOT_MET
    tests.append({"text": f"{rule['contrast']}: {described} {side} {threshold:+g}", "verdict": verdict,
                  "value": value})
    return verdict


def _fmt(value) -> str:
    return "—" if value is None else f"{value:+.4f}"
