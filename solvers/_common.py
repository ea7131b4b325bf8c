"""Shared result assembly for the back ends of the geometric formulations (39), (41), (42).

Every back end hands its candidate to :func:`geometric_solution`, which re-evaluates it
with the problem's numpy code (a candidate failing its own verification is a bug and
raises), classifies it (optimal only with a proof, ``unbounded`` when A sits at A_max with
the penalty slack, so a larger A_max lowers the risk), and builds the KKT report of
Proposition 4.  Infeasible outcomes go through :func:`geometric_infeasible`, which reports
the smallest achievable penalty like the exact solver does.
"""

from __future__ import annotations

import math

from policyopt.problems.geometric import GeometricScheduleProblem
from policyopt.result import Solution, Status, Termination, no_incumbent

__all__ = ["geometric_solution", "geometric_infeasible", "cvxpy_available", "KKT_TOL"]

#: Tolerance of the KKT checks (residuals are relative where a scale exists).
KKT_TOL = 1e-6


def cvxpy_available(wanted=("CLARABEL",)) -> tuple[bool, str]:
    """Whether cvxpy imports and at least one of the conic solvers `wanted` is installed for it.

    Parameters
    ----------
    wanted : sequence of str
        cvxpy solver names (e.g. ``("CLARABEL", "SCS")``), any one of which suffices.

    Returns
    -------
    (bool, str)
        ``(True, "")``, or ``(False, reason)`` naming what to install; never raises.
    """
    try:
        import cvxpy as cp

        installed = set(cp.installed_solvers())
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        return False, f"cvxpy cannot be imported ({exc}); `pip install cvxpy`"
    if not installed.intersection(wanted):
        return False, f"none of the conic solvers {list(wanted)} is installed for cvxpy (found {sorted(installed)})"
    return True, ""


def _branch(problem: GeometricScheduleProblem, A: float, S_bar: float, tol: float) -> str:
    if problem.integer:
        return "integer"
    if A <= tol:
        return "A=0 (42)"
    if A >= problem.A_max - tol:
        return "A=A_max"
    if S_bar <= 1 + tol or S_bar >= problem.S_max - tol:
        return "S_bar at bound"
    return "A>0 interior (41)"


def _larger_A_max_helps(problem: GeometricScheduleProblem, A, S_bar, eps, ev) -> bool:
    """True when A sits at A_max and a larger A_max would lower (39a) (the bound's multiplier is > 0).

    (39a) decreases in A.  With the penalty slack, A can simply grow.  With it binding, A can
    grow by δ while S̄ shrinks by δ (same peak age, same ε_C), which lowers (39a) when
    w = cρ^{S̄}e^{ε_C} < 1/2 (derivative L(w/(1 − w) − 1)δ) and S̄ is above its lower bound.
    Integer problems are checked directly at A_max + 1.
    """
    if problem.formulation == "42" or A < problem.A_max - 1e-6 * max(1.0, problem.A_max):
        return False
    o = problem.aoi_offset
    f_bar = problem.max_penalty
    if problem.integer:
        options = [(A + 1, S_bar), (A + 1, S_bar - 1)]
        for a, s in options:
            if s < 1:
                continue
            e = float(problem.penalty.min_epsilon(a + s - o, f_bar))
            if not math.isfinite(e) or float(problem.log_condition(s, e)) > math.log1p(-problem.margin):
                continue
            if float(problem.risk(a, s, e)) < ev.objective * (1 - 1e-12):
                return True
        return False
    slack_age = float(problem.penalty.max_age(eps, f_bar)) - ev.peak_age
    if slack_age > 1e-6:
        return True
    if problem.formulation == "41":
        return False
    s_low = max(1.0, (math.log(problem.c) + eps - math.log1p(-problem.margin)) / problem.L)
    return ev.condition < 0.5 - 1e-9 and S_bar > s_low + 1e-6


def geometric_solution(
    problem: GeometricScheduleProblem,
    A: float,
    S_bar: float,
    epsilon_c: float,
    *,
    proven_optimal: bool,
    bound: float | None,
    method: str,
    backend: str,
    backend_version: str,
    wall_time_s: float,
    message: str,
    termination: Termination = Termination.COMPLETED,
    values: dict | None = None,
    kkt: dict | None = None,
    tol: float = 1e-7,
) -> Solution:
    """Verify a candidate and build the common :class:`~policyopt.result.Solution`.

    Parameters
    ----------
    problem : GeometricScheduleProblem
    A, S_bar, epsilon_c : float
        The candidate (slots, slots, nats).
    proven_optimal : bool
        True only when the back end proves global optimality (e.g. SCIP with zero gap,
        exhaustive enumeration).
    bound : float or None
        Proven lower bound on (39a), nats.
    method, backend, backend_version, wall_time_s, message, termination
        Reported as given.
    values : dict, optional
        Extra back-end values (merged into ``Solution.values``).
    kkt : dict, optional
        Back-end KKT residuals (merged into ``Solution.kkt``).
    tol : float
        Feasibility tolerance of the re-evaluation and of the branch classification.

    Returns
    -------
    Solution

    Raises
    ------
    RuntimeError
        If the candidate fails the problem's own feasibility check.
    """
    ev = problem.evaluate(A, S_bar, epsilon_c, tol=tol)
    if not ev.feasible:
        raise RuntimeError(f"{method}: returned candidate fails verification: {'; '.join(ev.violations)}")
    branch = _branch(problem, A, S_bar, 1e-8 * max(1.0, problem.A_max))
    report = {"branch": branch, "tolerance": KKT_TOL}
    if branch == "A>0 interior (41)":
        report["residual_40"] = ev.kkt_40_residual
        report["passed"] = ev.kkt_40_residual <= KKT_TOL
    else:
        report["residual_40"] = None
        report["passed"] = True  # (40) applies only at interior optima with A > 0
    if kkt:
        report.update(kkt)
        report["passed"] = bool(report["passed"] and kkt.get("passed", True))
    status = Status.OPTIMAL if proven_optimal else Status.FEASIBLE
    notes = [message]
    if _larger_A_max_helps(problem, A, S_bar, epsilon_c, ev):
        status = Status.UNBOUNDED
        notes.append(
            f"unbounded: A sits at A_max = {problem.A_max:g} and a larger A_max lowers the risk further "
            "((39a) decreases in A along a feasible direction)"
        )
        if math.isinf(problem.penalty.noise_floor_age(problem.max_penalty)):
            notes.append("f̄ exceeds the staleness limit, so the infimum is 0 with A → ∞ (not attained)")
    out_values = {
        "formulation": problem.formulation,
        "native_objective": ev.native_objective,
        "penalty": ev.penalty,
        "peak_age": ev.peak_age,
        "condition_39b": ev.condition,
        "max_penalty": problem.max_penalty,
        "integer": problem.integer,
    }
    out_values.update(values or {})
    return Solution(
        status=status,
        termination=termination,
        decision={"A": A, "S_bar": S_bar, "epsilon_c": epsilon_c},
        objective=ev.objective,
        bound=bound,
        method=method,
        backend=backend,
        backend_version=backend_version,
        wall_time_s=wall_time_s,
        message="; ".join(notes),
        values=out_values,
        kkt=report,
        objective_name="peak_risk",
    )


def geometric_infeasible(
    problem: GeometricScheduleProblem,
    *,
    proven: bool,
    method: str,
    backend: str,
    backend_version: str,
    wall_time_s: float,
    message: str,
    termination: Termination | None = None,
    values: dict | None = None,
) -> Solution:
    """An infeasible outcome with the smallest achievable penalty (an infimum under (39b)).

    `proven` says whether the back end proved infeasibility (status ``infeasible``,
    termination ``infeasible`` by default) or just found nothing (status ``unknown``,
    termination ``completed`` by default).
    """
    floor, s_at, eps_at = problem.min_penalty()
    if math.isinf(floor):
        why = f"no S̄ ≤ {problem.S_max:g} satisfies (39b) for any ε_C > 0"
    else:
        why = (
            f"the smallest achievable penalty is {floor:.6g} (A = 0, S̄ = {s_at:.6g}, ε_C = {eps_at:.6g}; "
            f"an infimum under (39b)) and f̄ = {problem.max_penalty:.6g}"
        )
    out = {"max_penalty": problem.max_penalty, "min_penalty": floor, "formulation": problem.formulation}
    out.update(values or {})
    return no_incumbent(proven, method=method, backend=backend, backend_version=backend_version,
                        wall_time_s=wall_time_s, message=f"{message}; {why}", values=out, objective_name="peak_risk",
                        termination=termination)
