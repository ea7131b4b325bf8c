"""Benchmark of the failure-rate schedule search on a 20 × 20 box.

Source of the penalty: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy",
IEEE Trans. Inf. Theory, 2024, eqs. (50)–(51).

Run: ``.venv/bin/python tests/benchmarks/bench_failure_rate.py`` (also run by ``make bench``).

``design_schedule(method="heuristic")`` for one two-state chain (p = q = 0.1, I = 20 users,
posterior rule, stationary X_0), f̄ = 0.35, A ≤ 20, S̄ ≤ 20: the exact solver of (28) (grid scan +
bisection of ε_C per schedule) followed by the corrected Algorithms 1–2 on (39) with the running-max
penalty.  Timed with today's O(I) recurrences of :meth:`FailureRatePenalty.value`, and — the named
baseline, in the same run — with the evaluation path of main at 89ab31f (per age, the region by
signed log-sum-exps and Laplace CDFs over all I + 1 counts, :meth:`FailureRatePenalty.conditional_value`).
Both must return the same schedule (asserted).  Target < 1 s.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the baseline in _failure_rate_ref.py

TARGET_S = 1.0


def _search(cls):
    from policyopt import Population, two_state_chain
    from policyopt.studies.schedule import design_schedule

    pop = Population([two_state_chain(0.1, 0.1)], [20])
    start = time.perf_counter()
    d = design_schedule(pop, max_penalty=0.35, A_max=20, S_max=20, penalty=cls(0.1, 0.1, 20), method="heuristic").to_dict()
    return time.perf_counter() - start, d


def bench() -> None:
    """Time the 20 × 20 failure-rate search, fast path vs main's per-count path; print time and ratio."""
    from _failure_rate_ref import PerCountFailureRate  # baseline: main's per-count interval algebra (O(I²) per point)
    from policyopt.utility.failure_rate import FailureRatePenalty

    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    _search(FailureRatePenalty)  # warm-up: imports
    fast = min(_search(FailureRatePenalty)[0] for _ in range(3))
    t_fast, d_fast = _search(FailureRatePenalty)
    fast = min(fast, t_fast)
    slow, d_slow = _search(PerCountFailureRate)
    keys = ("status", "A", "S_bar", "epsilon_c", "peak_risk")
    assert all(d_fast[k] == d_slow[k] for k in keys), ({k: d_fast[k] for k in keys}, {k: d_slow[k] for k in keys})
    verdict = "OK" if fast < TARGET_S else "OVER TARGET"
    print(f"failure-rate search, 20 × 20 box (heuristic + exact (28)): {fast:.3f} s (best of 4)  "
          f"[target < {TARGET_S:g} s] {verdict}; baseline per-count interval algebra (main): {slow:.2f} s; "
          f"ratio {slow / fast:.1f}×; same schedule A = {d_fast['A']:g}, S̄ = {d_fast['S_bar']:g}, "
          f"ε_C = {d_fast['epsilon_c']:.12g}")


if __name__ == "__main__":
    bench()
