"""A run's candidate pools: pickers as contrasts and the App. I.3 diagnostics.

Reads each fusion / selection pool's candidates (texts, stored grades, display order), the
selector's choice and fusion's answer, runs the pickers (`core.pickers`, and the rerankers
named in ``settings.OWNWORDS_RANKERS``, `core.rankers`) and the diagnostics
(`core.stats.pools`), all intervals on one shared stream of draws with the run's seed.

The result is numbers only, cached per run with the sha256 of its inputs (every pool
prediction's status, answer hash, grade, choice and copy; the seed and draws; the rankers'
names and versions; POOLS_VERSION), as the dashboard's is. The rankers' names and versions
are recorded in the result, not in the protocol's seal: a picker is an analysis of sealed,
graded outputs and never sends a request, so it can be added after a run (as PairRM was in
the paper) without touching the seal.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
from django.conf import settings
from django.utils import timezone

from experiments.core import pickers
from experiments.core.candidates import CANDIDATE_LABELS, display_key, pool_of
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.conditions import FINAL, FUSION, SELECTION, get_condition
from experiments.core.parsers import candidate_display_order
from experiments.core.rankers import describe, load_ranker, ranked_pick
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.core.stats.pool_stats import Draws, Pool, picker_rows, pool_diagnostics
from experiments.models import CohortTask, Memory, PoolAnalysisResult, Prediction, Run, ScreenerItem

POOLS_VERSION = "1"
USABLE = (Prediction.Status.OK, Prediction.Status.EMPTY)


def run_pools(run: Run) -> dict[str, dict[str, str]]:
    """pool (memory key) → {"fusion": condition key, "selection": condition key} of the run."""
    pools: dict[str, dict[str, str]] = {}
    for key in run.protocol.conditions:
        pool = pool_of(key)
        if pool is not None:
            pools.setdefault(pool, {})[get_condition(key).workflow] = key
    return pools


def configured_rankers() -> list:
    return [load_ranker(spec) for spec in settings.OWNWORDS_RANKERS]


def _rows(run: Run, pools: dict) -> list[tuple]:
    keys = [key for sources in pools.values() for key in sources.values()]
    return list(Prediction.objects.filter(run=run, condition__in=keys).order_by("task_id", "condition", "label")
                .values_list("task_id", "condition", "label", "status", "answer_sha256", "score", "chosen_label",
                             "copied_label", "text"))


def pools_inputs(run: Run, rankers=None) -> tuple[list[tuple], str]:
    rankers = configured_rankers() if rankers is None else rankers
    pools = run_pools(run)
    rows = _rows(run, pools)
    digest = hashlib.sha256()
    for row in rows:
        digest.update(canonical_json(list(row[:8])).encode())
    tasks = list(CohortTask.objects.filter(cohort_id=run.protocol.cohort_id).order_by("position")
                 .values_list("task_id", "task__session__person_id"))
    inputs = {"version": POOLS_VERSION, "rows": digest.hexdigest(), "tasks": tasks, "pools": pools,
              "bootstrap": run.protocol.bootstrap, "rankers": [describe(r) for r in rankers]}
    return rows, sha256_text(canonical_json(inputs))


def pools_cached(run: Run) -> PoolAnalysisResult | None:
    _, inputs_sha = pools_inputs(run)
    return PoolAnalysisResult.objects.filter(run=run, inputs_sha256=inputs_sha).first()


def pools_refresh(run: Run) -> PoolAnalysisResult:
    rankers = configured_rankers()
    rows, inputs_sha = pools_inputs(run, rankers)
    payload = pools_compute(run, rows, rankers)
    result, _ = PoolAnalysisResult.objects.update_or_create(
        run=run, defaults={"inputs_sha256": inputs_sha, "payload": payload, "computed_at": timezone.now()})
    return result


def _ranker_context(run: Run, task_ids) -> tuple[dict, dict, dict]:
    """Questions, memories and screeners, read only when a ranker needs them."""
    tasks = {t.task_id: t.task for t in CohortTask.objects.filter(cohort_id=run.protocol.cohort_id)
             .select_related("task__question_turn")}
    questions = {pk: tasks[pk].question_turn.text for pk in task_ids}
    sessions = {pk: tasks[pk].session_id for pk in task_ids}
    memories = {(m.session_id, f"memory({m.kind},{m.words}w)"): m.text or "" for m in Memory.objects.filter(run=run)}
    screener: dict[int, list[str]] = {}
    for item in ScreenerItem.objects.filter(session_id__in=set(sessions.values())).order_by("session_id", "index"):
        screener.setdefault(item.session_id, []).append(f"{item.question}: {item.answer}")
    return questions, {pk: sessions[pk] for pk in task_ids}, {"memories": memories, "screener": screener}


def pools_compute(run: Run, rows: list[tuple], rankers=()) -> dict:
    protocol = run.protocol
    seed = int(protocol.bootstrap.get("seed", DEFAULT_SEED))
    n_draws = int(protocol.bootstrap.get("draws", DEFAULT_DRAWS))
    pools = run_pools(run)
    order = list(CohortTask.objects.filter(cohort_id=protocol.cohort_id).order_by("position")
                 .values_list("task_id", "task__session__person_id"))
    task_ids = [t for t, _ in order]
    at = {t: i for i, t in enumerate(task_ids)}
    person = np.array([p for _, p in order], dtype=np.int64)
    T = len(task_ids)
    by = {(task, condition, label): row for task, condition, label, *row in rows}
    names = sorted(pools)
    # Per pool: candidate texts (None when incomplete), grades, display positions, words.
    texts = {name: [None] * T for name in names}
    fused_texts = {name: [None] * T for name in names}
    built = {}
    for name in names:
        sources = pools[name]
        source = sources.get(FUSION) or sources.get(SELECTION)
        grades, words = np.full((3, T), np.nan), np.full((3, T), np.nan)
        display = np.zeros((3, T), dtype=np.int64)
        arrays = {w: (np.full(T, np.nan), np.full(T, -1, dtype=np.int64), np.full(T, np.nan)) for w in sources}
        copies = np.zeros(T, dtype=np.int64)
        for task_id in task_ids:
            t = at[task_id]
            pool_rows = [by.get((task_id, source, label)) for label in CANDIDATE_LABELS]
            ordered = candidate_display_order(display_key(task_id, name), [(label, "") for label in CANDIDATE_LABELS])
            for position, (label, _) in enumerate(ordered):
                display[CANDIDATE_LABELS.index(label), t] = position
            for i, row in enumerate(pool_rows):
                if row is not None and row[0] in USABLE:
                    grades[i, t] = np.nan if row[2] is None else row[2]
                    words[i, t] = len((row[5] or "").split())
            if all(row is not None and row[0] in USABLE for row in pool_rows):
                texts[name][t] = [row[5] or "" for row in pool_rows]
            for workflow, key in sources.items():
                final = by.get((task_id, key, FINAL))
                grade, pick, length = arrays[workflow]
                if final is None:
                    continue
                status, sha, score, chosen, copied, text = final
                grade[t] = np.nan if score is None else score
                if status in USABLE:
                    length[t] = len((text or "").split())
                if workflow == SELECTION and chosen in CANDIDATE_LABELS and status in USABLE:
                    pick[t] = CANDIDATE_LABELS.index(chosen)
                if workflow == FUSION and status in USABLE:
                    copies[t] = sum(r is not None and r[1] == sha for r in pool_rows)
                    pick[t] = CANDIDATE_LABELS.index(copied) if copied in CANDIDATE_LABELS else -1
                    fused_texts[name][t] = text or ""
        sel, fus = arrays.get(SELECTION), arrays.get(FUSION)
        built[name] = Pool(
            name=name, person=person, candidates=grades, display=display, words=words,
            selection_grade=sel[0] if sel else None, selection_pick=sel[1] if sel else None,
            selection_words=sel[2] if sel else None, fusion_grade=fus[0] if fus else None,
            fusion_copies=copies if fus else None, fusion_copied=fus[1] if fus else None,
            fusion_words=fus[2] if fus else None)
    draws = Draws(seed, n_draws)
    diagnostics = [pool_diagnostics(built[name], draws) for name in names]
    picked = _picks(run, names, built, texts, fused_texts, task_ids, rankers)
    picker_tables = []
    for name in names:
        pool = built[name]
        grades = pool.candidates
        complete = ~np.isnan(grades).any(axis=0)
        comparators = {"candidate mean": np.where(complete, np.nan_to_num(grades).sum(axis=0) / 3, np.nan),
                       "one-shot (b0)": grades[0]}
        if pool.selection_grade is not None:
            comparators["prompted selector"] = pool.selection_grade
        if pool.fusion_grade is not None:
            comparators["fusion"] = pool.fusion_grade
        picker_tables.append({"pool": name, "comparators": list(comparators),
                              "rows": picker_rows(person, picked[name], comparators, draws)})
    draws.compute()
    return _finite({"seed": seed, "draws": n_draws, "tasks": T, "pools": names, "diagnostics": diagnostics,
            "pickers": picker_tables, "rankers": [describe(r) for r in rankers], "version": POOLS_VERSION})


def _finite(value):
    """The payload with every NaN or infinity as None: PostgreSQL's JSON has no NaN."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _picks(run, names, built, texts, fused_texts, task_ids, rankers) -> dict[str, dict[str, np.ndarray]]:
    """pool → rule → the grade each task's pick inherits (NaN where the rule could not pick)."""
    T = len(task_ids)
    rules = list(pickers.POOL_RULES) + (list(pickers.CROSS_MEMORY) if len(names) > 1 else [])
    picked = {name: {rule: np.full(T, np.nan) for rule in rules} for name in names}
    for t in range(T):
        per_pool = pickers.task_picks([texts[name][t] for name in names], [fused_texts[name][t] for name in names])
        for m, name in enumerate(names):
            for rule, pick in per_pool[m].items():
                if pick is None:
                    continue
                pool, index = pick if isinstance(pick, tuple) else (m, pick)
                picked[name][rule][t] = built[names[pool]].candidates[index, t]
    if rankers:
        questions, sessions, context = _ranker_context(run, task_ids)
        for ranker in rankers:
            label = f"reranker {ranker.name} {ranker.version}"
            for name in names:
                column = picked[name].setdefault(label, np.full(T, np.nan))
                for t, task_id in enumerate(task_ids):
                    pool_texts = texts[name][t]
                    if pool_texts is None:
                        continue
                    session = sessions[task_id]
                    index = ranked_pick(ranker, questions[task_id], pool_texts, {
                        "memory": context["memories"].get((session, name), ""),
                        "screener": "\n".join(context["screener"].get(session, []))})
                    column[t] = built[name].candidates[index, t]
    return picked
