"""Exact solver of :class:`~policyopt.problems.horizon.HorizonDesignProblem`: enumeration of the box.

Per cell (A, S̄) the smallest budget meeting f̄ is read from the penalty's ``min_epsilon_c_table`` and Theorem 3's
recursion (Zhang et al. 2024, eq. (25)) is run across the N publications in log space (``logaddexp``/``log_expm1``),
one column S̄ at a time over all agings; see the module docstring of :mod:`policyopt.problems.horizon` for why the
smallest ε_C is optimal per cell.  The chosen schedule's risk is recomputed by
:func:`~policyopt.privacy.age_dependent.compose` and the larger of the two is rounded up by the recursion's error
bound (16(N + 2) units of roundoff).
"""

from __future__ import annotations

import time

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import UNIT_ROUNDOFF, round_down, round_up
from policyopt.privacy.age_dependent import compose, log_expm1
from policyopt.problems.horizon import HorizonDesignProblem
from policyopt.result import Solution, Status, Termination

__all__ = ["HorizonEnumeration"]


class HorizonEnumeration:
    """Exhaustive enumeration of (A, S̄) for the horizon design, with the composition re-check of the optimum.

    Class constants declare what the back end can do, as cvxpy's solver interfaces do.
    """

    name = "exact"
    MIP_CAPABLE = True
    NONCONVEX_CAPABLE = True
    REQUIRED_MODULES = ()
    SUPPORTED_PROBLEMS = (HorizonDesignProblem,)

    @staticmethod
    def available() -> tuple[bool, str]:
        """Always (True, ""): numpy only."""
        return True, ""

    def solve(self, problem: HorizonDesignProblem) -> Solution:
        """Solve `problem` to global optimality over A ∈ {0..A_max}, S̄ ∈ {1..S_max}.

        Parameters
        ----------
        problem : HorizonDesignProblem

        Returns
        -------
        Solution
            ``status`` ``optimal`` or ``infeasible``; ``decision`` = {``A``, ``S_bar`` (slots), ``epsilon_c``
            (nats)}; ``objective`` = the largest risk over the horizon (nats, rounded up), ``bound`` the same rounded
            down (every cell is evaluated); ``values``
            holds ``penalty`` (the epoch's largest), ``releases`` (N), ``horizon``, ``enumerated`` (cells),
            ``feasible_cells``, ``composition_check`` (the optimum's largest risk by ``compose``), ``proof``.

        Raises
        ------
        InvalidInputError
            If `problem` is not a HorizonDesignProblem.
        """
        if not isinstance(problem, HorizonDesignProblem):
            raise InvalidInputError(f"the horizon solver handles HorizonDesignProblem, got {fmt(problem)}")
        start = time.perf_counter()
        H, A_max, S_max = problem.horizon, problem.A_max, problem.S_max
        eps = np.asarray(problem.penalty.min_epsilon_c_table(A_max, S_max, problem.max_penalty), dtype=float)
        logd = np.asarray(problem.max_tv.log_max_tv(np.arange(max(A_max, S_max) + 1)), dtype=float)
        A = np.arange(A_max + 1)[:, None]
        S = np.arange(1, S_max + 1)[None, :]
        N = np.where(A <= H, (H - A) // S + 1, 0)  # publications A + (n − 1)S̄ ≤ H
        ok = np.isfinite(eps) & (N >= 1)
        e = np.where(ok, eps, 0.0)
        risk = np.empty(e.shape)
        with np.errstate(invalid="ignore"):
            for j in range(S_max):  # one column S̄ = j + 1 at a time: ~H/S̄ steps over the A_max + 1 agings
                ej, nj, prior = e[:, j], N[:, j], np.zeros(A_max + 1)
                for k in range(2, int(nj.max(initial=1)) + 1):  # Theorem 3, eq. (25): ε(τ_k) from ε(τ_{k−1}) across S̄
                    nxt = np.logaddexp(0.0, logd[j + 1] + log_expm1(ej + prior))
                    nxt = np.where(k <= nj, nxt, prior)
                    if np.array_equal(nxt, prior):  # a float fixed point: every later step repeats it, bit for bit
                        break
                    prior = nxt
                risk[:, j] = np.logaddexp(0.0, logd[: A_max + 1] + log_expm1(ej + prior))  # peak: the last publication
        risk = np.where(ok, risk, np.inf)
        cells = int(risk.size)
        feasible = int(np.count_nonzero(ok))
        proof = (
            f"all {cells} integer (A, S̄) with 0 ≤ A ≤ {A_max}, 1 ≤ S̄ ≤ {S_max} enumerated; per cell the smallest ε_C "
            "meeting f̄ is optimal because the risk over the horizon increases with ε_C and the penalty does not"
        )
        values = {"horizon": H, "enumerated": cells, "feasible_cells": feasible, "proof": proof,
                  "max_penalty": problem.max_penalty}
        if feasible == 0:
            values.update(penalty=None, releases=None, composition_check=None)
            return Solution(status=Status.INFEASIBLE, termination=Termination.INFEASIBLE, decision=None, objective=None,
                            bound=None, method=self.name, backend="numpy", backend_version=np.__version__,
                            wall_time_s=time.perf_counter() - start, message=f"infeasible: {proof}", values=values,
                            objective_name="horizon_risk")
        flat = np.lexsort((np.broadcast_to(S, risk.shape).ravel(), np.broadcast_to(A, risk.shape).ravel(), risk.ravel()))[0]
        a, s = np.unravel_index(int(flat), risk.shape)
        a, s = int(a), int(s) + 1
        n = int(N[a, s - 1])
        ec = float(eps[a, s - 1])
        value = float(risk[a, s - 1])
        times = a + s * np.arange(n)
        # Δ(t) for the ages compose asks (≤ A + S̄ − 1, inside the table); 1 beyond the table (no claim)
        comp = compose(times, a, ec, problem.composition_source(), horizon=H)
        check = float(np.max(comp.risk))
        # n recursion steps of logaddexp/log_expm1, each within a few ulps: a relative margin of 16(n + 2)u
        margin = 16.0 * (n + 2) * UNIT_ROUNDOFF
        upper = round_up(max(value, check), rel=margin)
        lower = round_down(min(value, check), rel=margin)  # every cell was evaluated: the optimum is at least this
        pen = problem.epoch_penalty(a, s, ec)  # the epoch's largest penalty
        values.update(penalty=pen, releases=n, composition_check=check)
        return Solution(status=Status.OPTIMAL, termination=Termination.COMPLETED,
                        decision={"A": a, "S_bar": s, "epsilon_c": ec}, objective=upper, bound=lower,
                        method=self.name, backend="numpy", backend_version=np.__version__,
                        wall_time_s=time.perf_counter() - start, message=f"globally optimal: {proof}", values=values,
                        objective_name="horizon_risk")
