"""Algorithms 1 and 2 of Zhang et al. (2024), corrected, for the geometric formulations (39), (41), (42).

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Section V-C, Algorithms 1–2.

Corrections to the printed algorithms
-------------------------------------
* The loop condition ``while A_H − A_L ≤ φ`` never runs (the bracket starts wider than φ);
  bisection must run while the bracket is *wider* than φ.
* The midpoint is set inside the loop, the test is f(A + S̄ − o, ε_C(k)) ≤ f̄ at the midpoint,
  and the feasible end A_L (resp. S̄_L) is kept at the end, so every returned point meets the
  penalty bound.
* Grid points ε_C(k) with no feasible A (resp. S̄) are skipped, and Algorithm 2 checks (42b)
  c ρ^{S̄} e^{ε_C} < 1 (the printed algorithm never does).
* Both algorithms are always run for (39) and compared in the units of (39a): Algorithm 1
  alone can be worse than Algorithm 2 (when the A = 0 branch is optimal).
* Proposition 4 ignores the box A ≤ A_max, S̄ ≤ S_max; a third candidate,
  :func:`inner_closed_form`, solves the inner problem exactly for each ε_C with the box
  (it is (40) clamped to the feasible interval), and covers the A = A_max branch.
* The exhaustive grid is followed by a bounded Brent refinement of ε_C around the best grid
  point, so that the defaults reach 1e-6 relative accuracy on (39a) with K = 2000 points
  (the printed algorithm's accuracy is only O(ε̄/K)).

Both inner searches exploit that f is non-decreasing in the peak age: the best A for (41)
is the largest feasible one ((41a) decreases in A), and the best S̄ for (42) is the
largest feasible one ((42a) decreases in S̄).
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.search import grid_then_brent
from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.problems.geometric import GeometricScheduleProblem, KKTBranchProblem, NoAgingProblem

from ._common import geometric_infeasible, geometric_solution

__all__ = ["HeuristicSolver", "algorithm_1", "algorithm_2", "inner_closed_form"]


def _bisect_largest(feasible, lo, hi, phi):
    """Largest x in [lo, hi] with feasible(x), vectorised; lo must be feasible, NaN rows skipped.

    Corrected loop of Algorithms 1–2: run while the bracket is wider than φ, keep the feasible end.
    """
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    done = feasible(hi)
    lo = np.where(done, hi, lo)
    active = ~done & (hi - lo > phi)
    while np.any(active):
        mid = 0.5 * (lo + hi)
        ok = feasible(mid)
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid, hi)
        active = active & (hi - lo > phi)
    return lo


def algorithm_1(problem: GeometricScheduleProblem, eps, phi):
    """Algorithm 1 (corrected) for the branch (41) at budgets `eps` (array, nats).

    Returns (A, S_bar, risk) arrays; risk is (39a) in nats, NaN where ε_C(k) is skipped.
    """
    eps = np.asarray(eps, dtype=float)
    o = problem.aoi_offset
    S = (math.log(2.0 * problem.c) + eps) / problem.L  # (41b)
    ok = (S >= 1.0) & (S <= problem.S_max)
    A_hi = np.full(eps.shape, problem.A_max)
    floor_age = problem.penalty.noise_floor_age(problem.max_penalty)
    if math.isfinite(floor_age):  # Ā of line 3: lim_{ε→∞} f(Ā, ε) = f̄
        A_hi = np.minimum(A_hi, np.maximum(floor_age + o - S, 0.0))

    def feasible(A):
        """Penalty of (A, S̄(k)) within f̄, per grid point."""
        return np.asarray(problem.penalty.value(A + S - o, eps)) <= problem.max_penalty

    ok &= feasible(np.zeros_like(eps))  # skip k with no feasible A
    A = np.where(ok, _bisect_largest(feasible, np.zeros_like(eps), A_hi, phi), np.nan)
    risk = np.where(ok, problem.risk(np.where(ok, A, 0.0), S, eps), np.nan)
    return A, S, risk


def algorithm_2(problem: GeometricScheduleProblem, eps, phi):
    """Algorithm 2 (corrected) for (42) at budgets `eps` (array, nats): A = 0, largest feasible S̄.

    Returns (S_bar, risk) arrays; risk is (39a) at A = 0, NaN where ε_C(k) is skipped.
    """
    eps = np.asarray(eps, dtype=float)
    o = problem.aoi_offset
    S_hi = np.full(eps.shape, problem.S_max)
    floor_age = problem.penalty.noise_floor_age(problem.max_penalty)
    if math.isfinite(floor_age):  # B̄ of line 4
        S_hi = np.clip(floor_age + o, 1.0, S_hi)

    def feasible(S):
        """Penalty of (0, S̄) within f̄, per grid point."""
        return np.asarray(problem.penalty.value(S - o, eps)) <= problem.max_penalty

    ok = feasible(np.ones_like(eps))
    S = np.where(ok, _bisect_largest(feasible, np.ones_like(eps), S_hi, phi), np.nan)
    cond = problem.log_condition(np.where(ok, S, problem.S_max), eps)
    ok &= cond <= math.log1p(-problem.margin)  # (42b), which the printed Algorithm 2 never checks
    risk = np.where(ok, problem.risk(0.0, np.where(ok, S, problem.S_max), eps), np.nan)
    return np.where(ok, S, np.nan), risk


def inner_closed_form(problem: GeometricScheduleProblem, eps):
    """Exact optimum over (A, S̄) for fixed budgets `eps` (array, nats), with the box A ≤ A_max.

    Beyond the paper: Proposition 4 ignores the upper bound A ≤ A_max, so when A reaches A_max
    (or S̄ a bound) Algorithm 1's (40) no longer holds.  For fixed ε_C the inner problem
    min −L·A − ln(1 − c e^{ε_C} e^{−L S̄}) s.t. A + S̄ − o ≤ T_max(ε_C), box, is convex; with the
    penalty binding, A = T_max + o − S̄ and the objective is convex in S̄ with stationary point
    (40), so the optimum is (40) clamped to the feasible interval of S̄ (and A = A_max,
    S̄ = S_max when the penalty does not bind).

    Returns (A, S_bar, risk) arrays, NaN where ε_C admits no feasible point.
    """
    eps = np.asarray(eps, dtype=float)
    o = problem.aoi_offset
    T = np.asarray(problem.penalty.max_age(eps, problem.max_penalty), dtype=float)
    s_min = np.maximum(1.0, (math.log(problem.c) + eps - math.log1p(-problem.margin)) / problem.L)  # (39b)
    a_max = 0.0 if isinstance(problem, NoAgingProblem) else problem.A_max
    with np.errstate(invalid="ignore"):
        # S̄ below T + o − A_max would leave A capped at A_max with the penalty slack; when even
        # S_max does (penalty not binding), A = A_max and S̄ = S_max.
        lo = np.maximum(s_min, np.minimum(T + o - a_max, problem.S_max))
        hi = np.minimum(problem.S_max, T + o)
        if isinstance(problem, KKTBranchProblem):
            S = np.asarray(problem.s_bar_of(eps), dtype=float)
            ok = (S >= s_min) & (S <= problem.S_max)  # A = min(A_max, T + o − S) ≥ 0 checked below
        elif isinstance(problem, NoAgingProblem):
            S = hi
            ok = lo <= hi
        else:
            S = np.clip((math.log(2.0 * problem.c) + eps) / problem.L, lo, hi)  # (40), clamped
            ok = lo <= hi
        A = np.minimum(a_max, T + o - S)
    ok &= np.isfinite(S) & (A >= 0)
    A = np.where(ok, A, np.nan)
    S = np.where(ok, S, np.nan)
    risk = np.where(ok, problem.risk(np.where(ok, A, 0.0), np.where(ok, S, problem.S_max), eps), np.nan)
    return A, S, risk


def _alg2_full(problem, eps, phi):
    S, risk = algorithm_2(problem, eps, phi)
    return np.where(np.isnan(S), np.nan, 0.0), S, risk


class HeuristicSolver:
    """Grid-and-bisection heuristics (Algorithms 1–2, corrected) for (39), (41), (42).

    Parameters of :meth:`solve`: ``K`` grid points over (0, ε̄], bisection width ``phi``, and
    ``epsilon_bar`` (default: the largest ε_C that (39b) allows).  A local method: results
    are ``feasible``, never ``optimal``.
    """

    name = "heuristic"
    MIP_CAPABLE = False
    NONCONVEX_CAPABLE = True
    REQUIRED_MODULES = ("numpy", "scipy")
    SUPPORTED_PROBLEMS = (GeometricScheduleProblem,)

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") — numpy and scipy are dependencies."""
        return True, ""

    def solve(self, problem, *, K: int = 2000, phi: float | None = None, epsilon_bar: float | None = None, refine: bool = True):
        """Run the corrected Algorithm 1 ((41)), Algorithm 2 ((42)) or both ((39)).

        Parameters
        ----------
        problem : GeometricScheduleProblem
        K : int
            Grid points ε_C(k) = ε̄·k/K (≥ 2).
        phi : float, optional
            Bisection width (slots); default 1e-10·max(1, A_max, S_max).
        epsilon_bar : float, optional
            Largest budget searched (nats); default ``problem.epsilon_max``.
        refine : bool
            Refine ε_C around the best grid point with bounded Brent (default True).

        Returns
        -------
        Solution
            ``status`` ``feasible`` (or ``unbounded``); for integer problems the relaxed
            answer is rounded to the best feasible neighbouring integers, as the paper does.
            ``values`` holds each algorithm's answer.

        Raises
        ------
        InvalidInputError
            If `problem` is not a geometric problem or a parameter is out of range.
        """
        if not isinstance(problem, GeometricScheduleProblem):
            raise InvalidInputError(f"the heuristic solves (39), (41), (42) problems, got {fmt(problem)}")
        check_int(K, "K", 2)
        start = time.perf_counter()
        phi = 1e-10 * max(1.0, problem.A_max, problem.S_max) if phi is None else float(phi)
        if not phi > 0:
            raise InvalidInputError(f"`phi` must be positive, got {fmt(phi)}")
        eps_bar = problem.epsilon_max if epsilon_bar is None else float(epsilon_bar)
        if not eps_bar > 0:
            return geometric_infeasible(
                problem, proven=True, method=self.name, backend="numpy", backend_version=np.__version__,
                wall_time_s=time.perf_counter() - start,
                message="no ε_C > 0 satisfies (39b) for S̄ ≤ S_max",
            )
        grid = eps_bar * np.arange(1, K + 1) / K  # ε_C(k) = ε̄k/K
        grid = np.concatenate(([grid[0] * 1e-6], grid))  # so that refinement can reach below ε̄/K
        runs = {}
        if not isinstance(problem, NoAgingProblem):
            runs["algorithm_1"] = self._run(problem, grid, refine, lambda e: algorithm_1(problem, e, phi))
        if not isinstance(problem, KKTBranchProblem):
            runs["algorithm_2"] = self._run(problem, grid, refine, lambda e: _alg2_full(problem, e, phi))
        runs["box_inner"] = self._run(problem, grid, refine, lambda e: inner_closed_form(problem, e))
        found = {k: v for k, v in runs.items() if v is not None}
        params = {"K": K, "phi": phi, "epsilon_bar": eps_bar, "refine": refine}
        summary = {k: (v if v is None else {"A": v[0], "S_bar": v[1], "epsilon_c": v[2], "objective": v[3]}) for k, v in runs.items()}
        if not found:
            return geometric_infeasible(
                problem, proven=False, method=self.name, backend="numpy", backend_version=np.__version__,
                wall_time_s=time.perf_counter() - start,
                message="no grid point ε_C(k) admits a feasible schedule (heuristic: infeasibility not proven)",
                values={"heuristic": params, "algorithms": summary},
            )
        best_name = min(found, key=lambda k: found[k][3])
        A, S, eps, _ = found[best_name]
        note = f"best of {', '.join(found)}: {best_name.replace('_', ' ')} (compared in the units of (39a))"
        if problem.integer:
            rounded = self._round(problem, A, S)
            if rounded is None:
                return geometric_infeasible(
                    problem, proven=False, method=self.name, backend="numpy", backend_version=np.__version__,
                    wall_time_s=time.perf_counter() - start,
                    message=f"relaxed answer A = {A:.6g}, S̄ = {S:.6g} has no feasible integer neighbour",
                    values={"heuristic": params, "algorithms": summary},
                )
            A, S, eps = rounded
            note += "; rounded to the best feasible neighbouring integers"
        sol = geometric_solution(
            problem, A, S, eps, proven_optimal=False, bound=None, method=self.name, backend="numpy",
            backend_version=np.__version__, wall_time_s=time.perf_counter() - start,
            message=f"local heuristic ({note}); not proven optimal",
            values={"heuristic": params, "algorithms": summary, "best_algorithm": best_name},
        )
        return sol

    def _run(self, problem, grid, refine, evaluate):
        """Grid over ε_C(k), then (if `refine`) bounded Brent around the best point; (A, S̄, ε_C, risk) or None."""
        if refine:
            eps, risk = grid_then_brent(lambda e: evaluate(e)[2], lambda e: evaluate(np.array([e]))[2][0], grid)
        else:
            r = evaluate(grid)[2]
            k = int(np.nanargmin(r)) if not np.all(np.isnan(r)) else 0
            eps, risk = float(grid[k]), float(r[k])
        if not np.isfinite(risk):
            return None
        a, s, rr = evaluate(np.array([eps]))
        return float(a[0]), float(s[0]), float(eps), float(rr[0])

    @staticmethod
    def _round(problem, A, S):
        """Best feasible integer neighbour of (A, S̄) with the smallest feasible ε_C."""
        best = None
        o = problem.aoi_offset
        for a in {math.floor(A), math.ceil(A)}:
            for s in {math.floor(S), math.ceil(S)}:
                if not (0 <= a <= problem.A_max and 1 <= s <= problem.S_max):
                    continue
                eps = float(problem.penalty.min_epsilon(a + s - o, problem.max_penalty))
                if not math.isfinite(eps) or float(problem.log_condition(s, eps)) > math.log1p(-problem.margin):
                    continue
                r = float(problem.risk(a, s, eps))
                if best is None or r < best[3]:
                    best = (float(a), float(s), eps, r)
        return None if best is None else best[:3]

