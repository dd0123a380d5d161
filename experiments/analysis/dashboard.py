"""Numbers behind a run's dashboards, from the grades and the request journal.

Everything here is numbers about tasks, never text, so viewers may see it. The result is
cached per run together with the sha256 of its inputs (the grade table, the planned
contrasts, the bootstrap settings): a page recomputes only when an input changed.
"""
from __future__ import annotations


import numpy as np
from django.db.models import Count, Q, Sum
from django.utils import timezone

from experiments.core import stats
from experiments.core.candidates import is_integer_grade_row
from experiments.core.canonical import canonical_json, sha256_text
from experiments.analysis.answers_sql import answer_length_counts
from experiments.analysis.cost_sql import COST_COLUMNS, cost_per_condition
from experiments.analysis.grades import GradeMatrix, grade_matrix
from experiments.core.stats.arguments import bootstrap_tails
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.core.conditions import MEMORY, ONE_SHOT, OWNWORDS, RECENCY, WHOLE_RECORD, get_condition
from experiments.models import AnalysisResult, ModelCall, Run
from experiments.models.runs import PHASE_ORDER
from experiments.core.conditions import FINAL
from experiments.core.criteria import CriteriaError, evaluate_criteria

# The statistics code is part of what a cached result depends on.
DASHBOARD_VERSION = "2"
POINTWISE_TAILS = bootstrap_tails(0.95, None)  # paired_bootstrap's default level
SWEEP_BUILDERS = {MEMORY: "memory", OWNWORDS: "OwnWords", RECENCY: "most recent sentences"}


def dashboard_inputs(run: Run) -> tuple[GradeMatrix, str]:
    """The grades a dashboard is computed from (by aggregate SQL), and the sha256 of its inputs."""
    protocol = run.protocol
    matrix = grade_matrix(run, _analysed_conditions(protocol))
    inputs = {
        "version": DASHBOARD_VERSION,
        "grades": matrix.sha256(),
        "contrasts": protocol.contrasts,
        "bootstrap": protocol.bootstrap,
    }
    return matrix, sha256_text(canonical_json(inputs))


def _analysed_conditions(protocol) -> list[str]:
    return list(dict.fromkeys([*protocol.conditions, *(n for c in protocol.contrasts for n in c["terms"])]))


def dashboard_cached(run: Run) -> AnalysisResult | None:
    """The cached result if its inputs are still current, else None."""
    return dashboard_cached_with_grades(run)[0]


def dashboard_cached_with_grades(run: Run) -> tuple[AnalysisResult | None, GradeMatrix]:
    """`dashboard_cached` and the grades it was checked against (one read of them), for numbers
    counted from the grades on the page itself (the grade distributions)."""
    matrix, inputs_sha = dashboard_inputs(run)
    return AnalysisResult.objects.filter(run=run, inputs_sha256=inputs_sha).first(), matrix


def dashboard_refresh(run: Run) -> AnalysisResult:
    matrix, inputs_sha = dashboard_inputs(run)
    payload = dashboard_compute(run, matrix)
    result, _ = AnalysisResult.objects.update_or_create(
        run=run, defaults={"inputs_sha256": inputs_sha, "payload": payload, "computed_at": timezone.now()}
    )
    return result


def run_summary(payload: dict, criteria=()) -> dict:
    """The headline numbers kept on the run (run page, run_report) from a dashboard payload, with
    the verdicts of the protocol's prespecified `criteria` (evaluated on the payload's full rows,
    which hold the person-weighted estimates and bounds the summary leaves out)."""
    conditions = {m["condition"]: {k: m[k] for k in ("planned", "graded", "missing", "mean")}
                  for m in payload["means"]}
    contrasts = []
    for c in payload["contrasts"]:
        entry = {k: c[k] for k in ("name", "terms", "planned", "n_tasks", "lost", "seed", "draws", "family",
                                   "criterion")}
        if "estimate" in c:
            entry.update({k: c[k] for k in ("estimate", "lo", "hi", "wins", "ties", "losses")}, n_people=c["people"])
        entry.update({k: c[k] for k in ("family_lo", "family_hi", "criterion_met") if k in c})
        contrasts.append(entry)
    family = sum(1 for c in payload["contrasts"] if c["family"])
    summary = {"conditions": conditions, "contrasts": contrasts,
               "family_tails": stats.family_tails(family) if family else None,
               "seed": payload["seed"], "draws": payload["draws"], "tasks": payload["planned_tasks"]}
    if criteria:
        try:
            summary["verdicts"] = evaluate_criteria(criteria, {c["name"]: c for c in payload["contrasts"]})
        except CriteriaError as exc:
            summary["criteria_problem"] = f"the protocol's criteria cannot be evaluated: {exc}"
    return summary


class _SharedDraws:
    """The dashboard's bootstraps, collected and then computed on one stream of draws.

    Every interval of a dashboard uses the run's seed, so intervals over the same people
    resample the same people: `stats.shared_bootstraps` draws them once for all,
    with results identical to one `paired_bootstrap` per interval.
    """

    def __init__(self, seed: int, draws: int):
        self.seed, self.draws = seed, draws
        self.requests: list[stats.BootstrapRequest] = []
        self.fills = []

    def add(self, cluster, diff, fill, *tails) -> None:
        """Bootstrap at the pointwise 95% tails and any further ``tails``; ``fill(*results)``."""
        self.requests.append(stats.BootstrapRequest(cluster, diff, (POINTWISE_TAILS, *tails)))
        self.fills.append(fill)

    def compute(self) -> None:
        results = stats.shared_bootstraps(self.requests, seed=self.seed, draws=self.draws)
        for fill, intervals in zip(self.fills, results):
            fill(*intervals)


def dashboard_compute(run: Run, matrix: GradeMatrix) -> dict:
    protocol = run.protocol
    seed = int(protocol.bootstrap.get("seed", DEFAULT_SEED))
    draws = int(protocol.bootstrap.get("draws", DEFAULT_DRAWS))
    shared = _SharedDraws(seed, draws)
    means = _means(protocol.conditions, matrix, shared)
    contrasts = _contrasts(protocol.contrasts, matrix, shared, seed, draws)
    shared.compute()
    return {
        "seed": seed,
        "draws": draws,
        "planned_tasks": len(matrix.task_ids),
        "means": means,
        "contrasts": contrasts,
        "sweep": _sweep(protocol.conditions, means),
        "lengths": _answer_lengths(run),
        "cost": _cost(run),
    }


def descriptive_contrasts(contrasts, matrix: GradeMatrix, *, seed: int, draws: int) -> list[dict]:
    """Contrasts made after the fact (paper Table 8): the dashboard's contrast rows on ``matrix``
    with the run's seed and draws, none of them in a family (pointwise intervals, unadjusted)."""
    shared = _SharedDraws(seed, draws)
    rows = _contrasts([{**c, "family": False, "criterion": None} for c in contrasts], matrix, shared, seed, draws)
    shared.compute()
    return rows


def _means(conditions, matrix: GradeMatrix, shared: _SharedDraws) -> list[dict]:
    rows = []
    for key in conditions:
        grades = matrix.row(key)
        observed = ~np.isnan(grades)
        row = {"condition": key, "planned": grades.size, "graded": int(observed.sum()),
               "missing": int(grades.size - observed.sum()), "mean": None, "lo": None, "hi": None}
        if observed.any():
            def fill(result, row=row):
                row.update(mean=result.estimate, lo=result.lo, hi=result.hi, people=result.n_people)
            # The whole-person bootstrap of a mean is that of a "difference" against zero.
            shared.add(matrix.person[observed], stats.normalize(grades[observed]), fill)
        rows.append(row)
    return rows


def _contrasts(planned, matrix: GradeMatrix, shared: _SharedDraws, seed, draws) -> list[dict]:
    family = [c for c in planned if c.get("family")]
    family_tails = stats.family_tails(len(family)) if family else None
    rows = []
    for contrast in planned:
        names = list(contrast["terms"])
        coefficients = [float(contrast["terms"][n]) for n in names]
        columns = np.vstack([matrix.row(n) for n in names])
        paired = stats.paired_matrix(columns, matrix.task_ids, person=matrix.person)
        bounds = stats.missing_bounds(coefficients, np.ascontiguousarray(columns.T))
        row = {"name": contrast["name"], "terms": contrast["terms"], "family": bool(contrast.get("family")),
               "criterion": contrast.get("criterion"), "planned": columns.shape[1], "n_tasks": paired.n_tasks,
               "lost": paired.lost, "bound_lo": bounds.lo, "bound_hi": bounds.hi, "seed": seed, "draws": draws}
        if paired.n_tasks:
            diff = paired.diff(coefficients)
            people = paired.person
            kept = ~np.isnan(columns).any(axis=0)
            wtl = stats.win_tie_loss(diff)
            sign = stats.sign_test(people, diff)
            # A candidate mean is not a whole grade: it has no thresholds and no transitions.
            whole = all(is_integer_grade_row(g) for g in paired.grades)
            decomposition = (stats.threshold_decomposition(*paired.grades, coefficients=coefficients)
                             if whole else None)
            row.update(
                estimate=None, lo=None, hi=None, people=None,        # filled from the shared draws
                person_weighted=stats.person_weighted(people, diff),
                study_lo=None, study_hi=None, studies=None,
                wins=wtl.wins, ties=wtl.ties, losses=wtl.losses,
                sign_p=sign.p_value, people_below=sign.negative, people_above=sign.positive,
                delta_at_least=list(decomposition.delta) if decomposition else None,
            )

            def fill(pointwise, family_interval=None, row=row):
                row.update(estimate=pointwise.estimate, lo=pointwise.lo, hi=pointwise.hi, people=pointwise.n_people)
                if family_interval is not None:
                    # The same draws as the pointwise interval, read at the Bonferroni tails.
                    row.update(family_lo=family_interval.lo, family_hi=family_interval.hi)
                if row["criterion"] == "interval_above_zero":
                    row["criterion_met"] = bool(pointwise.lo > 0)

            def fill_study(by_study, row=row):
                row.update(study_lo=by_study.lo, study_hi=by_study.hi, studies=by_study.n_people)

            shared.add(people, diff, fill, *([family_tails] if row["family"] else []))
            shared.add(matrix.study[kept], diff, fill_study)     # whole studies resampled
            if sorted(coefficients) == [-1.0, 1.0] and whole:
                a, b = (0, 1) if coefficients[0] == 1 else (1, 0)
                row["transitions"] = stats.transition_table(paired.grades[b], paired.grades[a]).tolist()
                row["transition_axes"] = {"rows": names[b], "columns": names[a]}
        rows.append(row)
    return rows


def _sweep(conditions, means: list[dict]) -> dict:
    """Figure 4 of the paper: mean by memory length, one line per evidence builder.

    A point is its condition's mean with its interval: the same bootstrap (same people,
    scores and seed), so it is read from ``means`` instead of being drawn again.
    """
    lines: dict[str, list[dict]] = {}
    reference = None
    by_condition = {m["condition"]: m for m in means}
    for key in conditions:
        condition = get_condition(key)
        mean = by_condition[key]
        if not mean["graded"]:
            continue
        if condition.evidence == WHOLE_RECORD:
            reference = mean["mean"]
            continue
        if condition.evidence in SWEEP_BUILDERS and condition.workflow == ONE_SHOT and condition.memory_words:
            lines.setdefault(SWEEP_BUILDERS[condition.evidence], []).append(
                {"words": condition.memory_words, "mean": mean["mean"], "lo": mean["lo"], "hi": mean["hi"],
                 "condition": key, "tasks": mean["graded"]}
            )
    for points in lines.values():
        points.sort(key=lambda p: p["words"])
    shown = any(len(points) > 1 for points in lines.values())
    return {"lines": lines, "whole_record": reference, "shown": shown}


def _answer_lengths(run: Run) -> list[dict]:
    """Word and character counts of each condition's final answers (numbers, not text).

    Words are ``len(text.split())``: the database counts them (runs of characters outside
    Python's whitespace) and returns one row per distinct (condition, words, characters), so no
    answer text travels.
    """
    counts: dict[str, list[tuple[int, int, int]]] = {}       # condition → (words, chars, answers)
    for condition, words, chars, n in answer_length_counts(run.pk, FINAL):
        counts.setdefault(condition, []).append((words, chars, n))
    rows = []
    for condition in run.protocol.conditions:
        table = np.array(sorted(counts.get(condition, [])), dtype=np.int64).reshape(-1, 3)
        words = np.repeat(table[:, 0], table[:, 2])
        # Integer counts: the mean is exact whatever the order of the answers.
        chars = np.repeat(table[:, 1], table[:, 2])
        rows.append({
            "condition": condition,
            "answers": int(words.size),
            "words": words.tolist(),
            "median_words": float(np.median(words)) if words.size else None,
            "mean_chars": float(np.mean(chars)) if chars.size else None,
        })
    return rows


def _cost(run: Run) -> dict:
    """Calls, tokens and elapsed time per phase and per condition, from the journal.

    A token field the service did not report is unknown, not zero: `unreported` counts
    the attempts without it (App. B.3, Table 14).
    """
    # The run and phase each call copies from its slot (`ModelCall.run`, `.phase`): no join with the
    # run's slots (on the analysis phase's path: 35 ms -> 20 ms on a run of 2,560 tasks).
    calls = ModelCall.objects.filter(run=run)
    aggregates = dict(
        attempts=Count("pk"),
        recoveries=Count("pk", filter=Q(basis=ModelCall.Basis.RECOVERY)),
        input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"),
        reasoning_tokens=Sum("reasoning_tokens"),
        elapsed_s=Sum("elapsed_s"),
        unreported=Count("pk", filter=Q(total_tokens__isnull=True)),
    )
    per_phase = list(calls.values("phase").annotate(**aggregates).order_by("phase"))
    # In pipeline order (memories, generation, decisions, judging), as the run went.
    per_phase.sort(key=lambda r: (PHASE_ORDER.index(r["phase"]) if r["phase"] in PHASE_ORDER else len(PHASE_ORDER),
                                  r["phase"]))
    # A shared generation (byte-identical messages) counts for every condition it served. One grouped
    # statement for all conditions, not two per condition (`_cost` on 12 conditions of 3,200 tasks: 176-181 ms
    # -> 57-83 ms).
    used = cost_per_condition(run.pk)
    no_calls = {"attempts": 0, "recoveries": 0, "input_tokens": None, "output_tokens": None,
                "reasoning_tokens": None, "elapsed_s": None, "unreported": 0, "slots": 0}
    per_condition = []
    for condition in run.protocol.conditions:
        row = used.get(condition, no_calls)
        per_condition.append({**{name: row[name] for name in COST_COLUMNS}, "condition": condition,
                              "slots": row["slots"]})
    return {"per_phase": per_phase, "per_condition": per_condition}
