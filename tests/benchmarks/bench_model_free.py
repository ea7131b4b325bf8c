"""Benchmark of the model-free guarantee and design (a measurement script, not a pytest test).

Run with ``OPENBLAS_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_model_free.py`` (``bench()`` is what
``make bench`` calls).

1. The accounting of a year of hourly releases (k = 8760, ε_C = 0.00506, δ = 1e-6) by
   :func:`policyopt.privacy.model_free.laplace_epsilon` (adaptive grid), and in the same run ``dp_accounting``'s
   ``PLDAccountant`` called directly at its default grid (1e-4) as the baseline: both times, their ratio and the two ε.
   Target < 0.5 s.
2. The worst cases ε_C ∈ {0.3, 1, 50} × k = 8760 (and k = 10⁵ for ε_C = 50).  Target < 2 s each.
3. The model-free design (:class:`policyopt.problems.ModelFreeProblem`, exact solver) on the readings penalty of the
   bundled CityLearn homes (I = 10⁵, S_max = 168, H = 8760, δ = 1e-6) at three bounds f̄, and on two-state chains
   where every S̄ is feasible (the lower-bound pruning at work).  Target < 2 s each (building the penalty is not
   timed).
4. With ``--looseness``: the adaptive grid against the default grid on the cases of ``laplace_epsilon``'s notes
   (several minutes: the default grid takes 20–30 s at ε_C = 1, k = 8760).

The first accountant call pays the import of ``dp_accounting`` (≈ 2 s, scipy.stats/signal); it is made before the
clock starts.
"""

from __future__ import annotations

import sys
import time

YEAR_TARGET_S, WORST_TARGET_S, DESIGN_TARGET_S = 0.5, 2.0, 2.0
DELTA = 1e-6


def report(label: str, value: float, unit: str, target: float) -> None:
    """Print ``label: value unit  [target < X unit] OK`` or ``OVER TARGET``."""
    print(f"{label}: {value:.3f} {unit}  [target < {target:g} {unit}] {'OK' if value < target else 'OVER TARGET'}")


def _default_grid(eps: float, k: int) -> float:
    """dp_accounting's PLDAccountant called directly, default grid, pessimistic (the baseline)."""
    import dp_accounting
    import numpy as np
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant()
    acc.compose(dp_accounting.LaplaceDpEvent(noise_multiplier=1.0 / eps), count=k)
    with np.errstate(over="ignore"):
        return min(float(acc.get_epsilon(DELTA)), eps * k)


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def bench(looseness: bool = False) -> None:
    import os

    from policyopt.privacy.model_free import laplace_epsilon, pld_discretization

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"model-free accounting (dp_accounting PLD), δ = {DELTA:g}; load average {load:.2f}")
    laplace_epsilon(0.1, 2, DELTA)  # import dp_accounting before the clock starts
    _default_grid(0.1, 2)

    ours, t_ours = _timed(laplace_epsilon, 0.00506, 8760, DELTA)
    base, t_base = _timed(_default_grid, 0.00506, 8760)
    report("year of hourly releases (k = 8760, ε_C = 0.00506), laplace_epsilon", t_ours, "s", YEAR_TARGET_S)
    print(f"  dp_accounting direct, default grid: {t_base:.3f} s (ratio {t_base / t_ours:.2f}×); "
          f"ε = {ours:.6f} (grid {pld_discretization(0.00506, 8760, DELTA):.3g}) vs {base:.6f} nats "
          f"({100 * (ours - base) / base:+.3f} %)")

    for eps, k in ((0.3, 8760), (1.0, 8760), (50.0, 8760), (50.0, 100_000)):
        value, t = _timed(laplace_epsilon, eps, k, DELTA)
        report(f"worst case ε_C = {eps:g}, k = {k}", t, "s", WORST_TARGET_S)
        print(f"  ε = {value:.6g} nats (pure {eps * k:.6g}; grid {pld_discretization(eps, k, DELTA):.3g})")

    _design()
    if looseness:
        _looseness()


def _design() -> None:
    import policyopt as po
    from policyopt.problems import ModelFreeProblem
    from policyopt.utility.readings_penalty import ReadingsMSEPenalty, readings_moments

    data = po.load_citylearn()
    pen = ReadingsMSEPenalty(readings_moments(data, 200, value_range=(0, 48), phase_period=24), users=100_000,
                             unit="kWh^2")
    for f_bar in (0.0364048, 0.3, 0.8):
        problem = ModelFreeProblem(pen, f_bar, horizon=8760, delta=DELTA, S_max=168, windows=(24, 168))
        sol, t = _timed(problem.solve)
        report(f"model-free design, readings penalty of the bundled homes, f̄ = {f_bar:g} kWh^2, S_max = 168, H = 8760",
               t, "s", DESIGN_TARGET_S)
        d, v = sol.decision, sol.values
        print(f"  {sol.status.value}: A = {d['A']}, S̄ = {d['S_bar']}, ε_C = {d['epsilon_c']!r}; ε = {sol.objective:.6g} "
              f"nats over {v['releases']} releases; {v['accounted']} S̄ accounted, {v['pruned']} pruned")
    # every S̄ feasible: the pruning does the work (two-state chains, Zhang et al. 2024 eqs. (43), (48)–(49))
    from policyopt.models.markov import Population, two_state_chain
    from policyopt.utility.penalty import MSEPenalty

    chain = MSEPenalty(Population([two_state_chain(0.1, 0.1)], [100]), users=1000)
    problem = ModelFreeProblem(chain, 0.0021, horizon=8760, delta=DELTA, A_max=24, S_max=168, windows=(24, 168))
    sol, t = _timed(problem.solve)
    report("model-free design, two-state chains (p = q = 0.1, I = 1000), f̄ = 0.0021, A_max = 24, S_max = 168", t, "s",
           DESIGN_TARGET_S)
    d, v = sol.decision, sol.values
    print(f"  {sol.status.value}: A = {d['A']}, S̄ = {d['S_bar']}, ε = {sol.objective:.6g} nats; "
          f"{v['accounted']} S̄ accounted, {v['pruned']} pruned")


def _looseness() -> None:
    from policyopt.privacy.model_free import laplace_epsilon

    worst = 0.0
    cases = [(e, k) for e in (0.00506, 0.05, 0.3, 1.0, 3.0, 50.0) for k in (1, 24, 168, 8760)]
    cases += [(50.0, 10), (0.001, 8760), (0.01, 8760), (0.1, 1000), (2.0, 1000)]
    for eps, k in cases:
        if (eps >= 3.0 and k == 8760) or (eps == 50.0 and k == 168):
            continue  # the default grid needs > 10⁷ points here
        ours = laplace_epsilon(eps, k, DELTA)
        base, t = _timed(_default_grid, eps, k)
        rel = (ours - base) / base
        worst = max(worst, rel)
        print(f"  looseness ε_C = {eps:g}, k = {k}: {ours:.8g} vs default grid {base:.8g} ({100 * rel:+.4f} %, "
              f"default {t:.2f} s)")
    print(f"  worst looseness against the default grid: {100 * worst:+.4f} %  [target < 1 %] "
          f"{'OK' if worst < 0.01 else 'OVER TARGET'}")


if __name__ == "__main__":
    bench(looseness="--looseness" in sys.argv[1:])
