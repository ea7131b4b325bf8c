"""Benchmark of :func:`policyopt.privacy.age_dependent.compose` (Theorem 3 trajectory) against the all-ages evaluation.

Run: ``.venv/bin/python tests/benchmarks/bench_compose.py`` (also a section of ``make bench``).

``compose`` evaluates Δ(t) only on the ages 0..L, L the largest lag Theorem 3 of Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (25) looks up (A + S̄ − 1 for an
equal-spacing schedule).  Baseline in the same run: ``compose_all_ages`` (tests/_compose_ref.py), the implementation
before the change, which evaluated Δ at every age up to the horizon.  Setting: the bundled CityLearn model of
``policyopt publish`` (``ModelSpec().load()``), warm, one year of hourly slots, (A, S̄) = (168, 168) (52 releases,
as the ledger benchmark) and (24, 24) (364 releases), ε_C = 1 nat; median of 3 calls each.  The two trajectories must
agree bit for bit (asserted).  Target: at least 10× faster than the baseline.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the baseline in _compose_ref.py

TARGET_RATIO = 10.0
HORIZON = 8760


def _median_time(fn, repeats: int = 3):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def bench() -> None:
    """Print one line per schedule: compose, the all-ages baseline and their ratio."""
    from _compose_ref import compose_all_ages
    from policyopt.deploy import ModelSpec
    from policyopt.privacy.age_dependent import compose

    pop = ModelSpec().load()
    for A, S_bar in ((168, 168), (24, 24)):
        S = A + S_bar * np.arange((HORIZON - A) // S_bar + 1)
        t_new, new = _median_time(lambda: compose(S, A, 1.0, pop, horizon=HORIZON))
        t_old, old = _median_time(lambda: compose_all_ages(S, A, 1.0, pop, horizon=HORIZON))
        for name in ("risk", "aoi", "epoch_peaks", "prior_risk"):
            assert getattr(new, name).tobytes() == getattr(old, name).tobytes(), f"{name} differs from the baseline"
        ratio = t_old / t_new
        verdict = "OK" if ratio >= TARGET_RATIO else "UNDER TARGET"
        print(f"compose (Theorem 3), {HORIZON + 1} slots, A = S̄ = {A}, {S.size} releases: {t_new * 1e3:.1f} ms; "
              f"baseline Δ at every age: {t_old * 1e3:.1f} ms; ratio {ratio:.1f}x [target >= {TARGET_RATIO:g}x] "
              f"{verdict} (bit for bit equal)")


if __name__ == "__main__":
    bench()
