"""The cached numbers of a run's dashboard (AnalysisResult) and of its pools page (PoolAnalysisResult)."""
from django.db import models

from experiments.models.runs import Run


class AnalysisResult(models.Model):
    """A run's dashboard numbers, cached with the sha256 of the inputs they came from."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="analysis_result")
    inputs_sha256 = models.CharField(max_length=64)
    payload = models.JSONField()
    computed_at = models.DateTimeField()


class PoolAnalysisResult(models.Model):
    """A run's pickers and pool diagnostics (issue 14), cached with the sha256 of their inputs."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="pool_analysis_result")
    inputs_sha256 = models.CharField(max_length=64)
    payload = models.JSONField()
    computed_at = models.DateTimeField()
