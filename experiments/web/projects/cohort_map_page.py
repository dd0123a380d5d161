"""The cohort map (the paper's Fig. 5): which people and sessions each cohort of a project drew, and
what cohorts share. Counts for every role but the rater; the people's and sessions' labels only
for roles that may read participant data (`Membership.can_read_text`)."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from experiments.access import AGGREGATE_READERS, membership_for
from experiments.analysis import figures
from experiments.analysis.cohort_map_data import project_draws
from experiments.core.cohort_map_counts import cohort_map, shared_keys


def _labelled(draws: dict, overlaps: list[dict]) -> dict:
    """Each cohort's people and sessions, and each overlapping pair's shared ones, by label."""
    cohorts = [{"name": name, "people": sorted({p for p, _ in pairs}, key=str),
                "sessions": sorted({s for _, s in pairs if s is not None}, key=str)} for name, pairs in draws.items()]
    pairs = [{**pair, **shared_keys(draws, pair["first"], pair["second"])} for pair in overlaps
             if pair["people"] or pair["sessions"]]
    return {"cohorts": cohorts, "pairs": pairs}


@login_required
def cohort_map_view(request, slug):
    """Template experiments/projects/cohort_map.html."""
    membership = membership_for(request, slug, roles=AGGREGATE_READERS)
    project = membership.project
    found = cohort_map(project_draws(project))
    rows = [{"name": name, "people": p, "sessions": s,
             "cells": [{"people": sp, "sessions": ss} for sp, ss in zip(row_p, row_s)]}
            for name, p, s, row_p, row_s in zip(found.names, found.people, found.sessions,
                                                 found.shared_people, found.shared_sessions)]
    context = {
        "membership": membership, "project": project, "map": found, "rows": rows, "pairs": found.pairs(),
        "overlap_figure": figures.cohort_overlap(list(found.names), found.shared_people, found.shared_sessions),
        "sizes_figure": figures.cohort_sizes(list(found.names), found.people, found.sessions),
    }
    if membership.can_read_text():
        # Labels are drawn by a second read: the counts above never depend on them.
        context["labelled"] = _labelled(project_draws(project, labels=True), found.pairs())
    return render(request, "experiments/projects/cohort_map.html", context)
