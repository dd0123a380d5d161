"""The RQ job path of before the move to `experiments.data.import_jobs`, kept for imports already in Redis.

RQ stores a job's function by dotted path, so an interview import queued before the upgrade names
`experiments.execution.imports.job_import_file`. Drop this module once no queue holds old jobs.
"""
from experiments.data.import_jobs import job_import_file

__all__ = ["job_import_file"]
