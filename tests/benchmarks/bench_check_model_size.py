"""Benchmark of ``policyopt check-model``'s verdict on true first-order chains (a measurement script, not a test).

Run with ``OPENBLAS_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_check_model_size.py [--sets N] [--k 3,12]
[--seeds 2027,2028,2029]`` (``--quick``: 4 data sets per seed and K, K = 3 only).

What is measured: how often :func:`policyopt.studies.check_model.check_model` — in its default configuration for
``--data`` (99 simulated data sets, Δ(t) check at lags 1..876, no ``--holdout``; the Markov test fitted on the first
half of each series and tested on the second, lags 1..168) — refutes data that *are* first-order chains, at level
0.95: the family-wise Δ(t) check alone, the held-out Markov test alone, and the verdict of both (refuted when either
refutes; at most 10 % by Bonferroni if each test were exact; the parametric bootstrap of fitted chains is not exact).
Each data set: 17 users × 8,760 hourly slots of random sticky chains over K states (diagonal s ~ U(0.5, 0.9) plus
(1 − s) × a Dirichlet(1) row, as ``bench_markov_test``), readings = the state (the quantile edges then fall between
the values and recover the states exactly), generated with ``np.random.default_rng([seed, K, i])``; the check's seed
is i.  The band is formed from 20 block-bootstrap replicates (it does not enter the verdict).  Also the power on
order-2 chains (``bench_markov_test.order2_series``).  Rates with 95 % Clopper–Pearson intervals.

Measured: see the report of the session that wrote this file (machine load varies: 2 shared cores).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_markov_test import interval, order2_series, sticky_chains  # noqa: E402

USERS, SLOTS, LEVEL = 17, 8760, 0.95


def frame(x: np.ndarray) -> pd.DataFrame:
    """The (U, T) states as long readings (user, time, value = state)."""
    U, T = x.shape
    return pd.DataFrame({"user": np.repeat([f"u{u:03d}" for u in range(U)], T), "time": np.tile(np.arange(T), U),
                         "value": x.reshape(-1).astype(float)})


def chain_set(K: int, seed: int, i: int) -> pd.DataFrame:
    """Data set i: USERS × SLOTS of random sticky first-order chains (simulation only)."""
    from policyopt.models.empirical import simulate_chain_states, user_streams

    rng = np.random.default_rng([seed, K, i])
    P = sticky_chains(np, rng, USERS, K)
    x = simulate_chain_states(list(P), np.full(USERS, SLOTS), rng.integers(0, K, USERS), 1,
                              user_streams([f"true{i}-u{u}" for u in range(USERS)], seed, stream=3))[0]
    return frame(x)


def run(df: pd.DataFrame, K: int, i: int) -> tuple[bool, bool, bool, float, float, float]:
    """(Δ(t) check refuted, Markov test refuted, verdict, their p-values, seconds) of the default check."""
    from policyopt.studies.check_model import check_model

    t0 = time.perf_counter()
    rep = check_model(df, n_states=K, n_boot=20, seed=i)
    mv, mt = rep.max_tv_check, rep.markov
    return mv["refuted"], mt["refuted"], rep.model_refuted, mv["p_value"], mt["p_value"], time.perf_counter() - t0


def rate(label: str, k: int, n: int) -> None:
    lo, hi = interval(k, n)
    print(f"  {label}: {k} of {n} = {100 * k / n:.1f} % (95 % interval {100 * lo:.1f}–{100 * hi:.1f} %)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=10, help="data sets per seed and K (default 10)")
    ap.add_argument("--k", default="3,12", help="state counts (default 3,12)")
    ap.add_argument("--seeds", default="2027,2028,2029", help="data seeds (default 2027,2028,2029)")
    ap.add_argument("--power", type=int, default=5, help="order-2 data sets per K for the power (default 5)")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    ks = [3] if a.quick else [int(v) for v in a.k.split(",")]
    sets = 4 if a.quick else a.sets
    seeds = [int(v) for v in a.seeds.split(",")]
    for K in ks:
        tot = {"dtv": 0, "mk": 0, "both": 0, "n": 0}
        for seed in seeds:
            per = {"dtv": 0, "mk": 0, "both": 0}
            for i in range(sets):
                d, m, b, pd_, pm, sec = run(chain_set(K, seed, i), K, i)
                per["dtv"] += d
                per["mk"] += m
                per["both"] += b
                print(f"K={K} seed={seed} set={i}: Δ(t) check p={pd_:.3f}, Markov test p={pm:.3f}, "
                      f"{'REFUTED' if b else 'passed'} ({sec:.0f} s)", flush=True)
            print(f"K={K} seed {seed}: combined {per['both']} of {sets} refuted (Δ(t) {per['dtv']}, Markov {per['mk']})",
                  flush=True)
            for key in per:
                tot[key] += per[key]
            tot["n"] += sets
        print(f"K={K}, true first-order chains, level {LEVEL}: false refutations over {len(seeds)} seeds", flush=True)
        rate("Δ(t) check (family-wise max-T)", tot["dtv"], tot["n"])
        rate("held-out Markov test", tot["mk"], tot["n"])
        rate("verdict of both", tot["both"], tot["n"])
        if a.power and not a.quick:
            hits = 0
            for i in range(a.power):
                x = order2_series(np, np.random.default_rng([seeds[0], K, 1000 + i]), USERS, SLOTS, K)
                hits += run(frame(x), K, i)[2]
            rate(f"power on order-2 chains, K={K}", hits, a.power)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
