"""What one item of the paper report is: a rendered table, a rendered figure, or what is missing.

Every builder of the paper report (`analysis.paper_report` and the `analysis.report_items_*`
modules) returns one of these, so the report page, its CSVs, its LaTeX and its `report.json`
are written by one rule from one value. Pure Python, no Django; cells are plain JSON values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

Cell = str | int | float | None


@dataclass(frozen=True)
class ReportInputs:
    """What a rendered item was computed from, named so a reader can find it again."""

    runs: tuple[int, ...] = ()
    cohorts: tuple[int, ...] = ()
    seeds: tuple[int, ...] = ()
    draws: int | None = None
    offline_runs: tuple[int, ...] = ()   # runs on the offline stand-in: never model results

    def as_json(self) -> dict:
        return {"runs": list(self.runs), "cohorts": list(self.cohorts), "seeds": list(self.seeds),
                "draws": self.draws, "offline_runs": list(self.offline_runs)}


@dataclass(frozen=True)
class ReportTable:
    """A table in the paper's column order. `digits[column]` is the rounding the paper prints
    (signed numbers keep their sign, as the paper's differences do, when the column is in `signed`)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    inputs: ReportInputs
    digits: dict[str, int] = field(default_factory=dict)
    signed: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row has {len(row)} cells for {len(self.columns)} columns")

    def as_json(self) -> dict:
        return {"columns": list(self.columns), "rows": [list(r) for r in self.rows],
                "digits": dict(self.digits), "signed": sorted(self.signed), "notes": list(self.notes),
                "inputs": self.inputs.as_json()}


@dataclass(frozen=True)
class ReportFigure:
    """A plotly figure (its JSON dict) and the table of the numbers it draws."""

    figure: dict
    table: ReportTable

    def as_json(self) -> dict:
        return {"figure": self.figure, "table": self.table.as_json()}


@dataclass(frozen=True)
class Missing:
    """Why an item cannot be rendered from this project yet, and the ready-made protocol
    (`execution.protocol_templates` / `core.paper_protocols` name) that would produce it, if any."""

    reason: str
    template: str | None = None

    def as_json(self) -> dict:
        return {"reason": self.reason, "template": self.template}


ReportItem = ReportTable | ReportFigure | Missing
