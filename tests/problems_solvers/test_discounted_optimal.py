"""The variance-optimal discounted-DP schedule (problems/discounted.py, solvers/discounted_opt.py)."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from policyopt.privacy.discounted import discount_matrix, discounted_loss
from policyopt.privacy.discounted_schedules import corollary_schedule
from policyopt.errors import InvalidInputError
from policyopt.problems.discounted import DiscountedScheduleProblem
from policyopt.result import Status
from policyopt.solvers.discounted_opt import DiscountedCvxpySolver, kkt_report, recovered_multipliers

CASES = [("dp", {}), ("exponential", {"alpha": 0.9}), ("exponential", {"alpha": 0.3}),
         ("hyperbolic", {"beta": 0.1}), ("hyperbolic", {"beta": 5.0})]


def numpy_objective(schedule, sensitivity, weights):
    """Σ w_t 2 b_t², written out independently of the package."""
    b = np.asarray(schedule)
    return float(np.sum(np.asarray(weights) * 2.0 * b**2))


@pytest.mark.parametrize("notion, kw", CASES)
def test_optimal_is_feasible_certified_and_beats_the_corollary(notion, kw):
    T, eps, d = 150, 0.8, 2.0
    w = np.random.default_rng(5).uniform(0.5, 2.0, T)
    prob = DiscountedScheduleProblem(notion, eps, T, sensitivity=d, weights=w, **kw)
    sol = prob.solve()
    assert sol.status == Status.OPTIMAL, sol.message
    b = np.asarray(sol.decision["schedule"])
    # feasible by the package's accounting and by an independent dense matrix product
    assert prob.evaluate(b).feasible
    A = discount_matrix(notion, T, **kw)
    assert np.max(A @ (d / b)) <= eps * (1 + 1e-12)
    # objective matches an independent numpy evaluation
    assert sol.objective == pytest.approx(numpy_objective(b, d, w), rel=1e-12)
    # certificate: bound ≤ objective, tiny gap, KKT passes
    assert sol.bound <= sol.objective and sol.relative_gap <= 1e-6
    assert sol.kkt["passed"] and sol.kkt["primal_feasibility"] <= 0
    # beats every corollary schedule of its notion in (weighted) variance for the same guarantee
    cor = corollary_schedule(notion, eps, T, sensitivity=d, **kw)
    assert discounted_loss(cor, d, notion, **kw).holds(eps)
    assert sol.objective < numpy_objective(cor, d, w)
    assert sol.values["savings_vs_corollary"] == pytest.approx(1 - sol.objective / numpy_objective(cor, d, w), rel=1e-9)


@pytest.mark.parametrize("notion, kw", CASES)
def test_dual_back_end_agrees_with_cvxpy(notion, kw):
    """Two independent back ends (Clarabel on the primal, L-BFGS-B on the dual) reach the same optimum."""
    prob = DiscountedScheduleProblem(notion, 1.0, 120, weights=np.linspace(1, 2, 120), **kw)
    a, b = prob.solve("cvxpy"), prob.solve("dual")
    assert a.status == b.status == Status.OPTIMAL
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
    assert max(a.bound, b.bound) <= min(a.objective, b.objective)  # weak duality across back ends
    np.testing.assert_allclose(a.decision["schedule"], b.decision["schedule"], rtol=2e-3)


def test_dp_optimum_matches_closed_form():
    # Σ c_t/r_t² s.t. Σ r_t ≤ ε: r_t ∝ c_t^{1/3}, optimum (Σ c_t^{1/3})³/ε² (Lagrange, by hand)
    rng = np.random.default_rng(2)
    T, eps = 60, 1.3
    d, w = rng.uniform(0.5, 3.0, T), rng.uniform(0.1, 5.0, T)
    c = 2 * w * d**2
    sol = DiscountedScheduleProblem("dp", eps, T, sensitivity=d, weights=w).solve()
    assert sol.objective == pytest.approx(np.sum(np.cbrt(c)) ** 3 / eps**2, rel=1e-7)
    r_ref = eps * np.cbrt(c) / np.sum(np.cbrt(c))
    np.testing.assert_allclose(sol.decision["losses"], r_ref, rtol=1e-4)


@pytest.mark.parametrize("notion, kw", [("exponential", {"alpha": 0.6}), ("hyperbolic", {"beta": 0.7})])
def test_small_problem_matches_scipy_slsqp(notion, kw):
    """Independent optimiser: SLSQP on log r with the dense constraint matrix."""
    T, eps = 8, 1.0
    w = np.arange(1, T + 1, dtype=float)
    A = discount_matrix(notion, T, **kw)
    c = 2 * w

    def f(x):
        """Objective in log r."""
        return float(np.sum(c * np.exp(-2 * x)))

    res = minimize(f, np.full(T, math.log(eps / T)), method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda x: eps - A @ np.exp(x)}],
                   options={"ftol": 1e-11, "maxiter": 1000})
    assert res.success
    sol = DiscountedScheduleProblem(notion, eps, T, weights=w, **kw).solve()
    assert sol.objective == pytest.approx(res.fun, rel=1e-6)


def test_infinite_horizon_structure_exponential():
    # constant Δf and weights: after a transient the optimum is Corollary 12's constant loss (1 − α)ε
    sol = DiscountedScheduleProblem("exponential", 1.0, 400, alpha=0.5).solve()
    r = np.asarray(sol.decision["losses"])
    np.testing.assert_allclose(r[50:350], 0.5, rtol=1e-4)
    assert r[0] > 0.5  # the start exploits the empty history


def test_zero_sensitivity_steps_get_no_noise():
    d = np.array([1.0, 0.0, 1.0, 0.0, 2.0])
    sol = DiscountedScheduleProblem("hyperbolic", 1.0, 5, beta=1.0, sensitivity=d).solve()
    b = np.asarray(sol.decision["schedule"])
    assert b[1] == 0.0 and b[3] == 0.0 and np.all(b[[0, 2, 4]] > 0)
    assert sol.status == Status.OPTIMAL
    triv = DiscountedScheduleProblem("dp", 1.0, 3, sensitivity=0.0).solve()
    assert triv.objective == 0.0 and triv.decision["schedule"] == [0.0, 0.0, 0.0]


def test_large_epsilon():
    sol = DiscountedScheduleProblem("exponential", 50.0, 100, alpha=0.95).solve()
    assert sol.status == Status.OPTIMAL and sol.values["worst_loss"] <= 50.0


def test_compiled_problem_is_dcp_and_matches_numpy():
    prob = DiscountedScheduleProblem("hyperbolic", 1.0, 20, beta=0.2, weights=np.linspace(1, 2, 20))
    comp = prob.to_cvxpy()
    assert comp["problem"].is_dcp() and comp["form"] == "dense"
    u = np.linspace(0.5, 1.5, 20)
    comp["u"].value = u
    r = comp["scale"] * u
    assert comp["normaliser"] * comp["problem"].objective.value == pytest.approx(np.sum(prob.cost / r**2), rel=1e-12)
    rec = DiscountedScheduleProblem("exponential", 1.0, 20, alpha=0.5).to_cvxpy()
    assert rec["form"] == "recursion" and isinstance(rec["problem"], cp.Problem)


def test_kkt_report_detects_a_non_optimal_point():
    prob = DiscountedScheduleProblem("exponential", 1.0, 30, alpha=0.7)
    sol = prob.solve()
    r = np.asarray(sol.decision["losses"])
    bad = r * np.linspace(0.9, 1.0, 30)  # feasible but not optimal
    rep = kkt_report(prob, bad, recovered_multipliers(prob, bad))
    assert not rep["passed"]
    assert kkt_report(prob, r, sol.values["multipliers"])["passed"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 100.0), min_size=12, max_size=12), st.floats(0.05, 0.95))
def test_weak_duality(lam, alpha):
    """g(λ) ≤ objective of any feasible schedule (here Corollary 12), for every λ ≥ 0."""
    prob = DiscountedScheduleProblem("exponential", 1.0, 12, alpha=alpha)
    cor = prob.corollary_schedule()
    assert prob.dual_bound(lam) <= prob.objective_value(cor) * (1 + 1e-12)


@pytest.mark.parametrize("kwargs, match", [
    ({"notion": "geometric"}, r"unknown `notion` 'geometric'"),
    ({"notion": "exponential", "alpha": None}, r"notion 'exponential' needs `alpha`"),
    ({"notion": "dp", "weights": [1.0, 0.0, 1.0]}, r"`weights` must be > 0 where the sensitivity is > 0; entry 1 is 0.0"),
    ({"notion": "dp", "weights": [1.0, 1.0]}, r"`weights` must have length 3"),
    ({"notion": "dp", "epsilon": -1.0}, r"`epsilon` must be finite and > 0 \(nats\), got -1.0"),
])
def test_problem_errors(kwargs, match):
    args = {"notion": "dp", "epsilon": 1.0, "horizon": 3}
    args.update(kwargs)
    notion = args.pop("notion")
    with pytest.raises(InvalidInputError, match=match):
        DiscountedScheduleProblem(notion, args.pop("epsilon"), args.pop("horizon"), **args)


def test_solve_errors():
    prob = DiscountedScheduleProblem("dp", 1.0, 3)
    with pytest.raises(InvalidInputError, match=r"unknown `method` 'scip'"):
        prob.solve(method="scip")
    with pytest.raises(InvalidInputError, match=r"handles DiscountedScheduleProblem"):
        DiscountedCvxpySolver().solve("not a problem")
    assert DiscountedCvxpySolver.available() == (True, "")


def test_alpha1_and_beta0_optima_are_the_dp_optimum():
    # source: Farokhi (2020), remarks after Definitions 10 and 14: (ε, 1)-exponential = (ε, 0)-hyperbolic = ε-DP
    w = np.linspace(1.0, 3.0, 40)
    objs = [DiscountedScheduleProblem(n, 0.9, 40, weights=w, **kw).solve().objective
            for n, kw in (("dp", {}), ("exponential", {"alpha": 1.0}), ("hyperbolic", {"beta": 0.0}))]
    assert objs[1] == pytest.approx(objs[0], rel=1e-9) and objs[2] == pytest.approx(objs[0], rel=1e-9)
    assert objs[0] == pytest.approx(np.sum(np.cbrt(2 * w)) ** 3 / 0.9**2, rel=1e-7)  # closed form, see above
