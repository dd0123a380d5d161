"""manage.py run_audit RUN [--json]: the independent execution audit (paper App. B.2, Tables 13–14).

Prints both tables and "0 violations", or each violation; exits with status 1 when one is found,
so a script (or CI) can stop on a journal that broke its rules.
"""
import json

from django.core.management.base import BaseCommand, CommandError

from experiments.models import Run
from experiments.execution.run_journal_audit import audit_run, audit_run_text


class Command(BaseCommand):
    help = ("Recount a run's phases from its journal's reservations and receipts (Tables 13–14) and check the "
            "journal's rules; exit status 1 on any violation.")

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--json", action="store_true", help="print the audit as JSON")

    def handle(self, run_id, **options):
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run with id {run_id}")
        audit = audit_run(run)
        if options["json"]:
            self.stdout.write(json.dumps({"run": run.pk, **audit.as_dict()}, indent=2))
        else:
            self.stdout.write(audit_run_text(run, audit))
        if audit.violations:
            n = len(audit.violations)
            raise CommandError(f"run {run.pk}: {n} violation{'s' if n != 1 else ''} of the journal's rules",
                               returncode=1)
