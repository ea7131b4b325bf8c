"""Exact solver of :class:`~policyopt.problems.model_free.ModelFreeProblem`: enumeration over S̄ with proven pruning.

For every S̄ ∈ {1..S_max} the smallest budget meeting f̄ over the agings A ∈ {0..A_max} is read from the penalty's
``min_epsilon_c_table`` (smallest A attaining it); k(S̄) = ⌈H/S̄⌉.  The accountant (``dp_accounting``'s PLD, about
0.02–0.1 s per call) is then run in order of a cheap proven lower bound,
:func:`~policyopt.privacy.model_free.laplace_epsilon_lower_bound` (exact ε(δ) of two binary garblings of the k
releases, O(k) numpy): once the next lower bound exceeds the best objective found, no remaining S̄ can beat it
(its certified objective ≥ its exact ε(δ) ≥ its lower bound), so the search stops with a proven optimum — see the
module docstring of :mod:`policyopt.problems.model_free` for why the smallest ε_C and the smallest A are optimal.
Ties in ε are broken by the smaller S̄ (fresher data).
"""

from __future__ import annotations

import importlib.util
import math
import time

import numpy as np

from policyopt.errors import BackendUnavailableError, InvalidInputError, fmt
from policyopt.privacy.model_free import dp_accounting_version, laplace_epsilon, laplace_epsilon_lower_bound
from policyopt.problems.model_free import ModelFreeProblem
from policyopt.result import Solution, Status, Termination
from policyopt.utility.penalty import window_max

from .exact import penalty_infeasible

__all__ = ["ModelFreeSolver"]


class ModelFreeSolver:
    """Exhaustive enumeration of S̄ for the model-free design, pruned by a proven lower bound.

    Class constants declare what the back end can do, as cvxpy's solver interfaces do.
    """

    name = "exact"
    MIP_CAPABLE = True
    NONCONVEX_CAPABLE = True
    REQUIRED_MODULES = ("dp_accounting",)
    SUPPORTED_PROBLEMS = (ModelFreeProblem,)

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") when ``dp_accounting`` can be imported, else (False, the reason and the fix)."""
        for module in ModelFreeSolver.REQUIRED_MODULES:
            if importlib.util.find_spec(module) is None:
                return False, f"the model-free solver needs {module!r}: pip install dp-accounting"
        return True, ""

    def solve(self, problem: ModelFreeProblem) -> Solution:
        """Solve `problem` to global optimality over A ∈ {0..A_max}, S̄ ∈ {1..S_max}.

        Parameters
        ----------
        problem : ModelFreeProblem

        Returns
        -------
        Solution
            ``status`` ``optimal`` (``feasible`` if the penalty is not proven non-increasing in ε_C, whose budgets then
            come from a grid scan) or ``infeasible`` (``values["min_penalty"]``: the smallest achievable penalty, an
            infimum as ε_C → ∞).  ``decision`` = {``A``, ``S_bar`` (slots), ``epsilon_c`` (nats)}; ``objective`` = ε
            at δ (nats, rounded up), ``bound`` = ``objective`` (exhaustive); ``values`` holds ``epsilon_pure``,
            ``releases``, ``delta``, ``horizon``, ``penalty``, ``peak_aoi``, ``max_penalty``, ``guarantee`` (the
            :meth:`~policyopt.privacy.model_free.ModelFreeGuarantee.to_dict` of the optimum), ``accounted`` (S̄ values
            run through the accountant) and ``pruned`` (discarded by the lower bound).

        Raises
        ------
        InvalidInputError
            If `problem` is not a ModelFreeProblem.
        BackendUnavailableError
            If ``dp_accounting`` is not installed.
        """
        if not isinstance(problem, ModelFreeProblem):
            raise InvalidInputError(f"the model-free solver handles ModelFreeProblem, got {fmt(problem)}")
        ok, why = self.available()
        if not ok:
            raise BackendUnavailableError(why)
        start = time.perf_counter()
        A_max, S_max, f_bar = problem.A_max, problem.S_max, problem.max_penalty
        H, delta = problem.horizon, problem.delta
        table = np.asarray(problem.penalty.min_epsilon_c_table(A_max, S_max, f_bar), dtype=float)  # (A_max+1, S_max)
        if not np.isfinite(table).any():
            return self._infeasible(problem, start)
        # (i): k does not depend on A — the smallest budget over A, at the smallest A attaining it
        best_A = np.argmin(table, axis=0)  # first minimum = smallest A
        eps_S = table[best_A, np.arange(S_max)]
        S = np.arange(1, S_max + 1)
        k_S = problem.releases(S)  # ⌈H/S̄⌉
        cand = np.flatnonzero(np.isfinite(eps_S))
        # (iii): a proven lower bound per S̄, then the accountant in its order
        lower = np.array([laplace_epsilon_lower_bound(float(eps_S[j]), int(k_S[j]), delta) for j in cand])
        order = cand[np.lexsort((S[cand], lower))]
        lower_of = dict(zip(cand.tolist(), lower.tolist()))
        best_j, best = -1, math.inf
        accounted = 0
        for j in order:
            if lower_of[int(j)] > best:
                break  # every remaining S̄ has exact ε(δ) ≥ its lower bound > best
            value = laplace_epsilon(float(eps_S[j]), int(k_S[j]), delta)
            accounted += 1
            if value < best or (value == best and S[j] < S[best_j]):
                best_j, best = int(j), value
        pruned = int(cand.size) - accounted
        a, s, eps = int(best_A[best_j]), int(S[best_j]), float(eps_S[best_j])
        ev = problem.evaluate(a, s, eps)
        if not ev.feasible:  # pragma: no cover - a failed re-check is a bug, never a warning
            raise RuntimeError(f"model-free solver returned an infeasible schedule: {ev.violations}")
        guarantee = ev.guarantee  # model_free_guarantee(ε_C, horizon=H, delta=δ, S_bar=S̄, windows=problem.windows)
        monotone = bool(getattr(problem.penalty, "monotone_in_epsilon", True))
        status = Status.OPTIMAL if monotone else Status.FEASIBLE
        if monotone:
            note = (f"globally optimal over S̄ ∈ {{1..{S_max}}} by exhaustive enumeration; ε_C smallest meeting f̄; "
                    "ε(δ) non-decreasing in ε_C (Laplace garbling)")
        else:
            note = (f"feasible, not proven optimal: penalty {problem.penalty.name!r} is not proven non-increasing in "
                    "ε_C, so each schedule's smallest feasible ε_C came from a grid scan (every S̄ enumerated)")
        note += (f"; A = {a}: the smallest aging attaining the smallest ε_C (k = ⌈H/S̄⌉ does not depend on A); "
                 f"{accounted} of {cand.size} feasible S̄ accounted with the PLD, {pruned} pruned by a proven lower bound")
        if s == S_max and S_max < H:
            note += f"; S̄ = S_max = {S_max} is the edge of the box: a larger S_max might lower ε"
        values = {
            "epsilon_pure": guarantee.epsilon_pure,
            "releases": guarantee.releases,
            "delta": delta,
            "horizon": H,
            "penalty": ev.penalty,
            "peak_aoi": ev.peak_aoi,
            "max_penalty": f_bar,
            "guarantee": guarantee.to_dict(),
            "accounted": accounted,
            "pruned": pruned,
            "optimality_box": {"A_max": A_max, "S_max": S_max},
        }
        return Solution(
            status=status,
            termination=Termination.COMPLETED,
            decision={"A": a, "S_bar": s, "epsilon_c": eps},
            objective=guarantee.epsilon,
            bound=guarantee.epsilon if monotone else None,
            method=self.name,
            backend="dp_accounting",
            backend_version=dp_accounting_version(),
            wall_time_s=time.perf_counter() - start,
            message=note,
            values=values,
            objective_name="epsilon",
        )

    def _infeasible(self, problem: ModelFreeProblem, start: float) -> Solution:
        """No (A, S̄) meets f̄ at any budget: report the smallest achievable penalty (noiseless, ε_C → ∞)."""
        A_max, S_max, f_bar = problem.A_max, problem.S_max, problem.max_penalty
        pen = problem.penalty
        floor = window_max(np.asarray(pen.noiseless(np.arange(A_max + S_max)), dtype=float), A_max, S_max)
        i, j = np.unravel_index(int(np.argmin(floor)), floor.shape)
        best = float(floor[i, j])
        msg = (f"infeasible: no (A, S̄) with A ≤ {A_max}, S̄ ≤ {S_max} meets f̄ = {f_bar:.6g} at any ε_C; the smallest "
               f"achievable penalty is {best:.6g} (A = {int(i)}, S̄ = {int(j) + 1}; an infimum as ε_C → ∞, the "
               "staleness alone); raise f̄ above it or enlarge the box")
        return penalty_infeasible(
            pen,
            msg,
            method=self.name,
            backend="dp_accounting",
            backend_version=dp_accounting_version(),
            wall_time_s=time.perf_counter() - start,
            values={"max_penalty": f_bar, "min_penalty": best, "delta": problem.delta, "horizon": problem.horizon},
            objective_name="epsilon",
        )
