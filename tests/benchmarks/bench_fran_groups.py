"""Benchmark of problem P1 (Luo et al. 2025, "Correlated-Sequence Differential Privacy", eqs. (23)–(24)) by the group search (policyopt.solvers.fran_groups) vs full enumeration.

Run: ``.venv/bin/python tests/benchmarks/bench_fran_groups.py`` (also run by ``make bench``).

1. s = 64 binary sequences in 32 independently coupled pairs (each pair the paper's eq. (25) model with
   random p, q, λ, seed 2026), A_max = 24, mean query, l̄ = 0.02: the group search, cold (building the
   32 two-sequence joint chains and tables included).  Target < 10 s.  Enumeration would visit
   25^64 ≈ 3.5·10^89 AoI vectors and needs the joint chain on 2^64 snapshots: it cannot run.
2. The named baseline in the same run: exhaustive enumeration (``FRANProblem.solve("enumeration")``,
   branch and bound over every AoI vector of the joint chain) vs the group search, on the largest
   cases enumeration handles in seconds: 3 pairs with A_max = 9 (10^6 vectors, 64 snapshots)
   and 2 pairs with A_max = 24 (25^4 = 390,625 vectors); the two optimal values must agree to 1e-9 (asserted).
3. For scale, 64 sequences in 16 coupled groups of 4 (A_max = 24, 16 × 390,625 group vectors).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import time

import numpy as np

TARGET_S = 10.0


def paired_cmc(n_pairs: int, rng):
    """CMC of `n_pairs` independent two-binary-sequence groups (Luo et al. 2025 eq. (25) per pair, random p, q, λ)."""
    from policyopt.models.cmc import CouplingMarkovChain, two_binary_cmc

    s = 2 * n_pairs
    T = np.broadcast_to(np.eye(2), (s, s, 2, 2)).copy()
    lam = np.zeros((s, s))
    for k in range(n_pairs):
        c = two_binary_cmc(*rng.uniform(0.05, 0.4, 2), rng.uniform(0.3, 0.9))
        sl = slice(2 * k, 2 * k + 2)
        T[sl, sl] = c.transitions
        lam[sl, sl] = c.coupling
    return CouplingMarkovChain(T, lam, [0.0, 1.0])


def block_cmc(sizes, rng):
    """Sticky random binary CMC with block-diagonal coupling of the given group sizes."""
    from policyopt.models.cmc import CouplingMarkovChain

    s = sum(sizes)
    T = 0.8 * np.eye(2) + 0.2 * rng.dirichlet(np.ones(2), size=(s, s, 2))
    lam = np.zeros((s, s))
    o = 0
    for n in sizes:
        lam[o:o + n, o:o + n] = rng.dirichlet(np.ones(n), size=n)
        o += n
    return CouplingMarkovChain(T, lam, [0.0, 1.0])


def _timed(f):
    start = time.perf_counter()
    out = f()
    return time.perf_counter() - start, out


def bench() -> None:
    """Print the group-search time for 64 sequences and the enumeration / group-search ratio."""
    from policyopt.problems.fran import FRANProblem
    from policyopt.problems.fran_groups import GroupedFRANProblem

    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    rng = np.random.default_rng(2026)
    cmc = paired_cmc(32, rng)
    t, sol = _timed(lambda: GroupedFRANProblem(cmc, 0.02, max_age=24).solve())
    verdict = "OK" if t < TARGET_S else "OVER TARGET"
    print(f"P1 group search, s = 64 (32 coupled pairs), A_max = 24, cold: {t:.3f} s  [target < {TARGET_S:g} s] "
          f"{verdict}; {sol.status.value}, ε_S = {sol.objective:.9g} nats, exact Δ_k for {sol.values['n_exact']} "
          f"of {sol.values['n_vectors']} group vectors (enumeration: 25^64 vectors, 2^64 snapshots: cannot run)")
    for n_pairs, A in ((3, 9), (2, 24)):
        cmc = paired_cmc(n_pairs, np.random.default_rng(7 + n_pairs))
        d_max = float(FRANProblem(cmc, 1.0, max_age=A).table["distortion"].max())
        lbar = 1.2 * d_max
        t_enum, ref = _timed(lambda: FRANProblem(cmc, lbar, max_age=A).solve("enumeration"))
        t_grp, got = _timed(lambda: GroupedFRANProblem(cmc, lbar, max_age=A).solve())
        # Δ_k of the joint chain and of the pair's own chain agree to rounding (~1e-17 absolute): equal
        # optima, and the AoI vectors may differ only between exact ties (symmetric sequences of a pair)
        assert abs(got.objective / ref.objective - 1) < 1e-9, (ref, got)
        print(f"P1, s = {2 * n_pairs} ({n_pairs} pairs), A_max = {A}, {(A + 1) ** (2 * n_pairs)} AoI vectors, cold: "
              f"baseline enumeration {t_enum:.3f} s, group search {t_grp:.3f} s, ratio {t_enum / t_grp:.1f}×; "
              f"same optimum ε_S = {got.objective:.9g} nats (A_t = {got.decision['aoi']} vs {ref.decision['aoi']})")
    cmc = block_cmc([4] * 16, np.random.default_rng(2026))
    t, sol = _timed(lambda: GroupedFRANProblem(cmc, 0.05, max_age=24).solve())
    print(f"P1 group search, s = 64 (16 coupled groups of 4), A_max = 24, cold: {t:.3f} s (no target); "
          f"exact Δ_k for {sol.values['n_exact']} of {sol.values['n_vectors']} group vectors")


if __name__ == "__main__":
    bench()
