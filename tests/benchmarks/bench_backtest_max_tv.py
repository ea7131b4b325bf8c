"""Benchmark of the backtest's held-out Δ(t) comparison (``max_tv_comparison``): how often it calls a true first-order
chain exceeded, how often it catches a held-out half that depends on its past more, and its time (a measurement
script, not a pytest test).

Run with ``.venv/bin/python tests/benchmarks/bench_backtest_max_tv.py [--sets N] [--users U] [--slots T]``
(``bench()`` is what ``make bench`` calls).

Setting, as ``tests/studies/test_backtest_max_tv.py``: U users × T slots, each user its own 3-state first-order chain
(random rows, 0.7 on the diagonal; ``tests/_markov_data.user_chains_readings``), chains fitted on the first half
(``fit_population``, 3 quantile states), the design's Δ(1) the fitted chains' (a chains' design at S̄ = 1), then
:func:`policyopt.studies.backtest.max_tv_comparison` on the second half at level 0.95:

* the same chains in both halves — every exceedance is a false one; target ≤ 5 % + Monte Carlo slack (the line
  prints the exact 95 % Clopper–Pearson interval, which must contain or lie below 5 %);
* the held-out chains 30 % of the way to the identity (stickier, so Δ(1) larger) — power.

Each line also counts what the rule it replaced (the held-out band's lower end above the design's Δ) said on the same
data sets.  Simulation only (numpy), never released noise.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _markov_data import user_chains_readings  # noqa: E402

FALSE_EXCEEDANCE_TARGET = 0.05


def run(n: int, users: int, slots: int) -> None:
    from scipy.stats import binomtest

    from policyopt.models.estimation import fit_population
    from policyopt.studies.backtest import max_tv_comparison

    print(f"backtest Δ(t) comparison: {n} data sets of {users} users × {slots} slots (3-state chains), split at "
          f"{slots // 2}, lag 1, level 0.95")
    for k, (label, stickier) in enumerate((("same chains (false exceedances)", 0.0),
                                           ("held-out chains 30 % stickier (power)", 0.3))):
        new = old = 0
        times = []
        for i in range(n):
            df = user_chains_readings(10_000 * (k + 1) + i, stickier=stickier, users=users, slots=slots)
            train, held = df[df.time < slots // 2], df[df.time >= slots // 2]
            fitted = fit_population(train, 3, smoothing=0.01, value_range=(0, 2), source="training readings")
            start = time.perf_counter()
            c = max_tv_comparison(train, held, fitted, {"source": None, "values": {}}, [1], level=0.95, seed=i)
            times.append(time.perf_counter() - start)
            new += not c["holds"]
            old += c["held_out_lower"][0] > c["design_max_tv"][0]
        ci = binomtest(new, n).proportion_ci(0.95, method="exact")
        line = (f"  {label}: exceeded {new}/{n} = {new / n:.1%} (95% CI {ci.low:.1%}–{ci.high:.1%}); the band rule it "
                f"replaced {old}/{n} = {old / n:.1%}; median {statistics.median(times):.2f} s per comparison")
        if k == 0:
            line += " OK" if ci.low <= FALSE_EXCEEDANCE_TARGET else " OVER TARGET"
            line += f" (target: CI reaches ≤ {FALSE_EXCEEDANCE_TARGET:.0%})"
        print(line)


def bench(quick: bool = False) -> None:
    """``make bench``: 200 data sets of 17 users × 2,000 slots (``quick``: 20)."""
    run(20 if quick else 200, 17, 2000)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=200)
    ap.add_argument("--users", type=int, default=17)
    ap.add_argument("--slots", type=int, default=2000)
    a = ap.parse_args()
    run(a.sets, a.users, a.slots)
