"""The RQ job path of before the move to `experiments.data.survey_import_jobs`, kept for imports already in Redis.

RQ stores a job's function by dotted path, so a survey import queued before the upgrade names
`experiments.execution.survey_imports.job_import_survey`. Drop this module once no queue holds old jobs.
"""
from experiments.data.survey_import_jobs import job_import_survey

__all__ = ["job_import_survey"]
