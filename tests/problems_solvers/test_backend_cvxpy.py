"""The cvxpy back end (solvers/convex.py) for the geometric formulations (39), (41), (42).

Source of the formulations: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Section V-C,
eqs. (38)–(42), Proposition 4 (40), Appendix F.  Every expected value here comes from an
independent brute force written in this file (dense ε_C grid, closed-form inner optimum,
Brent refinement), not from the back end.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from policyopt.errors import InvalidInputError
from policyopt.utility.continuous_penalty import LinearPenalty, TwoStateMSE
from policyopt.problems.geometric import KKTBranchProblem, NoAgingProblem, PeakRiskProblem
from policyopt.result import Status
from policyopt.solvers._common import KKT_TOL
from policyopt.solvers.convex import STATUS_MAP, CvxpySolver, inner_problem, kkt_report

import cvxpy as cp  # a hard dependency: a missing install must fail, not skip  # noqa: E402

REL_TOL = 1e-6  # agreement with the brute force on (39a)


# --- independent reference ---------------------------------------------------------------
def risk_39a(c, rho, A, S, eps):
    """(39a) straight from the paper: ln(1 + cρ^A(e^ε − 1)/(1 − cρ^S̄ e^ε)), inf where (39b) fails."""
    A, S, eps = (np.asarray(v, dtype=float) for v in (A, S, eps))
    log_u = math.log(c) + S * math.log(rho) + eps  # ln(cρ^S̄e^ε)
    with np.errstate(all="ignore"):
        log_ratio = math.log(c) + A * math.log(rho) + np.log(np.expm1(eps)) - np.log(-np.expm1(log_u))
        return np.where(log_u < 0, np.logaddexp(0.0, log_ratio), np.inf)


def inner_closed_form(pr, eps):
    """Best (A, S̄) for fixed ε_C in closed form, vectorised over `eps`; returns (risk, A, S̄).

    Derivation.  With u = ln c + ε − L·S̄ the log of (39a)'s ratio is const − L·A − ln(1 − e^u),
    strictly decreasing in A and in S̄; the penalty enters only through the peak age, as
    A + S̄ ≤ cap := T_max(ε) + o (f monotone in T).  Hence at the optimum either A and S̄
    both sit at their upper bounds or A + S̄ = cap.  On that line (A = cap − S̄) the objective
    h(S̄) = −L(cap − S̄) − ln(1 − e^u) has h'(S̄) = L − L e^u/(1 − e^u), zero at e^u = 1/2
    (this is (40)), and h is convex, so S̄* is S̄₄₀ = (ln 2c + ε)/L clipped to the segment
    [max(S̄_lo, cap − A_max), min(S_max, cap)], S̄_lo = max(1, (ln c + ε − ln(1 − margin))/L)
    from (39b).  (42): A = 0, so S̄ = min(S_max, cap).  (41): S̄ = S̄₄₀ and A = min(A_max, cap − S̄).
    """
    eps = np.asarray(eps, dtype=float)
    L, c = -math.log(pr.rho), pr.c
    cap = np.asarray(pr.penalty.max_age(eps, pr.max_penalty), dtype=float) + pr.aoi_offset
    s_lo = np.maximum(1.0, (math.log(c) + eps - math.log1p(-pr.margin)) / L)
    s40 = (math.log(2 * c) + eps) / L
    if pr.formulation == "41":
        S = s40
        ok = (S >= 1) & (S <= pr.S_max) & (S <= cap)
        A = np.clip(cap - S, 0.0, pr.A_max)
    elif pr.formulation == "42":
        S = np.minimum(pr.S_max, cap)
        A = np.zeros_like(eps)
        ok = s_lo <= S
    else:
        hi = np.minimum(pr.S_max, cap)
        ok = s_lo <= hi
        S = np.clip(s40, np.maximum(s_lo, cap - pr.A_max), hi)
        S = np.where(np.isinf(cap), pr.S_max, S)
        A = np.clip(cap - S, 0.0, pr.A_max)
    S_safe = np.where(ok, S, pr.S_max)
    return np.where(ok, risk_39a(c, pr.rho, A, S_safe, eps), np.inf), A, S


def brute_force(pr, n=20_000):
    """Min of (39a) over a dense linear ε_C grid (closed-form inner optimum), then bounded Brent."""
    grid = np.linspace(pr.epsilon_min, pr.epsilon_max, n)
    r, _, _ = inner_closed_form(pr, grid)
    k = int(np.argmin(r))
    if not np.isfinite(r[k]):
        return None
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, n - 1)]
    res = minimize_scalar(
        lambda e: min(float(inner_closed_form(pr, e)[0]), 1e3),  # finite stand-in for infeasible ε
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-13},
    )
    eps = float(res.x) if res.fun < r[k] else float(grid[k])
    risk, A, S = inner_closed_form(pr, eps)
    return float(risk), eps, float(A), float(S)


# --- case table --------------------------------------------------------------------------
# (penalty, c, rho, f_bar, expected branch of the (39) optimum, found by the brute force)
TWO_STATE = [
    # p, q, I, c, f̄ (K₀ = 8pq/(I(p+q)²) is the staleness limit), branch of (39)
    (0.1, 0.1, 100, 1.0, 0.016, "A=0 (42)"),  # K₀ = 0.02
    (0.1, 0.1, 100, 1.0, 0.019, "A>0 interior (41)"),
    (0.1, 0.1, 100, 1.0, 0.0198, "A>0 interior (41)"),
    (0.1, 0.1, 100, 1.7, 0.018, "A=0 (42)"),
    (0.1, 0.1, 100, 1.7, 0.0198, "A>0 interior (41)"),
    (0.05, 0.1, 100, 1.0, 0.016, "A=0 (42)"),  # K₀ = 0.01778
    (0.05, 0.1, 100, 1.0, 0.0169, "A>0 interior (41)"),
    (0.05, 0.1, 100, 1.7, 0.0142, "A=0 (42)"),
    (0.05, 0.1, 100, 1.7, 0.0176, "A>0 interior (41)"),
    (0.2, 0.3, 200, 1.0, 0.00576, "A=0 (42)"),  # K₀ = 0.0096
    (0.2, 0.3, 200, 1.0, 0.00864, "A>0 interior (41)"),
    (0.2, 0.3, 200, 1.7, 0.00768, "A=0 (42)"),
    (0.2, 0.3, 200, 1.7, 0.00912, "A>0 interior (41)"),
    (0.02, 0.03, 50, 1.0, 0.038, "A>0 interior (41)"),  # K₀ = 0.0384
    (0.02, 0.03, 50, 1.7, 0.0365, "A=0 (42)"),
]
LINEAR = [
    # a, b, rho, c, f̄, branch of (39)
    (0.01, 0.05, 0.8, 1.0, 0.1, "A=0 (42)"),
    (0.01, 0.05, 0.8, 1.0, 0.2, "A>0 interior (41)"),
    (0.01, 0.05, 0.8, 1.7, 0.3, "A>0 interior (41)"),
    (0.002, 0.01, 0.9, 1.7, 0.05, "A=0 (42)"),
    (0.002, 0.01, 0.9, 1.0, 0.5, "A=A_max"),
    (0.05, 0.1, 0.6, 1.0, 0.3, "A>0 interior (41)"),
    (0.05, 0.1, 0.6, 1.7, 0.3, "A=0 (42)"),
]
CASES = [
    pytest.param(TwoStateMSE(p, q, n), c, 1 - p - q, fb, br, id=f"mse-p{p}-q{q}-I{n}-c{c}-f{fb}")
    for p, q, n, c, fb, br in TWO_STATE
] + [pytest.param(LinearPenalty(a, b), c, rho, fb, br, id=f"lin-a{a}-b{b}-rho{rho}-c{c}-f{fb}") for a, b, rho, c, fb, br in LINEAR]


@pytest.fixture(scope="module")
def solver():
    return CvxpySolver()


@functools.lru_cache(maxsize=None)
def solved(cls, penalty, c, rho, f_bar):
    """Solve once per case (several tests inspect the same solution); returns (problem, solution)."""
    pr = cls(c, rho, penalty, f_bar)
    return pr, CvxpySolver().solve(pr)


def check_against_brute_force(sol, pr):
    ref = brute_force(pr)
    assert ref is not None
    assert sol.status in (Status.FEASIBLE, Status.UNBOUNDED)
    # cvxpy is never better than the brute-force optimum (beyond the Brent resolution of the
    # reference), and close to it.
    assert sol.objective >= ref[0] * (1 - 1e-7)
    assert sol.objective == pytest.approx(ref[0], rel=REL_TOL)
    d = sol.decision
    # The reported objective is (39a) at the reported decision, recomputed independently.
    assert float(risk_39a(pr.c, pr.rho, d["A"], d["S_bar"], d["epsilon_c"])) == pytest.approx(sol.objective, rel=1e-12)
    return ref


# --- the brute force itself -------------------------------------------------------------
@pytest.mark.parametrize("f_bar", [0.016, 0.019, 0.025])
def test_closed_form_inner_optimum_matches_a_fine_search_over_S_bar(f_bar):
    # Validates the reference: for fixed ε, a fine 1-D search over S̄ with
    # A = max(0, min(A_max, cap − S̄)) (the largest A the age constraint allows), refined by
    # bounded Brent around the best grid point, finds the same value, and never a lower one.
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), f_bar)
    for eps in (0.35, 0.5, 1.0, 3.0):
        r, _, _ = inner_closed_form(pr, eps)
        cap = float(pr.penalty.max_age(eps, f_bar)) + pr.aoi_offset

        def along(S, eps=eps, cap=cap):
            S = np.asarray(S, dtype=float)
            A = np.maximum(0.0, np.minimum(pr.A_max, cap - S))
            ok = (A + S <= cap) & (math.log(pr.c) + eps + S * math.log(pr.rho) <= math.log1p(-pr.margin))
            return np.where(ok, risk_39a(pr.c, pr.rho, A, S, eps), np.inf)

        S = np.linspace(1.0, pr.S_max, 200_001)
        vals = along(S)
        k = int(np.argmin(vals))
        if math.isinf(vals[k]):
            assert math.isinf(float(r))
            continue
        res = minimize_scalar(
            lambda s: min(float(along(s)), 1e3),
            bounds=(S[max(k - 1, 0)], S[min(k + 1, S.size - 1)]),
            method="bounded",
            options={"xatol": 1e-12},
        )
        best = min(float(vals[k]), float(res.fun))
        assert float(r) <= best * (1 + 1e-12)
        # bounded Brent resolves S̄ only to ~1.5e-8·S̄ (scipy adds sqrt(machine eps)·|x| to
        # xatol), and at ε = 3 the optimum sits at the kink S̄ = cap where (39a) is steep.
        assert float(r) == pytest.approx(best, rel=REL_TOL)


# --- (39) against the brute force, with the KKT checks -----------------------------------
@pytest.mark.parametrize("penalty, c, rho, f_bar, branch", CASES)
def test_peak_risk_39_matches_brute_force(penalty, c, rho, f_bar, branch):
    pr, sol = solved(PeakRiskProblem, penalty, c, rho, f_bar)
    ref = check_against_brute_force(sol, pr)
    assert sol.kkt["branch"] == branch
    assert sol.decision["epsilon_c"] == pytest.approx(ref[1], rel=1e-3)
    if branch == "A>0 interior (41)":
        # Proposition 4: 2cρ^S̄e^ε = 1 at an interior optimum with A > 0.
        assert sol.kkt["residual_40"] < 1e-6
        assert sol.kkt["passed"]
        assert sol.decision["A"] > 1e-3
        # Stationarity in A of the inner problem: ∂F/∂A = −L is balanced by the (39c) dual alone.
        assert sol.values["duals"]["age_39c"] == pytest.approx(pr.L, rel=1e-6)
    elif branch == "A=0 (42)":
        assert sol.decision["A"] == 0.0
        assert sol.kkt["residual_40"] is None


@pytest.mark.parametrize("penalty, c, rho, f_bar, branch", CASES)
def test_inner_kkt_residuals_below_tolerance(penalty, c, rho, f_bar, branch):
    _, sol = solved(PeakRiskProblem, penalty, c, rho, f_bar)
    for key in ("primal_feasibility", "dual_feasibility", "complementarity", "stationarity"):
        assert 0.0 <= sol.kkt[key] <= KKT_TOL, key
    assert sol.kkt["passed"] is True
    assert sol.kkt["tolerance"] == KKT_TOL
    assert set(sol.values["duals"]) == {"age_39c", "condition_39b", "A_lower", "A_upper", "S_lower", "S_upper"}
    assert min(sol.values["duals"].values()) >= -KKT_TOL


def test_case_table_covers_both_branches():
    branches = {b for *_, b in TWO_STATE} | {b for *_, b in LINEAR}
    assert {"A=0 (42)", "A>0 interior (41)"} <= branches


# --- (42) and (41) -------------------------------------------------------------------------
@pytest.mark.parametrize("penalty, c, rho, f_bar, branch", CASES[::2])
def test_no_aging_42_matches_brute_force(solver, penalty, c, rho, f_bar, branch):
    pr = NoAgingProblem(c, rho, penalty, f_bar)
    sol = solver.solve(pr)
    check_against_brute_force(sol, pr)
    assert sol.decision["A"] == 0.0
    assert sol.kkt["branch"] == "A=0 (42)"
    assert sol.kkt["passed"]
    assert set(sol.values["duals"]) == {"age_39c", "condition_39b", "S_lower", "S_upper"}
    # (42) never beats (39): it is (39) with A = 0 imposed.
    full = brute_force(PeakRiskProblem(c, rho, penalty, f_bar))
    assert sol.objective >= full[0] * (1 - REL_TOL)


@pytest.mark.parametrize("penalty, c, rho, f_bar, branch", [p for p in CASES if p.values[-1] == "A>0 interior (41)"])
def test_kkt_branch_41_matches_brute_force_and_39(solver, penalty, c, rho, f_bar, branch):
    pr = KKTBranchProblem(c, rho, penalty, f_bar)
    sol = solver.solve(pr)
    check_against_brute_force(sol, pr)
    d = sol.decision
    assert d["S_bar"] == pytest.approx((math.log(2 * c) + d["epsilon_c"]) / pr.L, rel=1e-12)  # (41b)
    assert sol.kkt["residual_40"] < 1e-9
    assert sol.kkt["passed"]
    # Where (39)'s optimum has A > 0 in the interior, (41) reaches the same value (Proposition 4).
    assert sol.objective == pytest.approx(brute_force(PeakRiskProblem(c, rho, penalty, f_bar))[0], rel=REL_TOL)
    # (41a) = ρ^A (e^ε − 1) as the native objective.
    assert sol.values["native_objective"] == pytest.approx(pr.rho ** d["A"] * math.expm1(d["epsilon_c"]), rel=1e-12)


@pytest.fixture(scope="module")
def citylearn():
    from policyopt.data import load_citylearn
    from policyopt.models.estimation import fit_population
    from policyopt.utility.continuous_penalty import TableMSE
    from policyopt.utility.penalty import MSEPenalty

    pop = fit_population(load_citylearn(), 12).population
    return pop.envelope(168), TableMSE(MSEPenalty(pop), 400)


@pytest.mark.parametrize("cls", [PeakRiskProblem, NoAgingProblem, KKTBranchProblem])
def test_table_mse_from_bundled_data_matches_brute_force(solver, citylearn, cls):
    # f̄ = 0.15 is above the staleness limit (≈ 0.129) of the fitted chains: (39) and (41)
    # are unbounded in A, (42) has its optimum where T_max(ε) + 1 reaches S_max.
    env, pen = citylearn
    pr = cls.from_envelope(env, pen, 0.15)
    sol = solver.solve(pr)
    check_against_brute_force(sol, pr)
    assert sol.kkt["passed"]
    expected = Status.FEASIBLE if cls is NoAgingProblem else Status.UNBOUNDED
    assert sol.status is expected


# --- the cvxpy model ----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [PeakRiskProblem, NoAgingProblem, KKTBranchProblem])
def test_inner_problem_is_dcp_and_dpp(cls):
    inner = inner_problem(cls(1.7, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019), 0.5)
    assert inner.problem.is_dcp()
    assert inner.problem.is_dpp()
    expected = {"39": {"A", "S_bar"}, "41": {"A"}, "42": {"S_bar"}}[inner.formulation]
    assert set(inner.variables) == expected


@pytest.mark.parametrize("cls", [PeakRiskProblem, NoAgingProblem, KKTBranchProblem])
def test_inner_objective_equals_numpy_formula(cls):
    # log_ratio(A, S̄, ε) − ln c − ln(e^ε − 1) is the inner objective F(A, S̄) (module docstring).
    pr = cls(1.7, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019)
    rng = np.random.default_rng(20240601)
    for _ in range(20):
        eps = float(rng.uniform(0.05, 6.0))
        inner = inner_problem(pr, eps)
        s_lo = (math.log(pr.c) + eps) / pr.L  # (39b) boundary
        S = float(pr.s_bar_of(eps)) if pr.formulation == "41" else float(rng.uniform(s_lo + 1e-3, s_lo + 40))
        A = 0.0 if pr.formulation == "42" else float(rng.uniform(0.0, 50.0))
        for name, v in inner.variables.items():
            v.value = {"A": A, "S_bar": S}[name]
        expected = float(pr.log_ratio(A, S, eps)) - math.log(pr.c) - math.log(math.expm1(eps))
        assert float(inner.problem.objective.value) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_inner_problem_reparametrises_without_rebuilding():
    # One DPP problem re-solved for several ε matches fresh problems built for each ε.
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019)
    shared = inner_problem(pr, 0.4)
    for eps in (0.4, 0.45, 0.6):
        shared.parameters["log_k"].value = math.log(pr.c) + eps
        shared.parameters["age_cap"].value = float(pr.penalty.max_age(eps, pr.max_penalty)) + 1
        shared.problem.solve(solver="CLARABEL")
        fresh = inner_problem(pr, eps)
        fresh.problem.solve(solver="CLARABEL")
        assert shared.problem.value == pytest.approx(fresh.problem.value, rel=1e-7)


def test_kkt_report_detects_a_wrong_dual():
    # The certificate is not vacuous: perturbing the binding dual breaks stationarity.
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019)
    sol = CvxpySolver().solve(pr)
    eps = sol.decision["epsilon_c"]
    inner = inner_problem(pr, eps)
    inner.problem.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    x = {k: float(v.value) for k, v in inner.variables.items()}
    duals = {k: float(c.dual_value) for k, c in inner.constraints.items()}
    good = kkt_report(pr, eps, x, duals)
    assert good["passed"] and good["stationarity"] < KKT_TOL
    bad = kkt_report(pr, eps, x, {**duals, "age_39c": duals["age_39c"] * 1.01})
    assert not bad["passed"]
    assert bad["stationarity"] > 1e-3


def test_status_map_covers_every_cvxpy_status():
    import cvxpy.settings as cps

    statuses = set(cps.SOLUTION_PRESENT) | set(cps.INF_OR_UNB) | set(cps.ERROR)
    assert len(statuses) == 9
    assert statuses <= set(STATUS_MAP)
    assert STATUS_MAP[cp.OPTIMAL] == "solved"
    assert STATUS_MAP[cp.OPTIMAL_INACCURATE] == "inaccurate"
    assert STATUS_MAP[cp.INFEASIBLE] == "infeasible"
    assert STATUS_MAP[cp.SOLVER_ERROR] == "error"


# --- outcomes -----------------------------------------------------------------------------
def test_infeasible_tiny_f_bar_is_unknown_with_min_penalty(solver):
    pen = TwoStateMSE(0.1, 0.1, 100)
    pr = PeakRiskProblem(1.0, 0.8, pen, 0.002)
    assert brute_force(pr) is None
    sol = solver.solve(pr)
    assert sol.status is Status.UNKNOWN  # cvxpy proves nothing about the nonconvex problem
    assert sol.decision is None and sol.objective is None and sol.bound is None
    assert sol.values["min_penalty"] > 0.002
    # The floor is the noise + staleness at the smallest S̄ (39b) allows: check it is achievable-ish.
    floor = sol.values["min_penalty"]
    eps = np.linspace(0.01, 5, 200_001)
    S = np.maximum(1.0, (eps - math.log1p(-pr.margin)) / pr.L)
    assert floor == pytest.approx(float(np.min(pen.value(S - 1, eps))), rel=1e-6)
    assert "smallest achievable penalty" in sol.message


def test_f_bar_above_staleness_limit_is_unbounded_at_A_max(solver):
    pen = TwoStateMSE(0.1, 0.1, 100)
    pr = PeakRiskProblem(1.0, 0.8, pen, 1.05 * pen.limit)
    sol = solver.solve(pr)
    assert sol.status is Status.UNBOUNDED
    assert sol.decision["A"] == pr.A_max
    assert sol.kkt["branch"] == "A=A_max"
    check_against_brute_force(sol, pr)


def test_solution_metadata(solver):
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019)
    before = dict(vars(pr))
    sol = solver.solve(pr, tol=1e-8, n_bracket=32)
    assert dict(vars(pr)) == before  # the problem is not modified
    assert sol.status is Status.FEASIBLE  # the outer search over ε_C is not proven global
    assert sol.bound is None and sol.gap is None
    assert sol.method == "cvxpy" and sol.backend == "cvxpy"
    assert sol.backend_version.startswith(f"cvxpy {cp.__version__} / ")
    assert sol.backend_version.split(" / ")[1] in ("CLARABEL", "SCS")
    assert sol.values["n_bracket"] == 32
    lo, hi = sol.values["epsilon_range"]
    assert 0 < lo < sol.decision["epsilon_c"] < hi <= pr.epsilon_max
    assert sol.values["epsilon_xatol"] == pytest.approx(1e-8 * max(1.0, sol.decision["epsilon_c"]), rel=0.5)
    assert "not proven" in sol.message
    assert sol.wall_time_s < 5.0


def test_dispatch_through_problem_solve():
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019)
    sol = pr.solve(method="cvxpy")
    assert sol.backend == "cvxpy"
    assert sol.objective == pytest.approx(brute_force(pr)[0], rel=REL_TOL)


# --- capabilities and errors -----------------------------------------------------------------
def test_class_constants_and_available():
    assert CvxpySolver.name == "cvxpy"
    assert CvxpySolver.MIP_CAPABLE is False
    assert CvxpySolver.NONCONVEX_CAPABLE is False
    assert CvxpySolver.REQUIRED_MODULES == ("cvxpy",)
    assert set(CvxpySolver.SUPPORTED_PROBLEMS) == {PeakRiskProblem, KKTBranchProblem, NoAgingProblem}
    assert CvxpySolver.available() == (True, "")


def test_cvxpy_available_names_the_missing_solver():
    from policyopt.solvers._common import cvxpy_available

    ok, why = cvxpy_available(("NO_SUCH_SOLVER",))
    assert not ok and "['NO_SUCH_SOLVER']" in why and "CLARABEL" in why  # lists what is installed
    assert cvxpy_available(("NO_SUCH_SOLVER", "CLARABEL")) == (True, "")


def test_cvxpy_is_imported_lazily():
    code = "import sys, policyopt.solvers.convex; print('cvxpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_integer_problem_is_rejected(solver):
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019, integer=True)
    with pytest.raises(InvalidInputError, match=r"`problem.integer` is True.*continuous relaxation.*\"pyomo\" or \"exact\""):
        solver.solve(pr)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tol": 0.0}, r"`tol` must be a number in \(0, 0.01\), got 0.0"),
        ({"tol": "1e-9"}, r"`tol` must be a number in \(0, 0.01\), got '1e-9'"),
        ({"n_bracket": 2}, r"`n_bracket` must be an integer ≥ 3, got 2"),
        ({"n_bracket": 10.0}, r"`n_bracket` must be an integer ≥ 3, got 10.0"),
    ],
)
def test_bad_options_are_rejected(solver, kwargs, match):
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019)
    with pytest.raises(InvalidInputError, match=match):
        solver.solve(pr, **kwargs)


def test_unsupported_problem_is_rejected(solver):
    with pytest.raises(InvalidInputError, match=r"the cvxpy back end solves PeakRiskProblem.*got `problem` = 'x'"):
        solver.solve("x")


@pytest.mark.parametrize("eps", [0.0, -1.0, math.inf, "1"])
def test_inner_problem_rejects_bad_epsilon(eps):
    pr = PeakRiskProblem(1.0, 0.8, TwoStateMSE(0.1, 0.1, 100), 0.019)
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be a (positive finite )?number"):
        inner_problem(pr, eps)
