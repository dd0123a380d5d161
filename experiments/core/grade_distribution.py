"""How each condition's final answers are graded: counts and shares of the 0–3 grades, missing
grades counted on their own (the paper's Fig. 6). Pure Python and NumPy, no Django.

A grade is the raw judge grade 0..3 of a condition's final answer on a planned task; a task with
no grade (no answer, an unparsed grade, a failed call) is *missing*, never a zero. Shares are of
the planned tasks, so a condition's five shares sum to one.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

GRADE_VALUES = (0, 1, 2, 3)
MISSING = "missing"
CATEGORIES = (*map(str, GRADE_VALUES), MISSING)
CSV_COLUMNS = ["condition", "planned", *(f"grade_{g}" for g in GRADE_VALUES), "missing",
               *(f"share_{g}" for g in GRADE_VALUES), "share_missing"]


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def distribution(condition: str, grades: Iterable) -> dict:
    """One condition's row: ``counts`` of grades 0..3, ``missing``, and their ``shares``.

    ``grades`` holds one entry per planned task: a raw grade 0..3, or None / NaN when missing.
    """
    counts = [0] * len(GRADE_VALUES)
    missing = 0
    for value in grades:
        if _is_missing(value):
            missing += 1
            continue
        grade = int(value)
        if grade != value or grade not in GRADE_VALUES:
            raise ValueError(f"{condition}: {value!r} is not a grade 0..3")
        counts[grade] += 1
    planned = sum(counts) + missing
    shares = [n / planned if planned else None for n in counts]
    missing_share = missing / planned if planned else None
    return {"condition": condition, "planned": planned, "counts": counts, "missing": missing,
            "shares": shares, "missing_share": missing_share,
            # (label, tasks, share) for grades 0..3 and missing, for a table
            "cells": [*zip(CATEGORIES, counts + [missing], shares + [missing_share])]}


def distributions(conditions: Sequence[str], rows: Iterable[Iterable]) -> list[dict]:
    """`distribution` of each condition, ``rows`` parallel to ``conditions``."""
    return [distribution(condition, row) for condition, row in zip(conditions, rows)]


def csv_rows(table: list[dict]) -> list[dict]:
    """`distributions` flattened to CSV_COLUMNS (one row per condition)."""
    out = []
    for row in table:
        flat = {"condition": row["condition"], "planned": row["planned"], "missing": row["missing"],
                "share_missing": row["missing_share"]}
        for g, n, share in zip(GRADE_VALUES, row["counts"], row["shares"]):
            flat[f"grade_{g}"], flat[f"share_{g}"] = n, share
        out.append(flat)
    return out
