"""Building a project's paper report: every catalog item's builder run once on the project's sealed,
finished runs, the result cached as `PaperReport` with its inputs' sha256; the queued job that does it
when a run finishes (`report_after_run`, from the driver), on the report page's "Rebuild" and from
`manage.py analysis_refresh` / `paper_report`.

A builder is resolved from its dotted path when the report is built: one that is not in this
version (a module or function not there yet) makes its item "not available in this version", and
one that fails is logged and shown as an error of its own, never the whole report's.
"""
from __future__ import annotations

import importlib
import logging
import time

import django_rq
import redis
from rq import Worker
from django.db import transaction
from django.utils import timezone

from experiments.analysis.paper_report_state import REPORT_VERSION, report_inputs_sha256, report_runs
from experiments.analysis.report_archive import drawable_figures, figure_images, figures_sha256, images_pack
from experiments.core.paper_report_catalog import CATALOG, CatalogItem
from experiments.core.report_format import item_json
from experiments.execution.report_lock_sql import report_build_lock
from experiments.models import PaperReport, PaperReportImages, Project

logger = logging.getLogger(__name__)
REPORT_QUEUE = "analysis"
JOB_TIMEOUT_S = 1800


def resolve(path: str | None):
    """The builder `module:function`, or None when this version has no such module or function."""
    if not path:
        return None
    module_name, _, function = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return None  # the module itself is missing, not one of its imports
        raise
    return getattr(module, function, None)


def build_item(item: CatalogItem, project, runs) -> dict:
    started = time.perf_counter()
    try:
        builder = resolve(item.builder)
        built = builder(project, runs) if builder is not None else None
    except Exception as exc:  # noqa: BLE001 - one item's failure is that item's state, logged with its traceback
        logger.exception("paper report of %s: %s failed", project.slug, item.id)
        out = item_json(item, None, error=f"its builder failed ({type(exc).__name__}); see the server log")
    else:
        out = item_json(item, built)
    out["build_seconds"] = round(time.perf_counter() - started, 3)
    return out


def build_report(project) -> tuple[list[dict], str]:
    project.__dict__.pop("report_audit", None)  # what a builder kept on the project is this build's only
    runs = report_runs(project)
    inputs_sha = report_inputs_sha256(project, runs)
    return [build_item(item, project, runs) for item in CATALOG], inputs_sha


def refresh_report(project, *, wait: bool = True, images: bool = False) -> PaperReport | None:
    """Build and store the project's report under its build lock; None when `wait` is False and
    another build holds the lock (that build stores the report). With `images`, then draw its
    figures' PNG and SVG for the archive (`store_images`): the queued job and the command do; a
    rebuild inside a request does not (it would start a browser there)."""
    with report_build_lock(project.pk, wait=wait) as held:
        if not held:
            return None
        started = time.perf_counter()
        items, inputs_sha = build_report(project)
        report, _ = PaperReport.objects.update_or_create(project=project, defaults={
            "version": REPORT_VERSION, "built_at": timezone.now(), "inputs_sha256": inputs_sha, "items": items,
            "build_seconds": time.perf_counter() - started})
    if images:
        store_images(report)
    return report


def store_images(report: PaperReport) -> PaperReportImages | None:
    """Draw the report's figures (kaleido, outside the build lock: a browser takes seconds a figure)
    and keep them under the sha256 of the figures drawn, unless the report was rebuilt with other
    figures meanwhile (None): those are drawn by their own build, and images of an older build
    never replace a newer one's. An archive takes images only when that sha256 is its report's."""
    figures = drawable_figures(report.items)
    made, note = figure_images(figures)
    drawn = figures_sha256(figures)
    with transaction.atomic():
        current = PaperReport.objects.select_for_update().filter(pk=report.pk).first()  # images stored in turn
        if current is None or figures_sha256(drawable_figures(current.items)) != drawn:
            return None
        kept, _ = PaperReportImages.objects.update_or_create(report=current, defaults={
            "figures_sha256": drawn, "made_at": timezone.now(), "note": note, "images": images_pack(made)})
    return kept


def job_paper_report(project_id: int) -> None:
    project = Project.objects.filter(pk=project_id).first()
    if project is not None:
        refresh_report(project, images=True)  # waits for a build in progress: this one sees the newer runs


def report_queue():
    return django_rq.get_queue(REPORT_QUEUE)


def queue_has_worker(queue) -> bool:
    return bool(Worker.count(queue=queue))


PENDING = ("queued", "deferred", "scheduled")


def report_enqueue(project) -> bool:
    """Queue a rebuild; False when the queue (Redis) does not answer or no worker serves it: nothing
    was queued (a job no worker takes would wait there, and one queued by an inline run, e.g. the
    demo's or a test's, would be built later against whatever database that worker reads)."""
    try:
        queue = report_queue()
        if not queue_has_worker(queue):
            return False
        # One waiting rebuild per project: a run finishing while one waits is covered by it (it
        # reads every finished run when it starts). A rebuild already started gets one successor.
        for job_id in (f"paper-report-{project.pk}", f"paper-report-{project.pk}-next"):
            job = queue.fetch_job(job_id)
            status = job.get_status(refresh=True) if job is not None else None
            if status in PENDING:
                return True
            if status != "started":
                queue.enqueue(job_paper_report, project.pk, job_timeout=JOB_TIMEOUT_S, job_id=job_id)
                return True
        return True  # a rebuild started and its successor too: the successor will read this run
    except (redis.RedisError, OSError) as exc:
        logger.warning("paper report of %s not queued: %s", project.slug, exc)
        return False
    return True


def report_after_run(run) -> None:
    """After a run's analysis: its project's report is rebuilt on the queue (a run never waits for it).
    With no worker on the queue nothing is queued: the report page says the report is stale, and its
    Rebuild (or `manage.py paper_report`) builds it."""
    report_enqueue(run.protocol.project)
