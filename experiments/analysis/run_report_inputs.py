"""What a paper-report table computed from one run says about its inputs: the run's recorded seed and draws,
whether the offline stand-in made it (never to be shown as a model result), its `ReportInputs` and notes."""
from __future__ import annotations

from experiments.core.report_table import ReportInputs
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import Run

OFFLINE_NOTE = ("Computed from a run on the offline stand-in (a deterministic lexical rule, not a model): "
                "these figures test the pipeline, they are not model results.")


def run_settings(run: Run) -> tuple[int, int]:
    """The run's recorded bootstrap seed and draws (the analysis defaults where none is recorded)."""
    bootstrap = run.protocol.bootstrap or {}
    return int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))


def is_offline(run: Run) -> bool:
    """Whether the offline stand-in generated or graded the run (never to be shown as a model result)."""
    protocol = run.protocol
    return any((getattr(protocol, role) or {}).get("provider") == "offline" for role in ("generator", "judge"))


def report_inputs(run: Run, *extra_runs: Run) -> ReportInputs:
    seed, draws = run_settings(run)
    every = [run, *extra_runs]
    return ReportInputs(runs=tuple(r.pk for r in every),
                        cohorts=tuple(dict.fromkeys(r.protocol.cohort_id for r in every)), seeds=(seed,), draws=draws,
                        offline_runs=tuple(r.pk for r in every if is_offline(r)))


def notes_for(run: Run, *notes: str, extra_runs=()) -> tuple[str, ...]:
    offline = any(is_offline(r) for r in (run, *extra_runs))
    return (*notes, *((OFFLINE_NOTE,) if offline else ()))
