"""Benchmark: temporal privacy leakage on an augmented chain Z, by the size of Z (what ``MAX_TPL_Z_STATES`` rests on).

Run with ``OPENBLAS_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_tpl_z.py [--large]``.

For the 17 bundled homes, each model (``order:k``, ``hmm:R``) is fitted on every reading
(:func:`policyopt.studies.markov_check.fit_for_design`), its Z matrices give P_B, P_F
(:func:`policyopt.studies.tpl_report.z_temporal_matrices`), and the script prints the CPU seconds of the three things
``tpl`` / ``tpl-budget`` compute on them (Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in
Continuous Data Release under Temporal Correlations", IEEE TKDE 31(7), 2019): BPL/FPL/TPL over T = 24 and 1000 steps of
ε_t = 0.1 (eqs. (10)–(15), ``leakage_upper``), Theorem 11's suprema (``supremum_upper`` per user and side) and
Algorithm 8 (``BudgetAllocationProblem(..., 1.0, 24).solve("quantification")``).  ``--large`` adds Z of 144
(``order:2``, 12 states) and 729 states (``order:2``, 27 states), which the cap refuses (minutes).  The model check is
not timed here (``bench_markov_test.py``); the fits are reported separately.

Measured (CPU seconds, one core, 17 users; the machine shared by several jobs, load ≈ 10 on 2 cores):

=============  ========  ==========  ============  =======  ======  ===========================
model, K       Z states  TPL T = 24  TPL T = 1000  suprema  Alg. 8  note
=============  ========  ==========  ============  =======  ======  ===========================
hmm:2, 3       6         0.15        0.17          0.08     0.23
order:2, 3     9         0.03        0.06          0.12     0.52    Alg. 8: no positive budgets
hmm:2, 12      24        0.24        0.32          0.12     0.13
order:3, 3     27        0.03        0.04          0.41     0.00
hmm:4, 12      48        1.09        1.01          0.39     1.52
hmm:6, 12      72        4.17        4.03          1.75     2.03    fit 12 s (EM)
hmm:6, 13      78        4.27        4.62          2.28     2.99
order:4, 3     81        0.04        0.06          2.48     0.01    the cap
order:2, 12    144       0.06        0.10          13.76    0.43    refused
order:2, 27    729       6.7 (wall)  —             > 300    —       refused
=============  ========  ==========  ============  =======  ======  ===========================

The dense hidden-regime Z grows about as n³ (the loss function's row pairs), the sparse order-k Z's suprema about as
n²; both scale linearly in the users.
"""

from __future__ import annotations

import sys
import time

import numpy as np

CASES = [("order:2", 3), ("hmm:2", 3), ("order:3", 3), ("hmm:2", 12), ("order:4", 3), ("hmm:4", 12), ("hmm:6", 12)]
LARGE = [("order:2", 12), ("order:2", 27)]


def _cpu(fn):
    start = time.process_time()
    value = fn()
    return value, time.process_time() - start


def bench(cases) -> None:
    """One line per (model, K): Z states, fit, leakage at T = 24 and 1000, suprema, Algorithm 8 (CPU seconds)."""
    from policyopt.data import load_citylearn
    from policyopt.models.estimation import fit_population
    from policyopt.privacy.tpl_leakage import leakage_upper
    from policyopt.privacy.tpl_supremum import supremum_upper
    from policyopt.problems.tpl_budget import BudgetAllocationProblem
    from policyopt.studies.markov_check import fit_for_design
    from policyopt.studies.tpl_report import z_temporal_matrices

    df = load_citylearn()
    for spec, K in cases:
        fitted = fit_population(df, K)
        model, t_fit = _cpu(lambda: fit_for_design(spec, df, fitted.quantizer, fitted.users, seed=0, default_period=24))
        (P_B, P_F), t_z = _cpu(lambda: z_temporal_matrices(model))
        n = P_F[0].shape[0]
        _, t24 = _cpu(lambda: leakage_upper(P_B, P_F, np.full(24, 0.1)))
        _, t1000 = _cpu(lambda: leakage_upper(P_B, P_F, np.full(1000, 0.1)))
        _, t_sup = _cpu(lambda: [supremum_upper(P, 0.1) for P in P_B + P_F])
        sol, t_alg = _cpu(lambda: BudgetAllocationProblem(P_B, P_F, 1.0, 24).solve("quantification"))
        print(f"{spec:>8} K={K:<3} Z={n:<4} fit {t_fit:7.2f} s  Z matrices {t_z:5.2f} s  TPL T=24 {t24:7.2f} s  "
              f"T=1000 {t1000:7.2f} s  suprema {t_sup:7.2f} s  Alg. 8 {t_alg:7.2f} s ({sol.status.value})", flush=True)


if __name__ == "__main__":
    bench(CASES + (LARGE if "--large" in sys.argv[1:] else []))
