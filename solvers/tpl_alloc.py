"""Budget allocation back ends for :class:`~policyopt.problems.tpl_budget.BudgetAllocationProblem`.

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019, Theorem 11,
Algorithms 6–8, eqs. (26)–(27).

* :class:`UpperBoundAllocator` — Algorithm 7: the constant ε with
  sup_t BPL + sup_t FPL − ε = α (Theorem 11, eq. 11).
* :class:`QuantificationAllocator` — Algorithm 8: ε_1 = α^B, ε_T = α^F and a constant ε_m in
  between, with L_B(α^B) + α^F = α (26) and L_F(α^F) + α^B = α (27), so that TPL_t = α at
  every t.
* :class:`~policyopt.solvers.tpl_optimal.OptimalAllocator` (in :mod:`policyopt.solvers.tpl_optimal`) — beyond the paper: minimum total Laplace variance subject to
  TPL_t ≤ α, solved globally by SCIP through Pyomo.  Three steps make SCIP prove optimality
  for horizons up to 50 in seconds (without them it stalls at a 26 % gap after 120 s at
  T = 24): a local optimum from Algorithm 8 (:func:`local_optimum`, SLSQP with the exact
  chain-rule Jacobian) gives a cutoff V; optimality-based bound tightening on a linear
  relaxation (:func:`tighten_bounds`, HiGHS, dual-based safe bounds) shrinks the box of every
  ε_t, BPL_t, FPL_t to the points with variance ≤ V (widths ~1e-3 nats); SCIP then starts
  from the local optimum (a full warm start, :func:`_warm_start_solver`) inside that box,
  where its relaxation of eq. (24) is tight and it closes the gap at the root node.
  For populations (17 homes × 12 states: 840 columns, one all-column round took ~40 s) the
  default tightens only the T budgets by LP (:func:`tighten_budget_bounds`) and derives the
  BPL/FPL bounds by monotone interval propagation through the recursions
  (:func:`propagate_bounds`); its safe LP bound then proves the gap by itself (the bundled
  population in ~20 s) and SCIP is run only when it has not (``TIGHTEN = "all"`` restores the
  all-column tightening followed by SCIP).

Paper errors and pitfalls handled here
--------------------------------------
* Algorithms 7 and 8 run a "binary search until equality" (``while bingo = false``), which
  never terminates in floating point unless the equality happens to be hit exactly.  Here
  the equation is bracketed and solved by Brent's method to a stated tolerance
  (``xtol = 1e-15``, ``rtol = 4·2⁻⁵²``), and the end of the final bracket on the feasible
  side is returned, so the allocation satisfies TPL ≤ α up to rounding of the leakage
  recursion.  Every allocator then passes its budgets through
  :meth:`~policyopt.problems.tpl_budget.BudgetAllocationProblem.certify`, which shrinks them by the
  smallest relative κ ∈ {0, 2⁻⁴⁶, 2⁻⁴⁵, …} for which the rounded-up max TPL
  (:func:`policyopt.privacy.temporal.leakage_upper`) is ≤ α: the returned budgets meet α-DP_T in
  exact arithmetic, and the reported ``max_tpl`` is that rounded-up value (≤ α).  Before this,
  Algorithm 8 at α = 1 reported max TPL = 1.0000000000000002.
* Algorithm 8 starts a^B at α/2 with step α/4, α/8, ...; the reachable points are then
  confined to (0, α) and the search can only approach the root; Brent's method on [0, α]
  (h(0) ≤ 0 ≤ h(α), see :func:`_quantification_root`) needs no such start.
* Algorithm 8 line 8 uses a^F, computed on line 7 as α^F: the same quantity, two spellings.
* With L_B = identity (Theorem 7, case 4 of Theorem 11) Algorithm 7 has no positive constant
  budget (the supremum is infinite for every ε > 0) and Algorithm 8's middle budget
  ε_m = α^B − L_B(α^B) is 0; both return status ``unknown``.  The problem itself stays feasible
  (ε_t = α/T always is, because L(x) ≤ x).
* Theorem 11, case 2, prints ε ≤ log(1/q) for a finite supremum when d = 0; equality diverges
  (see :mod:`policyopt.privacy.temporal`).  Algorithm 7's bracket stays strictly below the divergence.
* For a population (lists of matrices) Algorithms 7 and 8 use L(x) = max over users of
  L_i(x); BPL/FPL computed with it bound every user's, so the allocation is α-DP_T for every
  user (conservative: eq. (11) with the maxima).  The optimal allocator keeps one recursion
  per user and is exact.
"""

from __future__ import annotations


import math
import time

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.problems.tpl_budget import TPL_RTOL, BudgetAllocationProblem
from policyopt.result import Solution, Status, Termination
from policyopt.privacy.tpl_loss import scalar_piecewise
from policyopt.privacy.tpl_supremum import supremum
from policyopt.solvers.scipy_backend import scipy_available
from policyopt.solvers.scipy_backend import scipy_versions as backend_versions

__all__ = ["UpperBoundAllocator", "QuantificationAllocator", "upper_bound_budget", "quantification_budgets",
           "verify_budgets", "check_budget_problem", "backend_versions", "PROOF_GAP", "XTOL", "RTOL"]

#: Brent's method tolerances (absolute, relative) on the budget / on α^B (nats).
XTOL = 1e-15
RTOL = 4 * np.finfo(float).eps
#: Relative gap at or below which the optimal allocator reports ``optimal``.
PROOF_GAP = 1e-6


def _tolerance(x: float) -> float:
    """Width of Brent's final bracket at x (nats)."""
    return XTOL + RTOL * abs(x)


def _loss_max(users, x: float) -> float:
    """max over users of L_i(x) (eq. 24, Algorithm 5 in plain floats); None (no known correlation) contributes 0."""
    out = 0.0
    for lf in users:
        if lf is not None:
            out = max(out, scalar_piecewise(lf)(x))
    return out


def _sup_max(users, eps: float) -> float:
    """max over users of sup_t BPL_t (or FPL_t) at constant ε (Theorem 11, Algorithm 6); inf if divergent."""
    out = eps  # L ≡ 0: BPL_t = ε (Theorem 6)
    for lf in users:
        if lf is None:
            continue
        s = supremum(lf, eps)
        if s.status != "finite":
            return math.inf
        out = max(out, s.value)
    return out


def _feasible_end(f, root: float, lo: float, *, max_steps: int = 64) -> float:
    """A point in [lo, root] with f ≤ 0 next to Brent's root (the feasible end of the bracket).

    f is non-decreasing; steps down by the bracket tolerance, doubling, until f ≤ 0.
    """
    x, step = root, _tolerance(root)
    for _ in range(max_steps):
        if f(x) <= 0:
            return x
        x = max(lo, x - step)
        step *= 2
    if f(x) <= 0:
        return x
    raise RuntimeError(f"no point with f ≤ 0 found below the root {root!r}")  # pragma: no cover


def check_budget_problem(problem, who: str) -> BudgetAllocationProblem:
    """Return `problem` if it is a BudgetAllocationProblem; else raise InvalidInputError naming the `who` allocator."""
    if not isinstance(problem, BudgetAllocationProblem):
        raise InvalidInputError(f"the {who} allocator handles BudgetAllocationProblem, got {fmt(problem)}")
    return problem


def verify_budgets(problem: BudgetAllocationProblem, budgets, who: str):
    """Re-evaluate with numpy; a failing allocation is a bug (RuntimeError), never a warning."""
    ev = problem.evaluate(budgets)
    if not ev.feasible:
        raise RuntimeError(
            f"{who} returned budgets that fail their own check: max TPL {ev.max_tpl!r} > α = "
            f"{problem.tpl_level!r} (rtol {TPL_RTOL:g}) or a budget ≤ 0: {list(budgets)!r}"
        )
    return ev


class _Base:
    """Shared class constants and result assembly of the numpy/scipy allocators."""

    name = ""
    BACKEND = "numpy+scipy"
    MIP_CAPABLE = False
    NONCONVEX_CAPABLE = True
    REQUIRED_MODULES = ("numpy", "scipy")
    SUPPORTED_PROBLEMS = (BudgetAllocationProblem,)
    #: (True, "") if scipy imports, else (False, reason); never raises.
    available = staticmethod(scipy_available)

    def _solution(self, problem, budgets, start, message, values):
        verify_budgets(problem, budgets, f"method {self.name!r}")
        cert = problem.certify(budgets)  # exact max TPL ≤ α: shrunk by κ if needed
        ev = verify_budgets(problem, cert.budgets, f"method {self.name!r}")
        lk = cert.leakage
        values = dict(values)
        values.update(
            max_tpl=lk.tpl_level, alpha=problem.tpl_level, total_variance=ev.total_variance,
            tpl=lk.tpl.tolist(), bpl=lk.bpl.tolist(), fpl=lk.fpl.tolist(),
            budget_shrink=cert.shrink, tpl_rounding_margin=lk.margin,
        )
        if cert.shrink:
            message = f"{message}; budgets shrunk by κ = {cert.shrink:.3g} (relative) so that max TPL ≤ α exactly"
        return Solution(
            status=Status.FEASIBLE, termination=Termination.COMPLETED,
            decision={"budgets": [float(e) for e in cert.budgets]}, objective=ev.total_variance, bound=None,
            method=self.name, backend=self.BACKEND, backend_version=backend_versions(),
            wall_time_s=time.perf_counter() - start, message=message, values=values,
        )

    def _no_answer(self, problem, start, message, values):
        """No allocation of this algorithm's form exists; the problem itself stays feasible (ε_t = α/T).

        Reported as status ``unknown`` (the method found nothing), never ``infeasible``, which
        would claim that no budgets at all meet α-DP_T.
        """
        message = f"{message} (the problem itself is feasible, e.g. ε_t = α/T; try method 'optimal')"
        values = dict(values)
        values.update(alpha=problem.tpl_level)
        values.setdefault("tolerance", None)
        values.setdefault("max_tpl", None)
        values.setdefault("total_variance", None)
        return Solution(
            status=Status.UNKNOWN, termination=Termination.COMPLETED, decision=None, objective=None,
            bound=None, method=self.name, backend=self.BACKEND, backend_version=backend_versions(),
            wall_time_s=time.perf_counter() - start, message=message, values=values,
        )


# ----------------------------------------------------------------------------------------
# Algorithm 7
# ----------------------------------------------------------------------------------------


def upper_bound_budget(loss_B, loss_F, alpha: float) -> tuple[float | None, str, dict]:
    """Algorithm 7's constant budget: the ε with g(ε) = sup BPL + sup FPL − ε − α = 0.

    g(0) = −α < 0; g is continuous and increasing (each supremum s solves s = L(s) + ε with
    L' ≤ 1, so ds/dε ≥ 1) until a supremum diverges (Theorem 11, cases 3–4, ε ≥ log(1/q)).
    The bracket [0, b] is found by halving b from α until g(b) is finite (g ≥ 0 at α since
    each supremum is ≥ ε); Brent's method then solves g = 0 and the feasible end (g ≤ 0) is
    returned.  Returns (ε or None, note, info).
    """
    from scipy.optimize import brentq

    def g(e):
        """sup TPL − α for the constant budget e; its root is Algorithm 7's budget."""
        return _sup_max(loss_B, e) + _sup_max(loss_F, e) - e - alpha  # eq. (11) with Theorem 11

    a, b = 0.0, alpha
    gb = g(b)
    for _ in range(2000):
        if math.isfinite(gb):
            break
        m = 0.5 * (a + b)
        gm = g(m)
        if math.isfinite(gm) and gm <= 0:
            a = m
        else:
            b, gb = m, gm
        if b <= 1e-300:
            break
    if not math.isfinite(gb):
        return None, (
            "Algorithm 7 has no positive constant budget: the supremum of BPL or FPL is infinite for every "
            "ε > 0 (Theorem 11, case 4: a pair of rows with q = 1, d = 0, e.g. an identity matrix)"
        ), {}
    if gb <= 0:  # only when L_B ≡ L_F ≡ 0 and b = α (g(α) = 0)
        eps = b
    else:
        root = brentq(g, a, b, xtol=XTOL, rtol=RTOL, maxiter=500)  # Algorithm 7, lines 4–11
        eps = _feasible_end(g, root, a)
    return eps, "", {"sup_bpl": _sup_max(loss_B, eps), "sup_fpl": _sup_max(loss_F, eps), "residual": g(eps)}


class UpperBoundAllocator(_Base):
    """Algorithm 7 of Cao et al. (2019): one constant budget whose supremum TPL equals α.

    Class constants declare what the back end can do, as cvxpy's solver interfaces do.
    """

    name = "tpl-upper-bound"

    def solve(self, problem: BudgetAllocationProblem) -> Solution:
        """Constant budgets ε_t = ε with sup BPL(ε) + sup FPL(ε) − ε = α (Theorem 11, eq. 11).

        Parameters
        ----------
        problem : BudgetAllocationProblem

        Returns
        -------
        Solution
            ``feasible`` (a heuristic, not proven optimal) with ``decision["budgets"] = [ε]*T``,
            or ``unknown`` when no ε > 0 keeps the supremum finite (Theorem 11, case 4; the
            problem itself stays feasible, see ``_no_answer``).
            ``values``: ``max_tpl`` (over the T steps, by :func:`~policyopt.privacy.temporal.leakage`),
            ``alpha``, ``tolerance`` (Brent's bracket width on ε, nats), ``total_variance``,
            ``epsilon``, ``sup_bpl``, ``sup_fpl``, ``sup_tpl`` (= sup_bpl + sup_fpl − ε ≤ α),
            ``tpl``, ``bpl``, ``fpl`` (per step).

        Raises
        ------
        InvalidInputError
            If `problem` is not a BudgetAllocationProblem.
        RuntimeError
            If the allocation fails its own check (a bug).
        """
        check_budget_problem(problem, "upper-bound")
        start = time.perf_counter()
        alpha = problem.tpl_level
        eps, note, info = upper_bound_budget(problem.loss_B, problem.loss_F, alpha)
        if eps is None:
            return self._no_answer(problem, start, note, {})
        tol = _tolerance(eps)
        values = dict(epsilon=eps, tolerance=tol, sup_bpl=info["sup_bpl"], sup_fpl=info["sup_fpl"],
                      sup_tpl=info["sup_bpl"] + info["sup_fpl"] - eps)
        msg = (f"Algorithm 7: constant ε = {eps:.12g} nats with sup TPL = {values['sup_tpl']:.12g} ≤ α = {alpha:g} "
               f"(Brent's method, bracket width {tol:.1e}, feasible end)")
        return self._solution(problem, [eps] * problem.horizon, start, msg, values)


# ----------------------------------------------------------------------------------------
# Algorithm 8
# ----------------------------------------------------------------------------------------


def _quantification_root(loss_B, loss_F, alpha: float):
    """α^B solving h(α^B) = L_F(α − L_B(α^B)) + α^B − α = 0, eqs. (26)–(27).

    α^F = α − L_B(α^B) is eq. (26); substituted into (27) it gives h.  h is non-decreasing
    (L' ≤ 1 for every sub-function of eq. 24, so h' = 1 − L_F'·L_B' ≥ 0), h(0) = L_F(α) − α ≤ 0
    and h(α) = L_F(α − L_B(α)) ≥ 0, so [0, α] brackets a root.  The feasible end (h ≤ 0,
    i.e. TPL_1 ≤ α) is returned.  Returns (α^B, α^F) or None when the only root is α^B = 0.
    """
    from scipy.optimize import brentq

    def h(aB):
        """Residual of (26)–(27) as a function of α^B; non-decreasing, root in [0, α]."""
        return _loss_max(loss_F, alpha - _loss_max(loss_B, aB)) + aB - alpha  # (27) after (26)

    h0, h1 = h(0.0), h(alpha)
    if h0 >= 0:  # L_F(α) = α: forward identity, Theorem 7
        return None
    if h1 <= 0:
        aB = alpha
    else:
        root = brentq(h, 0.0, alpha, xtol=XTOL, rtol=RTOL, maxiter=500)  # Algorithm 8, lines 4–12
        aB = _feasible_end(h, root, 0.0)
    aF = alpha - _loss_max(loss_B, aB)  # eq. (26)
    return aB, aF


def quantification_budgets(loss_B, loss_F, alpha: float, T: int):
    """Algorithm 8's budgets (list) and diagnostics, or (None, reason, {})."""
    if T == 1:
        return [alpha], "", {"alpha_B": alpha, "alpha_F": alpha, "epsilon_m": None, "tolerance": 0.0}
    for lf in (*loss_B, *loss_F):  # every L is evaluated on [0, α] only (BPL_t, FPL_t ≤ α)
        if lf is not None:
            lf.restrict(alpha)
    r = _quantification_root(loss_B, loss_F, alpha)
    if r is None:
        return None, (
            "Algorithm 8 has no solution with positive budgets: L_F(α) = α (forward correlation of "
            "Theorem 7, q = 1, d = 0), so eqs. (26)–(27) force α^B = ε_1 = 0"
        ), {}
    aB, aF = r
    info = {"alpha_B": aB, "alpha_F": aF, "tolerance": _tolerance(aB)}
    if T == 2:
        budgets = [aB, aF]  # TPL_1 = α^B + L_F(α^F), TPL_2 = L_B(α^B) + α^F: (27), (26)
        info["epsilon_m"] = None
    else:
        # (i) L_B(α^B) + ε_m = α^B, (ii) L_F(α^F) + ε_m = α^F agree at the root; the smaller
        # keeps BPL_t ≤ α^B and FPL_t ≤ α^F on the feasible side, hence TPL_t ≤ α.
        em = min(aB - _loss_max(loss_B, aB), aF - _loss_max(loss_F, aF))
        info["epsilon_m"] = em
        budgets = [aB] + [em] * (T - 2) + [aF]
    if not min(budgets) > 0:
        return None, (
            f"Algorithm 8 has no solution with positive budgets: ε_1 = α^B = {aB:.6g}, ε_T = α^F = {aF:.6g}, "
            f"ε_m = {info['epsilon_m']!r} (with L_B(x) = x or L_F(x) = x, Theorem 7, (i)–(ii) give ε_m = 0)"
        ), {}
    return budgets, "", info


class QuantificationAllocator(_Base):
    """Algorithm 8 of Cao et al. (2019): ε_1 = α^B, ε_T = α^F, constant ε_m in between, TPL_t = α for all t."""

    name = "tpl-quantification"

    def solve(self, problem: BudgetAllocationProblem) -> Solution:
        """Budgets with TPL_t = α at every step (eqs. 26–27).

        Parameters
        ----------
        problem : BudgetAllocationProblem

        Returns
        -------
        Solution
            ``feasible`` with ``decision["budgets"] = [α^B, ε_m, ..., ε_m, α^F]`` (T = 1: [α];
            T = 2: [α^B, α^F]) or ``unknown`` when the equations force a zero budget
            (Theorem 7 correlations; the problem itself stays feasible).  ``values``: ``max_tpl``, ``alpha``, ``tolerance``
            (Brent's bracket width on α^B, nats), ``total_variance``, ``alpha_B``, ``alpha_F``,
            ``epsilon_m`` (None for T ≤ 2), ``tpl``, ``bpl``, ``fpl``.

        Raises
        ------
        InvalidInputError
            If `problem` is not a BudgetAllocationProblem.
        RuntimeError
            If the allocation fails its own check (a bug).
        """
        check_budget_problem(problem, "quantification")
        start = time.perf_counter()
        alpha, T = problem.tpl_level, problem.horizon
        budgets, note, info = quantification_budgets(problem.loss_B, problem.loss_F, alpha, T)
        if budgets is None:
            return self._no_answer(problem, start, note, {})
        msg = (f"Algorithm 8: ε_1 = α^B = {info['alpha_B']:.12g}, ε_T = α^F = {info['alpha_F']:.12g}"
               + ("" if info["epsilon_m"] is None else f", ε_m = {info['epsilon_m']:.12g}")
               + f" nats, TPL_t = α = {alpha:g} at every t (Brent's method on eqs. (26)–(27), "
               f"bracket width {info['tolerance']:.1e}, feasible end)")
        return self._solution(problem, budgets, start, msg, info)
