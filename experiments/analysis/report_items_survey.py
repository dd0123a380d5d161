"""Paper-report items of the Twin-2K-500 survey benchmark (paper App. H; Tables 21, 22 and 23).

Builders of the paper report (`core.report_table`), each ``NAME(project, runs)`` with ``runs`` the
project's sealed, finished runs in pk order. They read only the numbers a survey run's analysis
cached on the run (`analysis.survey_results.survey_summary`: per-condition means, paired
differences with whole-person intervals at the run's recorded seed and draws); no bootstrap runs
here, and a paired difference the analysis did not compute is listed as not computed, never made up.

- ``table21``: runs with no screener in any condition (the protocol's sealed `survey_screener`
  off): per run, each paired difference in accuracy and in normalized deviation with its interval;
- ``table22``: the standard one-pass run (screener on, a sample that is not a further sample):
  each condition's means, the human test-retest row, then the paired differences;
- ``table23``: the same layout for a run on a further sample of new respondents (a sample that
  excludes earlier ones, `data.surveys.draw_further_sample`).

The app has no ready-made survey protocol template, so `Missing.template` is None.
"""
from __future__ import annotations

from experiments.core.report_table import Missing, ReportInputs, ReportTable
from experiments.core.survey.prompt import SURVEY_CONDITIONS, condition_label
from experiments.core.survey.scores import ACCURACY, DEVIATION, HUMAN_RETEST, PAPER_PAIRS
from experiments.data.surveys import is_further_sample
from experiments.models import Protocol, Run

SURVEY_TEMPLATE = None  # no ready-made survey protocol in `core.paper_protocols`
DIGITS = 4  # the paper prints survey differences and means to four decimals
OFFLINE_NOTE = ("Computed from a run on the offline stand-in (a deterministic lexical rule, not a model): "
                "these figures test the pipeline, they are not model results.")
SYNTHETIC_NOTE = "The respondents are synthetic (invented in the Twin-2K-500 structure), not the panel's."

TABLE21_COLUMNS = ("Run", "Respondents", "Difference", "Accuracy", "Accuracy 95% lo", "Accuracy 95% hi",
                   "Normalized deviation", "Deviation 95% lo", "Deviation 95% hi")
NUMBER_COLUMNS = ("Accuracy", "Accuracy 95% lo", "Accuracy 95% hi", "Normalized deviation", "Deviation 95% lo",
                  "Deviation 95% hi")
# Tables 22 and 23: a condition row fills the means, a difference row the signed differences.
MEAN_COLUMNS = NUMBER_COLUMNS
DIFFERENCE_COLUMNS = ("Accuracy difference", "Accuracy diff. 95% lo", "Accuracy diff. 95% hi",
                      "Deviation difference", "Deviation diff. 95% lo", "Deviation diff. 95% hi")
MEANS_COLUMNS = ("Condition or difference", *MEAN_COLUMNS, "Respondents", "Items", *DIFFERENCE_COLUMNS)


# --- which runs ----------------------------------------------------------------------------------

def shows_screener(protocol: Protocol) -> bool:
    """Whether the protocol's conditions show the screener (the sealed option; on unless turned off)."""
    return protocol.survey_screener


def survey_runs(runs) -> list[Run]:
    """The survey runs among ``runs`` whose analysis is cached, in the order given."""
    return [run for run in runs if run.protocol.kind == Protocol.Kind.SURVEY
            and (run.analysis or {}).get("kind") == "survey"]


def is_offline(run: Run) -> bool:
    return (run.protocol.generator or {}).get("provider") == "offline"


def report_inputs(chosen: list[Run]) -> ReportInputs:
    return ReportInputs(runs=tuple(r.pk for r in chosen),
                        cohorts=tuple(dict.fromkeys(r.protocol.cohort_id for r in chosen)),
                        seeds=tuple(dict.fromkeys(int(r.analysis["seed"]) for r in chosen)),
                        draws=int(chosen[0].analysis["draws"]) if len({r.analysis["draws"] for r in chosen}) == 1
                        else None,
                        offline_runs=tuple(r.pk for r in chosen if is_offline(r)))


def common_notes(chosen: list[Run]) -> tuple[str, ...]:
    notes = []
    if len({r.analysis["draws"] for r in chosen}) > 1:
        notes.append("Draws per run: " + ", ".join(f"run {r.pk}: {r.analysis['draws']}" for r in chosen) + ".")
    if any(r.analysis.get("synthetic") for r in chosen):
        notes.append(SYNTHETIC_NOTE)
    if any(is_offline(r) for r in chosen):
        notes.append(OFFLINE_NOTE)
    return tuple(notes)


# --- rows ----------------------------------------------------------------------------------------

def label(key: str, *, screener: bool = True) -> str:
    if key == HUMAN_RETEST:
        return "human test–retest (waves 1–3 answers)"
    return condition_label(key, screener=screener) if key in SURVEY_CONDITIONS else key


def ordered_pairs(analysis: dict) -> list[tuple[str, str]]:
    """The (first, second) pairs the analysis holds: the paper's order first, then the rest as cached."""
    cached = list(dict.fromkeys((c["first"], c["second"]) for c in analysis.get("contrasts", [])))
    return [pair for pair in PAPER_PAIRS if pair in cached] + [pair for pair in cached if pair not in PAPER_PAIRS]


def difference_cells(analysis: dict, first: str, second: str) -> tuple[list, int | None]:
    """[accuracy, lo, hi, deviation, lo, hi] of one cached difference (None where not computed)
    and its respondents."""
    by_metric = {c["metric"]: c for c in analysis.get("contrasts", []) if (c["first"], c["second"]) == (first, second)}
    cells, people = [], None
    for metric in (ACCURACY, DEVIATION):
        contrast = by_metric.get(metric)
        cells += [contrast["estimate"], contrast["lo"], contrast["hi"]] if contrast else [None, None, None]
        if contrast:
            people = contrast["people"] if people is None else max(people, contrast["people"])
    return cells, people


def missing_paper_pairs(analysis: dict, conditions) -> list[tuple[str, str]]:
    cached = set(ordered_pairs(analysis))
    return [pair for pair in PAPER_PAIRS if set(pair) <= set(conditions) and pair not in cached]


# --- the tables ----------------------------------------------------------------------------------

def table21(project, runs) -> ReportTable | Missing:
    """Table 21: earlier runs with no screener in any condition, paired differences per run."""
    chosen = [run for run in survey_runs(runs) if not shows_screener(run.protocol)]
    if not chosen:
        return Missing("no finished survey run with no screener in any condition (a survey protocol with the "
                       "\"no screener\" option)", SURVEY_TEMPLATE)
    rows = []
    for run in chosen:
        for first, second in ordered_pairs(run.analysis):
            cells, people = difference_cells(run.analysis, first, second)
            rows.append((run.pk, people, f"{label(first, screener=False)} − {label(second, screener=False)}",
                         *cells))
    notes = ["Paired differences (first minus second) over the items scored in both, with 95% whole-person "
             "intervals at each run's recorded seed and draws; accuracy: higher is better, normalized deviation "
             "on ordinal items: lower is better; –: not computed.",
             "The paper's first run reports three decimals; every run here is printed to four."]
    return ReportTable(TABLE21_COLUMNS, tuple(rows), report_inputs(chosen), digits=dict.fromkeys(NUMBER_COLUMNS, DIGITS),
                       signed=frozenset(NUMBER_COLUMNS), notes=(*notes, *common_notes(chosen)))


def means_and_differences(run: Run, *, screener: bool = True) -> tuple[tuple, tuple[str, ...]]:
    """Tables 22 and 23: each condition's means in the paper's order and the human test-retest row,
    with their cached intervals, then every cached paired difference, with the respondents it pairs
    (Items: scored items of a condition row)."""
    analysis = run.analysis
    means = {row["condition"]: row for row in analysis["means"]}
    order = [key for key in SURVEY_CONDITIONS if key in means] + [k for k in means if k not in SURVEY_CONDITIONS]
    rows = [(label(key, screener=screener), *mean_cells(means[key]), means[key]["people"], means[key]["items"],
             *[None] * len(DIFFERENCE_COLUMNS)) for key in order]
    for first, second in ordered_pairs(analysis):
        cells, people = difference_cells(analysis, first, second)
        rows.append((f"{label(first, screener=screener)} − {label(second, screener=screener)}",
                     *[None] * len(MEAN_COLUMNS), people, None, *cells))
    notes = [f"Run {run.pk}: {analysis['respondents']} respondents; the condition rows are means over respondents "
             "(each counts once) with 95% whole-person intervals (– where the run was analysed before they were "
             "kept), the difference rows paired differences (first minus second) over the items "
             f"scored in both with 95% whole-person bootstrap intervals (seed {analysis['seed']}, "
             f"{analysis['draws']} draws). Accuracy: higher is better; normalized deviation on ordinal items: "
             "lower is better."]
    notes += [f"Prespecified criterion: {c['sentence']}." for c in analysis.get("criteria", [])]
    absent = missing_paper_pairs(analysis, run.protocol.conditions)
    if absent:
        notes.append("Not computed by this run's analysis (not among its planned contrasts): "
                     + "; ".join(f"{label(a)} − {label(b)}" for a, b in absent) + ".")
    return tuple(rows), tuple(notes)


def mean_cells(row: dict) -> tuple:
    """A condition row's accuracy and deviation means with their cached intervals (None if not kept)."""
    return (row["accuracy"], row.get("accuracy_lo"), row.get("accuracy_hi"),
            row["deviation"], row.get("deviation_lo"), row.get("deviation_hi"))


def _means_table(run: Run) -> ReportTable:
    rows, notes = means_and_differences(run, screener=shows_screener(run.protocol))
    return ReportTable(MEANS_COLUMNS, rows, report_inputs([run]),
                       digits=dict.fromkeys((*MEAN_COLUMNS, *DIFFERENCE_COLUMNS), DIGITS),
                       signed=frozenset(DIFFERENCE_COLUMNS), notes=(*notes, *common_notes([run])))


def table22(project, runs) -> ReportTable | Missing:
    """Table 22: the standard one-pass run (the newest survey run with the screener on a sample that
    is not a further sample)."""
    chosen = [run for run in survey_runs(runs)
              if shows_screener(run.protocol) and not is_further_sample(run.protocol.cohort)]
    if not chosen:
        return Missing("no finished survey run with the screener on a development or reported sample",
                       SURVEY_TEMPLATE)
    return _means_table(chosen[-1])


def table23(project, runs) -> ReportTable | Missing:
    """Table 23: the newest survey run with the screener on a further sample of new respondents."""
    chosen = [run for run in survey_runs(runs)
              if shows_screener(run.protocol) and is_further_sample(run.protocol.cohort)]
    if not chosen:
        return Missing("no finished survey run on a second sample of new respondents (a sample drawn excluding "
                       "the earlier samples: manage.py survey_sample, or the study page)", SURVEY_TEMPLATE)
    run = chosen[-1]
    table = _means_table(run)
    excludes = run.protocol.cohort.rule.get("excludes", [])
    note = (f"Sample {run.protocol.cohort.name!r}: new respondents, none of them in "
            + (", ".join(repr(name) for name in excludes) or "any earlier sample") + ".")
    return ReportTable(table.columns, table.rows, table.inputs, digits=table.digits, signed=table.signed,
                       notes=(note, *table.notes))
