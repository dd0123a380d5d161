"""The RQ job paths of before the layout move (`experiments.jobs.job_*`), kept for jobs already in Redis.

RQ stores a job's function by dotted path, so a run queued or paused before the upgrade names
these. New jobs use `experiments.execution.jobs`; drop this module once no queue holds old jobs.
"""
from experiments.execution.jobs import job_analyze, job_drive, job_recheck, job_slot

__all__ = ["job_analyze", "job_drive", "job_recheck", "job_slot"]
