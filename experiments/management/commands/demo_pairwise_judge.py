"""The demo's LLM pairwise judge (bin/demo runs this after demo_ratings): a pairwise-judge run over the
demo project's finished run, every pair of its conditions (the pairs of the demo pairwise campaign),
both orders, judged by the run's own judge (the offline stand-in), driven inline or, with --queue (what
bin/demo does: its workers are running), through the queues like the demo's other runs. Once; a second
call finds it made. The pairwise campaign's results page then shows people beside the judge."""
from django.core.management.base import BaseCommand

from experiments.execution import control, policy
from experiments.execution.driver import run_inline
from experiments.execution.jobs import run_enqueue
from experiments.execution.pairwise_judge import all_pairs
from experiments.management.commands.demo_setup import DEMO_PROTOCOL
from experiments.models import Project, Protocol, Role, Run


class Command(BaseCommand):
    help = ("Judge every pair of the demo run's conditions with the LLM pairwise judge (the run's own judge, "
            "the offline stand-in in the demo), both orders, inline or (--queue) through the queues.")

    def add_arguments(self, parser):
        parser.add_argument("--queue", action="store_true",
                            help="run it through the RQ queues (a worker must be running) instead of inline")

    def handle(self, queue=False, **options):
        project = Project.objects.filter(slug="demo").first()
        if project is None:
            return "no demo project: run demo_setup first"
        # the demo run (not the paraphrase-controls run beside it), whose conditions the pairwise campaign pairs
        source = (Run.objects.filter(protocol__project=project, protocol__name=DEMO_PROTOCOL["name"],
                                     status=Run.Status.FINISHED).select_related("protocol").order_by("-pk").first())
        if source is None:
            return "no finished demo run yet: no pairwise judge"
        if Run.objects.filter(protocol__regrade_of=source, protocol__kind=Protocol.Kind.PAIRWISE).exists():
            return f"a pairwise judge of run {source.pk} exists already"
        owner = project.memberships.filter(role=Role.OWNER).select_related("user").order_by("pk").first()
        try:
            pairs = all_pairs(source.protocol.conditions, source.protocol.conditions)
            protocol = control.regrade_create(source=source, user=owner.user if owner else None, pairs=pairs)
        except policy.RunError as exc:
            return f"no pairwise judge of run {source.pk}: {exc}"
        page = f"/p/{project.slug}/runs/{{}}/pairwise-judge/"
        if queue:
            run = Run.objects.create(protocol=protocol)
            control.run_start(run=run)
            run_enqueue(run.pk)
            return (f"pairwise judge of run {source.pk}: run {run.pk}, {len(pairs)} pairs of conditions, both orders, "
                    f"goes through the queue (offline stand-in, labelled as such); results at {page.format(run.pk)} "
                    "and beside people's on the pairwise campaign's results page")
        run = Run.objects.create(protocol=protocol, inline=True)
        control.run_start(run=run)
        run = run_inline(run.pk)
        calls = run.slots.count()
        stand_in = " (offline stand-in, labelled as such on its pages)" if (run.analysis or {}).get(
            "pairwise_judge", {}).get("stand_in") else ""
        return (f"pairwise judge of run {source.pk}: run {run.pk}, {len(pairs)} pairs of conditions, {calls} "
                f"calls (both orders){stand_in}; results at {page.format(run.pk)} "
                "and beside people's on the pairwise campaign's results page")
