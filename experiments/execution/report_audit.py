"""Tables 13 and 14 of the paper report (App. B.2): the independent journal audit of every run the
report reads (`run_journal_audit`), one block of rows per run, its phases then its total; the
violations found are named in the notes. It stands here, not beside the cached items of
`analysis.report_items_cached`, because the audit needs the run's retry policy (`execution.policy`).

The audit recounts the journal (no participant text is read) and is computed when the report is
built (the queued job), never in a page request.
"""
from __future__ import annotations

from experiments.analysis.report_inputs import inputs_of
from experiments.core.journal_audit_tables import TABLE_13, TABLE_14
from experiments.core.report_table import Missing, ReportTable
from experiments.execution.run_journal_audit import audit_run


def _audits(runs) -> list:
    store = []
    for run in runs:
        cache = run.__dict__.setdefault("report_payloads", {})
        if "audit" not in cache:
            cache["audit"] = audit_run(run)
        store.append((run, cache["audit"]))
    return store


def _table(columns, runs) -> ReportTable | Missing:
    if not runs:
        return Missing("needs a finished run: every run's journal is audited", "common")
    rows, notes = [], []
    for run, audit in _audits(runs):
        for account in [*audit.phases, audit.total]:
            d = account.as_dict()
            rows.append((run.pk, *(read(d) for _, read in columns)))
        notes.append(f"run {run.pk}: {len(audit.violations)} violation{'s' if len(audit.violations) != 1 else ''}"
                     + (": " + "; ".join(v.text() for v in audit.violations[:5]) if audit.violations else ""))
    names = ("Run", *(header for header, _ in columns))
    return ReportTable(columns=names, rows=tuple(rows), inputs=inputs_of(runs), notes=tuple(notes))


def table13(project, runs):
    return _table(TABLE_13, list(runs))


def table14(project, runs):
    return _table(TABLE_14, list(runs))
