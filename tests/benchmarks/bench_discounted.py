"""Benchmarks of discounted DP (issue 6): optimal-schedule solve times and accounting over 10⁶ steps.

Run standalone: ``.venv/bin/python tests/benchmarks/bench_discounted.py``.

Targets (issue 6, "Measure"):
* optimal schedule, exponential discounting (one-step recursion), T ∈ {10², 10³, 10⁴}: T = 10⁴ under 30 s;
* optimal schedule, hyperbolic discounting (dense constraint): how far T goes within 60 s and 4 GiB
  (each size runs in a child process, so its peak memory is its own);
* accounting of a schedule over 10⁶ steps (dp, exponential, hyperbolic by FFT) under 1 s each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


OPT_TARGET_S = 30.0
HYP_LIMIT_S = 60.0
HYP_LIMIT_GIB = 4.0
ACC_TARGET_S = 1.0

_CHILD = """
import json, resource, time, sys
from policyopt.problems.discounted import DiscountedScheduleProblem
notion, T, method = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kw = {"alpha": 0.9} if notion == "exponential" else ({"beta": 0.1} if notion == "hyperbolic" else {})
DiscountedScheduleProblem(notion, 1.0, 5, **kw).solve(method=method)  # warm-up: imports, not timed
t = time.perf_counter()
sol = DiscountedScheduleProblem(notion, 1.0, T, **kw).solve(method=method)
dt = time.perf_counter() - t
print(json.dumps({"time": dt, "status": sol.status.value, "gap": sol.relative_gap,
                  "worst": sol.values["worst_loss"], "kkt": bool(sol.kkt and sol.kkt["passed"]),
                  "maxrss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def _line(label: str, seconds: float, target: float, extra: str = "") -> str:
    ok = "OK" if seconds < target else "OVER TARGET"
    return f"{label}: {seconds:.3f} s  [target < {target:g} s] {ok}{extra}"


def _child(notion: str, T: int, method: str, timeout: float):
    """Solve in a fresh interpreter; None on timeout."""
    try:
        res = subprocess.run([sys.executable, "-c", _CHILD, notion, str(T), method], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if res.returncode != 0:
        raise RuntimeError(f"child failed for {notion} T={T}: {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_optimal() -> None:
    """Solve times of the optimal schedule (exponential: recursion; hyperbolic: dense)."""
    for T in (100, 1000, 10_000):
        r = _child("exponential", T, "cvxpy", 10 * OPT_TARGET_S)
        assert r is not None and r["worst"] <= 1.0 and r["status"] == "optimal", r
        print(_line(f"optimal schedule, exponential α=0.9, T={T}", r["time"], OPT_TARGET_S,
                    f"  (status {r['status']}, gap {r['gap']:.1e}, {r['maxrss_gib']:.2f} GiB)"))
    for method in ("cvxpy", "dual"):
        reached = None
        for T in (100, 1000, 2000, 4000, 10_000, 20_000):
            r = _child("hyperbolic", T, method, HYP_LIMIT_S * 1.5)
            if r is None:
                print(f"optimal schedule, hyperbolic β=0.1, {method}, T={T}: > {HYP_LIMIT_S * 1.5:g} s (stopped)  OVER TARGET")
                break
            assert r["worst"] <= 1.0, r
            fits = r["time"] < HYP_LIMIT_S and r["maxrss_gib"] < HYP_LIMIT_GIB
            print(_line(f"optimal schedule, hyperbolic β=0.1, {method}, T={T}", r["time"], HYP_LIMIT_S,
                        f"  (status {r['status']}, gap {r['gap']:.1e}, peak {r['maxrss_gib']:.2f} GiB)"))
            if not fits:
                break
            reached = T
        print(f"hyperbolic optimal schedule ({method}): largest T tried within {HYP_LIMIT_S:g} s and "
              f"{HYP_LIMIT_GIB:g} GiB: {reached}")


def bench_accounting() -> None:
    """Running (discounted) loss sums of a 10⁶-step schedule."""
    from policyopt.privacy.discounted import discounted_loss
    from policyopt.privacy.discounted_schedules import corollary_schedule

    T = 10**6
    for notion, kw in (("dp", {}), ("exponential", {"alpha": 0.99}), ("hyperbolic", {"beta": 0.01})):
        b = corollary_schedule(notion, 1.0, T, **kw)
        discounted_loss(b[:10], 1.0, notion, **kw)  # warm-up: imports (scipy.signal), not timed
        if notion == "hyperbolic":
            discounted_loss(b[:30_000], 1.0, notion, **kw)  # FFT path
        times = []
        for _ in range(3):  # best of 3: the machine is shared
            t = time.perf_counter()
            loss = discounted_loss(b, 1.0, notion, **kw)
            times.append(time.perf_counter() - t)
        dt = min(times)
        assert loss.values.shape == (T,) and loss.holds(1.0), (notion, loss.worst)
        print(_line(f"accounting {notion} over 10^6 steps ({loss.method})", dt, ACC_TARGET_S,
                    f"  (worst {loss.worst:.12f} nats ≤ ε = 1)"))


def bench() -> None:
    """All discounted-DP benchmarks (prints one line per measurement)."""
    import os

    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    bench_accounting()
    bench_optimal()


if __name__ == "__main__":
    bench()
