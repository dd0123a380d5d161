"""What the paper report's builders read: the runs that fit an item, their cached numbers, and the
inputs a rendered item names (`core.report_table.ReportInputs`).

A builder never computes a bootstrap: it reads the dashboard (AnalysisResult), the robustness
tables (TablesResult) and the pools (PoolAnalysisResult) that the run's analysis cached, once per
build (the payloads are kept on the run object for the other items of the same build).
"""
from __future__ import annotations

from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.core.report_table import Missing, ReportInputs
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import AnalysisResult, PoolAnalysisResult, Protocol, TablesResult

OFFLINE = "offline"
CACHES = {"dashboard": AnalysisResult, "tables": TablesResult, "pools": PoolAnalysisResult}


def template_conditions(template: str) -> set[str]:
    return set(PAPER_PROTOCOLS[template].conditions)


def is_interview(run) -> bool:
    """A run that made and graded its own interview answers: not a survey run, a re-grade (another judge
    on a run's answers, read by App. I's items) or a pairwise judge (no grades), which carry their
    source's conditions and would otherwise stand in for it with another judge's grades."""
    return run.protocol.kind == Protocol.Kind.INTERVIEW


def runs_with(runs, conditions) -> list:
    """The interview runs whose protocol has every one of `conditions`, in pk order."""
    wanted = set(conditions)
    return [r for r in runs if is_interview(r) and wanted <= set(r.protocol.conditions)]


def latest_with(runs, conditions):
    found = runs_with(runs, conditions)
    return found[-1] if found else None


def template_runs(runs, template: str) -> list:
    """Runs of a ready-made protocol: every condition of the template that this installation ran
    (a template instantiated without an unavailable condition, e.g. Mem0, still counts)."""
    core = {c for c in template_conditions(template) if not c.startswith(("mem0", "memgpt"))}
    found = runs_with(runs, core)
    # A run of the template itself before one that merely contains its conditions (a memory-systems
    # run holds the confirmation's three): the latest such run is the one a builder reads.
    exact = [r for r in found if set(r.protocol.conditions) <= template_conditions(template)]
    return exact or found


def cached(run, name: str) -> dict | None:
    """The run's cached payload `name` (dashboard / tables / pools), or None; read once per build."""
    store = run.__dict__.setdefault("report_payloads", {})
    if name not in store:
        store[name] = CACHES[name].objects.filter(run=run).values_list("payload", flat=True).first()
    return store[name]


def is_offline(run) -> bool:
    return OFFLINE in {(run.protocol.generator or {}).get("provider"), (run.protocol.judge or {}).get("provider")}


def inputs_of(runs) -> ReportInputs:
    runs = list(dict.fromkeys(runs))
    seeds = sorted({int(r.protocol.bootstrap.get("seed", DEFAULT_SEED)) for r in runs})
    draws = sorted({int(r.protocol.bootstrap.get("draws", DEFAULT_DRAWS)) for r in runs})
    return ReportInputs(runs=tuple(r.pk for r in runs), cohorts=tuple(sorted({r.protocol.cohort_id for r in runs})),
                        seeds=tuple(seeds), draws=draws[0] if len(draws) == 1 else None,
                        offline_runs=tuple(r.pk for r in runs if is_offline(r)))


def needs(template: str, what: str) -> Missing:
    return Missing(f"needs a finished run of {what}", template)


def not_cached(run, name: str, template: str | None) -> Missing:
    return Missing(f"run {run.pk} has no cached {name} yet (manage.py analysis_refresh computes it)", template)


def oriented(contrast: dict, sign: int) -> tuple:
    """(estimate, lo, hi) of a contrast, or of its negation (sign −1: the interval swaps)."""
    est, lo, hi = contrast.get("estimate"), contrast.get("lo"), contrast.get("hi")
    if sign == 1:
        return est, lo, hi
    return (None if est is None else -est, None if hi is None else -hi, None if lo is None else -lo)


def find_contrast(payload: dict | None, plus: str, minus: str) -> tuple[dict | None, int]:
    """The planned contrast `plus − minus` of a dashboard payload, either way round: (row, sign)."""
    for c in (payload or {}).get("contrasts", []):
        terms = {k: float(v) for k, v in c["terms"].items()}
        if terms == {plus: 1.0, minus: -1.0}:
            return c, 1
        if terms == {plus: -1.0, minus: 1.0}:
            return c, -1
    return None, 0


def mean_row(payload: dict | None, condition: str) -> dict | None:
    return next((m for m in (payload or {}).get("means", []) if m["condition"] == condition), None)
