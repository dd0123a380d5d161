"""One rule for how a paper-report item is printed: its state, each cell as the paper rounds it (the
page and the LaTeX), the CSV rows (full precision), and the LaTeX of a table (booktabs, escaped by
`paper_tables.latex_escape`). Works on the items' JSON (`ReportTable.as_json()`), as cached.
Pure Python, no Django.
"""
from __future__ import annotations

import math

from experiments.core.paper_report_catalog import NEEDS_RUN, NOT_HERE, RENDERED, CatalogItem
from experiments.core.paper_tables import latex_escape
from experiments.core.report_table import Missing, ReportFigure, ReportTable

DEFAULT_DIGITS = 4
MINUS = "−"
NOT_AVAILABLE = "not available in this version"


def item_json(item: CatalogItem, built, error: str | None = None) -> dict:
    """The cached JSON of one catalog item: what it is, its state, and its table, figure or reason.

    `built` is what its builder returned (None when the builder is not in this version)."""
    out = {"id": item.id, "slug": item.slug, "title": item.title, "section": item.section, "kind": item.kind,
           "builder": item.builder, "template": item.template, "caption": item.caption, "in_paper": item.in_paper,
           "table": None, "figure": None, "reason": None}
    if isinstance(built, ReportFigure):
        out.update(figure=built.figure, table=built.table.as_json())
    elif isinstance(built, ReportTable):
        out["table"] = built.as_json()
    if out["table"] is not None:  # the page's cells, rounded once when the report is built
        out["cells"] = display_rows(out["table"])
    elif isinstance(built, Missing):
        out.update(reason=built.reason, template=built.template or item.template)
    if item.offline_only:
        out.update(state=NOT_HERE, reason=item.offline_only)
    elif error is not None:
        out.update(state=NOT_HERE, reason=error, table=None, figure=None, cells=None)
    elif built is None:
        out.update(state=NOT_HERE, reason=NOT_AVAILABLE + (f"; {item.history}" if item.history else ""))
    elif isinstance(built, Missing):
        out["state"] = NEEDS_RUN  # with its template's button when there is one
    else:
        out["state"] = RENDERED
    return out


def cell_text(value, column: str, table: dict) -> str:
    """A cell as the paper prints it: `digits[column]` decimals, a sign on `signed` columns, − for minus."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if isinstance(value, int) and column not in table.get("digits", {}):
        return str(value)
    digits = table.get("digits", {}).get(column, DEFAULT_DIGITS)
    text = f"{value:+.{digits}f}" if column in table.get("signed", ()) else f"{value:.{digits}f}"
    return text.replace("-", MINUS, 1) if text.startswith("-") else text


def display_rows(table: dict) -> list[list[str]]:
    return [[cell_text(v, c, table) for v, c in zip(row, table["columns"])] for row in table["rows"]]


def csv_rows(table: dict) -> list[dict]:
    """The rows as dicts under the column names, values unrounded (for `exports.csv_text`)."""
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def _latex_cell(text: str) -> str:
    if text.startswith(MINUS):
        return "$-$" + latex_escape(text[1:])
    return latex_escape(text)


def table_latex(item: dict) -> str:
    """The item's table as a booktabs `table` environment (needs \\usepackage{booktabs}), the paper's
    columns in order, each cell rounded as on the page; the inputs in a comment line."""
    table = item["table"]
    columns = table["columns"]
    inputs = table.get("inputs", {})
    offline = inputs.get("offline_runs") or []
    caption = f"{item['id']}: {item['title']}"
    if offline:
        caption += " (offline stand-in runs: " + ", ".join(str(r) for r in offline) + "; not model results)"
    lines = [f"% {item['id']} — runs {inputs.get('runs', [])}, cohorts {inputs.get('cohorts', [])}, "
             f"seeds {inputs.get('seeds', [])}, draws {inputs.get('draws')}".replace("\n", " "),
             r"\begin{table}[ht]", r"\centering", r"\small",
             r"\caption{" + latex_escape(caption) + "}",
             r"\begin{tabular}{" + "l" + "r" * (len(columns) - 1) + "}", r"\toprule",
             " & ".join(latex_escape(c) for c in columns) + r" \\", r"\midrule"]
    for row in display_rows(table):
        lines.append(" & ".join(_latex_cell(cell) for cell in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    for note in table.get("notes", []):
        lines.append(r"\par\footnotesize " + latex_escape(note))
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def latex_problems(text: str) -> list[str]:
    """A syntax check without LaTeX: braces balance (escaped ones aside), environments nest, math
    shifts pair up. An empty list when none is found."""
    problems, depth, stack, dollars = [], 0, [], 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in "{}$%&#_\\":
            i += 2
            continue
        if ch == "%" and (i == 0 or text[i - 1] != "\\"):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        dollars += ch == "$"
        if depth < 0:
            problems.append(f"unbalanced }} at {i}")
            depth = 0
        for word in ("begin", "end"):
            if text.startswith(f"\\{word}{{", i):
                name = text[i + len(word) + 2:text.index("}", i)]
                if word == "begin":
                    stack.append(name)
                elif not stack or stack.pop() != name:
                    problems.append(f"\\end{{{name}}} closes nothing open")
        i += 1
    if depth:
        problems.append(f"{depth} unclosed {{")
    if stack:
        problems.append(f"unclosed environments: {stack}")
    if dollars % 2:
        problems.append("an odd number of $")
    return problems
