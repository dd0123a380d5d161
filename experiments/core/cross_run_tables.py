"""The paper's tables that read more than one run or the condition registry: Table 1 (OwnWords
against memory systems, with context in units of B and calls per answer), Table 16 (designs ×
cohorts), Table 30 and Figure 3a (history minus question alone, per generator). Pure Python and
NumPy, no Django: `analysis.report_items_cross_run` reads the runs and hands plain numbers here.

A difference "OwnWords minus X" is read from a run's cached planned contrasts when the run planned
it (or planned X minus OwnWords: the same draws, negated, so the interval's ends swap); otherwise it
is computed here with the whole-person bootstrap (`stats.paired_bootstrap`) at the run's seed and
draws, when that is cheap (`CHEAP_PERSON_DRAWS`), and left out with a note when it is not.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.core.canonical import canonical_json
from experiments.core.report_table import ReportInputs, ReportTable
from experiments.core.stats.paired import paired_bootstrap, paired_matrix

# People × draws of one bootstrap the report builder may compute itself (about a second here).
CHEAP_PERSON_DRAWS = 60_000_000
DIFFERENCE_DIGITS = 4


@dataclass(frozen=True)
class Difference:
    """A paired difference a − b (normalized units) with its 95% whole-person interval."""

    estimate: float
    lo: float
    hi: float
    n_tasks: int
    people: int | None
    source: str          # "planned", "planned, negated" or "computed"

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0


def planned_difference(contrasts: list[dict], a: str, b: str) -> Difference | None:
    """a − b from a dashboard payload's planned contrasts: the contrast {a: 1, b: −1}, or
    {b: 1, a: −1} negated; None when neither was planned or it has no estimate."""
    for contrast in contrasts:
        terms = {key: float(value) for key, value in contrast.get("terms", {}).items()}
        if contrast.get("estimate") is None or set(terms) != {a, b}:
            continue
        if terms == {a: 1.0, b: -1.0}:
            return Difference(contrast["estimate"], contrast["lo"], contrast["hi"], contrast["n_tasks"],
                              contrast.get("people"), "planned")
        if terms == {a: -1.0, b: 1.0}:
            # 0.0 − x, not −x: a zero difference stays +0.0 (no "−0.0000" in a table).
            return Difference(0.0 - contrast["estimate"], 0.0 - contrast["hi"], 0.0 - contrast["lo"],
                              contrast["n_tasks"], contrast.get("people"), "planned, negated")
    return None


def bootstrap_is_cheap(people: int, draws: int) -> bool:
    return people * draws <= CHEAP_PERSON_DRAWS


def computed_difference(grades_a, grades_b, task_ids, person, *, seed: int, draws: int) -> Difference | str | None:
    """a − b on the tasks both conditions graded (raw 0–3 grades, NaN missing), by the whole-person
    bootstrap at `seed` and `draws`; None without paired tasks; a sentence when it is not cheap."""
    paired = paired_matrix(np.vstack([grades_a, grades_b]), list(task_ids), person=person)
    if not paired.n_tasks:
        return None
    people = len(np.unique(paired.person))
    if not bootstrap_is_cheap(people, draws):
        return f"not computed here: {people} people × {draws} draws is beyond the report's budget"
    result = paired_bootstrap(paired.person, paired.diff((1, -1)), seed=seed, draws=draws)
    return Difference(result.estimate, result.lo, result.hi, result.n_tasks, result.n_people, "computed")


def mean_ratio(evidence_chars, budgets) -> float | None:
    """The mean over tasks of evidence characters / B (tasks with B > 0)."""
    chars, b = np.asarray(evidence_chars, dtype=float), np.asarray(budgets, dtype=float)
    kept = b > 0
    return float(np.mean(chars[kept] / b[kept])) if kept.any() else None


def merged_inputs(parts: list[ReportInputs]) -> ReportInputs:
    """One ReportInputs for an item built from several runs (draws: None when they differ)."""
    draws = {p.draws for p in parts if p.draws is not None}

    def union(name):
        return tuple(sorted({value for p in parts for value in getattr(p, name)}))

    return ReportInputs(runs=union("runs"), cohorts=union("cohorts"), seeds=union("seeds"),
                        draws=draws.pop() if len(draws) == 1 else None, offline_runs=union("offline_runs"))


# --- Table 1 ------------------------------------------------------------------------------------

TABLE1_COLUMNS = ("Method", "Context (B)", "Calls per answer", "Score", "OwnWords − method", "95% lo", "95% hi",
                  "Excludes 0", "Tasks")
TABLE1_DIGITS = {"Context (B)": 2, "Score": 4, "OwnWords − method": 4, "95% lo": 4, "95% hi": 4}
TABLE1_SIGNED = frozenset({"OwnWords − method", "95% lo", "95% hi"})


@dataclass(frozen=True)
class MethodRow:
    """One row's inputs: a label, its condition (None: not in the run), what was measured."""

    label: str
    condition: str | None
    context: float | None
    calls: str
    score: float | None
    difference: Difference | None = None
    why_missing: str = ""


def _difference_cells(d: Difference | None) -> tuple:
    if d is None:
        return None, None, None, None, None
    return d.estimate, d.lo, d.hi, "yes" if d.excludes_zero else "no", d.n_tasks


def table1(rows: list[MethodRow], inputs: ReportInputs, notes: tuple[str, ...] = ()) -> ReportTable:
    """Table 1: the first row is OwnWords itself (no difference), then each method."""
    cells = [(r.label, r.context, r.calls, r.score, *_difference_cells(r.difference)) for r in rows]
    extra = tuple(f"{r.label}: {r.why_missing}" for r in rows if r.why_missing)
    return ReportTable(TABLE1_COLUMNS, tuple(cells), inputs, dict(TABLE1_DIGITS), TABLE1_SIGNED, notes + extra)


# --- Table 16 -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CohortColumn:
    cohort: int
    name: str
    people: int


def table16(designs: list[tuple[str, str, float | None, str]], cohorts: list[CohortColumn],
            entries: dict[tuple[str, int], tuple[Difference, int]], inputs: ReportInputs,
            notes: tuple[str, ...] = ()) -> ReportTable:
    """Designs × cohorts: `designs` are (label, condition, length in B, calls); `entries` map
    (condition, cohort) to (OwnWords − design, the run it came from). Two columns per cohort: the
    entry and whether its 95% interval excludes zero (the paper's bold); "–" where not run."""
    columns = ["Design", "Length (B)", "Calls"]
    for c in cohorts:
        head = f"{c.name} ({c.people} people)"
        columns += [head, f"{head}: excludes 0"]
    rows, intervals = [], []
    for label, condition, length, calls in designs:
        row = [label, length, calls]
        for c in cohorts:
            entry = entries.get((condition, c.cohort))
            if entry is None:
                row += ["–", "–"]
                continue
            d, run = entry
            row += [d.estimate, "yes" if d.excludes_zero else "no"]
            intervals.append(f"{label}, {c.name}: {d.estimate:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}], "
                             f"{d.n_tasks} tasks, run {run} ({d.source})")
        rows.append(tuple(row))
    digits = {"Length (B)": 2, **{f"{c.name} ({c.people} people)": DIFFERENCE_DIGITS for c in cohorts}}
    signed = frozenset(f"{c.name} ({c.people} people)" for c in cohorts)
    return ReportTable(tuple(columns), tuple(rows), inputs, digits, signed, notes + tuple(intervals))


# --- Table 30 and Figure 3a ---------------------------------------------------------------------

# What may differ between runs compared as generator configurations: the generator itself, and
# how its calls were paced (concurrency, retry policy), the protocol's name and the code version.
IGNORED_FOR_GENERATOR_GROUPS = ("generator", "concurrency", "retry_policy", "name", "code_version")


def generator_signature(settings: dict) -> str:
    """The protocol settings that must agree for runs to differ only in the generator."""
    return canonical_json({k: v for k, v in settings.items() if k not in IGNORED_FOR_GENERATOR_GROUPS})


def generator_group(runs: list[dict]) -> list[dict]:
    """From runs given as {"run", "settings", "generator"} in pk order: the largest set of runs
    whose settings agree except for the generator and that have at least two different generators
    (ties: the earliest); [] when there is none."""
    groups: dict[str, list[dict]] = {}
    for run in runs:
        groups.setdefault(generator_signature(run["settings"]), []).append(run)
    best: list[dict] = []
    for members in groups.values():
        distinct = {canonical_json(m["generator"]) for m in members}
        if len(distinct) >= 2 and len(distinct) > len({canonical_json(m["generator"]) for m in best}):
            best = members
    return best


def generator_label(generator: dict) -> str:
    """A generator configuration in words: model, provider and any reasoning setting."""
    label = f"{generator.get('model') or '?'} ({generator.get('provider') or '?'}"
    for key in ("reasoning", "reasoning_effort", "temperature"):
        if generator.get(key) not in (None, ""):
            label += f", {key} {generator[key]}"
    return label + ")"


TABLE30_COLUMNS = ("Generator", "Run", "History", "Question alone", "History − question", "95% lo", "95% hi",
                   "Tasks", "People")
TABLE30_DIGITS = {"History": 4, "Question alone": 4, "History − question": 4, "95% lo": 4, "95% hi": 4}
TABLE30_SIGNED = frozenset({"History − question", "95% lo", "95% hi"})


def table30(rows: list[tuple[str, int, float | None, float | None, Difference | None]], inputs: ReportInputs,
            notes: tuple[str, ...] = ()) -> ReportTable:
    """One row per generator configuration: (label, run, history mean, question-alone mean, difference)."""
    cells = tuple((label, run, history, question,
                   *((d.estimate, d.lo, d.hi, d.n_tasks, d.people) if d else (None,) * 5))
                  for label, run, history, question, d in rows)
    return ReportTable(TABLE30_COLUMNS, cells, inputs, dict(TABLE30_DIGITS), TABLE30_SIGNED, notes)


def figure3a(table: ReportTable) -> dict:
    """Figure 3a as plotly data: one bar per generator, history minus question alone, with its
    95% whole-person interval as error bars."""
    index = {name: i for i, name in enumerate(table.columns)}
    shown = [r for r in table.rows if r[index["History − question"]] is not None]
    labels = [r[index["Generator"]] for r in shown]
    estimate = [r[index["History − question"]] for r in shown]
    return {
        "data": [{
            "type": "bar", "x": labels, "y": estimate, "name": "history − question alone",
            "marker": {"color": "#2f5d9b"},
            "error_y": {"type": "data", "symmetric": False,
                        "array": [r[index["95% hi"]] - r[index["History − question"]] for r in shown],
                        "arrayminus": [r[index["History − question"]] - r[index["95% lo"]] for r in shown]},
        }],
        "layout": {"yaxis": {"title": {"text": "history − question alone (normalized score)"}, "zeroline": True,
                             "automargin": True},
                   "xaxis": {"automargin": True}, "height": 320, "margin": {"l": 10, "r": 10, "t": 30, "b": 40}},
    }
