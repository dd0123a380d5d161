"""manage.py judge_sample RUN [--n N] [--seed S]: two judges' agreement on a seeded, stratified sample (App. I.6)."""
from django.core.management.base import BaseCommand, CommandError

from experiments.analysis.sampled_agreement import sampled_agreement
from experiments.core.stats.judge_sample import (
    AGREEMENT_COLUMNS, DEFAULT_SAMPLE_SEED, DEFAULT_SAMPLE_SIZE, MAX_SAMPLE_SIZE,
)
from experiments.models import Protocol, Run


def _cell(value) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


class Command(BaseCommand):
    help = ("Agreement of a re-grade run's judge with its source run's judge on a sample of N answers drawn "
            "evenly over the conditions with a seeded PCG64 generator (paper App. I.6). Numbers only.")

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, help="the re-grade run (its protocol re-grades another run)")
        parser.add_argument("--n", type=int, default=DEFAULT_SAMPLE_SIZE,
                            help=f"sample size (default {DEFAULT_SAMPLE_SIZE})")
        parser.add_argument("--seed", type=int, default=DEFAULT_SAMPLE_SEED,
                            help=f"the sample's seed (default {DEFAULT_SAMPLE_SEED}); intervals use the run's own")

    def handle(self, run_id, n, seed, **options):
        if not 1 <= n <= MAX_SAMPLE_SIZE:
            raise CommandError(f"--n must be between 1 and {MAX_SAMPLE_SIZE:,}")
        if not 0 <= seed < 2 ** 63:
            raise CommandError("--seed must be a non-negative 64-bit integer")
        run = Run.objects.select_related("protocol").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run with id {run_id}")
        if run.protocol.kind != Protocol.Kind.REGRADE:  # a pairwise judge names a source but grades nothing
            raise CommandError(f"run {run_id} is not a re-grade: re-grade a finished run first (manage.py regrade_run)")
        result = sampled_agreement(run, n=n, sample_seed=seed)
        if not result["rows"]:
            raise CommandError(f"run {run_id} and its source share no answer graded by both judges")
        lines = [f"run {run.protocol.regrade_of_id} (first judge) against re-grade run {run.pk} (second judge): "
                 f"{result['items']} answers graded by both; sample of {result['sample']} (seed {seed}): "
                 + ", ".join(f"{k} {v}" for k, v in sorted(result["strata"].items())),
                 f"95% whole-person intervals, seed {result['seed']}, {result['draws']} draws",
                 "\t".join(AGREEMENT_COLUMNS)]
        lines += ["\t".join(_cell(v) for v in row) for row in result["rows"]]
        return "\n".join(lines)
