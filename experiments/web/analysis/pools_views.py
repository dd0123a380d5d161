"""A run's candidate pools page: pickers as rows of contrasts and the App. I.3 diagnostics.

Numbers only, like the dashboard: owners, analysts and viewers see it, raters do not
(`access.run_for` with its default, the aggregate readers). The numbers are cached with the
sha256 of their inputs; a page whose cache is stale computes them once and keeps them.
"""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from experiments.access import run_for
from experiments.analysis.pools import pools_cached, pools_refresh, run_pools
from experiments.core.rankers import RankerError
from experiments.execution.policy import offline_roles


@login_required
def run_pools_page(request, slug, pk):
    """Template experiments/analysis/run_pools.html."""
    membership, run = run_for(request, slug, pk)
    context = {"membership": membership, "project": membership.project, "run": run, "result": None,
               "has_pools": bool(run_pools(run)), "offline": offline_roles(run.protocol)["any"]}
    if context["has_pools"]:
        try:
            context["result"] = pools_cached(run) or pools_refresh(run)
        except RankerError as error:      # a configured reranker that does not load or rank
            context["ranker_error"] = str(error)
    return render(request, "experiments/analysis/run_pools.html", context)
