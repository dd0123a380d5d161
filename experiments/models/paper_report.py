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


class PaperReportImages(models.Model):
    """The PNG and SVG of a built report's figures, made by the build (kaleido drives a Chromium, seconds a
    figure), so that downloading the archive never starts a browser. `figures_sha256` names the figures
    they draw: images of another build's figures are not put in an archive."""

    report = models.OneToOneField(PaperReport, on_delete=models.CASCADE, related_name="figure_images")
    figures_sha256 = models.CharField(max_length=64, help_text="sha256 of the figures (plotly JSON) drawn")
    made_at = models.DateTimeField()
    note = models.TextField(help_text="how the images were made, or why they were not")
    images = models.BinaryField(help_text="a zip holding <slug>.png and <slug>.svg of each figure")
