"""Failure rate f_MLE of Zhang et al. (2024), eqs. (50)–(51): exact computation vs brute force and Monte Carlo; solvers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from policyopt import Population, two_state_chain
from policyopt.errors import InvalidInputError
from policyopt.utility.failure_rate import FailureRatePenalty, simulate_failure_rate
from policyopt.utility.continuous_penalty import StepPenalty
from policyopt.problems import ScheduleProblem
from policyopt.result import Status
from policyopt.studies.schedule import design_schedule


def _brute_force(p, q, I, t, eps, rule, x0=None):
    """Independent reference: enumerate all 2^I start/end configurations, integrate over M on a fine grid."""
    P = np.array([[1 - p, p], [q, 1 - q]])  # (43), states (−1, +1)
    Pt = np.linalg.matrix_power(P, t)
    pi = np.array([q, p]) / (p + q)
    b = (2.0 / I) / eps
    K = I + 1
    prior = np.zeros(K)
    q1 = np.zeros(K)
    q0 = np.zeros(K)
    for start in itertools.product((0, 1), repeat=I):
        k = sum(start)
        pr = np.prod([pi[s] for s in start])
        prior[k] += pr
        for end in itertools.product((0, 1), repeat=I):
            tr = np.prod([Pt[s, e] for s, e in zip(start, end)])
            if 2 * sum(end) - I >= 0:
                q1[k] += pr * tr
            else:
                q0[k] += pr * tr
    q1, q0 = q1 / prior, q0 / prior
    means = (2 * np.arange(K) - I) / I
    M = np.linspace(-1 - 40 * b, 1 + 40 * b, 400_001)
    dM = M[1] - M[0]
    like = np.exp(-np.abs(M[:, None] - means[None, :]) / b) / (2 * b)  # Laplace density of M given k
    if rule == "sign":
        g = M >= 0
    else:
        g = (like * prior * q1).sum(1) >= (like * prior * q0).sum(1)
    fail_k = ((like * np.where(g[:, None], q0, q1)).sum(0)) * dM
    return float(fail_k[x0]) if x0 is not None else float(prior @ fail_k)


@pytest.mark.parametrize("rule", ["posterior", "sign"])
@pytest.mark.parametrize("p, q, I, t, eps, x0", [(0.1, 0.1, 4, 3, 1.0, None), (0.3, 0.1, 3, 2, 2.5, None), (0.7, 0.9, 4, 1, 0.7, 1), (0.2, 0.4, 5, 0, 3.0, 3)])
def test_exact_matches_brute_force_enumeration(rule, p, q, I, t, eps, x0):
    # source: Zhang et al. (2024), eqs. (43), (48), (50)–(51); brute force over all 2^I configurations and a Riemann sum over M
    pen = FailureRatePenalty(p, q, I, rule=rule, x0=x0)
    assert pen.value(t, eps) == pytest.approx(_brute_force(p, q, I, t, eps, rule, x0), abs=2e-5)


@pytest.mark.parametrize("rule, x0", [("posterior", None), ("sign", None), ("posterior", 13), ("sign", 6)])
def test_exact_matches_monte_carlo(rule, x0):
    """Seeded simulation of I = 20 users (numpy noise: simulation only, nothing is released)."""
    pen = FailureRatePenalty(0.1, 0.1, 20, rule=rule, x0=x0)  # source: Zhang et al. (2024), Fig. 5 setting p = q = 0.1, I = 20
    rng = np.random.default_rng(20261123)
    for t, eps in ((0, 0.3), (4, 1.0), (12, 5.0)):
        est, se = simulate_failure_rate(pen, t, eps, n_samples=60_000, rng=rng)
        assert abs(est - pen.value(t, eps)) < 4.5 * se + 1e-9


def test_limits_and_noiseless():
    # source: Zhang et al. (2024), text under Fig. 5: "the accuracy loss eventually converges to 0.5 as t → ∞" (sign rule)
    sign = FailureRatePenalty(0.1, 0.1, 20, rule="sign")
    for eps in (0.3, 1.0, 5.0):  # with Laplace noise and p = q, Pr[M < 0] = 1/2 exactly, so the limit is 0.5
        assert sign.value(400, eps) == pytest.approx(0.5, abs=1e-9)
    p_hi = sum(math.comb(20, k) for k in range(10, 21)) / 2**20  # noiseless: 2 Pr[z=1] Pr[z=0]
    assert sign.limit == pytest.approx(2 * p_hi * (1 - p_hi), rel=1e-12)
    assert sign.noiseless(400) == pytest.approx(sign.limit, rel=1e-9)
    post = FailureRatePenalty(0.1, 0.1, 20)
    # posterior rule: min(Pr[z=1], Pr[z=0]) with z = 1{K ≥ 10}, K ~ Bin(20, 1/2): Pr[K ≤ 9] = 0.411901...
    p_low = sum(math.comb(20, k) for k in range(10)) / 2**20
    assert post.limit == pytest.approx(p_low, rel=1e-12)
    assert post.value(400, 3.0) == pytest.approx(p_low, rel=1e-9)
    # fresh, noiseless data: never wrong; huge budgets approach the noiseless value without overflow
    assert post.noiseless(0) == 0.0 and sign.noiseless(0) == 0.0
    assert post.value(7, 1e4) == pytest.approx(float(post.noiseless(7)), abs=1e-12)
    assert np.isfinite(post.value(3, 50.0))


def test_monotonicity_is_checked_not_assumed():
    grid_t, grid_e = np.arange(40), np.geomspace(1e-2, 100, 60)
    post = FailureRatePenalty(0.1, 0.1, 20)
    assert post.monotone_in_epsilon  # proven (Bayes risk under a garbling)
    rep = post.check_monotonicity(grid_t, grid_e)
    assert rep.decreasing_in_epsilon and rep.increasing_in_t
    # λ = 1 − p − q < 0: the sign rule's failure rate oscillates in t (the posterior rule adapts to t)
    osc = FailureRatePenalty(0.8, 0.8, 6, rule="sign")
    rep = osc.check_monotonicity(grid_t, grid_e)
    assert not rep.increasing_in_t and rep.worst_t[2] > 1e-3
    # conditional on X_0 with the posterior rule, more budget can *raise* the failure rate
    cond = FailureRatePenalty(0.1, 0.1, 20, x0=10)
    assert not cond.monotone_in_epsilon
    rep = cond.check_monotonicity(grid_t, grid_e)
    assert not rep.decreasing_in_epsilon and rep.worst_epsilon[2] > 1e-3


def _brute_schedule(pop, pen, f_bar, A_max, S_max):
    """Reference: per (A, S̄) scan ε_C on a fine grid, keep the smallest feasible one meeting (31)."""
    eps = np.geomspace(1e-3, 5.0, 1500)
    lam = abs(1 - 0.1 - 0.1)
    best = None
    table = pen.value(np.arange(A_max + S_max)[:, None], eps[None, :])  # f(t, ε) on the grid
    for A in range(A_max + 1):
        for S in range(1, S_max + 1):
            vals = np.max(table[A : A + S], axis=0)
            ok = (vals <= f_bar) & (lam**S * np.exp(eps) < 1)
            if not ok.any():
                continue
            e = eps[np.argmax(ok)]
            risk = math.log1p(lam**A * math.expm1(e) / (1 - lam**S * math.exp(e)))  # source: Zhang et al. (2024), (53)
            if best is None or risk < best[0]:
                best = (risk, A, S, e)
    return best


def test_exact_solver_handles_the_failure_rate():
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    pen = FailureRatePenalty(0.1, 0.1, 20)
    f_bar = 0.35
    sol = ScheduleProblem(pop, pen, f_bar, A_max=6, S_max=8).solve()
    assert sol.status in (Status.OPTIMAL, Status.UNBOUNDED)
    ref = _brute_schedule(pop, pen, f_bar, 6, 8)
    assert sol.objective <= ref[0] + 1e-12  # never worse than the grid reference
    assert sol.objective == pytest.approx(ref[0], rel=5e-3)
    d = sol.decision
    assert float(np.max(pen.value(np.arange(d["A"], d["A"] + d["S_bar"]), d["epsilon_c"]))) <= f_bar


def test_non_monotone_penalty_is_reported_feasible_not_optimal():
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    pen = FailureRatePenalty(0.1, 0.1, 20, rule="sign", x0=14)
    sol = ScheduleProblem(pop, pen, 0.35, A_max=5, S_max=6).solve()
    assert sol.status is Status.FEASIBLE and sol.bound is None
    assert "not proven non-increasing in ε_C" in sol.message
    d = sol.decision
    assert float(np.max(pen.value(np.arange(d["A"], d["A"] + d["S_bar"]), d["epsilon_c"]))) <= 0.35


def test_heuristic_handles_it_and_cvxpy_refuses():
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    pen = FailureRatePenalty(0.1, 0.1, 20)
    rep = design_schedule(pop, max_penalty=0.35, A_max=6, S_max=8, penalty=pen, method="heuristic")
    d = rep.to_dict()
    assert d["status"] in ("feasible", "unbounded")
    exact = design_schedule(pop, max_penalty=0.35, A_max=6, S_max=8, penalty=pen).to_dict()
    # the heuristic solves (39) with the envelope, an upper bound on the exact peak risk
    assert d["peak_risk"] >= exact["peak_risk"] - 1e-12
    A, S, eps = int(d["A"]), int(d["S_bar"]), d["epsilon_c"]
    assert float(np.max(pen.value(np.arange(A, A + S), eps))) <= 0.35 * (1 + 1e-9)
    with pytest.raises(InvalidInputError, match="nonconvex and non-smooth .* cvxpy back end cannot model it"):
        design_schedule(pop, max_penalty=0.35, A_max=6, S_max=8, penalty=pen, method="cvxpy", relax=True)
    with pytest.raises(InvalidInputError, match="not proven non-increasing in ε_C"):
        design_schedule(pop, max_penalty=0.35, A_max=6, S_max=8, penalty=FailureRatePenalty(0.1, 0.1, 20, x0=3), method="heuristic")


def test_step_penalty_bounds_the_epoch_penalty():
    pen = FailureRatePenalty(0.8, 0.8, 6)
    step = StepPenalty(pen, 20)
    for eps in (0.5, 2.0):
        table = pen.epoch_table(10, 10, eps)
        for A in range(11):
            for S in range(1, 11):
                assert step.value(A + S - 1, eps) >= table[A, S - 1] - 1e-15
        T = step.max_age(eps, 0.3)
        if np.isfinite(T):
            assert step.value(T, eps) <= 0.3 and step.value(T + 1, eps) > 0.3
            e = step.min_epsilon(T, 0.3)
            assert e <= eps and step.value(T, e) <= 0.3


def test_errors():
    with pytest.raises(InvalidInputError, match=r"`p` must be a transition probability in \(0, 1\], got 0"):
        FailureRatePenalty(0, 0.1, 5)
    with pytest.raises(InvalidInputError, match="`n_users` must be an integer ≥ 1, got 0"):
        FailureRatePenalty(0.1, 0.1, 0)
    with pytest.raises(InvalidInputError, match=r"`rule` must be one of \['posterior', 'sign'\], got 'mle'"):
        FailureRatePenalty(0.1, 0.1, 5, rule="mle")
    with pytest.raises(InvalidInputError, match=r"`x0` as a count of users at \+1 must be in 0..5, got 9"):
        FailureRatePenalty(0.1, 0.1, 5, x0=9)
    with pytest.raises(InvalidInputError, match=r"`x0` must be None, a count in 0..3, or 3 values"):
        FailureRatePenalty(0.1, 0.1, 3, x0=[1, 0, 1])
    assert FailureRatePenalty(0.1, 0.1, 3, x0=[1, -1, 1]).x0 == 2
    pen = FailureRatePenalty(0.1, 0.1, 5)
    with pytest.raises(InvalidInputError, match="`epsilon_c` must be positive"):
        pen.value(1, -1.0)
    with pytest.raises(InvalidInputError, match="`n_samples` must be an integer ≥ 2, got 1"):
        simulate_failure_rate(pen, 1, 1.0, n_samples=1, rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="`rng` must be a numpy.random.Generator"):
        simulate_failure_rate(pen, 1, 1.0, n_samples=10, rng=0)
    with pytest.raises(InvalidInputError, match="`ages` must be a non-empty increasing"):
        pen.check_monotonicity([3, 1], [1.0])
