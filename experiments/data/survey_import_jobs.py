"""Large survey uploads import as a background job on the `default` queue, with progress.

The pattern of interview imports (`import_jobs`): an upload whose files together exceed
`survey_background_bytes()` is not read inside the request. The files are copied to a folder of
their own under `OWNWORDS_IMPORT_DIR`, a job is queued, and the owner follows it on the survey
import's progress page. The job reads and prepares the files in worker processes
(`core.survey.prepare.PreparedStream`) into `survey_data.survey_import`, whole or not at all as
ever, and records in the rq job's meta after each batch: ``status`` (queued, running, done,
failed), ``respondents`` read so far, the ``study`` once stored, and a ``message`` (the summary, or
every problem). The copies are removed when the job ends.

Limits (settings, in MB of the whole upload): ``OWNWORDS_SURVEY_MAX_UPLOAD_MB`` (200) refuses a
larger upload from its Content-Length, before it is read; ``OWNWORDS_SURVEY_BACKGROUND_MB`` (5)
sends larger uploads to the queue.
"""
from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from rq import get_current_job

from experiments.core.interviews.records import printable
from experiments.core.survey.prepare import PreparedStream
from experiments.core.survey.records import SurveyImportError
from experiments.data import import_jobs
from experiments.data.import_jobs import (
    JOB_TIMEOUT_S, MB, RESULT_TTL_S, ImportStatus, QueueUnavailable, import_dir, import_progress, megabytes, record_progress,
    save_upload,
)
from experiments.models import Project
from experiments.data.surveys import survey_import, survey_import_workers

logger = logging.getLogger(__name__)

SURVEY_JOB = "survey"  # the meta's "kind": what tells a survey import from an interview import


def survey_upload_limit_bytes() -> int:
    return int(float(settings.OWNWORDS_SURVEY_MAX_UPLOAD_MB) * MB)


def survey_background_bytes() -> int:
    return int(float(settings.OWNWORDS_SURVEY_BACKGROUND_MB) * MB)


def survey_too_large_message(size: int) -> str:
    return (f"The upload is {megabytes(size)} MB; this server takes survey uploads of at most "
            f"{megabytes(survey_upload_limit_bytes())} MB in all. Upload fewer chunks at a time into separate studies, "
            "or import the files with manage.py import_survey. Nothing was imported.")


def survey_import_enqueue(*, project: Project, uploads, name: str, synthetic: bool, user=None) -> str:
    """Copy the uploaded files to a folder of their own and queue their import; returns the job id."""
    job_id = uuid.uuid4().hex
    folder = import_dir() / f"{job_id}.survey"
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    try:
        for number, upload in enumerate(uploads, 1):
            # The client's name, without any folder part (and never "." or ".."); a number keeps two
            # equal names apart. The name's ending tells the reader the file's type.
            base = Path(upload.name or "").name.lstrip(".") or f"upload-{number}"
            stored = base if base not in names else f"{number}-{base}"
            save_upload(upload, folder / stored)
            names.append(stored)
        total = sum((folder / n).stat().st_size for n in names)
        meta = {"project": project.pk, "kind": SURVEY_JOB, "label": printable(name), "files": names,
                "status": ImportStatus.QUEUED.value, "respondents": 0, "bytes_read": 0, "bytes_total": total, "study": None,
                "message": ""}
        import_jobs.import_queue().enqueue(job_import_survey, project.pk, getattr(user, "pk", None), str(folder), names,
                                       name, synthetic, job_id=job_id, meta=meta, job_timeout=JOB_TIMEOUT_S,
                                       result_ttl=RESULT_TTL_S, failure_ttl=RESULT_TTL_S)
    except (redis.RedisError, OSError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise QueueUnavailable(str(exc)) from None
    return job_id


def job_import_survey(project_id: int, user_id: int | None, folder: str, names: list[str], name: str,
                      synthetic: bool) -> str:
    """The job: read, check and store the files as one study, recording progress; copies removed after."""
    job = get_current_job()
    place = Path(folder)
    try:
        project = Project.objects.get(pk=project_id)
        user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
        record_progress(job, status=ImportStatus.RUNNING)
        result = survey_import(project=project, name=name, respondents=PreparedStream(
                                   [place / n for n in names], survey_import_workers()),
                               sources=names, synthetic=synthetic, user=user,
                               on_batch=lambda read: record_progress(job, respondents=read))
    except SurveyImportError as exc:
        record_progress(job, status=ImportStatus.FAILED, respondents=0,
                        message=f"Nothing imported as {printable(name)}:\n{exc}")
        return ImportStatus.FAILED.value
    except Exception:
        logger.exception("survey import %s failed", printable(name))
        record_progress(job, status=ImportStatus.FAILED, respondents=0,
                        message="Nothing imported: the import stopped on an unexpected error (logged on the server).")
        raise
    finally:
        shutil.rmtree(place, ignore_errors=True)
    record_progress(job, status=ImportStatus.DONE, respondents=result.imported, study=result.study.pk, bytes_read=0,
            message=f"{printable(name)}: {result.imported} respondent(s) imported; "
                    f"{result.excluded_respondents} excluded by the leak check.")
    return ImportStatus.DONE.value


def survey_import_progress(job_id: str, project: Project) -> dict | None:
    """What the survey progress page shows of one import of `project`, or None (no such import here)."""
    return import_progress(job_id, project, kind=SURVEY_JOB)
