"""manage.py paper_report PROJECT [--out report.zip] [--no-images]: build a project's paper report (every
table and figure of the paper, `core.paper_report_catalog`), cache it, list each item's state, and
write its archive (LaTeX, CSV, figures, report.json) when --out is given."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from experiments.analysis.report_archive import archive_bytes
from experiments.execution.paper_report_build import refresh_report
from experiments.models import Project


class Command(BaseCommand):
    help = "Build a project's paper report from its sealed, finished runs; --out writes report.zip."

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project's slug")
        parser.add_argument("--out", help="write the archive here (e.g. report.zip)")
        parser.add_argument("--no-images", action="store_true", help="draw no PNG or SVG of the figures (the archive says so)")

    def handle(self, project, out=None, no_images=False, **options):
        found = Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"no project {project!r}")
        report = refresh_report(found, images=not no_images)
        for item in report.items:
            reason = f" — {item['reason']}" if item.get("reason") else ""
            template = f" [{item['template']}]" if item["state"] == "needs run" and item.get("template") else ""
            self.stdout.write(f"{item['id']}: {item['state']}{template}{reason}")
        self.stdout.write(f"built in {report.build_seconds:.1f} s, inputs sha256 {report.inputs_sha256}")
        if out:
            path = Path(out)
            path.write_bytes(archive_bytes(report, stale=False, images=not no_images))
            self.stdout.write(f"wrote {path} ({path.stat().st_size:,} bytes)")
