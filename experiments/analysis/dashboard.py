"""Numbers behind a run's dashboards (issue 5), from the grades and the request journal.

Everything here is numbers about tasks, never text, so viewers may see it. The result is
cached per run together with the sha256 of its inputs (the grade table, the planned
contrasts, the bootstrap settings): a page recomputes only when an input changed.
"""
from __future__ import annotations


import numpy as np
from django.db.models import Count, Q, Sum
from django.utils import timezone

from experiments.core import stats
from experiments.core.canonical import canonical_json, sha256_text
from experiments.analysis.grades import final_grades
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.core.conditions import MEMORY, ONE_SHOT, OWNWORDS, RECENCY, WHOLE_RECORD, get_condition
from experiments.models import AnalysisResult, ModelCall, Prediction, Run, Slot
from experiments.core.conditions import FINAL
from experiments.data import cohort_tasks

# The statistics code is part of what a cached result depends on.
DASHBOARD_VERSION = "1"
SWEEP_BUILDERS = {MEMORY: "memory", OWNWORDS: "OwnWords", RECENCY: "most recent sentences"}


def dashboard_inputs(run: Run) -> tuple[dict, str]:
    """The grade table and settings a dashboard is computed from, and their sha256."""
    table = final_grades(run)
    protocol = run.protocol
    inputs = {
        "version": DASHBOARD_VERSION,
        "grades": {c: {str(t): g for t, g in sorted(rows.items())} for c, rows in sorted(table.items())},
        "contrasts": protocol.contrasts,
        "bootstrap": protocol.bootstrap,
    }
    return table, sha256_text(canonical_json(inputs))


def dashboard_cached(run: Run) -> AnalysisResult | None:
    """The cached result if its inputs are still current, else None."""
    _, inputs_sha = dashboard_inputs(run)
    return AnalysisResult.objects.filter(run=run, inputs_sha256=inputs_sha).first()


def dashboard_refresh(run: Run) -> AnalysisResult:
    table, inputs_sha = dashboard_inputs(run)
    payload = dashboard_compute(run, table)
    result, _ = AnalysisResult.objects.update_or_create(
        run=run, defaults={"inputs_sha256": inputs_sha, "payload": payload, "computed_at": timezone.now()}
    )
    return result


def run_summary(payload: dict) -> dict:
    """The headline numbers kept on the run (run page, run_report) from a dashboard payload."""
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
    return {"conditions": conditions, "contrasts": contrasts,
            "family_tails": stats.family_tails(family) if family else None,
            "seed": payload["seed"], "draws": payload["draws"], "tasks": payload["planned_tasks"]}


def dashboard_compute(run: Run, table: dict[str, dict[int, int | None]]) -> dict:
    protocol = run.protocol
    tasks = cohort_tasks(protocol.cohort)
    task_ids = [t.pk for t in tasks]
    person = {t.pk: t.session.person_id for t in tasks}
    study = {t.pk: t.session.study_id for t in tasks}
    seed = int(protocol.bootstrap.get("seed", DEFAULT_SEED))
    draws = int(protocol.bootstrap.get("draws", DEFAULT_DRAWS))
    return {
        "seed": seed,
        "draws": draws,
        "planned_tasks": len(task_ids),
        "means": _means(protocol.conditions, table, task_ids, person, seed, draws),
        "contrasts": _contrasts(protocol.contrasts, table, task_ids, person, study, seed, draws),
        "sweep": _sweep(protocol.conditions, table, task_ids, person, seed, draws),
        "lengths": _answer_lengths(run),
        "cost": _cost(run),
    }


def _means(conditions, table, task_ids, person, seed, draws) -> list[dict]:
    rows = []
    for key in conditions:
        observed = [t for t in task_ids if table.get(key, {}).get(t) is not None]
        row = {"condition": key, "planned": len(task_ids), "graded": len(observed),
               "missing": len(task_ids) - len(observed), "mean": None, "lo": None, "hi": None}
        if observed:
            scores = stats.normalize([table[key][t] for t in observed])
            # The whole-person bootstrap of a mean is that of a "difference" against zero.
            result = stats.paired_bootstrap([person[t] for t in observed], scores, seed=seed, draws=draws)
            row.update(mean=result.estimate, lo=result.lo, hi=result.hi, people=result.n_people)
        rows.append(row)
    return rows


def _contrasts(planned, table, task_ids, person, study, seed, draws) -> list[dict]:
    family = [c for c in planned if c.get("family")]
    family_tails = stats.family_tails(len(family)) if family else None
    rows = []
    for contrast in planned:
        names = list(contrast["terms"])
        coefficients = [float(contrast["terms"][n]) for n in names]
        columns = [{t: table.get(n, {}).get(t) for t in task_ids} for n in names]
        paired = stats.paired_set(*columns, person=person)
        grades_matrix = [[np.nan if columns[j][t] is None else columns[j][t] for j in range(len(names))]
                         for t in task_ids]
        bounds = stats.missing_bounds(coefficients, grades_matrix)
        row = {"name": contrast["name"], "terms": contrast["terms"], "family": bool(contrast.get("family")),
               "criterion": contrast.get("criterion"), "planned": len(task_ids), "n_tasks": paired.n_tasks,
               "lost": paired.lost, "bound_lo": bounds.lo, "bound_hi": bounds.hi, "seed": seed, "draws": draws}
        if paired.n_tasks:
            diff = paired.diff(coefficients)
            people = paired.person
            pointwise = stats.paired_bootstrap(people, diff, seed=seed, draws=draws, keep_replicates=True)
            by_study = stats.study_bootstrap([study[t] for t in paired.keys], diff, seed=seed, draws=draws)
            wtl = stats.win_tie_loss(diff)
            sign = stats.sign_test(people, diff)
            decomposition = stats.threshold_decomposition(*paired.grades, coefficients=coefficients)
            row.update(
                estimate=pointwise.estimate, lo=pointwise.lo, hi=pointwise.hi, people=pointwise.n_people,
                person_weighted=stats.person_weighted(people, diff),
                study_lo=by_study.lo, study_hi=by_study.hi, studies=by_study.n_people,
                wins=wtl.wins, ties=wtl.ties, losses=wtl.losses,
                sign_p=sign.p_value, people_below=sign.negative, people_above=sign.positive,
                delta_at_least=list(decomposition.delta),
            )
            if row["family"]:
                # The same draws as the pointwise interval, read at the Bonferroni tails.
                family_lo, family_hi = np.percentile(
                    pointwise.replicates, [100 * family_tails[0], 100 * family_tails[1]], method="linear")
                row.update(family_lo=float(family_lo), family_hi=float(family_hi))
            if sorted(coefficients) == [-1.0, 1.0]:
                a, b = (0, 1) if coefficients[0] == 1 else (1, 0)
                row["transitions"] = stats.transition_table(paired.grades[b], paired.grades[a]).tolist()
                row["transition_axes"] = {"rows": names[b], "columns": names[a]}
            if row["criterion"] == "interval_above_zero":
                row["criterion_met"] = bool(pointwise.lo > 0)
        rows.append(row)
    return rows


def _sweep(conditions, table, task_ids, person, seed, draws) -> dict:
    """Figure 4 of the paper: mean by memory length, one line per evidence builder."""
    lines: dict[str, list[dict]] = {}
    reference = None
    for key in conditions:
        condition = get_condition(key)
        observed = [t for t in task_ids if table.get(key, {}).get(t) is not None]
        if not observed:
            continue
        scores = stats.normalize([table[key][t] for t in observed])
        if condition.evidence == WHOLE_RECORD:
            reference = float(np.mean(scores))
            continue
        if condition.evidence in SWEEP_BUILDERS and condition.workflow == ONE_SHOT and condition.memory_words:
            result = stats.paired_bootstrap([person[t] for t in observed], scores, seed=seed, draws=draws)
            lines.setdefault(SWEEP_BUILDERS[condition.evidence], []).append(
                {"words": condition.memory_words, "mean": result.estimate, "lo": result.lo, "hi": result.hi,
                 "condition": key, "tasks": len(observed)}
            )
    for points in lines.values():
        points.sort(key=lambda p: p["words"])
    shown = any(len(points) > 1 for points in lines.values())
    return {"lines": lines, "whole_record": reference, "shown": shown}


def _answer_lengths(run: Run) -> list[dict]:
    """Word and character counts of each condition's final answers (numbers, not text)."""
    lengths: dict[str, list[tuple[int, int]]] = {}
    for condition, text in Prediction.objects.filter(run=run, label=FINAL).exclude(text=None).values_list(
        "condition", "text"
    ):
        lengths.setdefault(condition, []).append((len(text.split()), len(text)))
    rows = []
    for condition in run.protocol.conditions:
        pairs = lengths.get(condition, [])
        words = [w for w, _ in pairs]
        rows.append({
            "condition": condition,
            "answers": len(words),
            "words": words,
            "median_words": float(np.median(words)) if words else None,
            "mean_chars": float(np.mean([c for _, c in pairs])) if pairs else None,
        })
    return rows


def _cost(run: Run) -> dict:
    """Calls, tokens and elapsed time per phase and per condition, from the journal.

    A token field the service did not report is unknown, not zero: `unreported` counts
    the attempts without it (App. B.3, Table 14).
    """
    calls = ModelCall.objects.filter(slot__run=run)
    aggregates = dict(
        attempts=Count("pk"),
        recoveries=Count("pk", filter=Q(basis=ModelCall.Basis.RECOVERY)),
        input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"),
        reasoning_tokens=Sum("reasoning_tokens"),
        elapsed_s=Sum("elapsed_s"),
        unreported=Count("pk", filter=Q(total_tokens__isnull=True)),
    )
    per_phase = list(calls.values("slot__phase").annotate(**aggregates).order_by("slot__phase"))
    for row in per_phase:
        row["phase"] = row.pop("slot__phase")
    # A shared generation (byte-identical messages) counts for every condition it served.
    per_condition = []
    for condition in run.protocol.conditions:
        slot_ids = Prediction.objects.filter(run=run, condition=condition).exclude(slot=None).values("slot_id")
        row = ModelCall.objects.filter(slot_id__in=slot_ids).aggregate(**aggregates)
        row["condition"] = condition
        row["slots"] = Slot.objects.filter(pk__in=slot_ids).count()
        per_condition.append(row)
    return {"per_phase": per_phase, "per_condition": per_condition}
