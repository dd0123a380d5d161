"""Flat tables of a campaign's result payload: the rows behind each results table and its CSV.

Pure. ``names`` (label → username) is given only for owners: the raters table then carries
a ``username`` column; everyone else sees the labels R1, R2 … alone.
"""
from __future__ import annotations

STATS = ("exact", "within_one", "kappa", "alpha")

_AGREEMENT = ["scope", "comparison", "n_pairs", "n_people"] + [
    f"{s}{suffix}" for s in STATS for suffix in ("", "_lo", "_hi")] + [
    "mean_abs_diff", "mean_abs_diff_lo", "mean_abs_diff_hi", "seed", "draws"]

CSV_TABLES = {
    "agreement": _AGREEMENT,
    "confusion": ["scope", "comparison", "rows", "columns", "row_grade", "column_grade", "count"],
    "levels": ["scope", "source", "estimate", "lo", "hi", "items", "people"],
    "raters": ["rater", "username", "ratings", "graded", "flagged", "flag_only", "median_seconds",
               "grade_0", "grade_1", "grade_2", "grade_3",
               "kappa_vs_others", "kappa_vs_others_lo", "kappa_vs_others_hi", "exact_vs_others", "pairs_vs_others",
               "kappa_vs_judge", "kappa_vs_judge_lo", "kappa_vs_judge_hi", "exact_vs_judge", "pairs_vs_judge",
               "gold_items", "gold_exact", "gold_within_one", "gold_exact_share", "gold_within_one_share"],
    "contrasts": ["name", "source", "estimate", "lo", "hi", "family_lo", "family_hi", "person_weighted",
                  "wins", "ties", "losses", "n_tasks", "people", "tasks_with_items", "planned", "rated", "reason",
                  "criterion", "criterion_met", "seed", "draws"],
}
ALL = "all items"


def comparisons(payload: dict, scope_payload: dict | None = None, *, scope: str = ALL) -> list[tuple]:
    """(scope, comparison, axes, figure) of one scope: the campaign (default) or one condition."""
    p = payload if scope_payload is None else scope_payload
    rows = [
        (scope, "rater vs rater (pairs of the same item)", ("first rater", "second rater"), p["between"]["pairs"]),
        (scope, "raters (every rating) vs judge", ("rater", "judge"), p["vs_judge"]["pooled"]),
        (scope, "raters' mean (rounded half up) vs judge", ("raters' mean", "judge"), p["vs_judge"]["mean"]),
    ]
    if scope_payload is None and "retest" in payload:
        rows.append((scope, "same rater, hidden repeat (retest ceiling)", ("first showing", "repeat"),
                     payload["retest"]["pairs"]))
    if scope_payload is None:
        for r in payload["per_rater"]:
            rows.append((scope, f"{r['rater']} vs judge", (r["rater"], "judge"), r["vs_judge"]))
            rows.append((scope, f"{r['rater']} vs the other raters", (r["rater"], "other raters"),
                         r["vs_others"]))
    return rows


def _interval(prefix: str, value: dict | None) -> dict:
    value = value or {}
    return {prefix: value.get("estimate"), f"{prefix}_lo": value.get("lo"), f"{prefix}_hi": value.get("hi")}


def agreement_rows(payload: dict) -> list[dict]:
    scopes = [comparisons(payload)] + [comparisons(payload, c, scope=c["condition"]) for c in payload["conditions"]]
    rows = []
    for scope_rows in scopes:
        for scope, name, _, fig in scope_rows:
            row = {"scope": scope, "comparison": name, "seed": payload["seed"], "draws": payload["draws"]}
            if fig:
                row.update(n_pairs=fig["n_pairs"], n_people=fig["n_people"])
                for s in STATS:
                    row.update(_interval(s, fig[s]))
                if "mean_abs_diff" in fig:
                    row.update(_interval("mean_abs_diff", fig["mean_abs_diff"]))
            else:
                row.update(n_pairs=0)
            rows.append(row)
    # Krippendorff's α over every rater: one row per scope, not a pair statistic.
    for scope, between in [(ALL, payload["between"])] + [(c["condition"], c["between"]) for c in payload["conditions"]]:
        rows.append({"scope": scope, "comparison": "all raters (Krippendorff's ordinal α)",
                     "n_pairs": between["items"], "seed": payload["seed"], "draws": payload["draws"],
                     **_interval("alpha", between["alpha"])})
    return rows


def confusion_rows(payload: dict) -> list[dict]:
    scopes = [comparisons(payload)] + [comparisons(payload, c, scope=c["condition"]) for c in payload["conditions"]]
    return [{"scope": scope, "comparison": name, "rows": axes[0], "columns": axes[1], "row_grade": i,
             "column_grade": j, "count": n}
            for scope_rows in scopes for scope, name, axes, fig in scope_rows if fig
            for i, line in enumerate(fig["confusion"]) for j, n in enumerate(line)]


def level_rows(payload: dict) -> list[dict]:
    rows = []
    for scope, levels in [(ALL, payload["levels"])] + [(c["condition"], c["levels"]) for c in payload["conditions"]]:
        for source in ("raters_mean", "judge", "difference"):
            v = levels[source] or {}
            rows.append({"scope": scope, "source": source, "estimate": v.get("estimate"), "lo": v.get("lo"),
                         "hi": v.get("hi"), "items": v.get("n", 0), "people": v.get("people", 0)})
    return rows


def rater_rows(payload: dict, names: dict | None = None) -> list[dict]:
    rows = []
    for r in payload["per_rater"]:
        others, judge = r["vs_others"] or {}, r["vs_judge"] or {}
        row = {"rater": r["rater"], "username": (names or {}).get(r["rater"], ""),
               **{k: r[k] for k in ("ratings", "graded", "flagged", "flag_only", "median_seconds")},
               **{f"grade_{g}": n for g, n in enumerate(r["distribution"])},
               **_interval("kappa_vs_others", others.get("kappa")),
               "exact_vs_others": (others.get("exact") or {}).get("estimate"),
               "pairs_vs_others": others.get("n_pairs", 0),
               **_interval("kappa_vs_judge", judge.get("kappa")),
               "exact_vs_judge": (judge.get("exact") or {}).get("estimate"),
               "pairs_vs_judge": judge.get("n_pairs", 0),
               **{f"gold_{k}": v for k, v in r["gold"].items()}}
        rows.append(row)
    return rows


def contrast_rows(payload: dict) -> list[dict]:
    rows = []
    for c in payload["contrasts"]:
        base = {k: c[k] for k in ("name", "n_tasks", "people", "tasks_with_items", "planned", "rated", "reason",
                                  "criterion", "seed", "draws")}
        if not c["rows"]:
            rows.append(base)
        for r in c["rows"]:
            rows.append({**base, **{k: r[k] for k in ("source", "estimate", "lo", "hi", "family_lo", "family_hi",
                                                      "person_weighted", "wins", "ties", "losses",
                                                      "criterion_met")}})
    return rows


def table_rows(payload: dict, table: str, names: dict | None = None) -> list[dict]:
    """The rows of CSV table ``table`` (a key of CSV_TABLES)."""
    if table == "agreement":
        return agreement_rows(payload)
    if table == "confusion":
        return confusion_rows(payload)
    if table == "levels":
        return level_rows(payload)
    if table == "raters":
        return rater_rows(payload, names)
    if table == "contrasts":
        return contrast_rows(payload)
    raise KeyError(table)
