"""Formulations (39), (41), (42) as modelling objects and the corrected Algorithms 1–2 (Zhang et al. 2024, Section V-C)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _refs import geometric_reference

from policyopt.errors import InvalidInputError
from policyopt.models.markov import two_state_chain
from policyopt.utility.continuous_penalty import LinearPenalty, TwoStateMSE
from policyopt.problems import KKTBranchProblem, NoAgingProblem, PeakRiskProblem
from policyopt.result import Status
from policyopt.solvers.heuristic import algorithm_1

CASES = [
    # (penalty, c, rho, f_bar): two-state MSE with ρ = 1 − p − q, and a linear penalty; c = 1 and c > 1
    (TwoStateMSE(0.1, 0.1, 20), 1.0, 0.8, 0.08),
    (TwoStateMSE(0.1, 0.1, 20), 1.0, 0.8, 0.095),
    (TwoStateMSE(0.1, 0.2, 5), 1.7, 0.7, 0.33),
    (TwoStateMSE(0.05, 0.15, 8), 1.3, 0.8, 0.2),
    (LinearPenalty(0.01, 0.05), 1.0, 0.85, 0.5),
    (LinearPenalty(0.01, 0.05), 1.5, 0.85, 0.4),
    (LinearPenalty(0.02, 0.3), 1.0, 0.6, 1.5),
]


def test_problem_description_is_truthful():
    prob = PeakRiskProblem(1.2, 0.8, TwoStateMSE(0.1, 0.1, 20), 0.1, A_max=30, S_max=40)
    assert prob.is_convex is False
    assert prob.variables == ("A", "S_bar", "epsilon_c")
    assert prob.integrality == {"A": "continuous", "S_bar": "continuous", "epsilon_c": "continuous"}
    lo, hi = prob.bounds["epsilon_c"]
    # ε_max is the largest budget (39b) allows at S_max: c ρ^{S_max} e^{ε_max} = 1 − margin
    assert 1.2 * 0.8**40 * math.exp(hi) == pytest.approx(1 - prob.margin, rel=1e-12)
    assert PeakRiskProblem(1.2, 0.8, TwoStateMSE(0.1, 0.1, 20), 0.1, integer=True).integrality["A"] == "integer"
    assert KKTBranchProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 20), 0.1).variables == ("A", "epsilon_c")
    assert NoAgingProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 20), 0.1).A_max == 0.0


def test_the_paper_convexity_claim_for_41_is_false():
    # Hessian of g(A, ε) = ρ^A (e^ε − 1): det = −L² ρ^{2A} e^ε (e^ε − 1)... < 0 — indefinite everywhere
    L = -math.log(0.8)
    for A, e in [(0.0, 0.1), (3.0, 1.0), (10.0, 5.0)]:
        g = 0.8**A * math.expm1(e)
        H = np.array([[L * L * g, -L * 0.8**A * math.exp(e)], [-L * 0.8**A * math.exp(e), 0.8**A * math.exp(e)]])
        assert np.linalg.det(H) < 0


def test_evaluate_matches_closed_form_and_flags_violations():
    prob = PeakRiskProblem(1.3, 0.8, TwoStateMSE(0.1, 0.1, 20), 0.09, A_max=50, S_max=50)
    ev = prob.evaluate(2.5, 6.2, 0.7)
    expected = math.log1p(1.3 * 0.8**2.5 * math.expm1(0.7) / (1 - 1.3 * 0.8**6.2 * math.exp(0.7)))  # (39a)
    assert ev.objective == pytest.approx(expected, rel=1e-13)
    assert ev.peak_age == pytest.approx(7.7)
    assert ev.penalty == pytest.approx(0.1 * (1 - 0.8**7.7) + 8 / (400 * 0.49), rel=1e-13)
    assert ev.kkt_40_residual == pytest.approx(abs(2 * 1.3 * 0.8**6.2 * math.exp(0.7) - 1), rel=1e-12)
    bad = prob.evaluate(0.0, 1.0, 3.0)
    assert not bad.feasible and any("(39b) fails" in v for v in bad.violations)
    k41 = KKTBranchProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 20), 0.2, A_max=50, S_max=50)
    assert any("(41b) fails" in v for v in k41.evaluate(1.0, 5.0, 0.5).violations)
    assert k41.evaluate(1.0, float(k41.s_bar_of(0.5)), 0.5).native_objective == pytest.approx(0.8 * math.expm1(0.5))


@pytest.mark.parametrize("penalty, c, rho, f_bar", CASES)
def test_heuristic_agrees_with_reference(penalty, c, rho, f_bar):
    for cls in (PeakRiskProblem, NoAgingProblem, KKTBranchProblem):
        box = dict(S_max=60) if cls is NoAgingProblem else dict(A_max=60, S_max=60)
        prob = cls(c, rho, penalty, f_bar, **box)
        ref = geometric_reference(prob)
        sol = prob.solve("heuristic")
        if not math.isfinite(ref[0]):
            assert sol.status is Status.UNKNOWN and sol.values["min_penalty"] > 0
            continue
        assert sol.status in (Status.FEASIBLE, Status.UNBOUNDED)
        assert sol.objective == pytest.approx(ref[0], rel=1e-6), (cls.formulation, sol.decision, ref)
        ev = prob.evaluate(sol.decision["A"], sol.decision["S_bar"], sol.decision["epsilon_c"])
        assert ev.feasible


def test_kkt_certificate_and_branch():
    # linear penalty: aging pays, interior A > 0 optimum satisfies (40)
    prob = PeakRiskProblem(1.0, 0.85, LinearPenalty(0.01, 0.05), 0.5, A_max=100, S_max=100)
    sol = prob.solve("heuristic")
    assert sol.kkt["branch"] == "A>0 interior (41)"
    assert 0 < sol.decision["A"] < 100
    assert sol.kkt["residual_40"] < 1e-6 and sol.kkt["passed"]
    # two-state MSE, f̄ = 0.08: the A = 0 branch (42) is optimal and (40) does not apply
    sol0 = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 20), 0.08, A_max=60, S_max=60).solve("heuristic")
    assert sol0.decision["A"] == 0.0
    assert sol0.kkt["branch"] == "A=0 (42)" and sol0.kkt["residual_40"] is None and sol0.kkt["passed"]


def test_corrected_bisection_finds_largest_feasible_age():
    prob = KKTBranchProblem(1.0, 0.85, LinearPenalty(0.01, 0.05), 0.5, A_max=100, S_max=100)
    eps = np.array([0.3, 0.5, 1.0])
    A, S, _ = algorithm_1(prob, eps, 1e-12)
    # closed form: A = T_max + 1 − S̄ with T_max = (f̄ − b/ε)/a
    expected = (0.5 - 0.05 / eps) / 0.01 + 1 - S
    np.testing.assert_allclose(A, np.minimum(expected, 100), atol=1e-9)
    # the printed loop `while A_H − A_L ≤ φ` would not run at all and return A_L = 0
    assert np.all(A > 1.0)


def test_integer_problems_exact_enumeration_and_rounded_heuristic():
    pen = TwoStateMSE(0.1, 0.1, 20)
    prob = PeakRiskProblem(1.0, 0.8, pen, 0.095, A_max=40, S_max=40, integer=True)
    sol = prob.solve("exact")
    # independent enumeration: all integer (A, S̄), smallest feasible ε_C, (39b) with the margin
    best = math.inf
    for A in range(41):
        for S in range(1, 41):
            slack = 0.095 - 0.1 * (1 - 0.8 ** (A + S - 1))
            if slack <= 0:
                continue
            e = math.sqrt(8 / 400 / slack)
            if 0.8**S * math.exp(e) <= 1 - prob.margin:
                best = min(best, math.log1p(0.8**A * math.expm1(e) / (1 - 0.8**S * math.exp(e))))
    assert sol.status is Status.OPTIMAL and sol.bound == sol.objective
    assert sol.objective == pytest.approx(best, rel=1e-9)
    heur = prob.solve("heuristic")
    assert heur.status is Status.FEASIBLE
    assert heur.objective >= sol.objective * (1 - 1e-12)
    assert float(heur.decision["A"]).is_integer() and float(heur.decision["S_bar"]).is_integer()
    # the exact Δ of the two-state chain is the geometric envelope with c = 1: same optimum as the main job
    from policyopt.models.markov import Population
    from policyopt.utility.penalty import MSEPenalty
    from policyopt.problems import ScheduleProblem

    pop = Population([two_state_chain(0.1, 0.1)], [20])
    main = ScheduleProblem(pop, MSEPenalty(pop), 0.095, A_max=40, S_max=40).solve()
    assert main.objective == pytest.approx(sol.objective, rel=1e-9)


def test_infeasible_and_unbounded_are_reported_like_the_exact_solver():
    pen = TwoStateMSE(0.1, 0.1, 20)
    tiny = PeakRiskProblem(1.0, 0.8, pen, 0.01, A_max=60, S_max=60)
    heur = tiny.solve("heuristic")
    assert heur.status is Status.UNKNOWN and heur.decision is None
    assert heur.values["min_penalty"] == pytest.approx(tiny.min_penalty()[0]) and heur.values["min_penalty"] > 0.01
    exact = PeakRiskProblem(1.0, 0.8, pen, 0.01, A_max=60, S_max=60, integer=True).solve("exact")
    assert exact.status is Status.INFEASIBLE and "smallest achievable penalty" in exact.message
    loose = PeakRiskProblem(1.0, 0.8, pen, 0.2, A_max=60, S_max=60).solve("heuristic")  # f̄ > limit 0.1
    assert loose.status is Status.UNBOUNDED and loose.decision["A"] == 60.0
    assert "infimum is 0" in loose.message


def test_bad_parameters():
    pen = TwoStateMSE(0.1, 0.1, 20)
    with pytest.raises(InvalidInputError, match=r"`c` must be ≥ 1, got 0.5"):
        PeakRiskProblem(0.5, 0.8, pen, 0.1)
    with pytest.raises(InvalidInputError, match=r"`rho` must be > 0 and < 1, got 1.0"):
        PeakRiskProblem(1.0, 1.0, pen, 0.1)
    with pytest.raises(InvalidInputError, match=r"`integer`=True is not defined"):
        KKTBranchProblem(1.0, 0.8, pen, 0.1, integer=True)
    with pytest.raises(InvalidInputError, match=r"needs 0 < 1 − p − q < 1"):
        TwoStateMSE(0.7, 0.9, 4)
    with pytest.raises(InvalidInputError, match=r"\(42\) fixes A = 0; `A_max` must be 0 or omitted, got 5"):
        NoAgingProblem(1.0, 0.8, pen, 0.1, A_max=5)
    with pytest.raises(InvalidInputError, match=r"`K` must be an integer ≥ 2, got 1"):
        PeakRiskProblem(1.0, 0.8, pen, 0.1).solve("heuristic", K=1)
    with pytest.raises(InvalidInputError, match=r"continuous relaxation"):
        PeakRiskProblem(1.0, 0.8, pen, 0.1).solve("exact")


def test_table_mse_inverses_and_exact_integer_on_bundled_data():
    from policyopt.data import load_citylearn
    from policyopt.models.estimation import fit_population
    from policyopt.utility.continuous_penalty import TableMSE
    from policyopt.utility.penalty import MSEPenalty

    pop = fit_population(load_citylearn(), 12).population
    mse = MSEPenalty(pop)
    table = TableMSE(mse, 60)
    T = np.array([0.0, 3.0, 7.5, 24.0])
    eps = table.min_epsilon(T, 0.2)
    np.testing.assert_allclose(table.value(T, eps), 0.2, rtol=1e-10)
    np.testing.assert_allclose(table.max_age(eps, 0.2), T, rtol=1e-9, atol=1e-9)
    # at integer ages the table is the running max of the exact staleness
    np.testing.assert_allclose(table.value(np.arange(10), np.inf), np.maximum.accumulate(mse.staleness(np.arange(10))))
    env = pop.envelope(168)  # beyond its 60 tabulated ages the table stays at the staleness limit
    prob = PeakRiskProblem.from_envelope(env, table, 0.15, integer=True)
    sol = prob.solve("exact")
    assert sol.status is Status.UNBOUNDED and sol.decision["A"] == 168.0
    assert PeakRiskProblem.from_envelope(pop.envelope(24), table, 0.15, integer=True).solve("exact").status is Status.INFEASIBLE
    heur = PeakRiskProblem.from_envelope(env, table, 0.15).solve("heuristic")
    # the relaxation is a lower bound of the integer problem (up to the heuristic's 1e-6 tolerance)
    assert heur.objective <= sol.objective * (1 + 1e-6)


def test_min_penalty_of_the_41_branch():
    prob = KKTBranchProblem(1.0, 0.7, TwoStateMSE(0.1, 0.2, 100), 0.01, A_max=60, S_max=60)
    floor, s_bar, eps = prob.min_penalty()
    assert floor > 0.01  # infeasible, and the floor says so consistently
    assert s_bar == pytest.approx((math.log(2.0) + eps) / -math.log(0.7))
    assert floor == pytest.approx(float(prob.penalty.value(s_bar - 1, eps)))
    # brute force over ε_C on the branch
    grid = np.linspace(1e-6, 60 * -math.log(0.7) - math.log(2.0), 200001)
    s = (math.log(2.0) + grid) / -math.log(0.7)
    brute = np.min(np.asarray(prob.penalty.value(s - 1, grid))[s >= 1])
    assert floor <= brute * (1 + 1e-12) and floor == pytest.approx(brute, rel=1e-8)
    sol = prob.solve("heuristic")
    assert sol.status is Status.UNKNOWN and sol.values["min_penalty"] == pytest.approx(floor)
