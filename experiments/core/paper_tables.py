"""Paper-style tables (App. B, G, I): rows of contrasts with estimate, interval, tasks and people; CSV rows and LaTeX.

Built from the cached numbers of a run (the dashboard's payload and the robustness tables'
payload, both plain JSON), so one rule writes the page, the CSV and the LaTeX. Imports no Django.
"""
from __future__ import annotations

import re

COLUMNS = ["run", "table", "contrast", "row", "estimate", "lo", "hi", "n_tasks", "n_people", "note"]
TABLE_TITLES = {
    "planned": "Planned contrasts (task-weighted; pointwise 95% and family intervals)",
    "weightings": "Task- and person-weighted estimates (App. I.8)",
    "thresholds": "Threshold decomposition (App. I.1): ΔP≥k, shares of tasks",
    "subgroups": "Subgroups (App. I.2, I.3, I.4)",
    "regressions": "Regression of the per-task difference on a covariate (App. I.2, I.7)",
    "exclusions": "Exclusions (App. I.5)",
}


def _row(run, table, contrast, label, figures, note="") -> dict:
    figures = figures or {}
    return {"run": run, "table": table, "contrast": contrast, "row": label,
            "estimate": figures.get("estimate"), "lo": figures.get("lo"), "hi": figures.get("hi"),
            "n_tasks": figures.get("n_tasks"), "n_people": figures.get("n_people"), "note": note}


def planned_rows(dashboard: dict, run="") -> list[dict]:
    """The planned contrasts of a dashboard payload: the pointwise row, and the family row of a family member."""
    rows = []
    for c in dashboard.get("contrasts", []):
        base = {"estimate": c.get("estimate"), "n_tasks": c.get("n_tasks"), "n_people": c.get("people")}
        note = f"{c['lost']} of {c['planned']} planned tasks lost to missing grades" if c.get("lost") else ""
        rows.append(_row(run, "planned", c["name"], "95% interval", {**base, "lo": c.get("lo"), "hi": c.get("hi")},
                         note))
        if c.get("family") and "family_lo" in c:
            rows.append(_row(run, "planned", c["name"], "family interval",
                             {**base, "lo": c["family_lo"], "hi": c["family_hi"]}))
    return rows


def robustness_rows(tables: dict, run="") -> list[dict]:
    """Every row of a robustness payload (`analysis.tables`), table by table in TABLE_TITLES order."""
    by_table: dict[str, list[dict]] = {k: [] for k in TABLE_TITLES if k != "planned"}
    for c in tables.get("contrasts", []):
        name = c["name"]
        if "task_weighted" not in c:
            continue
        by_table["weightings"] += [_row(run, "weightings", name, "task-weighted", c["task_weighted"]),
                                   _row(run, "weightings", name, "person-weighted", c["person_weighted"])]
        t = c["thresholds"]
        for d in t["delta"]:
            note = ""
            if d["k"] == t["smallest"]:
                note = "smallest: lower bound under any monotone rescoring"
            if d["k"] == t["largest"]:
                note = "largest: upper bound under any monotone rescoring"
            by_table["thresholds"].append(_row(run, "thresholds", name, f"ΔP≥{d['k']}", d, note))
        share = t["top_step_share"]
        verdict = ("the sign holds under every monotone rescoring" if t["same_sign"] else
                   "no direction holds under every spacing" if share in (None, 0.0) and not t["same_sign"] else
                   f"the sign holds while the step 2→3 has less than {share:.1%} of the range (linear: 33.3%)")
        if t["same_sign"] or share is not None:
            by_table["thresholds"].append(_row(run, "thresholds", name, "monotone rescoring",
                                               {"estimate": share}, verdict))
        for attribute, split in c.get("subgroups", {}).items():
            for g in split["groups"]:
                by_table["subgroups"].append(_row(run, "subgroups", name, f"{attribute}: {g['label']}", g))
            d = split.get("difference")
            if d:
                note = (f"undefined in {d['undefined_draws']} draws (a group without tasks)"
                        if d.get("undefined_draws") else "both groups on the same resampled people")
                by_table["subgroups"].append(_row(run, "subgroups", name,
                                                  f"{attribute}: {d['first']} − {d['second']}", d, note))
        for covariate, fit in c.get("regressions", {}).items():
            if fit:
                by_table["regressions"] += [
                    _row(run, "regressions", name, f"{covariate}: slope", fit["slope"]),
                    _row(run, "regressions", name, f"{covariate}: intercept (difference at 0)", fit["intercept"])]
        for exclusion in c.get("exclusions", []):
            by_table["exclusions"].append(_row(run, "exclusions", name, "all tasks", exclusion["all"]))
            by_table["exclusions"].append(_row(run, "exclusions", name, exclusion["rule"], exclusion["kept"],
                                               f"{exclusion['people_excluded']} people excluded"))
    return [row for rows in by_table.values() for row in rows]


def grouped(rows: list[dict]) -> list[dict]:
    """Rows → [{"key", "title", "rows"}] in TABLE_TITLES order, for a page."""
    out = []
    for key, title in TABLE_TITLES.items():
        members = [r for r in rows if r["table"] == key]
        if members:
            out.append({"key": key, "title": title, "rows": members})
    return out


# --------------------------------------------------------------------------
# LaTeX
# --------------------------------------------------------------------------

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "−": "$-$", "→": r"$\to$", "≥": r"$\geq$", "Δ": r"$\Delta$",
                  "≤": r"$\leq$", "×": r"$\times$", "±": r"$\pm$", "∞": r"$\infty$"}
_THRESHOLD = re.compile(r"ΔP≥(\d)")


def latex_escape(text) -> str:
    """Plain text for a LaTeX cell: its special characters escaped; ΔP≥k, −, → written as math."""
    pieces = _THRESHOLD.split(str(text))
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:
            out.append(rf"$\Delta P_{{\geq {piece}}}$")
        else:
            out.append("".join(_LATEX_SPECIAL.get(ch, ch) for ch in piece))
    return "".join(out)


def latex_number(value, digits: int = 4) -> str:
    """+0.0123 / $-$0.0123 as the paper prints them; — when absent."""
    if value is None:
        return "---"
    text = f"{value:+.{digits}f}"
    return text.replace("-", "$-$", 1) if text.startswith("-") else text


def latex(rows: list[dict], *, caption: str = "") -> str:
    """One booktabs tabular per table of ``rows`` (needs \\usepackage{booktabs})."""
    parts = []
    with_run = any(r["run"] not in ("", None) for r in rows)
    for table in grouped(rows):
        head = (["Run"] if with_run else []) + ["Contrast", "Row", "Estimate", "95\\% interval", "Tasks", "People"]
        lines = [r"\begin{table}[ht]", r"\centering", r"\small",
                 r"\caption{" + latex_escape(caption + (": " if caption else "") + table["title"]) + "}",
                 r"\begin{tabular}{" + "l" * (len(head) - 4) + "rcrr}", r"\toprule",
                 " & ".join(head) + r" \\", r"\midrule"]
        for r in table["rows"]:
            interval = ("---" if r["lo"] is None else f"[{latex_number(r['lo'])}, {latex_number(r['hi'])}]")
            cells = ([latex_escape(r["run"])] if with_run else []) + [
                latex_escape(r["contrast"]), latex_escape(r["row"]), latex_number(r["estimate"]), interval,
                "---" if r["n_tasks"] is None else f"{r['n_tasks']:,}".replace(",", "{,}"),
                "---" if r["n_people"] is None else f"{r['n_people']:,}".replace(",", "{,}")]
            lines.append(" & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
