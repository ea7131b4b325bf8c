"""Benchmark of the production-stream check (issue 33 item 4): how often it refutes a true model, how often it catches
a stream that is not like the pilot, and its time (a measurement script, not a pytest test).

Run with ``.venv/bin/python tests/benchmarks/bench_stream_check.py [--streams N] [--users U] [--slots T]``
(``bench()`` is what ``make bench`` calls).

Setting, as ``tests/deploy/test_stream_check.py``: a pilot of U binary users × T slots from the first-order chain
p = q = 0.1 (Δ(t) = 0.8^t), its first-order chains fitted on 2 quantile states (the design's fit), the schedule
A = 0, S̄ = 6 (the design the test gets).  Then N streams of U other users × T slots, each simulated with its own seed,
go through :func:`policyopt.studies.stream_check.stream_model_check` (the function ``publish`` calls), from:

* the same chain — every refutation is a false one; target: at most 3 × (1 − 0.95) = 15 % of streams (Bonferroni
  over the three tests), ``passed`` in the rest;
* a stickier chain (p = q = 0.05, Δ(1) = 0.9 against the pilot's ≈ 0.8) — power;
* an order-2 chain (``tests/_processes.order2_chain``) — power.

Each line prints the share refuted with its exact 95 % Clopper–Pearson interval (``scipy.stats.binomtest``), the
share unchecked, and the median wall time of one check.  Pilot and streams are simulation (numpy), never released
noise.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _processes as P  # noqa: E402

FALSE_REFUTATION_TARGET = 0.15


def _streams(make, n: int, users: int, slots: int, seed0: int):
    for i in range(n):
        df = make().simulate(users, slots, np.random.default_rng(seed0 + i))
        df["user"] = df["user"].astype(str) + f"_s{i}"
        yield df


def run(n: int, users: int, slots: int) -> None:
    from scipy.stats import binomtest

    from policyopt.models.estimation import fit_population
    from policyopt.studies.stream_check import stream_model_check

    pilot = P.first_order_chain(0.1, 0.1).simulate(users, slots, np.random.default_rng(1))
    fitted = fit_population(pilot, 2, smoothing=0.01, value_range=(0.0, 1.0))
    chains = [c.P for c in fitted.population.chains]
    print(f"stream check: pilot {users} users × {slots} slots (first-order p = q = 0.1), {n} streams each of "
          f"{users} users × {slots} slots; A = 0, S̄ = 6")
    cases = {"same chain (false refutations)": lambda: P.first_order_chain(0.1, 0.1),
             "stickier chain p = q = 0.05 (power)": lambda: P.first_order_chain(0.05, 0.05),
             "order-2 chain (power)": P.order2_chain}
    for k, (label, make) in enumerate(cases.items()):
        verdicts, times = [], []
        for df in _streams(make, n, users, slots, 1000 * (k + 1)):
            start = time.perf_counter()
            r = stream_model_check(df, fitted.quantizer, model="chain", pilot_chains=chains, A=0, S_bar=6,
                                   through=slots - 1, value_range=(0.0, 1.0))
            times.append(time.perf_counter() - start)
            verdicts.append(r["verdict"])
        refuted = verdicts.count("refuted")
        ci = binomtest(refuted, n).proportion_ci(0.95, method="exact")
        line = (f"  {label}: refuted {refuted}/{n} = {refuted / n:.1%} (95% CI {ci.low:.1%}–{ci.high:.1%}), "
                f"unchecked {verdicts.count('unchecked')}, median {statistics.median(times):.2f} s per check")
        if k == 0:
            line += " OK" if refuted / n <= FALSE_REFUTATION_TARGET else " OVER TARGET"
            line += f" (target ≤ {FALSE_REFUTATION_TARGET:.0%})"
        print(line)


def bench(quick: bool = False) -> None:
    """``make bench``: 100 streams of 20 users × 1,500 slots (``quick``: 10)."""
    run(10 if quick else 100, 20, 1500)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--slots", type=int, default=1500)
    a = ap.parse_args()
    run(a.streams, a.users, a.slots)
