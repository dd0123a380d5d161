from django.core.management.base import BaseCommand, CommandError

from experiments.analysis.dashboard import dashboard_refresh
from experiments.analysis.pools import pools_refresh, run_pools
from experiments.analysis.tables import tables_refresh
from experiments.execution.paper_report_build import refresh_report
from experiments.models import Run


class Command(BaseCommand):
    help = ("Recompute a run's dashboard numbers, its robustness tables, and its candidate pools page if it "
            "has fusion or selection (each cached with their inputs' hash); then its project's paper report.")

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)

    def handle(self, run_id, **options):
        try:
            run = Run.objects.select_related("protocol").get(pk=run_id)
        except Run.DoesNotExist:
            raise CommandError(f"no run {run_id}") from None
        result = dashboard_refresh(run)
        contrasts = result.payload["contrasts"]
        message = f"run {run.pk}: {len(contrasts)} contrasts computed, inputs sha256 {result.inputs_sha256}"
        tables_refresh(run)
        if run_pools(run):                  # the candidate pools page (pickers, diagnostics)
            message += f"; candidate pools, inputs sha256 {pools_refresh(run).inputs_sha256}"
        # its numbers are read from the caches just refreshed; its figures drawn again for report.zip
        report = refresh_report(run.protocol.project, images=True)
        message += f"; paper report rebuilt in {report.build_seconds:.1f} s"
        return message
