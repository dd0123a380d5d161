"""Large interview files import as a background job on the `default` queue, with progress.

A file over `background_threshold_bytes()` is not read inside the request: the upload is
copied to `OWNWORDS_IMPORT_DIR`, a job is queued, and the owner follows it on the import's
progress page. The job streams the file (`stream_binary`) into `data.sessions_import` in
batches, all or nothing as ever, and records its state in the rq job's meta after each
batch: ``status`` (queued, running, done, failed), ``sessions`` stored so far,
``bytes_read`` of ``bytes_total``, and a ``message`` (the summary, or every problem).
The meta lives as long as the job (`RESULT_TTL_S`), long enough to read the outcome.

Limits, with defaults here (settings may override; see `upload_limit_bytes`):
``OWNWORDS_MAX_UPLOAD_MB`` (50) refuses larger uploads before they are read;
``OWNWORDS_BACKGROUND_IMPORT_MB`` (5) sends larger files to the queue.
"""
from __future__ import annotations

import logging
import uuid
from pathlib import Path

import django_rq
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models
from rq import get_current_job
from rq.job import Job, NoSuchJobError

from experiments.core.interviews.readers import stream_binary
from experiments.core.interviews.records import InterviewFileError, printable
from experiments.data.sessions import sessions_import
from experiments.models import Project

logger = logging.getLogger(__name__)

MB = 1024 * 1024
RESULT_TTL_S = 7 * 24 * 3600  # the outcome stays readable for a week
JOB_TIMEOUT_S = 4 * 3600
MAX_MESSAGE_CHARS = 20_000


class ImportStatus(models.TextChoices):
    """Where a background import stands, as its job's meta and result say (stored as the plain value)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FAILED = "failed", "Failed"
    DONE = "done", "Done"


def upload_limit_bytes() -> int:
    return int(float(settings.OWNWORDS_MAX_UPLOAD_MB) * MB)


def background_threshold_bytes() -> int:
    return int(float(settings.OWNWORDS_BACKGROUND_IMPORT_MB) * MB)


def import_dir() -> Path:
    return Path(settings.OWNWORDS_IMPORT_DIR)


def megabytes(size: int) -> str:
    """A size in MB as messages show it: at most two decimals, no trailing zeros."""
    return f"{size / MB:,.2f}".rstrip("0").rstrip(".")


def save_upload(upload, path: Path) -> None:
    """Write an uploaded file to `path` chunk by chunk (never whole in memory)."""
    with path.open("wb") as target:
        for chunk in upload.chunks():
            target.write(chunk)


def import_queue():
    return django_rq.get_queue("default")


class QueueUnavailable(Exception):
    """The background queue (Redis) does not answer: nothing was queued."""


def import_enqueue(*, project: Project, upload, fmt: str, label: str, user=None) -> str:
    """Copy `upload` to the import folder and queue its import; returns the job id."""
    job_id = uuid.uuid4().hex
    folder = import_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{job_id}.upload"
    save_upload(upload, path)
    meta = {"project": project.pk, "label": printable(label), "format": fmt, "status": ImportStatus.QUEUED.value, "sessions": 0,
            "bytes_read": 0, "bytes_total": path.stat().st_size, "message": ""}
    try:
        import_queue().enqueue(job_import_file, project.pk, getattr(user, "pk", None), str(path), fmt, label,
                               job_id=job_id, meta=meta, job_timeout=JOB_TIMEOUT_S, result_ttl=RESULT_TTL_S,
                               failure_ttl=RESULT_TTL_S)
    except (redis.RedisError, OSError) as exc:
        path.unlink(missing_ok=True)
        raise QueueUnavailable(str(exc)) from None
    return job_id


def job_import_file(project_id: int, user_id: int | None, path: str, fmt: str, label: str) -> str:
    """The job: stream the file into the project, recording progress; the copy is removed after."""
    job = get_current_job()
    file = Path(path)
    try:
        project = Project.objects.get(pk=project_id)
        user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
        stream = stream_binary(file.open, label, fmt, file.stat().st_size)
        record_progress(job, status=ImportStatus.RUNNING)

        def progress(sessions: int) -> None:
            record_progress(job, sessions=sessions, bytes_read=stream.bytes_read)

        summary = sessions_import(project=project, parsed=stream, source_format=fmt, source_file=label, user=user,
                                  on_batch=progress)
    except InterviewFileError as exc:
        record_progress(job, status=ImportStatus.FAILED, sessions=0,
                        message=f"Nothing imported from {printable(label)}:\n{exc}")
        return ImportStatus.FAILED.value
    except Exception:
        logger.exception("import of %s failed", printable(label))
        record_progress(job, status=ImportStatus.FAILED, sessions=0,
                        message="Nothing imported: the import stopped on an unexpected error (logged on the server).")
        raise
    finally:
        file.unlink(missing_ok=True)
    record_progress(job, status=ImportStatus.DONE, sessions=summary.sessions, bytes_read=stream.bytes_total,
            message=f"{printable(label)}: {summary}")
    return ImportStatus.DONE.value


def record_progress(job, **changes) -> None:
    if job is None:  # run outside a worker (a shell): nothing to show
        return
    if "message" in changes:
        changes["message"] = changes["message"][:MAX_MESSAGE_CHARS]
    if "status" in changes:
        changes["status"] = ImportStatus(changes["status"]).value  # a plain string in the job's meta
    job.meta.update(changes)
    job.save_meta()


def import_progress(job_id: str, project: Project, kind: str = "interviews") -> dict | None:
    """What the progress page shows of one import of `project`, or None (no such import here, or
    one of another kind: interview imports carry none, survey imports "survey")."""
    try:
        job = Job.fetch(job_id, connection=import_queue().connection)
    except (NoSuchJobError, ValueError):
        return None
    meta = job.get_meta(refresh=True)
    if meta.get("project") != project.pk or meta.get("kind", "interviews") != kind:
        return None
    status = meta.get("status", ImportStatus.QUEUED.value)
    if status in (ImportStatus.QUEUED, ImportStatus.RUNNING) and job.is_failed:
        status = ImportStatus.FAILED.value  # the worker died or the job timed out before it could say so
        meta["message"] = meta.get("message") or "Nothing imported: the import job stopped (worker lost or timed out)."
    total = meta.get("bytes_total") or 0
    return {**meta, "status": status, "job_id": job_id,
            "percent": round(100 * meta.get("bytes_read", 0) / total) if total else 0,
            "finished": status in (ImportStatus.DONE, ImportStatus.FAILED)}
