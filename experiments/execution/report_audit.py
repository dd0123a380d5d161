"""Tables 13 and 14 of the paper report (App. B.2): the independent journal audit of every run the
report reads (`run_journal_audit`), one block of rows per run, its phases then its total; the
violations found are named in the notes. It stands here, not beside the cached items of
`analysis.report_items_cached`, because the audit needs the run's retry policy (`execution.policy`).

The audit recounts the journal (no participant text is read) when the report is built (the queued
job), never in a page request. Reading a run's journal is most of a build (seconds per 100,000
calls), so a run whose journal is unchanged keeps the rows of the previous report: each run's note
ends with the fingerprint of its journal (its slots' and calls' counts, last ids and times), and
rows are reused only when that fingerprint is the same.
"""
from __future__ import annotations

import re

from django.db.models import Count, Max

from experiments.analysis.report_inputs import inputs_of
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.journal_audit_tables import TABLE_13, TABLE_14
from experiments.core.report_table import Missing, ReportTable
from experiments.execution.run_journal_audit import audit_run
from experiments.models import ModelCall, PaperReport, Slot

NOTE = re.compile(r"^run (\d+): .*; journal ([0-9a-f]{16})$", re.S)
TABLES = {"Table 13": TABLE_13, "Table 14": TABLE_14}


def journal_fingerprint(run) -> str:
    """What the audit of `run` depends on, in three aggregate queries (no row is read)."""
    slots = Slot.objects.filter(run=run).aggregate(n=Count("pk"), last=Max("pk"), changed=Max("updated_at"))
    named = ModelCall.objects.filter(run=run).aggregate(n=Count("pk"), last=Max("pk"), done=Max("finished_at"))
    owned = ModelCall.objects.filter(slot__run=run).aggregate(n=Count("pk"), last=Max("pk"))
    facts = [run.pk, run.status, str(run.finished_at), *(str(v) for d in (slots, named, owned) for v in d.values())]
    return sha256_text(canonical_json(facts))[:16]


def _previous(project) -> dict[str, dict[int, tuple[str, list, str]]]:
    """table id → run → (fingerprint, rows, note) of the report built before this one."""
    items = PaperReport.objects.filter(project=project).values_list("items", flat=True).first() or []
    found = {}
    for item in items:
        if item.get("id") in TABLES and item.get("table"):
            per_run = {}
            for note in item["table"].get("notes", []):
                if match := NOTE.match(note):
                    run_id = int(match.group(1))
                    rows = [row for row in item["table"]["rows"] if row and row[0] == run_id]
                    per_run[run_id] = (match.group(2), rows, note)
            found[item["id"]] = per_run
    return found


def _audited(project, runs) -> dict[str, list[tuple[list, str]]]:
    """table id → per run (rows, note), from the previous report when the journal is unchanged."""
    store = project.__dict__.setdefault("report_audit", {})
    key = tuple(r.pk for r in runs)
    if key in store:
        return store[key]
    previous = _previous(project)
    out = {table: [] for table in TABLES}
    for run in runs:
        fingerprint = journal_fingerprint(run)
        kept = [previous.get(table, {}).get(run.pk) for table in TABLES]
        if all(k is not None and k[0] == fingerprint for k in kept):
            for table, (_, rows, note) in zip(TABLES, kept):
                out[table].append((rows, note))
            continue
        audit = audit_run(run)
        n = len(audit.violations)
        note = (f"run {run.pk}: {n} violation{'s' if n != 1 else ''}"
                + (" (" + "; ".join(v.text() for v in audit.violations[:5]) + ")" if n else "")
                + f"; journal {fingerprint}")
        accounts = [account.as_dict() for account in [*audit.phases, audit.total]]
        for table, columns in TABLES.items():
            out[table].append(([[run.pk, *(read(d) for _, read in columns)] for d in accounts], note))
    store[key] = out
    return out


def _table(table_id: str, project, runs) -> ReportTable | Missing:
    if not runs:
        return Missing("needs a finished run: every run's journal is audited", "common")
    blocks = _audited(project, runs)[table_id]
    names = ("Run", *(header for header, _ in TABLES[table_id]))
    return ReportTable(columns=names, rows=tuple(tuple(row) for rows, _ in blocks for row in rows),
                       inputs=inputs_of(runs), notes=tuple(note for _, note in blocks))


def table13(project, runs):
    return _table("Table 13", project, list(runs))


def table14(project, runs):
    return _table("Table 14", project, list(runs))
