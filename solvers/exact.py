"""Exact, globally optimal solver for :class:`~policyopt.problems.ScheduleProblem` over the integers.

For every pair (A, S̄) in the box, the smallest ε_C meeting the penalty bound is computed
(closed form for the MSE penalty, bracketed root finding otherwise); because the peak
risk (30) increases in ε_C for fixed (A, S̄), that ε_C is optimal for the pair, and the
minimum over the whole (A_max + 1) × S_max table — vectorised with numpy — is the global
optimum.  No external solver is involved, so the bound equals the objective.
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.formatting import round_down
from policyopt.privacy.age_dependent import peak_risk_margin, peak_risk_values_log
from policyopt.errors import InvalidInputError, fmt
from policyopt.utility.penalty import window_max
from policyopt.problems.age_dependent import ScheduleProblem
from policyopt.problems.geometric import GeometricScheduleProblem
from policyopt.result import Solution, Status, Termination, no_incumbent

from ._common import geometric_infeasible, geometric_solution

__all__ = ["ExactScheduleSolver", "penalty_infeasible"]

_REL_TOL = 1e-12


class ExactScheduleSolver:
    """Exhaustive enumeration of stationary schedules with the exact Δ(t) table.

    Class constants declare what the back end can do, as cvxpy's solver interfaces do.
    """

    name = "exact"
    MIP_CAPABLE = True
    NONCONVEX_CAPABLE = True
    REQUIRED_MODULES = ("numpy",)
    SUPPORTED_PROBLEMS = (ScheduleProblem, GeometricScheduleProblem)

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") — numpy is always there."""
        return True, ""

    def solve(self, problem: ScheduleProblem) -> Solution:
        """Solve `problem` to global optimality over A ∈ {0..A_max}, S̄ ∈ {1..S_max}.

        Parameters
        ----------
        problem : ScheduleProblem

        Returns
        -------
        Solution
            ``status`` is ``optimal``, ``unbounded`` (A = A_max + 1 would lower the risk: the
            best schedule within A_max is returned) or ``infeasible`` (``values["min_penalty"]``
            is the smallest achievable penalty, an infimum under (31)).  ``decision`` holds
            ``A``, ``S_bar`` (slots) and ``epsilon_c`` (nats); ``objective`` is ε* (nats);
            ``values`` holds ``penalty``, ``peak_aoi``, ``max_penalty`` and ``condition_31``.

        Raises
        ------
        InvalidInputError
            If `problem` is not a ScheduleProblem.
        """
        if isinstance(problem, GeometricScheduleProblem):
            return self._solve_geometric(problem)
        if not isinstance(problem, ScheduleProblem):
            raise InvalidInputError(
                f"the exact solver handles ScheduleProblem and integer (39)/(42) problems, got {fmt(problem)}"
            )
        start = time.perf_counter()
        A_max, S_max, f_bar = problem.A_max, problem.S_max, problem.max_penalty
        log_d = problem.log_max_tv_table
        # One extra row (A_max + 1) and column (S_max + 1) to probe beyond the box.
        eps = np.asarray(problem.penalty.min_epsilon_c_table(A_max + 1, S_max + 1, f_bar), dtype=float)
        finite = np.isfinite(eps)
        with np.errstate(invalid="ignore"):
            risk = np.where(
                finite,
                peak_risk_values_log(log_d[: A_max + 2, None], log_d[None, 1 : S_max + 2], np.where(finite, eps, 1.0)),
                np.nan,
            )
        box = risk[: A_max + 1, :S_max]
        ok = ~np.isnan(box)
        values = {"max_penalty": f_bar}
        if not ok.any():
            return self._infeasible(problem, eps[: A_max + 1, :S_max], start)

        a_idx, s_idx = np.nonzero(ok)
        r = box[a_idx, s_idx]
        # Lowest risk; ties broken by smaller peak AoI, then smaller A.
        order = np.lexsort((a_idx, a_idx + s_idx, r))
        a, s = int(a_idx[order[0]]), int(s_idx[order[0]]) + 1
        best = float(r[order[0]])
        ev = problem.evaluate(a, s, float(eps[a, s - 1]))
        if not ev.feasible:  # pragma: no cover - a failed re-check is a bug, never a warning
            raise RuntimeError(f"exact solver returned an infeasible schedule: {ev.violations}")
        values.update(penalty=ev.penalty, peak_aoi=ev.peak_aoi, condition_31=ev.condition_31)

        status = Status.OPTIMAL
        notes = [
            f"globally optimal over A ∈ {{0..{A_max}}}, S̄ ∈ {{1..{S_max}}} by exhaustive enumeration "
            "(ε_C is the smallest budget meeting f̄; ε* increases in ε_C)"
        ]
        monotone = bool(getattr(problem.penalty, "monotone_in_epsilon", True))
        if not monotone:
            # The smallest feasible ε_C per schedule came from a grid scan: a smaller feasible budget
            # between two infeasible grid points cannot be excluded, so optimality is not proven.
            status = Status.FEASIBLE
            notes = [
                f"feasible, not proven optimal: penalty {problem.penalty.name!r} is not proven non-increasing in ε_C, "
                "so each schedule's smallest feasible ε_C was found by a grid scan refined by bisection "
                f"(every (A, S̄) with A ≤ {A_max}, S̄ ≤ {S_max} enumerated)"
            ]
        beyond_A = _nanmin(risk[A_max + 1, :S_max]) if A_max > 0 else math.nan  # same S̄ range
        if beyond_A < best * (1 - _REL_TOL) and monotone:
            status = Status.UNBOUNDED
            notes = [
                f"unbounded: A_max is binding and the risk keeps falling as A grows (A = {A_max + 1} reaches "
                f"ε* = {beyond_A:.10g} < {best:.10g} with S̄ ≤ S_max); a larger A_max lowers the risk further; "
                "best schedule within A_max returned"
            ]
            limit = getattr(problem.penalty, "staleness_limit", None)
            if limit is not None and f_bar > limit:
                notes.append(
                    f"f̄ exceeds the staleness limit {limit:.6g} of the chains, so ε* → 0 as A → ∞"
                )
        beyond_S = _nanmin(risk[: A_max + 1, S_max])
        if beyond_S < best * (1 - _REL_TOL):
            notes.append(
                f"S̄ = {S_max + 1} would lower ε* from {best:.10g} to {beyond_S:.10g}: S_max is binding, consider raising it"
            )
        values["optimality_box"] = {"A_max": A_max, "S_max": S_max}
        return Solution(
            status=status,
            termination=Termination.COMPLETED,
            decision={"A": a, "S_bar": s, "epsilon_c": float(eps[a, s - 1])},
            objective=best,
            bound=self._lower_bound(problem) if status is Status.OPTIMAL else None,
            method=self.name,
            backend="numpy",
            backend_version=np.__version__,
            wall_time_s=time.perf_counter() - start,
            message="; ".join(notes),
            values=values,
            objective_name="peak_risk",
        )

    @staticmethod
    def _lower_bound(problem: ScheduleProblem) -> float:
        """A proven lower bound on the exact optimum ε* over the box, rounded down (issue 26).

        The deployed ε_C of each schedule is moved up so that f̄ holds exactly; the optimum's bound starts
        from the other side, the penalty's lower bound on the smallest budget
        (:meth:`~policyopt.utility.penalty.Penalty.min_epsilon_c_lower_table`): eq. (30) increases in ε_C, so
        the minimum over the box of ε* at those budgets (schedules where (31) fails there excluded, as
        no larger budget satisfies it either) is ≤ the exact optimum; it is lowered by
        :func:`~policyopt.privacy.age_dependent.peak_risk_margin` of its own evaluation.
        """
        A_max, S_max = problem.A_max, problem.S_max
        log_d = problem.log_max_tv_table
        lo = np.asarray(problem.penalty.min_epsilon_c_lower_table(A_max, S_max, problem.max_penalty), dtype=float)
        finite = np.isfinite(lo)
        with np.errstate(invalid="ignore"):
            risk = np.where(finite, peak_risk_values_log(log_d[: A_max + 1, None], log_d[None, 1 : S_max + 1],
                                                         np.where(finite, lo, 1.0)), np.nan)
        risk = np.where(np.isfinite(risk), risk, np.nan)  # (31) fails: no schedule there
        if np.all(np.isnan(risk)):
            return 0.0
        i, j = np.unravel_index(int(np.nanargmin(risk)), risk.shape)
        m = peak_risk_margin(float(log_d[i]), float(log_d[j + 1]), float(lo[i, j]), float(i), float(j + 1))
        return max(0.0, round_down(float(risk[i, j]), m))

    def _solve_geometric(self, problem: GeometricScheduleProblem) -> Solution:
        """Enumerate integer (A, S̄) of an integer (39)/(42) problem with its smallest feasible ε_C."""
        if not problem.integer:
            raise InvalidInputError(
                "the exact solver enumerates integer schedules; this problem is the continuous relaxation "
                "(`integer`=False): use method 'pyomo', 'cvxpy' or 'heuristic'"
            )
        start = time.perf_counter()
        A = np.arange(int(math.floor(problem.A_max)) + 1, dtype=float)[:, None]
        S = np.arange(1, int(math.floor(problem.S_max)) + 1, dtype=float)[None, :]
        eps = np.asarray(problem.penalty.min_epsilon(problem.peak_age(A, S), problem.max_penalty), dtype=float)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(eps) & (problem.log_condition(S, np.where(np.isfinite(eps), eps, 1.0)) <= math.log1p(-problem.margin))
            risk = np.where(ok, problem.risk(A, S, np.where(ok, eps, 1.0)), np.nan)
        version = np.__version__
        if not ok.any():
            return geometric_infeasible(
                problem, proven=True, method=self.name, backend="numpy", backend_version=version,
                wall_time_s=time.perf_counter() - start,
                message="infeasible: no integer (A, S̄) in the box meets (39b) and (39c)",
            )
        a_idx, s_idx = np.nonzero(ok)
        r = risk[a_idx, s_idx]
        order = np.lexsort((a_idx, a_idx + s_idx, r))
        a, s = int(a_idx[order[0]]), int(s_idx[order[0]]) + 1
        best = float(r[order[0]])
        return geometric_solution(
            problem, float(a), float(s), float(eps[a, s - 1]), proven_optimal=True, bound=best,
            method=self.name, backend="numpy", backend_version=version, wall_time_s=time.perf_counter() - start,
            message="globally optimal over the integer box by exhaustive enumeration "
            "(ε_C is the smallest budget meeting f̄; (39a) increases in ε_C)",
        )

    def _infeasible(self, problem: ScheduleProblem, eps: np.ndarray, start: float) -> Solution:
        A_max, S_max, f_bar = problem.A_max, problem.S_max, problem.max_penalty
        pen = problem.penalty
        log_dS = problem.log_max_tv_table[1 : S_max + 1]
        floor = window_max(np.asarray(pen.noiseless(np.arange(A_max + S_max)), dtype=float), A_max, S_max)
        # (31) caps ε_C below −ln Δ(S̄); the penalty at that cap is an infimum.
        cap = -log_dS
        best = math.inf
        where = None
        for j, c in enumerate(cap):
            if not c > 0:
                continue  # Δ(S̄) = 1: no ε_C > 0 satisfies (31)
            col = floor[:, j] if math.isinf(c) else np.asarray(pen.epoch_table(A_max, S_max, float(c)))[:, j]
            i = int(np.argmin(col))
            if col[i] < best:
                best, where = float(col[i]), (i, j + 1)
        noiseless_floor = float(np.min(floor))
        if f_bar <= noiseless_floor:
            reason = (
                f"the staleness alone exceeds f̄ = {f_bar:.6g}: the smallest noiseless penalty in the box is "
                f"{noiseless_floor:.6g}"
            )
        else:
            reason = (
                f"condition (31) caps ε_C below −ln Δ(S̄), and the noise that cap forces keeps the penalty "
                f"above f̄ = {f_bar:.6g}"
            )
        if where is None:
            msg = (
                f"infeasible: Δ(S̄) = 1 for every S̄ ≤ {S_max}, so no ε_C > 0 satisfies (31) "
                "(the chain does not forget); no penalty bound is achievable in this box"
            )
        else:
            msg = (
                f"infeasible: {reason}; the smallest achievable penalty is {best:.6g} "
                f"(A = {where[0]}, S̄ = {where[1]}; an infimum under (31)); raise f̄ above it "
                f"or enlarge the box (A_max = {A_max}, S_max = {S_max})"
            )
        return penalty_infeasible(
            pen,
            msg,
            method=self.name,
            backend="numpy",
            backend_version=np.__version__,
            wall_time_s=time.perf_counter() - start,
            values={"max_penalty": f_bar, "min_penalty": best},
            objective_name="peak_risk",
        )


def penalty_infeasible(penalty, message: str, *, method: str, backend: str, backend_version: str, wall_time_s: float,
                       values: dict, objective_name: str) -> Solution:
    """The outcome of a schedule enumeration in which no (A, S̄) of the box meets f̄.

    Infeasibility is proven when `penalty` is proven non-increasing in ε_C (its ``monotone_in_epsilon``, True
    when absent), since then each schedule's smallest feasible budget is exact: status and termination
    ``infeasible``.  Otherwise the budgets came from a grid scan and a feasible budget between grid points
    cannot be excluded: status ``unknown``, termination ``completed``, and `message` is prefixed to say so.
    Shared by :class:`ExactScheduleSolver` and :class:`~policyopt.solvers.model_free.ModelFreeSolver`.

    Parameters
    ----------
    penalty : Penalty
        The problem's penalty f(t, ε_C); only ``name`` and ``monotone_in_epsilon`` are read.
    message : str
        Why no schedule is feasible (the smallest achievable penalty and where).
    method, backend, backend_version : str
        As in :class:`~policyopt.result.Solution`.
    wall_time_s : float
        Seconds spent in the solver.
    values : dict
        The Solution's ``values`` (``max_penalty``, ``min_penalty``, ...).
    objective_name : str
        The Solution's ``objective_name`` (e.g. ``"peak_risk"``).

    Returns
    -------
    Solution
        Without incumbent: ``decision``, ``objective`` and ``bound`` are ``None``.
    """
    proven = bool(getattr(penalty, "monotone_in_epsilon", True))
    if not proven:
        message = (
            f"no feasible schedule found: penalty {penalty.name!r} is not proven non-increasing in ε_C, so "
            "infeasibility is not proven (budgets were scanned on a grid); " + message
        )
    return no_incumbent(proven, method=method, backend=backend, backend_version=backend_version,
                        wall_time_s=wall_time_s, message=message, values=values, objective_name=objective_name)


def _nanmin(a) -> float:
    a = np.asarray(a, dtype=float)
    a = a[~np.isnan(a)]
    return float(a.min()) if a.size else math.nan
