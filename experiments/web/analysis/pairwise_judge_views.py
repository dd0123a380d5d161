"""A pairwise-judge run's own dashboard: per condition pair the LLM judge's win rates, its position
bias and its consistency across the two orders (`analysis.pairwise_verdicts`, computed in the run's
analysis phase). Numbers only, for the aggregate readers (`access.run_for`'s default); raters get 403.
"""
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from experiments.access import run_for
from experiments.execution.kind_table import kind_rules

DASHBOARD = "pairwise_judge_dashboard"


@login_required
def pairwise_judge_dashboard(request, slug, pk):
    """Template experiments/analysis/pairwise_judge_dashboard.html."""
    membership, run = run_for(request, slug, pk)
    if (dashboard := kind_rules(run.protocol).dashboard) != DASHBOARD:
        return redirect(dashboard, slug=slug, pk=pk)  # not a pairwise judge: the run's own dashboard
    return render(request, "experiments/analysis/pairwise_judge_dashboard.html", {
        "membership": membership, "project": membership.project, "run": run,
        "data": (run.analysis or {}).get("pairwise_judge"), "source": run.protocol.regrade_of_id,
    })
