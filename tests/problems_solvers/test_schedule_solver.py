"""Problem (28) via Theorem 4 and its exact solver; the benchmarks of the main job."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt.errors import InvalidInputError
from policyopt.models.markov import MarkovChain, Population, two_state_chain
from policyopt.utility.penalty import CallablePenalty, MSEPenalty, two_state_mse
from policyopt.problems import ScheduleProblem
from policyopt.result import Status, Termination
from policyopt.studies.schedule import design_schedule, noise_only_benchmark


def two_state_problem(p, q, users, f_bar, A_max=6, S_max=6):
    pop = Population([two_state_chain(p, q)], [users])
    return ScheduleProblem(pop, MSEPenalty(pop), f_bar, A_max=A_max, S_max=S_max)


def brute_force(p, q, users, f_bar, A_max, S_max, eps_grid):
    """Independent grid search with the closed forms (47), (49), (30)."""
    lam = abs(1 - p - q)
    best = math.inf
    for A in range(A_max + 1):
        for S in range(1, S_max + 1):
            ages = np.arange(A, A + S)
            pen = np.max(two_state_mse(ages[:, None], eps_grid[None, :], p, q, users), axis=0)
            cond = lam**S * np.exp(eps_grid)
            ok = (pen <= f_bar) & (cond < 1)
            if ok.any():
                e = eps_grid[ok]
                risk = np.log1p(lam**A * np.expm1(e) / (1 - lam**S * np.exp(e)))
                best = min(best, float(risk.min()))
    return best


def independent_check(p, q, users, f_bar, decision):
    """Feasibility of a returned schedule, re-evaluated from the closed forms only."""
    A, S, eps = decision["A"], decision["S_bar"], decision["epsilon_c"]
    lam = abs(1 - p - q)
    pen = np.max(two_state_mse(np.arange(A, A + S), eps, p, q, users))
    return pen <= f_bar and lam**S * math.exp(eps) < 1


@pytest.mark.parametrize(
    "p, q, users, f_bar",
    [(0.1, 0.1, 20, 0.08), (0.1, 0.3, 5, 0.4), (0.7, 0.9, 4, 0.7), (0.3, 0.2, 10, 0.15), (0.05, 0.1, 8, 0.4)],
)
def test_exact_solver_agrees_with_brute_force(p, q, users, f_bar):
    problem = two_state_problem(p, q, users, f_bar)
    sol = problem.solve()
    grid = np.linspace(1e-4, 8.0, 40001)
    ref = brute_force(p, q, users, f_bar, 6, 6, grid)
    assert sol.status in (Status.OPTIMAL, Status.UNBOUNDED)
    assert independent_check(p, q, users, f_bar, sol.decision)
    # exact ≤ any grid point; the grid is fine enough to come within 1e-3 relative
    assert sol.objective <= ref * (1 + 1e-12)
    assert ref - sol.objective <= 1e-3 * ref
    if sol.status is Status.OPTIMAL:
        # the bound starts from the lower side of each budget and is rounded down (issue 26): a rounding gap
        assert sol.bound <= sol.objective and 0.0 <= sol.gap < 1e-9
    assert sol.termination is Termination.COMPLETED
    assert sol.values["peak_aoi"] == sol.decision["A"] + sol.decision["S_bar"] - 1


def test_paper_setting_reference_schedule():
    # p = q = 0.1, I = 20 (Zhang et al. 2024, Fig. 4/6 setting), f̄ = 0.08: optimum publishes fresh data every 5 slots
    sol = two_state_problem(0.1, 0.1, 20, 0.08, A_max=50, S_max=50).solve()
    assert sol.status is Status.OPTIMAL
    assert (sol.decision["A"], sol.decision["S_bar"]) == (0, 5)
    # ε_C = s·sqrt(2/(f̄ − W)) with W = staleness at peak AoI 4: 0.1(1 − 0.8^4) = 0.059040
    W = 8 * 0.01 * (1 - 0.8**4) / (20 * 0.04)
    # rounded up (never down) so that the bound holds in exact arithmetic: by ROUND_UP = 1e-12 and by
    # the staleness rounding-error bound (MSEPenalty.staleness_rel_error · W, relative to f̄ − W)
    ref = 0.1 * math.sqrt(2 / (0.08 - W))
    assert ref <= sol.decision["epsilon_c"] <= ref * (1 + 2e-12)
    e = sol.decision["epsilon_c"]
    assert sol.objective == pytest.approx(math.log1p(math.expm1(e) / (1 - 0.8**5 * math.exp(e))), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    st.floats(0.02, 0.98),
    st.floats(0.02, 0.98),
    st.integers(1, 30),
    st.floats(0.01, 1.0),
    st.floats(1.0, 3.0),
)
def test_looser_penalty_bound_never_raises_the_optimal_risk(p, q, users, f_bar, factor):
    tight = two_state_problem(p, q, users, f_bar, 5, 5).solve()
    loose = two_state_problem(p, q, users, f_bar * factor, 5, 5).solve()
    if tight.status is Status.INFEASIBLE:
        return
    assert loose.status is not Status.INFEASIBLE
    assert loose.objective <= tight.objective * (1 + 1e-12)
    for sol, fb in ((tight, f_bar), (loose, f_bar * factor)):
        assert independent_check(p, q, users, fb, sol.decision)


def test_non_reversible_population_schedule_is_feasible_and_optimal(nonreversible3):
    pop = Population([nonreversible3, MarkovChain([[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]], [0, 1, 3])], [3, 2])
    pen = MSEPenalty(pop)
    f_bar = 1.0
    problem = ScheduleProblem(pop, pen, f_bar, A_max=8, S_max=8)
    sol = problem.solve()
    assert sol.status in (Status.OPTIMAL, Status.UNBOUNDED)
    d = sol.decision
    ev = problem.evaluate(d["A"], d["S_bar"], d["epsilon_c"])
    assert ev.feasible and ev.peak_risk == pytest.approx(sol.objective, rel=1e-14)
    # brute force over (A, S̄) and a fine ε grid, with Δ from the definition
    best = math.inf
    grid = np.linspace(1e-3, 6, 6000)
    for A in range(9):
        for S in range(1, 9):
            # the penalty decreases in ε_C (its noise term; staleness does not depend on ε_C): the grid points before
            # the first one meeting f̄ miss it and are infeasible.  That point by bisection, then the scan as before,
            # up to the first point where (31) fails (Δ(S̄)e^ε_C grows with ε_C: it fails at every later point too)
            meets = lambda i: problem.evaluate(A, S, float(grid[i])).penalty <= f_bar  # noqa: E731
            lo, hi = 0, grid.size
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if meets(mid) else (mid + 1, hi)
            assert lo == grid.size or lo == 0 or not meets(lo - 1) and meets(lo)
            for e in grid[lo:]:
                cand = problem.evaluate(A, S, float(e))
                if cand.feasible:
                    best = min(best, cand.peak_risk)
                    break  # ε* increases in ε_C: the first feasible grid point is the best
                if cand.condition_31 >= 1:
                    break
    assert sol.objective <= best * (1 + 1e-12)
    assert best - sol.objective <= 2e-3 * best


def test_infeasible_reports_smallest_achievable_penalty():
    problem = two_state_problem(0.1, 0.1, 20, 0.05, A_max=20, S_max=20)
    sol = problem.solve()
    assert sol.status is Status.INFEASIBLE and sol.decision is None and sol.objective is None
    assert sol.termination is Termination.INFEASIBLE
    floor = sol.values["min_penalty"]
    assert floor > 0.05
    assert "smallest achievable penalty" in sol.message and "(31)" in sol.message
    # just above the infimum is feasible, just below is not
    above = two_state_problem(0.1, 0.1, 20, floor * 1.001, A_max=20, S_max=20).solve()
    assert above.status is not Status.INFEASIBLE
    below = two_state_problem(0.1, 0.1, 20, floor * 0.999, A_max=20, S_max=20).solve()
    assert below.status is Status.INFEASIBLE


def test_infeasible_because_staleness_exceeds_bound():
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    mse = MSEPenalty(pop)
    # a penalty whose noiseless part is at least 1 at every age
    shifted = CallablePenalty(lambda t, e: mse.value(t, e) + 1.0, lambda t: mse.noiseless(t) + 1.0)
    sol = ScheduleProblem(pop, shifted, 0.5, A_max=3, S_max=3).solve()
    assert sol.status is Status.INFEASIBLE
    assert "the staleness alone exceeds f̄ = 0.5" in sol.message
    assert sol.values["min_penalty"] > 1.0


def test_infeasible_when_chain_never_forgets():
    pop = Population([MarkovChain([[0.0, 1.0], [1.0, 0.0]], [-1.0, 1.0])], [5])  # periodic: Δ ≡ 1
    sol = ScheduleProblem(pop, MSEPenalty(pop), 10.0, A_max=4, S_max=4).solve()
    assert sol.status is Status.INFEASIBLE
    assert "no ε_C > 0 satisfies (31)" in sol.message
    assert sol.values["min_penalty"] == math.inf


def test_iid_data_leaks_exactly_the_budget_of_fresh_releases():
    # p = q = 0.5: Δ(0) = 1 and Δ(t) = 0 for t ≥ 1, so (31) holds for any ε_C and eq. (30) gives ε* = ε_C
    # at A = 0; any aging A ≥ 1 would give ε* = 0 but its staleness 2/I = 1 exceeds f̄.
    sol = two_state_problem(0.5, 0.5, 2, 1e-3, A_max=3, S_max=3).solve()
    assert sol.status is Status.OPTIMAL
    assert (sol.decision["A"], sol.decision["S_bar"]) == (0, 1)
    assert sol.objective == pytest.approx(sol.decision["epsilon_c"], rel=1e-14)
    assert sol.decision["epsilon_c"] == pytest.approx(1.0 * math.sqrt(2 / 1e-3), rel=1e-11)


def test_unbounded_when_bound_exceeds_staleness_limit():
    problem = two_state_problem(0.1, 0.1, 20, 0.2, A_max=30, S_max=30)
    sol = problem.solve()
    assert sol.status is Status.UNBOUNDED
    assert sol.decision["A"] == 30
    assert "a larger A_max lowers the risk further" in sol.message
    assert "staleness limit" in sol.message
    assert sol.bound is None
    larger = two_state_problem(0.1, 0.1, 20, 0.2, A_max=31, S_max=30).solve()
    assert larger.objective < sol.objective


def test_no_aging_restriction_and_problem_is_not_mutated():
    problem = two_state_problem(0.1, 0.1, 20, 0.2, A_max=30, S_max=30)
    no_aging = problem.restrict(A_max=0)
    sol = no_aging.solve()
    assert sol.status is Status.OPTIMAL and sol.decision["A"] == 0
    assert problem.A_max == 30
    with pytest.raises(dataclasses.FrozenInstanceError):
        sol.objective = 0.0
    with pytest.raises(TypeError):
        sol.decision["A"] = 3
    with pytest.raises(InvalidInputError, match="can only shrink the box"):
        problem.restrict(A_max=40)


def test_noise_only_benchmark_reference():
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    bench = noise_only_benchmark(MSEPenalty(pop), 0.08, 24)
    eps = 0.1 * math.sqrt(2 / 0.08)  # s = 2/I = 0.1, staleness 0 at age 0
    assert bench["epsilon_c"] == pytest.approx(eps, rel=1e-11)  # rounded up by 1e-12
    assert bench["risk_after_releases"] == pytest.approx(24 * eps, rel=1e-11)
    assert bench["status"] == "divergent"


def test_design_schedule_report_fields():
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    report = design_schedule(pop, max_penalty=0.08, A_max=20, S_max=20, releases=10)
    out = report.to_dict()
    for key in ("status", "A", "S_bar", "epsilon_c", "peak_risk", "penalty", "max_penalty", "peak_aoi", "method", "wall_time_s"):
        assert key in out
    assert out["model"]["c"] == pytest.approx(1.0) and out["model"]["rho"] == pytest.approx(0.8)
    assert out["benchmarks"]["no_aging"]["A"] == 0
    assert out["benchmarks"]["noise_only"]["releases"] == 10
    assert out["peak_risk"] <= out["benchmarks"]["no_aging"]["peak_risk"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_penalty=0.0), r"`max_penalty` \(f̄\) must be a positive finite number, got 0.0"),
        (dict(max_penalty=float("nan")), r"`max_penalty` \(f̄\) must be a positive finite number, got nan"),
        (dict(A_max=-1), r"`A_max` must be an integer ≥ 0 \(slots\), got -1"),
        (dict(S_max=0), r"`S_max` must be an integer ≥ 1 \(slots\), got 0"),
    ],
)
def test_problem_input_errors(kwargs, match):
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    args = dict(max_penalty=0.1, A_max=5, S_max=5)
    args.update(kwargs)
    with pytest.raises(InvalidInputError, match=match):
        ScheduleProblem(pop, MSEPenalty(pop), **args)


def test_evaluate_and_method_errors():
    problem = two_state_problem(0.1, 0.1, 20, 0.1)
    ev = problem.evaluate(0, 1, 2.0)  # Δ(1)e^2 = 5.9 ≥ 1
    assert not ev.feasible and ev.peak_risk is None
    assert any("(31) fails" in v for v in ev.violations)
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be a positive finite number \(nats\), got -1.0"):
        problem.evaluate(0, 1, -1.0)
    with pytest.raises(InvalidInputError, match=r"unknown `method` 'nope'; choose one of \['cvxpy', 'exact', 'heuristic', 'pyomo'"):
        problem.solve(method="nope")
    assert problem.is_convex is False
    assert problem.integrality == {"A": "integer", "S_bar": "integer", "epsilon_c": "continuous"}


def test_large_budget_never_hides_a_divergent_schedule():
    # penalty 1/ε_C forces ε_C ≥ 800; Δ(t) = 0.1^t needs S̄ > 800/ln 10 ≈ 347.4 for (31),
    # which S_max = 340 does not allow, although Δ(S̄) underflows a float long before
    chain = two_state_chain(0.4, 0.5)
    pen = CallablePenalty(lambda t, e: 0 * t + 1 / np.asarray(e), lambda t: 0.0 * t)
    pop = Population([chain])
    sol = ScheduleProblem(pop, pen, 1 / 800, A_max=3, S_max=340).solve()
    assert sol.status is Status.INFEASIBLE
    ok = ScheduleProblem(pop, pen, 1 / 800, A_max=3, S_max=360).solve()
    assert ok.status in (Status.OPTIMAL, Status.UNBOUNDED)
    assert ok.decision["S_bar"] >= 348
    assert ok.objective > 0
