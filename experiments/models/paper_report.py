"""The paper report of a project, cached: every item of `core.paper_report_catalog` as JSON, with the
sha256 of the inputs it was built from, so the report page only reads it and can say when it is stale."""
from django.db import models

from experiments.models.data import Project


class PaperReport(models.Model):
    """One project's built report (`execution.paper_report_build`); rebuilt by a queued job."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="paper_report")
    version = models.CharField(max_length=20)
    built_at = models.DateTimeField()
    inputs_sha256 = models.CharField(max_length=64)
    build_seconds = models.FloatField(default=0.0)
    items = models.JSONField(help_text="every catalog item: id, title, section, state, and its table or figure")
