"""The Pyomo + SCIP back end for (39), (41), (42) (Zhang et al. 2024, Section V-C) against independent brute force.

Every expected value is computed here with numpy/scipy alone — a dense ε_C grid with the
best (A, S̄) per ε_C, refined by nested bounded Brent, for the continuous problems, and a
full enumeration of integer (A, S̄) for the integer ones — never with the solver under test.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from policyopt.errors import BackendUnavailableError, InvalidInputError
from policyopt.utility.continuous_penalty import LinearPenalty, TwoStateMSE
from policyopt.problems.geometric import KKTBranchProblem, NoAgingProblem, PeakRiskProblem
from policyopt.result import Status, Termination
from policyopt.solvers.global_scip import PyomoSCIPSolver, log_ratio_to_risk, to_pyomo

_OK, _WHY = PyomoSCIPSolver.available()


def test_backend_is_available_here():
    # pyomo and pyscipopt are dependencies that `make` installs: unavailability is a failure, not a skip
    assert _OK, _WHY

P, Q, I = 0.1, 0.2, 100
RHO = 1.0 - P - Q  # the two-state chain (43) has Δ(t) = |1 − p − q|^t: envelope (38) with c = 1
TWO_STATE = TwoStateMSE(P, Q, I)  # staleness limit K₀ = 8pq/(I(p+q)²) ≈ 0.01778
LINEAR = LinearPenalty(0.01, 0.05)
BOX = 60

# (penalty, c, ρ, f̄): the optimum of (39) lies at A > 0 on (40) for the first two and the linear
# penalty, and at A = 0 (the (42) branch) for the third.
CONTINUOUS = [
    (TWO_STATE, 1.0, RHO, 0.0175),
    (TWO_STATE, 1.7, RHO, 0.0175),
    (TWO_STATE, 1.7, RHO, 0.016),
    (LINEAR, 1.0, 0.8, 0.5),
]
INTEGER = [
    (TWO_STATE, 1.0, RHO, 0.0175),
    (TWO_STATE, 1.7, RHO, 0.016),
    (LINEAR, 1.7, 0.8, 0.5),
]


@pytest.fixture(scope="module")
def solver():
    return PyomoSCIPSolver()


# --- independent references ------------------------------------------------------------------
def _risk(c, rho, A, S, eps):
    """(39a) ln(1 + cρ^A(e^ε − 1)/(1 − cρ^S̄ e^ε)) with numpy, NaN where (39b) fails."""
    A, S, eps = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (A, S, eps)))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        den = 1.0 - c * rho**S * np.exp(eps)
        return np.where(den > 0, np.log1p(c * rho**A * np.expm1(eps) / den), np.nan)


def _refine(h, grid, values):
    """Best grid point of h, refined by bounded Brent between its neighbours; inf if none is finite."""
    if not np.isfinite(values).any():
        return math.nan, math.inf
    k = int(np.nanargmin(values))
    best_x, best = float(grid[k]), float(values[k])
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    res = minimize_scalar(lambda x: min(h(x), 1e300), bounds=(lo, hi), method="bounded", options={"xatol": 1e-13})
    return (float(res.x), float(res.fun)) if res.fun < best else (best_x, best)


def brute_39(pr, n_eps=3000, n_s=400):
    """Continuous (39): min over ε of min over S̄ of (39a) with A = clip(T_max(ε) + o − S̄, 0, A_max).

    For fixed ε and S̄, (39a) decreases in A, so A is as large as (39c) (A + S̄ − o ≤ T_max(ε),
    f monotone in the age) and the box allow; the remaining function of S̄ is convex (module
    docstring of problems/geometric.py), so bounded Brent finds its minimum.  Returns inf if
    no grid ε is feasible.
    """
    c, rho, L, o, f = pr.c, pr.rho, pr.L, pr.aoi_offset, pr.max_penalty

    def s_range(eps):
        T = float(pr.penalty.max_age(eps, f))
        s_lo = max(1.0, (math.log(c) + eps - math.log1p(-pr.margin)) / L)  # (39b) with the margin
        return T, s_lo, min(pr.S_max, T + o)

    def inner(eps):
        T, s_lo, s_hi = s_range(eps)
        if not s_lo <= s_hi:
            return math.inf

        def g(S):
            return float(_risk(c, rho, np.clip(T + o - S, 0.0, pr.A_max), S, eps))

        res = minimize_scalar(g, bounds=(s_lo, s_hi), method="bounded", options={"xatol": 1e-12})
        return min(res.fun, g(s_lo), g(s_hi))

    grid = np.linspace(1e-4, pr.epsilon_max, n_eps)
    coarse = np.full(grid.size, np.inf)
    t = np.linspace(0.0, 1.0, n_s)
    for i, eps in enumerate(grid):  # vectorised over an S̄ grid for the coarse pass
        T, s_lo, s_hi = s_range(eps)
        if s_lo <= s_hi:
            S = s_lo + (s_hi - s_lo) * t
            coarse[i] = np.nanmin(_risk(c, rho, np.clip(T + o - S, 0.0, pr.A_max), S, eps))
    if not np.isfinite(coarse).any():
        return math.inf
    return _refine(inner, grid, coarse)[1]


def brute_42(pr, n_eps=6000):
    """(42): A = 0; for fixed ε, (42a) decreases in S̄, so S̄ = min(S_max, T_max(ε) + o)."""
    c, rho, o = pr.c, pr.rho, pr.aoi_offset

    def h(eps):
        S = min(pr.S_max, float(pr.penalty.max_age(eps, pr.max_penalty)) + o)
        if S < 1.0 or math.log(c) + eps - pr.L * S > math.log1p(-pr.margin):
            return math.inf
        return float(_risk(c, rho, 0.0, S, eps))

    grid = np.linspace(1e-4, pr.epsilon_max, n_eps)
    return _refine(h, grid, np.array([h(e) for e in grid]))[1]


def brute_41(pr, n_eps=6000):
    """(41): S̄ = (ln 2c + ε)/L (40); A as large as (39c) and A_max allow; ln(1 + 2cρ^A(e^ε − 1))."""
    c, rho, L, o = pr.c, pr.rho, pr.L, pr.aoi_offset

    def h(eps):
        S = (math.log(2 * c) + eps) / L
        A = min(pr.A_max, float(pr.penalty.max_age(eps, pr.max_penalty)) + o - S)
        if not (1.0 <= S <= pr.S_max and A >= 0):
            return math.inf
        return math.log1p(2 * c * rho**A * math.expm1(eps))

    grid = np.linspace(1e-4, pr.epsilon_max, n_eps)
    return _refine(h, grid, np.array([h(e) for e in grid]))[1]


def enumerate_integer(pr):
    """Integer (39)/(42): every A ∈ {0..A_max}, S̄ ∈ {1..S_max} with ε = min_epsilon(A + S̄ − o, f̄).

    (39a) increases in ε for fixed (A, S̄), so the smallest ε meeting (39c) is optimal; pairs
    violating (39b) with the margin are dropped.  Returns (best (39a), A, S̄) or (inf, None, None).
    """
    A = np.arange(int(pr.A_max) + 1, dtype=float)[:, None]
    S = np.arange(1, int(pr.S_max) + 1, dtype=float)[None, :]
    eps = np.asarray(pr.penalty.min_epsilon(A + S - pr.aoi_offset, pr.max_penalty), dtype=float)
    ok = np.isfinite(eps)
    ok &= np.where(ok, math.log(pr.c) + np.where(ok, eps, 0.0) - pr.L * S <= math.log1p(-pr.margin), False)
    risk = np.where(ok, _risk(pr.c, pr.rho, A, S, np.where(ok, eps, 1.0)), np.nan)
    if not ok.any():
        return math.inf, None, None
    i, j = np.unravel_index(np.nanargmin(risk), risk.shape)
    return float(risk[i, j]), float(A[i, 0]), float(S[0, j])


def _assert_brackets(sol, best, rel=1e-6):
    """SCIP's objective agrees with the reference and its bound brackets it."""
    assert sol.objective == pytest.approx(best, rel=rel)
    # The reference is a feasible value (≥ the optimum) and the bound is ≤ the optimum; the
    # brute force can sit above the true optimum only by its own ~1e-9 search error.
    assert sol.bound <= best * (1 + 1e-9)
    assert best <= sol.objective * (1 + 1e-7)
    assert sol.bound <= sol.objective
    assert sol.values["dual_bound"] == sol.bound
    assert 0 <= sol.values["gap"] <= 1e-6


# --- tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize("pen, c, rho, f_bar", CONTINUOUS)
def test_continuous_relaxation_matches_brute_force(solver, pen, c, rho, f_bar):
    pr = PeakRiskProblem(c, rho, pen, f_bar, A_max=BOX, S_max=BOX)
    sol = solver.solve(pr)
    assert sol.status is Status.OPTIMAL and sol.termination is Termination.COMPLETED
    _assert_brackets(sol, brute_39(pr))
    d = sol.decision
    assert pr.evaluate(d["A"], d["S_bar"], d["epsilon_c"], tol=0.0).feasible  # polished: exactly feasible
    assert sol.values["penalty"] <= f_bar
    assert sol.kkt["passed"]
    assert sol.method == "pyomo" and sol.backend == "pyomo+scip"
    assert "SCIP" in sol.backend_version and "pyomo" in sol.backend_version
    assert sol.values["time_limit"] == 60.0 and sol.values["scip_status"] in ("optimal", "gaplimit")
    # SCIP printed nothing: its output goes through a pipe that can deadlock when full (solver docstring)
    assert sol.values["scip_output_lines"] == 0


def test_interior_optimum_satisfies_40_and_equals_41(solver):
    # c = 1, f̄ = 0.0175: the optimum of (39) has 0 < A < A_max, so Proposition 4's (40) holds there
    # and (41) has the same optimal value (eq. (40): c ρ^S̄ e^ε = 1/2).
    pr39 = PeakRiskProblem(1.0, RHO, TWO_STATE, 0.0175, A_max=BOX, S_max=BOX)
    sol39 = solver.solve(pr39)
    assert 0 < sol39.decision["A"] < BOX
    assert sol39.kkt["branch"] == "A>0 interior (41)"
    assert sol39.values["condition_39b"] == pytest.approx(0.5, rel=1e-5)
    sol41 = solver.solve(KKTBranchProblem(1.0, RHO, TWO_STATE, 0.0175, A_max=BOX, S_max=BOX))
    assert sol41.status is Status.OPTIMAL
    assert sol41.objective == pytest.approx(sol39.objective, rel=1e-6)


@pytest.mark.parametrize("pen, c, rho, f_bar", INTEGER)
def test_integer_version_matches_enumeration(solver, pen, c, rho, f_bar):
    pr = PeakRiskProblem(c, rho, pen, f_bar, A_max=BOX, S_max=BOX, integer=True)
    sol = solver.solve(pr)
    best, A, S = enumerate_integer(pr)
    assert sol.status is Status.OPTIMAL
    _assert_brackets(sol, best)
    d = sol.decision
    assert float(d["A"]).is_integer() and float(d["S_bar"]).is_integer()
    assert (d["A"], d["S_bar"]) == (A, S)
    assert d["epsilon_c"] == pytest.approx(float(pen.min_epsilon(A + S - 1, f_bar)), rel=1e-12)
    # the continuous relaxation is a lower bound of the integer problem
    relaxed = solver.solve(PeakRiskProblem(c, rho, pen, f_bar, A_max=BOX, S_max=BOX))
    assert relaxed.objective <= sol.objective


@pytest.mark.parametrize("integer", [False, True])
def test_infeasible_instance_is_proven_infeasible(solver, integer):
    # c = 1.7, f̄ = 0.01 < K₀: (39b) forces S̄ ≥ (ln c + ε)/L, and the noise 8/(I²ε²) plus the
    # staleness at that S̄ stays above f̄ for every ε.
    pr = PeakRiskProblem(1.7, RHO, TWO_STATE, 0.01, A_max=BOX, S_max=BOX, integer=integer)
    assert (enumerate_integer(pr)[0] if integer else brute_39(pr)) == math.inf
    sol = solver.solve(pr)
    assert sol.status is Status.INFEASIBLE and sol.termination is Termination.INFEASIBLE
    assert sol.decision is None and sol.objective is None and sol.bound is None
    assert sol.values["scip_status"] in ("infeasible", "inforunbd")
    assert sol.values["min_penalty"] > 0.01
    assert "SCIP proved infeasibility" in sol.message


@pytest.mark.parametrize("c, f_bar", [(1.0, 0.0175), (1.7, 0.02)])
def test_no_aging_42_matches_brute_force(solver, c, f_bar):
    pr = NoAgingProblem(c, RHO, TWO_STATE, f_bar, S_max=BOX)
    sol = solver.solve(pr)
    assert sol.status is Status.OPTIMAL and sol.decision["A"] == 0.0
    _assert_brackets(sol, brute_42(pr))
    # (42a) as the native objective: (e^ε − 1)/(1 − cρ^S̄ e^ε)
    d = sol.decision
    native = math.expm1(d["epsilon_c"]) / (1 - c * RHO ** d["S_bar"] * math.exp(d["epsilon_c"]))
    assert sol.values["native_objective"] == pytest.approx(native, rel=1e-12)
    integer = solver.solve(NoAgingProblem(c, RHO, TWO_STATE, f_bar, S_max=BOX, integer=True))
    _assert_brackets(integer, enumerate_integer(NoAgingProblem(c, RHO, TWO_STATE, f_bar, S_max=BOX, integer=True))[0])


@pytest.mark.parametrize("pen, c, rho, f_bar", [(TWO_STATE, 1.7, RHO, 0.016), (LINEAR, 1.7, 0.8, 0.5)])
def test_kkt_branch_41_matches_brute_force(solver, pen, c, rho, f_bar):
    pr = KKTBranchProblem(c, rho, pen, f_bar, A_max=BOX, S_max=BOX)
    sol = solver.solve(pr)
    assert sol.status is Status.OPTIMAL
    _assert_brackets(sol, brute_41(pr))
    d = sol.decision
    # (41b) holds exactly after the polish: L·S̄ = ln(2c) + ε
    assert pr.L * d["S_bar"] == pytest.approx(math.log(2 * c) + d["epsilon_c"], rel=1e-12)
    assert sol.values["native_objective"] == pytest.approx(rho ** d["A"] * math.expm1(d["epsilon_c"]), rel=1e-12)


def test_time_limit_reports_bound_or_unknown(solver):
    pr = PeakRiskProblem(1.0, RHO, TWO_STATE, 0.0175, A_max=168, S_max=168)
    sol = solver.solve(pr, time_limit=1e-4)  # SCIP stops in presolve, before any incumbent (SCIP 10.0.2)
    assert sol.termination is Termination.TIME_LIMIT
    assert sol.values["time_limit"] == 1e-4 and sol.values["scip_status"] == "timelimit"
    if sol.decision is None:
        assert sol.status is Status.UNKNOWN and "infeasibility not proven" in sol.message
        assert sol.values["min_penalty"] < 0.0175
    else:  # a faster SCIP might already hold an incumbent: then feasible, with a bound below it
        assert sol.status is Status.FEASIBLE and sol.bound <= sol.objective
    loose = solver.solve(pr, rel_gap=1e-2)  # stops on the gap: an incumbent, no proof at 1e-6
    assert loose.status is Status.FEASIBLE and loose.values["scip_status"] == "gaplimit"
    assert loose.bound <= loose.objective and loose.values["gap"] > 1e-6
    # the relative gap on (39a) is at most the requested gap on the log-ratio (module docstring)
    assert loose.values["gap"] <= 1e-2


_STALL_CASES = """
from policyopt.utility.continuous_penalty import LinearPenalty, TwoStateMSE
from policyopt.problems.geometric import KKTBranchProblem
from policyopt.solvers.global_scip import PyomoSCIPSolver
s = PyomoSCIPSolver()
# With ε_C ≥ 1e-12 only, SCIP branched on unbounded auxiliaries of 1/ε_C and logged until the
# output pipe filled (a deadlock that ignores the time limit); now presolve proves infeasibility.
a = s.solve(KKTBranchProblem(1.7, 0.8, LinearPenalty(0.01, 0.05), 0.1, A_max=60, S_max=60), time_limit=20)
# With feastol 1e-9, SCIP asked SoPlex for an LP tolerance of 1e-12 and warned at every node.
b = s.solve(KKTBranchProblem(1.1246991582997512, 0.5485370499743045, TwoStateMSE(0.41443801306008815,
            0.03702493696560723, 145), 0.003909963654466673, A_max=168, S_max=168), time_limit=20)
print(a.status.value, b.status.value, b.values["scip_output_lines"])
"""


def test_former_stalls_finish():
    # A subprocess with a timeout: a regression would hang (pipe deadlock), not fail.
    out = subprocess.run([sys.executable, "-c", _STALL_CASES], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["infeasible", "optimal", "0"]


def test_model_has_finite_bounds_and_the_log_ratio_objective():
    import pyomo.environ as pyo

    pr = PeakRiskProblem(1.7, RHO, TWO_STATE, 0.0175, A_max=BOX, S_max=BOX, integer=True)
    m = to_pyomo(pr)
    for v in (m.A, m.S_bar, m.epsilon_c, m.u):
        lo, hi = v.bounds
        assert math.isfinite(lo) and math.isfinite(hi)
    assert m.A.is_integer() and m.S_bar.is_integer() and m.epsilon_c.is_continuous()
    assert m.u.bounds == (0.0, 1.0 - pr.margin)
    # ε_C's lower bound is the smallest budget (39c) allows at the smallest peak age 0
    assert m.epsilon_c.bounds[0] == pytest.approx(float(TWO_STATE.min_epsilon(0.0, 0.0175)), rel=1e-8)
    # the objective at a point, with u on its lower bound, is the log-ratio of (39a)
    A, S, eps = 2.0, 5.0, 0.5
    m.A.set_value(A), m.S_bar.set_value(S), m.epsilon_c.set_value(eps)
    m.u.set_value(pr.c * RHO**S * math.exp(eps))
    assert float(log_ratio_to_risk(pyo.value(m.log_ratio))) == pytest.approx(float(_risk(pr.c, RHO, A, S, eps)), rel=1e-12)
    assert pyo.value(m.penalty_39c.body) == pytest.approx(float(TWO_STATE.value(A + S - 1, eps)) / 0.0175, rel=1e-12)
    assert to_pyomo(NoAgingProblem(1.0, RHO, TWO_STATE, 0.0175, S_max=BOX)).A.fixed
    assert hasattr(to_pyomo(KKTBranchProblem(1.0, RHO, TWO_STATE, 0.0175, A_max=BOX, S_max=BOX)), "kkt_41b")


def test_errors_are_documented(solver):
    from policyopt.models.markov import Population, two_state_chain
    from policyopt.utility.continuous_penalty import TableMSE
    from policyopt.utility.penalty import MSEPenalty

    pop = Population([two_state_chain(0.1, 0.1)], [20])
    pr = PeakRiskProblem(1.0, 0.8, TableMSE(MSEPenalty(pop), 60), 0.1, A_max=BOX, S_max=BOX)
    with pytest.raises(InvalidInputError, match=r"needs a penalty with an algebraic form \(.*\), and the penalty 'mse-table' of this model has none; use "
                       r"method 'exact' or 'heuristic'"):
        solver.solve(pr)
    with pytest.raises(InvalidInputError, match=r"`time_limit` must be > 0, got 0"):
        solver.solve(PeakRiskProblem(1.0, RHO, TWO_STATE, 0.0175), time_limit=0)
    with pytest.raises(InvalidInputError, match=r"`rel_gap` must be a finite number, got nan"):
        solver.solve(PeakRiskProblem(1.0, RHO, TWO_STATE, 0.0175), rel_gap=float("nan"))
    with pytest.raises(InvalidInputError, match=r"the pyomo back end solves \(39\), \(41\), \(42\) problems"):
        solver.solve("not a problem")
    assert issubclass(BackendUnavailableError, ImportError)  # what solve raises when unavailable


def test_unavailable_backend_raises_with_the_reason(monkeypatch):
    monkeypatch.setattr(PyomoSCIPSolver, "available", staticmethod(lambda: (False, "PySCIPOpt is not importable")))
    with pytest.raises(BackendUnavailableError, match=r"method 'pyomo' is unavailable: PySCIPOpt is not importable"):
        PyomoSCIPSolver().solve(PeakRiskProblem(1.0, RHO, TWO_STATE, 0.0175))


def test_registered_and_reachable_through_problem_solve():
    pr = PeakRiskProblem(1.7, RHO, TWO_STATE, 0.016, A_max=BOX, S_max=BOX, integer=True)
    sol = pr.solve("pyomo", time_limit=30.0)
    assert sol.method == "pyomo" and sol.status is Status.OPTIMAL
    assert sol.values["time_limit"] == 30.0
    assert PyomoSCIPSolver.MIP_CAPABLE and PyomoSCIPSolver.NONCONVEX_CAPABLE
    assert PyomoSCIPSolver.REQUIRED_MODULES == ("pyomo", "pyscipopt")
    assert set(PyomoSCIPSolver.SUPPORTED_PROBLEMS) == {PeakRiskProblem, KKTBranchProblem, NoAgingProblem}
