"""Tables 13 and 14 of the paper (App. B.2) as plain text, from a journal audit (`journal_audit`).

Table 13, request accounting, per phase: logical slots and how they ended, then the HTTP
reservations (every one counted: an unknown reservation may or may not have reached the service)
split by basis and by outcome. Table 14, reported token subtotals and coverage: each token field
as its sum over the attempts that reported it, with how many did (an unreported field is unknown,
not zero), the recorded per-request elapsed times (not wall-clock time), the durable
request → receipt intervals and the phase's span from its first request to its last receipt.
"""
from __future__ import annotations

from experiments.core.journal_audit import Audit

TABLE_13 = [  # (header, how to read it from PhaseAccount.as_dict())
    ("phase", lambda d: d["phase"]),
    ("slots", lambda d: d["slots"]),
    ("answered", lambda d: d["answered"]),
    ("unusable", lambda d: d["unusable"]),
    ("failed", lambda d: d["failed"]),
    ("unknown", lambda d: d["unknown"]),
    ("open", lambda d: d["open"]),
    ("HTTP reservations", lambda d: d["reservations"]),
    ("first", lambda d: d["first_requests"]),
    ("recoveries", lambda d: d["recoveries"]),
    ("amended", lambda d: d["amended"]),
    ("ok", lambda d: d["outcomes"]["ok"]),
    ("unusable recv", lambda d: d["outcomes"]["unusable"]),
    ("transient", lambda d: d["outcomes"]["transient"]),
    ("quota", lambda d: d["outcomes"]["quota"]),
    ("fatal", lambda d: d["outcomes"]["fatal"]),
    ("no receipt", lambda d: d["outcomes"]["unknown"] + d["outcomes"]["in_flight"]),
    ("late", lambda d: d["late_receipts"]),
]


def _tokens(name):
    def cell(d):
        t = d["tokens"][name]
        return f"{'unknown' if t['sum'] is None else t['sum']} [{t['reported']}/{d['reservations']}]"
    return cell


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.2f}"


TABLE_14 = [
    ("phase", lambda d: d["phase"]),
    ("attempts", lambda d: d["reservations"]),
    ("input tokens", _tokens("input_tokens")),
    ("output tokens", _tokens("output_tokens")),
    ("reasoning tokens", _tokens("reasoning_tokens")),
    ("total tokens", _tokens("total_tokens")),
    ("elapsed s (sum)", lambda d: f"{_seconds(d['elapsed_s'])} [{d['elapsed_reported']}/{d['reservations']}]"),
    ("request→receipt s", lambda d: f"{_seconds(d['request_to_receipt_s'])} [{d['receipts']}]"),
    ("first request", lambda d: (d["first_request"] or "-")[:19]),
    ("last receipt", lambda d: (d["last_receipt"] or "-")[:19]),
    ("span s", lambda d: _seconds(d["span_s"])),
]


def table_text(columns, rows: list[dict]) -> str:
    cells = [[header for header, _ in columns]] + [[str(read(row)) for _, read in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
             for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if len(rows) > 1:  # a rule above the total row
        lines.insert(len(lines) - 1, lines[1])
    return "\n".join(lines)


def audit_text(audit: Audit, *, title: str = "") -> str:
    """Both tables, then "0 violations" or each violation on its own line."""
    rows = [p.as_dict() for p in audit.phases] + [audit.total.as_dict()]
    parts = [title] if title else []
    parts += [
        "Table 13 — request accounting (HTTP counts are durable reservations; a reservation with no "
        "receipt may or may not have reached the service)",
        table_text(TABLE_13, rows),
        "",
        "Table 14 — reported token subtotals and coverage [reported/attempts]; elapsed sums are not "
        "wall-clock time",
        table_text(TABLE_14, rows),
        "",
    ]
    n = len(audit.violations)
    parts.append(f"{n} violation{'s' if n != 1 else ''}" + (":" if n else ""))
    parts += [f"  {v.text()}" for v in audit.violations]
    return "\n".join(parts)
