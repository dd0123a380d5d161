"""Benchmark of experiments.stats (issue 5): the eight-contrast family of App. B.3.

Run from the repository root:

    .venv/bin/python benchmarks/stats.py

Synthetic data of the paper's size (188 people, 1,768 tasks, raw grades 0..3,
one missing grade as in the paper's 1,767-task trait-memory contrasts), the
eight family contrasts at 100,000 draws with the family tails, and the slow
reference loop on fewer draws, extrapolated linearly to 100,000 (its cost is
proportional to the number of draws).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import stats  # noqa: E402

PEOPLE, TASKS = 188, 1_768
SEED = 20260918                 # App. B.3
DRAWS = 100_000
LOOP_DRAWS = 10_000             # the loop runs on these and is extrapolated
CONDITIONS = ("one-shot C", "fusion C", "selection C",
              "one-shot T", "fusion T", "selection T",
              "whole record", "current dialogue")

# The family of App. B.3 as (name, conditions, coefficients).
FAMILY = [
    ("fusion − one-shot (concrete)", ("fusion C", "one-shot C"), (1, -1)),
    ("fusion − one-shot (trait)", ("fusion T", "one-shot T"), (1, -1)),
    ("concrete − trait under fusion", ("fusion C", "fusion T"), (1, -1)),
    ("interaction γ", ("fusion C", "one-shot C", "fusion T", "one-shot T"), (1, -1, -1, 1)),
    ("fusion − selection (concrete)", ("fusion C", "selection C"), (1, -1)),
    ("fusion − selection (trait)", ("fusion T", "selection T"), (1, -1)),
    ("fusion C − whole record", ("fusion C", "whole record"), (1, -1)),
    ("fusion C − current dialogue", ("fusion C", "current dialogue"), (1, -1)),
]


def synthetic_grades(seed: int = 1) -> dict[str, dict[tuple[int, int], int | None]]:
    """Per-condition {(person, task): grade} with correlated grades, uneven people."""
    rng = np.random.default_rng(seed)
    per_person = 5 + rng.multinomial(TASKS - 5 * PEOPLE, np.full(PEOPLE, 1 / PEOPLE))
    keys = [(p, t) for p in range(PEOPLE) for t in range(per_person[p])]
    base = rng.integers(0, 4, size=len(keys))           # how answerable the task is
    grades = {}
    for shift, name in zip(np.linspace(-0.2, 0.3, len(CONDITIONS)), CONDITIONS):
        noise = rng.choice([-1, 0, 1], size=len(keys), p=[0.25 + shift / 2, 0.5, 0.25 - shift / 2])
        grades[name] = dict(zip(keys, np.clip(base + noise, 0, 3).tolist()))
    grades["fusion T"][keys[100]] = None                 # one missing judgment
    return grades


def main() -> None:
    grades = synthetic_grades()
    tails = stats.family_tails(len(FAMILY))
    owner = lambda key: key[0]  # noqa: E731
    print(f"{PEOPLE} people, {TASKS} tasks; {DRAWS:,} draws per contrast, tails {tails}; "
          f"numpy {np.__version__}")
    print(f"{'contrast':32s} {'tasks':>5s} {'estimate':>9s} {'family interval':>21s} "
          f"{'fast s':>7s} {'loop s*':>8s} {'ratio':>6s}")
    fast_total = loop_total = 0.0
    for name, conds, coefficients in FAMILY:
        paired = stats.paired_set(*(grades[c] for c in conds), person=owner)
        diff = paired.diff(coefficients)

        t0 = time.perf_counter()
        r = stats.paired_bootstrap(paired.person, diff, seed=SEED, draws=DRAWS, tails=tails)
        fast = time.perf_counter() - t0

        t0 = time.perf_counter()
        slow = stats.paired_bootstrap_loop(paired.person, diff, seed=SEED,
                                           draws=LOOP_DRAWS, tails=tails)
        loop = (time.perf_counter() - t0) * DRAWS / LOOP_DRAWS
        # Same stream: the fast code on the loop's draws must give the loop's interval.
        check = stats.paired_bootstrap(paired.person, diff, seed=SEED, draws=LOOP_DRAWS, tails=tails)
        assert abs(check.lo - slow.lo) < 1e-12 and abs(check.hi - slow.hi) < 1e-12, name

        fast_total += fast
        loop_total += loop
        print(f"{name:32s} {r.n_tasks:5d} {r.estimate:+9.4f} [{r.lo:+.4f}, {r.hi:+.4f}] "
              f"{fast:7.3f} {loop:8.2f} {loop / fast:5.0f}x")
    print(f"{'family of 8':32s} {'':5s} {'':9s} {'':21s} {fast_total:7.3f} {loop_total:8.2f} "
          f"{loop_total / fast_total:5.0f}x")
    print(f"* loop seconds extrapolated linearly from {LOOP_DRAWS:,} draws to {DRAWS:,}; "
          "the loop and the vectorised code agreed on those draws.")

    # ------------------------------------------------------------------
    # LATER (issue 5, dashboards): a dashboard computed from a database holding
    # 20,000 predictions goes here, timed and printed like the family above.
    # It needs Django and a database, which this module-level benchmark
    # deliberately does not import.
    # ------------------------------------------------------------------


if __name__ == "__main__":
    main()
