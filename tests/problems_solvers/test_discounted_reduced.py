"""The reduced (prefix) back end of the optimal discounted-DP schedule and the O(T log T) inverse kernel."""

from __future__ import annotations

import numpy as np
import pytest

from policyopt.privacy.discounted import (
    DIRECT_MAX_T,
    discount_matrix,
    discounted_sum_transpose,
    inverse_discount_kernel,
    solve_discounted_transpose,
)
from policyopt.errors import InvalidInputError
from policyopt.problems.discounted import DiscountedScheduleProblem
from policyopt.result import Status
from policyopt.solvers.discounted_opt import DiscountedReducedSolver


@pytest.mark.parametrize("beta", [0.01, 0.1, 1.0, 7.0])
def test_inverse_kernel_fft_equals_recursion(beta):
    direct = inverse_discount_kernel("hyperbolic", 3000, beta=beta, method="direct")
    fft = inverse_discount_kernel("hyperbolic", 3000, beta=beta, method="fft")
    np.testing.assert_allclose(fft, direct, rtol=0, atol=1e-15)
    assert direct[0] == 1.0 and np.all(direct[1:] <= 0) and -direct[1:].sum() <= 1.0  # Kaluza
    A = discount_matrix("hyperbolic", 200, beta=beta)
    h = fft[:200]
    i = np.arange(200)
    H = np.where(i[:, None] >= i[None, :], h[np.clip(i[:, None] - i[None, :], 0, None)], 0.0)
    np.testing.assert_allclose(A @ H, np.eye(200), atol=1e-14)


def test_inverse_kernel_other_notions_and_errors():
    assert inverse_discount_kernel("dp", 4).tolist() == [1.0, -1.0, 0.0, 0.0]
    assert inverse_discount_kernel("exponential", 3, alpha=0.25).tolist() == [1.0, -0.25, 0.0]
    assert inverse_discount_kernel("hyperbolic", 1, beta=0.5).tolist() == [1.0]
    with pytest.raises(InvalidInputError, match="unknown `method` 'lu'; choose 'auto', 'direct' or 'fft'"):
        inverse_discount_kernel("hyperbolic", 5, beta=0.5, method="lu")


def test_transpose_solve_fft_path():
    T = DIRECT_MAX_T + 5  # above the direct limit: Newton inverse + FFT product
    x = np.random.default_rng(11).random(T)
    lam = solve_discounted_transpose(x, "hyperbolic", beta=0.1)
    back = discounted_sum_transpose(lam, "hyperbolic", beta=0.1)
    assert np.max(np.abs(back - x)) <= 1e-11 * np.max(np.abs(x))


@pytest.mark.parametrize("notion, kw, T", [("hyperbolic", {"beta": 0.1}, 300), ("hyperbolic", {"beta": 1.0}, 200),
                                           ("exponential", {"alpha": 0.9}, 300)])
def test_same_optimum_as_cvxpy(notion, kw, T):
    rng = np.random.default_rng(T)
    sens = rng.uniform(0.5, 2.0, T)
    weights = rng.uniform(0.5, 1.5, T)
    prob = DiscountedScheduleProblem(notion, 1.0, T, sensitivity=sens, weights=weights, **kw)
    ref = prob.solve(method="cvxpy")
    got = prob.solve(method="reduced")
    assert ref.status is Status.OPTIMAL and got.status is Status.OPTIMAL
    assert got.method == "discounted-reduced"
    assert got.objective == pytest.approx(ref.objective, rel=2e-6)
    assert got.bound <= ref.objective * (1 + 1e-9) and ref.bound <= got.objective * (1 + 1e-9)  # weak duality
    assert got.values["worst_loss"] <= 1.0 and got.relative_gap <= 1e-6 and got.kkt["passed"]
    b = np.array(got.decision["schedule"])
    assert prob.evaluate(b).feasible


def test_same_optimum_as_dual_and_first_active_slot():
    prob = DiscountedScheduleProblem("hyperbolic", 1.0, 2000, beta=0.1)
    dual = prob.solve(method="dual")
    got = prob.solve(method="reduced", fallback=False)
    assert got.status is Status.OPTIMAL and dual.status is Status.OPTIMAL
    assert got.objective == pytest.approx(dual.objective, rel=2e-6)
    assert 0 < got.values["first_active"] < got.values["prefix_length"] <= 2000


def test_zero_sensitivity_is_handed_to_the_dual_and_errors():
    sens = np.ones(50)
    sens[10] = 0.0
    sol = DiscountedScheduleProblem("hyperbolic", 1.0, 50, beta=0.5, sensitivity=sens).solve(method="reduced")
    assert sol.method == "discounted-dual" and sol.decision["schedule"][10] == 0.0
    with pytest.raises(InvalidInputError, match="`max_iterations` must be an integer ≥ 1, got 0"):
        DiscountedReducedSolver().solve(DiscountedScheduleProblem("dp", 1.0, 3), max_iterations=0)
    with pytest.raises(InvalidInputError, match="the discounted reduced solver handles DiscountedScheduleProblem"):
        DiscountedReducedSolver().solve("x")
    with pytest.raises(InvalidInputError, match=r"unknown `method` 'newton'; choose one of \['cvxpy', 'dual', 'reduced'\]"):
        DiscountedScheduleProblem("dp", 1.0, 3).solve(method="newton")
