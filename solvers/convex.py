"""Convex back end (cvxpy) for the geometric formulations (39), (41), (42) of Zhang et al.

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Section V-C, eqs. (38)–(42),
Proposition 4 (40), Appendix F.  Privacy in nats, time in slots.

What is convex and what is not
------------------------------
None of (39), (41), (42) is jointly convex in (A, S̄, ε_C) (see
:mod:`policyopt.problems.geometric`; the paper's claim that (41) is convex whenever f is
does not hold).  What *is* convex is the **inner problem** at a fixed ε_C.  With
L = ln(1/ρ), o the AoI offset and T_max(ε_C) = ``penalty.max_age(ε_C, f̄)`` (the monotone
inverse of f in the peak age, which turns (39c) into a linear constraint), the log of the
ratio inside (39a) is::

    ln c + ln(e^{ε_C} − 1) + F(A, S̄),   F(A, S̄) = −L·A − ln(1 − e^{u}),   u = ln c + ε_C − L·S̄,

and the inner problem is::

    minimise    F(A, S̄)
    subject to  A + S̄ ≤ T_max(ε_C) + o                 (39c), "age_39c"
                ln c + ε_C − L·S̄ ≤ ln(1 − margin)      (39b), "condition_39b"
                0 ≤ A ≤ A_max, 1 ≤ S̄ ≤ S_max           box, "A_lower" ... "S_upper"

which is DCP (−ln(1 − e^u) is convex: exponential cone) and DPP: it is compiled once,
with the ε_C-dependent numbers ln(c·e^{ε_C}) and T_max(ε_C) + o as ``cvxpy.Parameter`` s,
and re-solved cheaply for every ε_C.  For (42) A = 0 is fixed (variable S̄ only); for (41)
S̄ = (ln 2c + ε_C)/L is fixed by (40), so e^u = 1/2, F = −L·A + ln 2 and the inner problem
is a linear program in A.  (39a) itself is ln(1 + exp(ln c + ln(e^{ε_C} − 1) + F)).

The outer search over ε_C is one-dimensional: the feasible ε_C range is located with numpy
(dense feasibility screen, then bisection on its ends), the inner optimum is evaluated on a
**log-spaced (geometric)** bracket grid over that range, and the best grid point is refined
with bounded Brent (``scipy.optimize.minimize_scalar(method="bounded")``) on its two
neighbouring grid intervals.  The outer function is not known to be unimodal, so the
result is a feasible point, not a proven global optimum: ``status`` is ``feasible`` (or
``unbounded``, see :func:`policyopt.solvers._common.geometric_solution`) and ``bound`` is
``None``; when no ε_C leaves a feasible inner problem the status is ``unknown`` (nothing
about the nonconvex problem was proven).

Each inner problem is solved with Clarabel (tight tolerances) and, when Clarabel fails or
is inaccurate, again with SCS; of the points returned, the one with the lower numpy
objective is kept.  Solver points are projected exactly onto the inner feasible set (moves
of the order of the solver tolerance) and re-evaluated with the problem's numpy code, so
the value the outer search compares is always that of a feasible point.  At the final ε_C
the KKT conditions of the inner problem are checked with numpy from cvxpy's primal and dual
values (:func:`kkt_report`).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, NamedTuple

import numpy as np

from policyopt.errors import BackendUnavailableError, InvalidInputError, check_int, fmt
from policyopt.problems.geometric import GeometricScheduleProblem, KKTBranchProblem, NoAgingProblem, PeakRiskProblem
from policyopt.result import Solution, Termination
from policyopt.solvers._common import KKT_TOL, cvxpy_available, geometric_infeasible, geometric_solution

__all__ = ["CvxpySolver", "InnerProblem", "inner_problem", "kkt_report", "STATUS_MAP", "SOLVER_SEQUENCE"]

#: cvxpy status -> what the back end concludes about one inner solve.
#: ``"solved"``: optimal, trusted; ``"inaccurate"``: a point is present but not certified
#: (retried with the fallback solver); ``"infeasible"``: no (A, S̄) for this ε_C;
#: ``"unbounded"``: impossible on the bounded box, so treated as a solver failure;
#: ``"error"``: nothing usable (retried with the fallback solver).
STATUS_MAP: dict[str, str] = {
    "optimal": "solved",
    "optimal_inaccurate": "inaccurate",
    "user_limit": "inaccurate",  # iteration/time limit with a point present (cvxpy SOLUTION_PRESENT)
    "infeasible": "infeasible",
    "infeasible_inaccurate": "error",  # not a trusted proof: retry with the fallback solver
    "infeasible_or_unbounded": "infeasible",  # the objective is bounded below on the box
    "unbounded": "unbounded",
    "unbounded_inaccurate": "unbounded",
    "solver_error": "error",
}

#: Solvers tried in turn for the inner problem, with their options (Clarabel's default
#: gap tolerance 1e-8 leaves (40) satisfied only to ~1e-5 on the A > 0 branch, hence 1e-12).
SOLVER_SEQUENCE: tuple[tuple[str, dict], ...] = (
    ("CLARABEL", {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "tol_ktratio": 1e-10}),
    ("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 2_500}),
)

#: Value the outer search sees where the inner problem is infeasible (the log ratio of a
#: feasible point is at most ln c + ε_max + ln(1/margin), far below this).
_INFEASIBLE_VALUE = 1e12
#: Points of the numpy feasibility screen (half log-spaced, half linear).
_N_SCREEN = 4096


class InnerProblem(NamedTuple):
    """The compiled convex inner problem of (39), (41) or (42) at a fixed ε_C.

    Attributes
    ----------
    problem : cvxpy.Problem
        DCP and DPP; minimises F(A, S̄) = −L·A − ln(1 − c·e^{ε_C}·e^{−L·S̄}) (see the
        module docstring), so that ln(ratio of (39a)) = ln c + ln(e^{ε_C} − 1) + F.
    variables : dict of str to cvxpy.Variable
        Scalar variables: ``{"A", "S_bar"}`` for (39), ``{"A"}`` for (41), ``{"S_bar"}`` for (42).
    parameters : dict of str to cvxpy.Parameter
        ``"log_k"`` = ln c + ε_C (nats) for (39)/(42); ``"age_cap"`` = T_max(ε_C) + o (slots;
        for (41) the cap on A, T_max + o − S̄(ε_C)), clipped to a finite value.
    constraints : dict of str to cvxpy.Constraint
        Named inequalities, each written as g(x) ≤ 0 in cvxpy's sign convention (dual ≥ 0).
    formulation : str
        ``"39"``, ``"41"`` or ``"42"``.
    """

    problem: Any
    variables: dict
    parameters: dict
    constraints: dict
    formulation: str


def _import_cvxpy():
    try:
        import cvxpy as cp
    except ImportError as exc:  # pragma: no cover - cvxpy is a dependency
        raise BackendUnavailableError(f"the cvxpy back end needs cvxpy ({exc}); install it with `pip install cvxpy`") from exc
    return cp


def _check_problem(problem) -> GeometricScheduleProblem:
    if not isinstance(problem, CvxpySolver.SUPPORTED_PROBLEMS):
        names = ", ".join(c.__name__ for c in CvxpySolver.SUPPORTED_PROBLEMS)
        raise InvalidInputError(f"the cvxpy back end solves {names}; got `problem` = {fmt(problem)}")
    if not getattr(problem.penalty, "smooth", True):
        raise InvalidInputError(
            f"penalty {problem.penalty.name!r} is nonconvex and non-smooth (a step function of the peak age, "
            "e.g. the failure rate (51)): the cvxpy back end cannot model it; use method='exact' "
            "(integer schedules, exact Δ) or 'heuristic'"
        )
    if problem.integer:
        raise InvalidInputError(
            f"`problem.integer` is True for {fmt(problem)}: cvxpy solves only the continuous relaxation "
            'of (39)/(42); use method="pyomo" or "exact" for integer A and S̄'
        )
    return problem


def _check_epsilon(epsilon_c) -> float:
    if isinstance(epsilon_c, bool) or not isinstance(epsilon_c, (int, float, np.integer, np.floating)):
        raise InvalidInputError(f"`epsilon_c` must be a number (nats), got {fmt(epsilon_c)}")
    eps = float(epsilon_c)
    if not (math.isfinite(eps) and eps > 0):
        raise InvalidInputError(f"`epsilon_c` must be a positive finite number (nats), got {fmt(epsilon_c)}")
    return eps


def _solve_iv(problem, tol, n_bracket) -> tuple[GeometricScheduleProblem, float, int]:
    """Input validation of :meth:`CvxpySolver.solve`, run first."""
    problem = _check_problem(problem)
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) or not (0 < float(tol) < 1e-2):
        raise InvalidInputError(f"`tol` must be a number in (0, 0.01), got {fmt(tol)}")
    check_int(n_bracket, "n_bracket", 3)
    return problem, float(tol), int(n_bracket)


# --- the ε_C-dependent numbers (numpy) --------------------------------------------------
def _log_cap(problem: GeometricScheduleProblem) -> float:
    """ln(1 − margin): (39b) is ln c + ε_C − L·S̄ ≤ this."""
    return math.log1p(-problem.margin)


def _age_cap(problem: GeometricScheduleProblem, eps):
    """T_max(ε_C) + o (slots, vectorised): (39c) is A + S̄ ≤ this; ±inf passed through."""
    return np.asarray(problem.penalty.max_age(eps, problem.max_penalty), dtype=float) + problem.aoi_offset


def _s_lower(problem: GeometricScheduleProblem, eps):
    """Smallest S̄ allowed by S̄ ≥ 1 and (39b): (ln c + ε_C − ln(1 − margin))/L (vectorised)."""
    return np.maximum(1.0, (math.log(problem.c) + np.asarray(eps, dtype=float) - _log_cap(problem)) / problem.L)


def _screen(problem: GeometricScheduleProblem, eps) -> np.ndarray:
    """Whether the inner problem at each ε_C has a feasible point (numpy, vectorised)."""
    eps = np.asarray(eps, dtype=float)
    cap = _age_cap(problem, eps)
    if problem.formulation == "41":
        s = np.asarray(problem.s_bar_of(eps), dtype=float)
        # (41b) fixes S̄; A ≥ 0 needs S̄ ≤ T_max + o; (39b) holds since e^u = 1/2 by (40).
        ok = (s >= 1.0) & (s <= problem.S_max) & (s <= cap) & (-math.log(2.0) <= _log_cap(problem))
    else:
        ok = _s_lower(problem, eps) <= np.minimum(problem.S_max, cap)
    return ok & (eps > 0)


def _parameter_values(problem: GeometricScheduleProblem, eps: float) -> dict[str, float]:
    """Finite values of the DPP parameters at ε_C (a never-binding or infeasible cap replaces ±inf)."""
    cap = float(_age_cap(problem, eps))
    if problem.formulation == "41":
        cap -= float(problem.s_bar_of(eps))  # A ≤ T_max + o − S̄(ε_C)
        big = problem.A_max + 1.0
    else:
        big = problem.A_max + problem.S_max + 1.0  # A + S̄ ≤ A_max + S_max always holds
    cap = min(cap, big) if cap > -math.inf else -1.0  # −1: infeasible (A ≥ 0, S̄ ≥ 1)
    out = {"age_cap": cap}
    if problem.formulation != "41":
        out["log_k"] = math.log(problem.c) + eps  # ln(c·e^{ε_C})
    return out


# --- the cvxpy model -----------------------------------------------------------------
def _build_inner(problem: GeometricScheduleProblem) -> InnerProblem:
    """Compile the DPP inner problem of `problem` once, parameters unset."""
    cp = _import_cvxpy()
    L = problem.L
    form = problem.formulation
    cons: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    params = {"age_cap": cp.Parameter(name="age_cap")}
    if form == "41":
        A = cp.Variable(name="A")
        variables["A"] = A
        # (40): c ρ^{S̄} e^{ε_C} = 1/2, so −ln(1 − e^u) = ln 2 and F = −L·A + ln 2.
        objective = -L * A + math.log(2.0)
        cons["age_39c"] = A <= params["age_cap"]
        cons["A_lower"] = A >= 0
        cons["A_upper"] = A <= problem.A_max
    else:
        params["log_k"] = cp.Parameter(name="log_k")
        S = cp.Variable(name="S_bar")
        u = params["log_k"] - L * S  # ln(c ρ^{S̄} e^{ε_C}), affine in S̄ (DPP)
        if form == "42":
            A = 0.0
        else:
            A = cp.Variable(name="A")
            variables["A"] = A
        variables["S_bar"] = S
        objective = -L * A - cp.log(1 - cp.exp(u))  # F(A, S̄): convex (exponential cone)
        cons["age_39c"] = A + S <= params["age_cap"]  # (39c) through T_max(ε_C)
        cons["condition_39b"] = u <= _log_cap(problem)  # (39b)
        if form != "42":
            cons["A_lower"] = A >= 0
            cons["A_upper"] = A <= problem.A_max
        cons["S_lower"] = S >= 1
        cons["S_upper"] = S <= problem.S_max
    prob = cp.Problem(cp.Minimize(objective), list(cons.values()))
    return InnerProblem(problem=prob, variables=variables, parameters=params, constraints=cons, formulation=form)


def _set_epsilon(inner: InnerProblem, problem: GeometricScheduleProblem, eps: float) -> None:
    for name, value in _parameter_values(problem, eps).items():
        inner.parameters[name].value = value


def inner_problem(problem: GeometricScheduleProblem, epsilon_c: float) -> InnerProblem:
    """The convex inner problem of (39), (41) or (42) at a fixed ε_C, as a cvxpy Problem.

    Parameters
    ----------
    problem : PeakRiskProblem, KKTBranchProblem or NoAgingProblem
        Continuous (``integer`` False).
    epsilon_c : float
        Budget per release (nats), > 0.

    Returns
    -------
    InnerProblem
        ``(problem, variables, parameters, constraints, formulation)``: the DCP/DPP
        ``cvxpy.Problem`` with its parameters set for `epsilon_c`, its scalar variables
        (``A`` and/or ``S_bar``, slots), parameters and named constraints.  Its objective is
        F(A, S̄) = −L·A − ln(1 − c e^{ε_C} ρ^{S̄}), so that
        ``problem.log_ratio(A, S_bar, epsilon_c) == ln c + ln(e^{ε_C} − 1) + F`` (39a).
        Where T_max(ε_C) = −inf the age cap is set to −1, so the problem is infeasible.

    Raises
    ------
    InvalidInputError
        If `problem` is not a supported continuous problem or `epsilon_c` is not a positive
        finite number.
    """
    problem = _check_problem(problem)
    eps = _check_epsilon(epsilon_c)
    inner = _build_inner(problem)
    _set_epsilon(inner, problem, eps)
    return inner


# --- one inner solve -------------------------------------------------------------------
class _InnerSolve(NamedTuple):
    epsilon_c: float
    outcome: str  # a value of STATUS_MAP, or "screened" (numpy screen says infeasible)
    cvxpy_status: str
    solver: str
    x: dict  # raw cvxpy primal values
    duals: dict
    inner_value: float  # cvxpy objective value
    decision: tuple  # projected (A, S̄)
    log_ratio: float  # numpy ln(ratio of (39a)) at `decision`; +inf if none
    attempts: tuple = ()  # (solver, cvxpy status) of every solve tried at this ε_C


def _empty(eps: float, outcome: str, attempts: tuple = ()) -> _InnerSolve:
    status, solver = (attempts[-1][1], attempts[-1][0]) if attempts else ("", "")
    return _InnerSolve(eps, outcome, status, solver, {}, {}, math.nan, (math.nan, math.nan), math.inf, attempts)


def _value(x) -> float:
    return float(np.asarray(x, dtype=float).reshape(-1)[0])


def _solve_once(cp, prob, solver: str, opts: dict) -> tuple[str, str]:
    """One cvxpy solve; returns (STATUS_MAP outcome, cvxpy status)."""
    with warnings.catch_warnings():
        # An inaccurate solve is not hidden: its status is mapped below, it triggers the
        # fallback solver and is counted in ``values``.  The RuntimeWarning comes from cvxpy
        # evaluating ln(1 − e^u) at a point a hair outside (39b); the value is recomputed with numpy.
        warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
        warnings.filterwarnings("ignore", message="invalid value encountered in log", category=RuntimeWarning)
        try:
            prob.solve(solver=solver, **opts)
        except cp.error.SolverError:
            return "error", "solver_error"
    status = prob.status
    return STATUS_MAP.get(status, "error"), status


def _project(problem: GeometricScheduleProblem, eps: float, A: float, S: float) -> tuple[float, float]:
    """Move a solver point (feasible to ~1e-10) exactly into the feasible set of the inner problem.

    Clips to the box, snaps A to a bound it is within 1e-8·max(1, A_max) of, raises S̄ to the
    (39b) floor and removes any excess over the (39c) age cap from A first, then from S̄.
    """
    cap = float(_age_cap(problem, eps))
    snap = 1e-8 * max(1.0, problem.A_max)
    if problem.formulation == "41":
        S = float(problem.s_bar_of(eps))  # (41b)
    elif problem.formulation == "42":
        A = 0.0
    A = min(max(A, 0.0), problem.A_max)
    A = 0.0 if A <= snap else (problem.A_max if A >= problem.A_max - snap else A)
    if problem.formulation != "41":
        S = min(max(S, float(_s_lower(problem, eps))), problem.S_max)
    excess = A + S - cap
    if excess > 0:
        cut = min(A, excess)
        A -= cut
        if problem.formulation != "41":
            S = max(S - (excess - cut), float(_s_lower(problem, eps)))
    return A, S


def _solve_inner(cp, inner: InnerProblem, copies: dict, problem: GeometricScheduleProblem, eps: float) -> _InnerSolve:
    """Solve the inner problem at ε_C: Clarabel, then SCS if Clarabel fails or is inaccurate.

    When both return a point, the one with the lower numpy objective (after projection onto
    the feasible set) is kept.  `copies` maps each solver to its own ``cvxpy.Problem`` over
    the same variables, parameters and constraints: cvxpy caches one compiled (DPP) solving
    chain per Problem, so alternating solvers on a single Problem would recompile it each time.
    """
    if not bool(_screen(problem, eps)):
        return _empty(eps, "screened")
    _set_epsilon(inner, problem, eps)
    attempts: list[tuple[str, str]] = []
    points: list[_InnerSolve] = []
    for solver, opts in SOLVER_SEQUENCE:
        prob = copies.setdefault(solver, cp.Problem(inner.problem.objective, inner.problem.constraints))
        outcome, status = _solve_once(cp, prob, solver, opts)
        attempts.append((solver, status))
        if outcome in ("solved", "inaccurate"):
            points.append(_record(inner, prob, problem, eps, outcome, status, solver))
            if outcome == "solved":
                break
        elif outcome == "infeasible":
            return _empty(eps, outcome, tuple(attempts))
        # "error" / "unbounded" (impossible on the bounded box): try the next solver
    if not points:
        return _empty(eps, "error", tuple(attempts))
    best = min(points, key=lambda r: (r.log_ratio, r.outcome != "solved"))
    return best._replace(attempts=tuple(attempts))


def _record(inner: InnerProblem, prob, problem, eps, outcome, status, solver) -> _InnerSolve:
    x = {k: _value(v.value) for k, v in inner.variables.items()}
    duals = {k: _value(c.dual_value) for k, c in inner.constraints.items()}
    A0 = x.get("A", 0.0)
    S0 = x.get("S_bar", float(problem.s_bar_of(eps)) if problem.formulation == "41" else math.nan)
    A, S = _project(problem, eps, A0, S0)
    lr = float(problem.log_ratio(A, S, eps))
    value = float(prob.value) if prob.value is not None else math.nan
    return _InnerSolve(eps, outcome, status, solver, x, duals, value, (A, S), lr if math.isfinite(lr) else math.inf)


# --- KKT certificate of the inner problem (numpy) --------------------------------------------
def _linear_constraints(problem: GeometricScheduleProblem, eps: float) -> dict[str, tuple[np.ndarray, float]]:
    """Each inner constraint as g(x) = a·x − b ≤ 0 (the orientation cvxpy gives its dual)."""
    p = _parameter_values(problem, eps)
    L = problem.L
    if problem.formulation == "41":  # x = (A,)
        return {
            "age_39c": (np.array([1.0]), p["age_cap"]),
            "A_lower": (np.array([-1.0]), 0.0),
            "A_upper": (np.array([1.0]), problem.A_max),
        }
    two = problem.formulation == "39"  # x = (A, S̄) or (S̄,)

    def vec(a, s):
        """Gradient vector in the inner variables from the ∂/∂A and ∂/∂S̄ parts."""
        return np.array([a, s]) if two else np.array([s])

    out = {
        "age_39c": (vec(1.0, 1.0), p["age_cap"]),
        "condition_39b": (vec(0.0, -L), _log_cap(problem) - p["log_k"]),  # ln k − L S̄ ≤ ln(1 − m)
    }
    if two:
        out["A_lower"] = (vec(-1.0, 0.0), 0.0)
        out["A_upper"] = (vec(1.0, 0.0), problem.A_max)
    out["S_lower"] = (vec(0.0, -1.0), -1.0)
    out["S_upper"] = (vec(0.0, 1.0), problem.S_max)
    return out


def _objective_gradient(problem: GeometricScheduleProblem, eps: float, x: dict) -> tuple[float, np.ndarray]:
    """F and ∇F at the raw point, written analytically (independent of cvxpy's expression tree).

    F = −L·A − ln(1 − e^u), u = ln c + ε_C − L·S̄:  ∂F/∂A = −L,  ∂F/∂S̄ = −L·e^u/(1 − e^u) = −L/expm1(−u).
    For (41), S̄ is fixed by (40): F = −L·A + ln 2.
    """
    L = problem.L
    if problem.formulation == "41":
        return -L * x["A"] + math.log(2.0), np.array([-L])
    u = math.log(problem.c) + eps - L * x["S_bar"]
    A = x.get("A", 0.0)
    F = -L * A - math.log(-math.expm1(u)) if u < 0 else math.inf
    dS = -L / math.expm1(-u) if u < 0 else -math.inf
    return F, (np.array([-L, dS]) if problem.formulation == "39" else np.array([dS]))


def kkt_report(problem: GeometricScheduleProblem, epsilon_c: float, x: dict, duals: dict) -> dict:
    """KKT residuals of the convex inner problem at ε_C, computed with numpy.

    As in cvxpy's ``tests/solver_test_helpers.py``: primal feasibility, dual feasibility,
    complementary slackness and stationarity of the Lagrangian F + Σ λ_i g_i, with the
    gradients written analytically.

    Parameters
    ----------
    problem : PeakRiskProblem, KKTBranchProblem or NoAgingProblem
    epsilon_c : float
        Nats.
    x : dict of str to float
        Primal values of the inner variables (``A`` and/or ``S_bar``, slots).
    duals : dict of str to float
        Dual values by constraint name (see :class:`InnerProblem`).

    Returns
    -------
    dict
        ``primal_feasibility`` (max violation of g_i ≤ 0, relative to max(1, ``|b_i|``)),
        ``dual_feasibility`` (most negative λ_i, relative to max(1, ‖∇F‖)),
        ``complementarity`` (max ``|λ_i g_i|``, relative to max(1, ``|F|``)), ``stationarity``
        (‖∇F + Σ λ_i ∇g_i‖, relative to max(1, ‖∇F‖)) and ``passed`` (all ≤ ``KKT_TOL``).
    """
    cons = _linear_constraints(problem, epsilon_c)
    order = ("A", "S_bar") if problem.formulation == "39" else (("A",) if problem.formulation == "41" else ("S_bar",))
    xv = np.array([x[k] for k in order], dtype=float)
    F, grad = _objective_gradient(problem, epsilon_c, x)
    gscale = max(1.0, float(np.linalg.norm(grad)))
    primal, dual, comp = 0.0, 0.0, 0.0
    lagr = grad.copy()
    for name, (a, b) in cons.items():
        g = float(a @ xv - b)
        lam = duals[name]
        primal = max(primal, g / max(1.0, abs(b)))
        dual = max(dual, -lam / gscale)
        comp = max(comp, abs(lam * g) / max(1.0, abs(F)))
        lagr = lagr + lam * a
    stat = float(np.linalg.norm(lagr)) / gscale
    rep = {"primal_feasibility": primal, "dual_feasibility": dual, "complementarity": comp, "stationarity": stat}
    rep["passed"] = bool(all(v <= KKT_TOL for v in rep.values()))
    return rep


# --- the back end --------------------------------------------------------------------
class CvxpySolver:
    """Convex back end: exact inner convex problem in (A, S̄) with cvxpy, 1-D search over ε_C.

    Class constants declare what the back end can do, as cvxpy's solver interfaces do.
    """

    name = "cvxpy"
    MIP_CAPABLE = False
    NONCONVEX_CAPABLE = False
    REQUIRED_MODULES = ("cvxpy",)
    SUPPORTED_PROBLEMS = (PeakRiskProblem, KKTBranchProblem, NoAgingProblem)

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") if cvxpy imports and Clarabel or SCS is installed, else (False, reason); never raises."""
        return cvxpy_available([name for name, _ in SOLVER_SEQUENCE])

    def solve(self, problem: GeometricScheduleProblem, *, tol: float = 1e-9, n_bracket: int = 64) -> Solution:
        """Solve the continuous (39), (41) or (42) by an ε_C search around an exact convex inner solve.

        Parameters
        ----------
        problem : PeakRiskProblem, KKTBranchProblem or NoAgingProblem
            Continuous relaxation (``problem.integer`` False).  Not modified.
        tol : float
            Tolerance of the outer search: Brent's ``xatol = tol·max(1, ε_C)`` nats, with ε_C
            the best grid point (reported as ``values["epsilon_xatol"]``).  scipy's bounded
            method adds √(machine ε)·``|ε_C|`` ≈ 1.5e-8·ε_C to it, so the bracket is resolved to
            about xatol + 1.5e-8·ε_C.
        n_bracket : int
            Points of the log-spaced (geometric) grid over the feasible ε_C range, ≥ 3.

        Returns
        -------
        Solution
            ``status`` is ``feasible`` (the inner problem is solved to optimality, the outer
            search is not proven global; ``bound`` is ``None``), ``unbounded`` (A = A_max with
            the penalty slack) or ``unknown`` when no ε_C gives a feasible inner problem
            (``values["min_penalty"]`` is the smallest achievable penalty).  ``decision``
            holds ``A``, ``S_bar`` (slots) and ``epsilon_c`` (nats); ``objective`` is (39a) in
            nats.  ``values["duals"]`` maps the inner constraints' names to their duals at the
            final ε_C; ``kkt`` holds the inner KKT residuals (:func:`kkt_report`) next to
            the Proposition-4 (40) residual.

        Raises
        ------
        InvalidInputError
            If `problem` is not a supported problem, is an integer problem, or `tol` /
            `n_bracket` is out of range.
        BackendUnavailableError
            If cvxpy or both conic solvers are missing.
        """
        problem, tol, n_bracket = _solve_iv(problem, tol, n_bracket)
        ok, why = self.available()
        if not ok:
            raise BackendUnavailableError(f"the cvxpy back end is not available: {why}")
        start = time.perf_counter()
        cp = _import_cvxpy()
        version = f"cvxpy {cp.__version__}"

        def nothing_found(solver: str, message: str, **extra) -> Solution:
            """No feasible point found, infeasibility not proven: status ``unknown``, termination ``completed``."""
            return geometric_infeasible(
                problem,
                proven=False,
                method=self.name,
                backend="cvxpy",
                backend_version=f"{version} / {solver}",
                wall_time_s=time.perf_counter() - start,
                message=message,
                termination=Termination.COMPLETED,
                **extra,
            )

        lo, hi = _feasible_range(problem)
        if lo is None:
            return nothing_found("none (numpy screen)", "no ε_C in (0, ε_max] leaves a feasible (A, S̄) (numpy screen "
                                 "of the inner problem); cvxpy proved nothing about the nonconvex problem")

        inner = _build_inner(problem)
        copies = {SOLVER_SEQUENCE[0][0]: inner.problem}
        solves: list[_InnerSolve] = []

        def run(eps: float) -> _InnerSolve:
            """Solve the inner problem at `eps` and record it."""
            rec = _solve_inner(cp, inner, copies, problem, float(eps))
            solves.append(rec)
            return rec

        # Log-spaced (geometric) bracket grid over the feasible range of ε_C.
        grid = np.geomspace(lo, hi, n_bracket) if hi > lo else np.array([lo])
        vals = np.array([run(e).log_ratio for e in grid])
        xatol = tol * max(1.0, float(grid[int(np.argmin(vals))]))
        if np.isfinite(vals).any() and grid.size > 1:
            from scipy.optimize import minimize_scalar

            k = int(np.argmin(vals))
            a, b = float(grid[max(k - 1, 0)]), float(grid[min(k + 1, grid.size - 1)])

            def g(eps):  # ln(ratio of (39a)): same minimiser as (39a), better scaled
                """Inner optimum ln(ratio) at `eps`; a large finite value where infeasible."""
                v = run(eps).log_ratio
                return v if math.isfinite(v) else _INFEASIBLE_VALUE

            minimize_scalar(g, bounds=(a, b), method="bounded", options={"xatol": xatol})
        usable = [r for r in solves if math.isfinite(r.log_ratio)]
        n_failed = sum(r.outcome == "error" for r in solves)
        search = {
            "epsilon_grid": f"log-spaced, {grid.size} points",
            "epsilon_range": (float(lo), float(hi)),
            "epsilon_xatol": xatol,
            "n_bracket": n_bracket,
            "n_inner_solves": sum(r.outcome != "screened" for r in solves),
            "n_inner_fallbacks": sum(len(r.attempts) > 1 for r in solves),  # ε_C where SCS was also tried
            "n_inner_used_scs": sum(r.solver == "SCS" for r in solves),
            "n_inner_failures": n_failed,
        }
        if not usable:
            return nothing_found(SOLVER_SEQUENCE[0][0], f"cvxpy found no feasible inner problem on the ε_C search "
                                 f"({n_failed} solver failures); infeasibility of the nonconvex problem is not proven",
                                 values=search)
        best = min(usable, key=lambda r: (r.log_ratio, r.epsilon_c))
        kkt = kkt_report(problem, best.epsilon_c, best.x, best.duals)
        A, S = best.decision
        values = dict(search)
        values.update(
            duals=dict(best.duals),
            inner_objective=best.inner_value,
            inner_status=best.cvxpy_status,
            inner_solver=best.solver,
        )
        what = "optimal for" if best.outcome == "solved" else "a feasible point (not certified) of"
        msg = (
            f"(A, S̄) {what} the convex inner problem at ε_C = {best.epsilon_c:.10g} ({best.solver}, "
            f"{best.cvxpy_status}); ε_C from a {grid.size}-point log-spaced grid over [{lo:.6g}, {hi:.6g}] "
            f"refined by bounded Brent (xatol {xatol:.3g}); global optimality over ε_C not proven "
            f"(({problem.formulation}) is not jointly convex)"
        )
        if not kkt["passed"]:
            msg += "; the inner KKT check did not pass (see kkt)"
        return geometric_solution(
            problem,
            A,
            S,
            best.epsilon_c,
            proven_optimal=False,
            bound=None,
            method=self.name,
            backend="cvxpy",
            backend_version=f"{version} / {best.solver}",
            wall_time_s=time.perf_counter() - start,
            message=msg,
            values=values,
            kkt=kkt,
        )


def _feasible_range(problem: GeometricScheduleProblem) -> tuple[float | None, float | None]:
    """Hull [ε_lo, ε_hi] of the ε_C where the inner problem is feasible (numpy), or (None, None).

    A dense screen (log-spaced and linear points over [ε_min, ε_max]) finds the first and last
    feasible points; each end is then pushed to the feasibility boundary by bisection.
    """
    e0, e1 = problem.epsilon_min, problem.epsilon_max
    if not e1 > e0:
        pts = np.array([e0])
    else:
        pts = np.unique(np.concatenate([np.geomspace(e0, e1, _N_SCREEN // 2), np.linspace(e0, e1, _N_SCREEN // 2)]))
    ok = _screen(problem, pts)
    if not ok.any():
        return None, None
    idx = np.flatnonzero(ok)
    i, j = int(idx[0]), int(idx[-1])

    def push(good: float, bad: float) -> float:
        """Bisect between a feasible `good` and an infeasible `bad` ε_C towards the boundary."""
        for _ in range(200):
            mid = 0.5 * (good + bad)
            if mid in (good, bad):
                break
            if bool(_screen(problem, mid)):
                good = mid
            else:
                bad = mid
        return good

    lo = push(float(pts[i]), float(pts[i - 1])) if i > 0 else float(pts[i])
    hi = push(float(pts[j]), float(pts[j + 1])) if j < pts.size - 1 else float(pts[j])
    return lo, hi
