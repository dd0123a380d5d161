"""The cached numbers of a run's dashboard (AnalysisResult), its pools page (PoolAnalysisResult) and its paper-style tables (TablesResult)."""
from django.db import models

from experiments.models.runs import Run


class AnalysisResult(models.Model):
    """A run's dashboard numbers, cached with the sha256 of the inputs they came from."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="analysis_result")
    inputs_sha256 = models.CharField(max_length=64)
    payload = models.JSONField()
    computed_at = models.DateTimeField()


class PoolAnalysisResult(models.Model):
    """A run's pickers and pool diagnostics, cached with the sha256 of their inputs."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="pool_analysis_result")
    inputs_sha256 = models.CharField(max_length=64)
    payload = models.JSONField()
    computed_at = models.DateTimeField()


class TablesResult(models.Model):
    """A run's robustness tables (analysis.tables), cached like the dashboard with its inputs' sha256."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="tables_result")
    inputs_sha256 = models.CharField(max_length=64)
    payload = models.JSONField()
    computed_at = models.DateTimeField()
