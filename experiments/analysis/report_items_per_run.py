"""Paper-report items computed from one finished run (paper App. F, I.2, I.6; Tables 26, 27).

Builders of the paper report (`core.report_table`), each ``NAME(project, runs)`` with ``runs`` the
project's sealed, finished runs in pk order; each picks the newest run that can feed it and
returns a `ReportTable` naming that run, its cohort, seed and draws, or `Missing` with the
ready-made template (`core.paper_protocols`) that would produce the input:

- ``table8``: the post hoc contrasts (one-shot memories and the current dialogue, each minus the whole
  record) with the planned contrasts' estimator;
- ``table26``: concrete minus trait memory (one-shot) by tertile of the session length gap Δn;
- ``table27``: its threshold decomposition on "specific" and other reference answers;
- ``appendix_f_centrality`` and ``appendix_f_routing``: candidates' centrality in their pool
  against their grade, and a workflow − one-shot split by pool agreement, copy status, length ratio;
- ``appendix_i6_sampled_agreement``: two judges' agreement on a seeded, stratified sample.

They are computed with the run's robustness tables and kept in their cache (`analysis.tables`,
`analysis.per_run_tables`; App. I.6 with its default sample, on the re-grade run): a builder reads
the cache when it is current and computes the item itself only when it is not (a run analysed
before these items existed), or for another sample size or seed. ``page_items`` gives the kept
items to the run tables page. Only numbers leave this module; intervals use the runs' recorded
seeds and draws.
"""
from __future__ import annotations

from experiments.analysis.per_run_tables import (
    AGREEMENT_ITEM, COMMON, COMPUTED, CONCRETE_ONE_SHOT, PER_RUN_KEY, TRAIT_ONE_SHOT, agreement_table, feeds,
    item_from_json,
)
from experiments.analysis.tables import tables_cached
from experiments.core.kinds import REGRADE
from experiments.core.report_format import display_rows
from experiments.core.report_table import Missing
from experiments.core.stats.judge_sample import DEFAULT_SAMPLE_SEED, DEFAULT_SAMPLE_SIZE
from experiments.models import Run

MISSING = {
    "table8": "Table 8 needs a finished run with both one-shot memories, the current dialogue and the whole record: "
              "the common experiment (its post hoc contrasts are computed on it, no run of their own).",
    "table26": "Table 26 needs a finished run with the concrete and the trait memory, one-shot "
               f"({CONCRETE_ONE_SHOT}, {TRAIT_ONE_SHOT}): the common experiment.",
    "table27": "Table 27 needs a finished run with the concrete and the trait memory, one-shot "
               f"({CONCRETE_ONE_SHOT}, {TRAIT_ONE_SHOT}): the common experiment.",
    "appendix_f_centrality": "The centrality check of App. F needs a finished run with fusion or selection over "
                             "three candidates (the common experiment's pools).",
    "appendix_f_routing": "The routing check of App. F needs a finished run with fusion or selection over three "
                          "candidates (the common experiment's pools).",
}


def newest_feeding(runs, name: str) -> Run | None:
    """The newest of ``runs`` that can feed the item ``name`` (not a re-grade)."""
    for run in reversed(list(runs)):
        if name in feeds(run):
            return run
    return None


def kept_item(run: Run, name: str, template: str | None = COMMON):
    """The item as the run's current robustness-tables cache keeps it, or None (no current cache)."""
    cache = tables_cached(run)
    kept = ((cache.payload or {}).get(PER_RUN_KEY) or {}).get(name) if cache is not None else None
    return None if kept is None else item_from_json(kept, template)


def _per_run_item(runs, name: str):
    run = newest_feeding(runs, name)
    if run is None:
        return Missing(MISSING[name], COMMON)
    item = kept_item(run, name)
    return item if item is not None else COMPUTED[name](run)


def table8(project, runs):
    """Table 8: post hoc descriptive contrasts on the common run (App. B.3)."""
    return _per_run_item(runs, "table8")


def table26(project, runs):
    """Table 26: concrete minus trait memory by tertile of the session length gap Δn (App. I.2)."""
    return _per_run_item(runs, "table26")


def table27(project, runs):
    """Table 27: threshold decomposition of concrete minus trait memory by task class (App. I.2)."""
    return _per_run_item(runs, "table27")


def appendix_f_centrality(project, runs):
    """App. F: a candidate's centrality in its pool against its grade, per SD, pools with unequal grades."""
    return _per_run_item(runs, "appendix_f_centrality")


def appendix_f_routing(project, runs):
    """App. F: a workflow minus the one-shot by pool agreement, copy status and length ratio."""
    return _per_run_item(runs, "appendix_f_routing")


# --- App. I.6: two judges on a seeded, stratified sample ------------------------------------------

def newest_regrade(runs) -> Run | None:
    """The newest re-grade run (a second judge over a finished run's answers) among ``runs``."""
    for run in reversed(list(runs)):
        if run.protocol.kind == REGRADE:  # a pairwise judge names a source too, but grades nothing
            return run
    return None


def appendix_i6_sampled_agreement(project, runs, *, n: int = DEFAULT_SAMPLE_SIZE,
                                  sample_seed: int = DEFAULT_SAMPLE_SEED):
    """App. I.6: the two judges' agreement on a sample of ``n`` answers, evenly over the conditions; the
    default sample is kept with the re-grade run's robustness tables, another is computed here."""
    run = newest_regrade(runs)
    if run is None:
        return Missing("App. I.6 needs a second judge: re-grade a finished run's answers with another judge (the "
                       "run page's Re-grade, or manage.py regrade_run), then finish that run.")
    if (n, sample_seed) == (DEFAULT_SAMPLE_SIZE, DEFAULT_SAMPLE_SEED):
        item = kept_item(run, AGREEMENT_ITEM, template=None)
        if item is not None:
            return item
    return agreement_table(run, n, sample_seed)


PAGE_TITLES = {
    "table26": ("Table 26", "Concrete minus trait memory by tertile of the session length gap Δn (App. I.2)"),
    "table27": ("Table 27", "Threshold decomposition of the concrete-minus-trait difference by task class (App. I.2)"),
    "appendix_f_centrality": ("App. F", "A candidate's centrality in its pool against its grade"),
    "appendix_f_routing": ("App. F", "Routing by pool agreement, copy status or length ratio"),
    AGREEMENT_ITEM: ("App. I.6", "The two judges' agreement on a seeded, stratified sample of answers"),
    "judge_invariance": ("Wording control", "Judge invariance: each answer and its paraphrase graded by the same "
                         "judge (beyond the paper)"),
    "contrasts_under_paraphrase": ("Wording control", "The planned contrasts under the paraphrase grades "
                                   "(beyond the paper)"),
    "length_control": ("Length control", "The planned contrasts at equal length (beyond the paper)"),
}


def page_items(tables_payload: dict | None) -> list[dict]:
    """The per-run items the robustness tables' cache keeps, for the run tables page: numbers only,
    each cell as the paper rounds it (`core.report_format`)."""
    out = []
    for name, kept in ((tables_payload or {}).get(PER_RUN_KEY) or {}).items():
        label, title = PAGE_TITLES.get(name, (name, name))
        item = {"id": label, "slug": name, "title": title, "table": None, "cells": [], "reason": kept.get("missing")}
        if "missing" not in kept:
            item.update(table=kept, cells=display_rows(kept))
        out.append(item)
    return out
