"""The demo's "same content?" campaign alone (demo_ratings makes it last, after the other two): a
content-check campaign over the demo project's finished paraphrase-controls run, with generated demo
answers by the demo raters (`demo_ratings.demo_content_check`). Once; a second call finds it made."""
from django.core.management.base import BaseCommand

from annotations.management.commands.demo_ratings import demo_content_check, demo_owner
from experiments.models import Project


class Command(BaseCommand):
    help = ("A content-check ('same content?') campaign over the demo's paraphrase-controls run, by the demo "
            "raters (demo_ratings adds them), with generated demo answers; demo_ratings makes it too.")

    def add_arguments(self, parser):
        parser.add_argument("--wait", type=float, default=0.0,
                            help="seconds to wait for the controls run to finish (when it goes through the queue)")

    def handle(self, wait, **options):
        project = Project.objects.filter(slug="demo").first()
        if project is None:
            return "no demo project: run demo_setup first"
        return demo_content_check(project, demo_owner(project), wait=wait)
