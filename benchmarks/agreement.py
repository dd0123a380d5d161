"""Benchmark of experiments.core.stats.agreement_stats: graders' agreement with whole-person intervals.

Run from the repository root:

    .venv/bin/python benchmarks/agreement.py

Synthetic ratings of the size the ratings feature expects: 5,000 rated items of
500 uneven people, graded 0..3 by two raters (the second within a step of the
first most of the time), and a third rater who skipped a fifth of the items.
Each interval uses 100,000 draws of whole people (the paper's G.2 default);
the target is at most 3 s for the three together on a 2-core machine.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.core import stats  # noqa: E402

PEOPLE, ITEMS = 500, 5_000
SEED = 20260918                 # App. B.3
DRAWS = 100_000
TARGET_SECONDS = 3.0


def synthetic_ratings(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(items × 3 raters with NaN where the third rater skipped, person per item)."""
    rng = np.random.default_rng(seed)
    per_person = 2 + rng.multinomial(ITEMS - 2 * PEOPLE, np.full(PEOPLE, 1 / PEOPLE))
    person = np.repeat(np.arange(PEOPLE), per_person)
    truth = rng.integers(0, 4, size=ITEMS)
    step = [-2, -1, -1, 0, 0, 0, 0, 1, 1, 2]
    units = np.column_stack([np.clip(truth + rng.choice(step, size=ITEMS), 0, 3)
                             for _ in range(3)]).astype(float)
    units[rng.random(ITEMS) < 0.2, 2] = np.nan
    return units, person


def timed(call):
    """(result, wall seconds, CPU seconds of this process); CPU above wall means BLAS threads."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - t0, time.process_time() - c0


def show(name: str, interval: stats.Interval) -> str:
    return f"{name} {interval.estimate:.4f} [{interval.lo:.4f}, {interval.hi:.4f}]"


def main() -> None:
    units, person = synthetic_ratings()
    print(f"{ITEMS:,} items, {PEOPLE} people, {DRAWS:,} draws per interval; numpy {np.__version__}")

    print(f"{'':36s} {'wall s':>6s} {'cpu s':>6s}")
    pair, t_pair, c_pair = timed(lambda: stats.agreement_bootstrap(
        units[:, 0], units[:, 1], person, draws=DRAWS, seed=SEED))
    print(f"agreement_bootstrap, 2 raters        {t_pair:6.3f} {c_pair:6.3f}   "
          f"{show('exact', pair.exact)}  {show('within-one', pair.within_one)}")
    print(f"{'':54s}{show('kappa', pair.kappa)}  {show('alpha', pair.alpha)}")

    two, t_two, c_two = timed(lambda: stats.alpha_bootstrap(units[:, :2], person, draws=DRAWS, seed=SEED))
    print(f"alpha_bootstrap, 2 raters            {t_two:6.3f} {c_two:6.3f}   {show('alpha', two)}")

    three, t_three, c_three = timed(lambda: stats.alpha_bootstrap(units, person, draws=DRAWS, seed=SEED))
    print(f"alpha_bootstrap, 3 raters (20% NaN)  {t_three:6.3f} {c_three:6.3f}   {show('alpha', three)}")

    # The project's bootstrap on the same people and seed, for scale: it draws the same
    # person indices, so the difference is the cost of the tables and statistics.
    ref, t_ref, c_ref = timed(lambda: stats.paired_bootstrap(
        person, (units[:, 0] == units[:, 1]).astype(float), draws=DRAWS, seed=SEED))
    assert (ref.lo, ref.hi) == (pair.exact.lo, pair.exact.hi)
    print(f"(paired_bootstrap of exact, for scale {t_ref:6.3f} {c_ref:6.3f}   same interval as exact above)")

    total = t_pair + t_two + t_three
    print(f"total                                {total:6.3f} {c_pair + c_two + c_three:6.3f}   "
          f"(target ≤ {TARGET_SECONDS:.0f} s wall)")

    # The reference figures the fast code must reproduce on the same data.
    reference = stats.krippendorff_alpha_ordinal(units)
    assert abs(three.estimate - reference) < 1e-12
    assert abs(pair.alpha.estimate - two.estimate) < 1e-12


if __name__ == "__main__":
    main()
