"""Judge against judge (paper App. H, I.6): a re-grade run's grades beside its source run's.

The two runs graded the same answers, so agreement is read on the (task, answer sha256) items
both judges graded — operational zeros (empty answers, invalid selections) are rules, not
judgments, and stay out. The interval resamples whole people, as every interval of a run does.
Numbers only, never text: viewers may see all of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED, GRADES
from experiments.models import Grade, Run, Task

try:
    from experiments.core.stats.agreement import agreement_bootstrap
except ImportError:  # TODO(merge): replace with agreement_bootstrap — the shim below goes at merge
    agreement_bootstrap = None


# --- TODO(merge): replace with agreement_bootstrap ---------------------------------------------
# A stand-in for experiments.core.stats.agreement.agreement_bootstrap, written on another
# branch meanwhile. Same call, same attributes and the same as_dict() keys, so that nothing
# but this block changes when it lands. Alpha is Krippendorff's with the interval (squared)
# metric, the one that matches quadratic weights.

@dataclass(frozen=True)
class _Interval:
    estimate: float
    lo: float
    hi: float


@dataclass(frozen=True)
class _Agreement:
    exact: _Interval
    within_one: _Interval
    kappa: _Interval
    alpha: _Interval
    n_pairs: int
    n_people: int
    draws: int
    seed: int
    confusion: list

    def as_dict(self) -> dict:
        measures = {name: vars(getattr(self, name)).copy() for name in ("exact", "within_one", "kappa", "alpha")}
        return {"n_pairs": self.n_pairs, "n_people": self.n_people, "draws": self.draws, "seed": self.seed,
                "confusion": self.confusion, **measures}


def _measures(tables: np.ndarray) -> dict[str, np.ndarray]:
    """Exact, within-one, quadratic κ and interval α of each flattened K×K table (rows: judge a)."""
    k = len(GRADES)
    t = tables.reshape(-1, k, k)
    n = t.sum(axis=(1, 2))
    i, j = np.indices((k, k))
    squared = (i - j) ** 2
    expected = t.sum(2)[:, :, None] * t.sum(1)[:, None, :] / n[:, None, None]
    chance = (squared * expected).sum(axis=(1, 2))
    observed = (squared * t).sum(axis=(1, 2))
    coincidence = t + t.transpose(0, 2, 1)  # both judges' values pooled, as α pairs them
    margins = coincidence.sum(2)
    alpha_expected = (margins[:, :, None] * margins[:, None, :] * squared).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "exact": np.trace(t, axis1=1, axis2=2) / n,
            "within_one": (t * (np.abs(i - j) <= 1)).sum(axis=(1, 2)) / n,
            "kappa": np.where(chance > 0, 1 - observed / chance, np.nan),
            "alpha": np.where(alpha_expected > 0, 1 - (2 * n - 1) * 2 * observed / alpha_expected, np.nan),
        }


def _shim_agreement_bootstrap(a, b, persons, *, draws: int = DEFAULT_DRAWS, seed: int = DEFAULT_SEED,
                              block: int = 2_000) -> _Agreement:
    a, b = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    if not len(a) == len(b) == len(persons) or not len(a):
        raise ValueError("a, b and persons must be parallel and non-empty")
    k = len(GRADES)
    _, person = np.unique(np.asarray(persons), return_inverse=True)
    n_people = int(person.max()) + 1
    per_person = np.zeros((n_people, k * k))
    np.add.at(per_person, (person, a * k + b), 1)
    point = {name: float(values[0]) for name, values in _measures(per_person.sum(0)[None, :]).items()}
    rng = np.random.Generator(np.random.PCG64(seed))
    replicates = {name: np.empty(draws) for name in point}
    for start in range(0, draws, block):
        m = min(block, draws - start)
        idx = rng.integers(0, n_people, size=(m, n_people))
        # How often each person was drawn in each replicate, then their tables summed.
        times = np.bincount((np.arange(m)[:, None] * n_people + idx).ravel(), minlength=m * n_people)
        for name, values in _measures(times.reshape(m, n_people) @ per_person).items():
            replicates[name][start:start + m] = values
    intervals = {}
    for name, estimate in point.items():
        finite = replicates[name][np.isfinite(replicates[name])]
        lo, hi = np.percentile(finite, [2.5, 97.5], method="linear") if finite.size else (math.nan, math.nan)
        intervals[name] = _Interval(estimate, float(lo), float(hi))
    confusion = per_person.sum(0).reshape(k, k).astype(int).tolist()
    return _Agreement(n_pairs=int(a.size), n_people=n_people, draws=draws, seed=seed, confusion=confusion,
                      **intervals)


if agreement_bootstrap is None:
    agreement_bootstrap = _shim_agreement_bootstrap
# --- end of the TODO(merge) block --------------------------------------------------------------


def shared_grades(run: Run) -> tuple[list[int], list[int], list]:
    """(first judge's grades, second judge's, person per item) on the items both graded."""
    first = dict(_graded(run.protocol.regrade_of_id))
    items = [(key, first[key], score) for key, score in _graded(run.pk) if key in first]
    people = dict(Task.objects.filter(pk__in={key[0] for key, _, _ in items})
                  .values_list("pk", "session__person_id"))
    return [f for _, f, _ in items], [s for _, _, s in items], [people[key[0]] for key, _, _ in items]


def _graded(run_id: int) -> list[tuple[tuple[int, str], int]]:
    rows = (Grade.objects.filter(run_id=run_id, status=Grade.Status.OK).exclude(score=None)
            .order_by("task_id", "answer_sha256").values_list("task_id", "answer_sha256", "score"))
    return [((task_id, sha), score) for task_id, sha, score in rows]


def judge_comparison(run: Run) -> dict:
    """Agreement of the re-grade's judge with the source run's, and what each graded."""
    protocol = run.protocol
    source = protocol.regrade_of
    first, second, people = shared_grades(run)
    result = {
        "source_run": source.pk,
        "same_judge": protocol.judge == source.protocol.judge,
        "first_judge": _label(source.protocol.judge),
        "second_judge": _label(protocol.judge),
        "graded": {"first": _count(source.pk), "second": _count(run.pk)},
        "agreement": None,
    }
    if first:
        seed = int(protocol.bootstrap.get("seed", DEFAULT_SEED))
        draws = int(protocol.bootstrap.get("draws", DEFAULT_DRAWS))
        result["agreement"] = _finite(agreement_bootstrap(first, second, people, draws=draws, seed=seed).as_dict())
    return result


def contrasts_side_by_side(run: Run) -> list[dict]:
    """Each planned contrast under the first judge (the source run) and the second (this run)."""
    first = {c["name"]: c for c in (run.protocol.regrade_of.analysis or {}).get("contrasts", [])}
    return [{"name": c["name"], "second": c, "first": first.get(c["name"])}
            for c in (run.analysis or {}).get("contrasts", [])]


def _count(run_id: int) -> int:
    return Grade.objects.filter(run_id=run_id, status=Grade.Status.OK).exclude(score=None).count()


def _label(judge: dict) -> str:
    return f"{judge.get('provider')} · {judge.get('model')}" if isinstance(judge, dict) else str(judge)


def _finite(value):
    """NaN (κ when a judge used one grade only) as null: JSON has no NaN."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
