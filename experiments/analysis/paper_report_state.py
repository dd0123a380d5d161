"""Which runs a project's paper report reads, the sha256 of everything it is built from, and its cached
copy (`PaperReport`) with whether that copy is still current — a few small queries, for the report page.

The report reads the project's sealed, finished runs in pk order, pairwise judges left out; its inputs
are those runs (and their protocols' seals), the cached numbers of each (dashboard, robustness tables,
pools: their inputs' sha256 and when they were computed; a survey run's analysis kept on the run), the
project's cohorts, and the report's version.
"""
from __future__ import annotations

from experiments.core.canonical import canonical_json, sha256_text
from experiments.models import (
    AnalysisResult, Cohort, PaperReport, PoolAnalysisResult, Protocol, Run, TablesResult,
)

REPORT_VERSION = "1"


def report_runs(project) -> list[Run]:
    """The project's sealed, finished runs in pk order (protocols and cohorts loaded with them), but no
    pairwise judge: it copies its source's conditions to name its pairs and stores no answer or grade,
    so a builder that picks runs by their conditions would read it as an empty run; no item reads one."""
    return list(Run.objects.filter(protocol__project=project, status=Run.Status.FINISHED,
                                   protocol__sealed_at__isnull=False)
                .exclude(protocol__kind=Protocol.Kind.PAIRWISE)
                .select_related("protocol", "protocol__cohort").order_by("pk"))


def report_inputs_sha256(project, runs: list[Run] | None = None) -> str:
    runs = report_runs(project) if runs is None else runs
    ids = [r.pk for r in runs]
    caches = {}
    for name, model in (("dashboard", AnalysisResult), ("tables", TablesResult), ("pools", PoolAnalysisResult)):
        caches[name] = sorted([run_id, sha, str(at)] for run_id, sha, at in model.objects.filter(run_id__in=ids)
                              .values_list("run_id", "inputs_sha256", "computed_at"))
    inputs = {
        "version": REPORT_VERSION,
        "runs": [[r.pk, r.status, str(r.finished_at), r.protocol_id, (r.protocol.seal or {}).get("sha256", ""),
                  str(r.protocol.sealed_at)] for r in runs],
        "caches": caches,
        "cohorts": [list(row) for row in Cohort.objects.filter(project=project).order_by("pk")
                    .values_list("pk", "task_list_sha256")],
        # A survey run keeps its analysis on the run itself (`survey_results`), not in a cache table.
        "survey_analyses": [[r.pk, sha256_text(canonical_json(r.analysis))] for r in runs
                            if r.protocol.kind == Protocol.Kind.SURVEY],
    }
    return sha256_text(canonical_json(inputs))


def cached_report(project) -> tuple[PaperReport | None, bool]:
    """The cached report and whether it is stale (built from other inputs, or by another version)."""
    report = PaperReport.objects.filter(project=project).first()
    if report is None:
        return None, True
    return report, report.version != REPORT_VERSION or report.inputs_sha256 != report_inputs_sha256(project)
