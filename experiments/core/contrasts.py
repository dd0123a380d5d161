"""Planned contrasts written as text, one per line: parsing, formatting and checking them.

A page's text area and the `protocol_create` command share this syntax (CONTRAST_SYNTAX_HELP).
Imports no Django.
"""
from __future__ import annotations

import math
import re

from experiments.core.candidates import derived_problem, is_derived
from experiments.core.survey.prompt import SURVEY_CONDITIONS
from experiments.core.conditions import CONDITIONS

INTERVAL_ABOVE_ZERO = "interval_above_zero"
CRITERIA = (INTERVAL_ABOVE_ZERO,)
FAMILY_MARKER = "[family]"
CRITERION_MARKER = "[interval above zero]"


_TERM_SEPARATOR = re.compile(r"\s+([+-])\s+")
_COEFFICIENT = re.compile(r"(\d+(?:\.\d+)?)\s*\*\s*(\S.*)")

CONTRAST_SYNTAX_HELP = (
    "One contrast per line: optional “name:”, then condition keys joined by “ - ” or “ + ” "
    "(with spaces: condition keys contain + and -), optionally weighted as “0.5*key”; then "
    "“[family]” for the family (Bonferroni) intervals and “[interval above zero]” for the "
    "prespecified criterion. Example: "
    "ownwords(B=|memory|) - memory(concrete,100w)+one-shot [family] [interval above zero]. "
    "A fusion or selection pool also gives memory(…)+b1, +b2, +candidate-mean and +oracle "
    "(its candidates' grades, no call)."
)


def _number(value: float) -> int | float:
    """Whole coefficients stay integers, so the stored JSON reads 1 and -1."""
    return int(value) if float(value).is_integer() else value


def _strip_markers(text: str) -> tuple[str, bool, str | None]:
    family, criterion = False, None
    while True:
        lowered = text.lower()
        if lowered.endswith(FAMILY_MARKER):
            family, text = True, text[: -len(FAMILY_MARKER)].rstrip()
        elif lowered.endswith(CRITERION_MARKER):
            criterion, text = INTERVAL_ABOVE_ZERO, text[: -len(CRITERION_MARKER)].rstrip()
        else:
            return text, family, criterion


def parse_terms(expression: str) -> dict[str, int | float]:
    """'a - b' → {'a': 1, 'b': -1}; '0.5*a + 0.5*b - c' → weights as written."""
    text = expression.strip()
    first_sign = 1
    if text[:1] in "+-":
        first_sign, text = (-1 if text[0] == "-" else 1), text[1:].strip()
    pieces = _TERM_SEPARATOR.split(text)
    signs = [first_sign] + [(-1 if sign == "-" else 1) for sign in pieces[1::2]]
    terms: dict[str, int | float] = {}
    for sign, term in zip(signs, pieces[0::2]):
        term = term.strip()
        coefficient = 1.0
        weighted = _COEFFICIENT.fullmatch(term)
        if weighted:
            coefficient, term = float(weighted.group(1)), weighted.group(2).strip()
        if not term:
            raise ValueError("a term has no condition key")
        if term in terms:
            raise ValueError(f"{term} appears twice")
        terms[term] = _number(sign * coefficient)
    return terms


def format_terms(terms: dict) -> str:
    parts = []
    for index, (key, coefficient) in enumerate(terms.items()):
        magnitude = abs(coefficient)
        weight = "" if magnitude == 1 else f"{magnitude:g}*"
        negative = coefficient < 0
        if index == 0:
            parts.append(f"{'-' if negative else ''}{weight}{key}")
        else:
            parts.append(f"{'-' if negative else '+'} {weight}{key}")
    return " ".join(parts)


def parse_contrast_line(line: str) -> dict:
    """One editor line → {"name", "terms", "family", "criterion"}; ValueError says what is wrong."""
    text, family, criterion = _strip_markers(line.strip())
    if "[" in text or "]" in text:
        raise ValueError(f"unknown marker; use {FAMILY_MARKER} or {CRITERION_MARKER} at the end of the line")
    name = None
    if ":" in text:
        name, text = (part.strip() for part in text.split(":", 1))
        if not name:
            raise ValueError("an empty name before “:”")
    if not text:
        raise ValueError("no condition keys")
    terms = parse_terms(text)
    return {"name": name or format_terms(terms), "terms": terms, "family": family, "criterion": criterion}


def format_contrast(contrast: dict) -> str:
    expression = format_terms(contrast["terms"])
    line = expression if contrast["name"] == expression else f"{contrast['name']}: {expression}"
    if contrast.get("family"):
        line += f" {FAMILY_MARKER}"
    if contrast.get("criterion") == INTERVAL_ABOVE_ZERO:
        line += f" {CRITERION_MARKER}"
    return line


def contrast_problems(contrasts, conditions) -> list[str]:
    """What is wrong with a list of planned contrasts, for a page or a shell; [] when nothing."""
    if not isinstance(contrasts, list):
        return ["contrasts must be a list"]
    problems, names = [], set()
    chosen = set(conditions)
    for number, contrast in enumerate(contrasts, start=1):
        label = f"contrast {number}"
        if not isinstance(contrast, dict) or not isinstance(contrast.get("terms"), dict) or not contrast["terms"]:
            problems.append(f"{label}: needs a name and terms {{condition: coefficient}}")
            continue
        name = contrast.get("name")
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{label}: needs a name")
        elif name in names:
            problems.append(f"{label}: the name {name!r} is used twice")
        else:
            names.add(name)
            label = f"contrast {name!r}"
        unknown_fields = set(contrast) - {"name", "terms", "family", "criterion"}
        if unknown_fields:
            problems.append(f"{label}: unknown fields {', '.join(sorted(unknown_fields))}")
        if not isinstance(contrast.get("family", False), bool):
            problems.append(f"{label}: family must be true or false")
        if contrast.get("criterion") not in (None, *CRITERIA):
            problems.append(f"{label}: criterion must be empty or {INTERVAL_ABOVE_ZERO!r}")
        coefficients = list(contrast["terms"].values())
        if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) for c in coefficients):
            problems.append(f"{label}: coefficients must be finite numbers")
            continue
        for key in contrast["terms"]:
            if is_derived(key):
                # A candidate-level condition (b1, b2, candidate mean, oracle of a pool).
                problem = derived_problem(key, chosen)
                if problem:
                    problems.append(f"{label}: {problem}")
            elif key not in CONDITIONS and key not in SURVEY_CONDITIONS:
                problems.append(f"{label}: {key} is not a condition key (join terms with “ - ” or “ + ”, "
                                "spaces on both sides: condition keys themselves contain + and -)")
            elif key not in chosen:
                problems.append(f"{label} uses {key}, which is not among the protocol's conditions")
        if abs(sum(coefficients)) > 1e-9:
            problems.append(f"{label}: the coefficients must sum to zero (a paired difference)")
    return problems


