"""Benchmark of the readings MSE penalty (a measurement script, not a pytest test).

Run with ``.venv/bin/python tests/benchmarks/bench_readings.py`` (``bench()`` is what ``make bench`` calls).

Measured on a synthetic panel of 10^4 users × 8,760 hourly slots (daily cycle + an AR(1) common factor + AR(1) own
parts, seed 2026; 700 MB of float64 readings, generated before the clock starts), for the default search box
(ages 0..337):

1. the map step and reduce (``slot_terms``: banded products per chunk of 512 users, summed): wall time;
2. the moments per (day, hour, age) (``readings_moments`` from those sums) and the worst-phase penalty
   (``ReadingsMSEPenalty`` at I = 10^5), and the block-bootstrap band (399 replicates over 365 days);
3. peak memory of 1–2 traced by tracemalloc (numpy's allocations), the panel itself excluded.

Spot check: self(1) and cross(1) against a direct computation on the same panel.
Targets: map-reduce < 120 s, moments + penalty + band < 30 s, peak memory < 2 GiB beyond the panel.
"""

from __future__ import annotations

import time
import tracemalloc

N_USERS, N_SLOTS, MAX_AGE, SEED = 10_000, 8760, 337, 2026
MAP_TARGET_S, REST_TARGET_S, MEMORY_TARGET_MIB = 120.0, 30.0, 2048.0


def report(label: str, value: float, unit: str, target: float) -> None:
    """Print ``label: value unit  [target < X unit] OK`` or ``OVER TARGET``."""
    print(f"{label}: {value:.3f} {unit}  [target < {target:g} {unit}] {'OK' if value < target else 'OVER TARGET'}")


def synthetic_panel(np):
    """(N_USERS, N_SLOTS) readings that move together: daily cycle + common AR(1) + own AR(1), clipped at 0."""
    rng = np.random.default_rng(SEED)
    t = np.arange(N_SLOTS)
    common = np.zeros(N_SLOTS)
    e = rng.normal(0, 0.15, N_SLOTS)
    for k in range(1, N_SLOTS):
        common[k] = 0.95 * common[k - 1] + e[k]
    X = np.empty((N_USERS, N_SLOTS))
    X[:, 0] = rng.normal(0, 0.5, N_USERS)
    for k in range(1, N_SLOTS):  # own AR(1), one slot at a time for all users (bounded memory)
        X[:, k] = 0.6 * X[:, k - 1] + rng.normal(0, 0.4, N_USERS)
    X += 1.0 + 0.5 * np.sin(2 * np.pi * t / 24)[None, :] + common[None, :]
    np.maximum(X, 0.0, out=X)
    return X


def bench() -> None:
    import numpy as np

    from policyopt.utility.readings_penalty import ReadingsMSEPenalty, readings_moments, slot_terms

    X = synthetic_panel(np)
    print(f"panel: {N_USERS} users × {N_SLOTS} slots ({X.nbytes / 2**20:.0f} MiB), ages 0..{MAX_AGE}")
    tracemalloc.start()
    start = time.perf_counter()
    terms = slot_terms(X, MAX_AGE, value_range=(0.0, 48.0))
    t_map = time.perf_counter() - start
    start = time.perf_counter()
    moments = readings_moments(None, MAX_AGE, phase_period=24, terms=terms)
    pen = ReadingsMSEPenalty(moments, users=100_000, unit="kWh^2")
    band = pen.band()
    t_rest = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    report("readings penalty, map-reduce over 10^4 users × 8760 slots (slot_terms)", t_map, "s", MAP_TARGET_S)
    report("  moments per (day, hour, age) + worst-phase penalty + bootstrap band (399 reps)", t_rest, "s", REST_TARGET_S)
    report("  peak memory beyond the panel (tracemalloc)", peak / 2**20, "MiB", MEMORY_TARGET_MIB)
    d = X[:, 1:] - X[:, :-1]
    s_ref = float(np.mean(d**2))
    tot = d.sum(axis=0)
    c_ref = float(np.mean((tot**2 - (d**2).sum(axis=0)) / (N_USERS * (N_USERS - 1))))
    pooled = moments.pooled([1])
    assert abs(pooled["self"][0] - s_ref) <= 1e-9 * s_ref, (pooled["self"][0], s_ref)
    assert abs(pooled["cross"][0] - c_ref) <= 1e-6 * abs(c_ref) + 1e-12, (pooled["cross"][0], c_ref)
    print(f"  self(1) = {s_ref:.6g}, cross(1) = {c_ref:.6g} (checked against a direct computation); "
          f"staleness at I = 1e5, age 3: {pen.staleness(3):.6g} (band {band[0][3]:.4g}–{band[1][3]:.4g}), "
          f"block {pen.bootstrap_info()['block_periods']} days")


if __name__ == "__main__":
    bench()
