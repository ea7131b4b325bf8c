"""The utility-optimal TPL budget allocation (beyond Cao et al. 2019): minimum total Laplace variance subject to
TPL_t ≤ α at every step, solved globally by SCIP through Pyomo, with a local optimum, bound tightening on a linear
relaxation (HiGHS, safe dual bounds) and monotone interval propagation (:mod:`policyopt.solvers.tpl_bounds`).  The
paper's Algorithms 7 and 8 are in :mod:`policyopt.solvers.tpl_alloc` (see its module docstring for the method and
the paper's pitfalls).

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under
Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019, eqs. (10)–(15), (24).
"""


from __future__ import annotations

import math
import time

import numpy as np

from policyopt.errors import BackendUnavailableError
from policyopt.problems.tpl_budget import BudgetAllocationProblem
from policyopt.result import Solution, Status, Termination
from policyopt.solvers.tpl_alloc import (
    PROOF_GAP,
    check_budget_problem,
    quantification_budgets,
    upper_bound_budget,
    verify_budgets,
)
from policyopt.solvers.tpl_bounds import envelope_rows, tighten_bounds, tighten_budget_bounds

__all__ = ["OptimalAllocator", "variable_bounds", "local_optimum", "to_pyomo"]

# ----------------------------------------------------------------------------------------
# global optimum with SCIP
# ----------------------------------------------------------------------------------------


def variable_bounds(problem: BudgetAllocationProblem, v_ref: float, rounds: int = 8):
    """Finite bounds on ε_t, BPL_{u,t}, FPL_{u,t} valid at every point with variance ≤ v_ref.

    v_ref is the variance of a feasible allocation, so the optimum is ≤ v_ref.  Repeated
    propagation (all from TPL_t = L_B(BPL_{t−1}) + L_F(FPL_{t+1}) + ε_t ≤ α, eqs. 10, 13, 15):

    * ε_t ≥ Δf·√(2 / (v_ref − Σ_{s≠t} 2Δf²/ε_hi,s²))      (objective ≤ v_ref)
    * BPL_lo: BPL_1 ≥ ε_lo,1, BPL_t ≥ L_B(BPL_lo,t−1) + ε_lo,t  (eq. 13, L non-decreasing)
    * ε_t ≤ α − L_B(BPL_lo,t−1) − L_F(FPL_lo,t+1)          (eq. 10)
    * BPL_t ≤ α − L_F(FPL_lo,t+1), FPL_t ≤ α − L_B(BPL_lo,t−1)   (FPL_t − ε_t ≥ L_F(FPL_{t+1}))

    Returns arrays e_lo, e_hi (T,) and b_lo, b_hi, f_lo, f_hi (U, T), nats.
    """
    alpha, T, D2 = problem.tpl_level, problem.horizon, problem.sensitivity ** 2
    U = len(problem.loss_B)
    e_hi = np.full(T, alpha)
    e_lo = np.zeros(T)

    def L(lf, x):
        """L(x) of a user's loss function, 0 when the correlation is unknown."""
        return 0.0 if lf is None else float(lf(x))

    for _ in range(rounds):
        inv = 2.0 * D2 / e_hi ** 2
        rest = v_ref * (1 + 1e-9) - (inv.sum() - inv)
        e_lo = np.maximum(e_lo, np.sqrt(2.0 * D2 / np.maximum(rest, 2.0 * D2 / alpha ** 2)))
        b_lo, f_lo = np.zeros((U, T)), np.zeros((U, T))
        for u in range(U):
            for t in range(T):
                b_lo[u, t] = (L(problem.loss_B[u], b_lo[u, t - 1]) if t > 0 else 0.0) + e_lo[t]
            for t in reversed(range(T)):
                f_lo[u, t] = (L(problem.loss_F[u], f_lo[u, t + 1]) if t < T - 1 else 0.0) + e_lo[t]
        incB = np.array([[L(problem.loss_B[u], b_lo[u, t - 1]) if t > 0 else 0.0 for t in range(T)] for u in range(U)])
        incF = np.array([[L(problem.loss_F[u], f_lo[u, t + 1]) if t < T - 1 else 0.0 for t in range(T)] for u in range(U)])
        e_hi = np.minimum(e_hi, alpha - (incB + incF).max(axis=0))
    b_hi = alpha - incF
    f_hi = alpha - incB
    # a hair of slack so that rounding never cuts off the optimum
    pad = 1e-9 * alpha
    return (np.maximum(e_lo - pad, 0.0), e_hi + pad, np.maximum(b_lo - pad, 0.0), np.minimum(b_hi + pad, alpha),
            np.maximum(f_lo - pad, 0.0), np.minimum(f_hi + pad, alpha))


def to_pyomo(problem: BudgetAllocationProblem, bounds):
    """Pyomo model of the allocation problem with finite bounds on everything SCIP sees.

    Variables: ε_t (nats), BPL_{u,t}, FPL_{u,t} per user u, with the finite bounds of
    :func:`variable_bounds` (all within [0, α]), passed as `bounds`::

        minimise   Σ_t 2Δf² / ε_t²
        s.t.       BPL_{u,1} ≥ ε_1,  BPL_{u,t} ≥ log f_c(BPL_{u,t−1}) + ε_t  for every c     (13), (24)
                   FPL_{u,T} ≥ ε_T,  FPL_{u,t} ≥ log f_c(FPL_{u,t+1}) + ε_t  for every c     (15), (24)
                   BPL_{u,t} + FPL_{u,t} − ε_t ≤ α                                         (10), Def. 8

    with log f_c(x) = log(Q e^x + Q̄) − log(D e^x + D̄) (eq. 24), one c per envelope segment.

    Why "≥" is exact: L = max_c log f_c, so "BPL ≥ every term" is BPL ≥ L(BPL_prev) + ε.  For
    budgets ε feasible in the model, the true recursion satisfies BPL_true ≤ BPL_model by
    induction (L is non-decreasing), and likewise FPL, so the true TPL is ≤ α: the ε-part of
    every model point is truly feasible.  Conversely the true BPL/FPL make every truly feasible
    ε a model point.  Same ε, same objective: the optimal value is unchanged and no binary
    variables are needed.  The bounds of :func:`variable_bounds` hold at every model point with
    variance ≤ that of a known feasible allocation, so they cut off no optimum.
    """
    import pyomo.environ as pyo

    alpha, T, D2 = problem.tpl_level, problem.horizon, problem.sensitivity ** 2
    users = range(len(problem.loss_B))
    steps = range(1, T + 1)
    m = pyo.ConcreteModel(name="tpl_budget")
    e_lo, e_hi, b_lo, b_hi, f_lo, f_hi = bounds
    m.eps = pyo.Var(steps, bounds=lambda m, t: (e_lo[t - 1], e_hi[t - 1]), doc="budget ε_t (nats)")
    m.bpl = pyo.Var(users, steps, bounds=lambda m, u, t: (b_lo[u, t - 1], b_hi[u, t - 1]), doc="BPL_{u,t} (nats)")
    m.fpl = pyo.Var(users, steps, bounds=lambda m, u, t: (f_lo[u, t - 1], f_hi[u, t - 1]), doc="FPL_{u,t} (nats)")
    m.obj = pyo.Objective(expr=sum(2.0 * D2 / m.eps[t] ** 2 for t in steps), sense=pyo.minimize)
    m.rec = pyo.ConstraintList(doc="BPL/FPL recursions (13), (15) as ≥ each sub-function")
    m.tpl = pyo.ConstraintList(doc="TPL_t ≤ α (eq. 10, Definition 8)")

    def log_f(row, x):
        """Pyomo form of log f_{Q,D}(x) (eq. 25) for one candidate row (Q, 1−Q, D, 1−D)."""
        Q, Qc, D, Dc = (float(v) for v in row)
        num = pyo.log(Q * pyo.exp(x) + Qc) if Qc > 0 or Q != 1 else x  # Q = 1: log e^x = x
        den = pyo.log(D * pyo.exp(x) + Dc) if D > 0 else math.log(Dc)
        return num - den  # eq. (24)

    for u in users:
        cB, cF = envelope_rows(problem.loss_B[u], alpha), envelope_rows(problem.loss_F[u], alpha)
        m.rec.add(m.bpl[u, 1] >= m.eps[1])  # BPL_1 = ε_1
        m.rec.add(m.fpl[u, T] >= m.eps[T])  # FPL_T = ε_T
        for t in steps:
            if t > 1:
                m.rec.add(m.bpl[u, t] >= m.eps[t])  # L ≥ 0 (covers L ≡ 0)
                for row in cB:
                    m.rec.add(m.bpl[u, t] >= log_f(row, m.bpl[u, t - 1]) + m.eps[t])  # eq. (13)
            if t < T:
                m.rec.add(m.fpl[u, t] >= m.eps[t])
                for row in cF:
                    m.rec.add(m.fpl[u, t] >= log_f(row, m.fpl[u, t + 1]) + m.eps[t])  # eq. (15)
            m.tpl.add(m.bpl[u, t] + m.fpl[u, t] - m.eps[t] <= alpha)  # eq. (10)
    return m


def _scale_to_feasible(problem: BudgetAllocationProblem, eps: np.ndarray) -> tuple[np.ndarray, float]:
    """Largest factor s ≤ 1 (to 1e-12) with max_t TPL_t(s·ε) ≤ α exactly (no tolerance).

    TPL_t = L_B(BPL_{t−1}) + L_F(FPL_{t+1}) + ε_t with non-decreasing L, so shrinking all
    budgets shrinks every TPL_t: the condition is monotone in s and bisection applies.
    SCIP's point meets TPL ≤ α only to its feasibility tolerance; the returned budgets do so
    exactly, so the reported α-DP_T level is not overstated by solver tolerance.
    """

    def ok(e):
        """Budgets `e` feasible with max_t TPL_t ≤ α exactly."""
        ev = problem.evaluate(e)
        return ev.feasible and ev.max_tpl <= problem.tpl_level

    if ok(eps):
        return eps, 1.0
    bad, s = 1.0, min(1.0, problem.tpl_level / problem.evaluate(eps).max_tpl)
    while not ok(s * eps):
        bad, s = s, s * (1 - 1e-6) if s > 0.999 else s * 0.5
        if s < 1e-12:  # pragma: no cover - ε → 0 is always feasible
            raise RuntimeError("could not scale SCIP's budgets to a feasible point")
    good = s
    for _ in range(60):
        if bad - good <= 1e-12:
            break
        mid = 0.5 * (good + bad)
        if ok(mid * eps):
            good = mid
        else:
            bad = mid
    return good * eps, good


# ---- local optimum (incumbent for the cutoff and SCIP's warm start) ------------------------


def _scalar_loss(lf):
    """L as a plain-float function of x ≥ 0 (Algorithm 5; L ≡ 0 for None)."""
    from policyopt.privacy.tpl_loss import scalar_piecewise

    return (lambda x: 0.0) if lf is None else scalar_piecewise(lf)


def _tpl_and_jacobian(problem: BudgetAllocationProblem, eps: np.ndarray, funcs=None):
    """TPL_{u,t} (U·T,) and its Jacobian d TPL / d ε (U·T, T) by the chain rule of (13), (15).

    dBPL_t/dε = L_B'(BPL_{t−1})·dBPL_{t−1}/dε + e_t, likewise FPL backwards; TPL = BPL + FPL − ε.
    L' by a central difference (step 1e-7, one-sided at 0).  `funcs`: cached
    [(L_B, L_F)] plain-float functions per user (built if None).
    """
    if funcs is None:
        funcs = [(_scalar_loss(lb), _scalar_loss(lf)) for lb, lf in zip(problem.loss_B, problem.loss_F)]
    T = eps.size
    e = [float(v) for v in eps]
    I = np.eye(T)
    h = 1e-7

    def d(L, x):
        """dL/dx at x ≥ 0 by a central (one-sided at 0) difference."""
        lo = max(0.0, x - h)
        return (L(x + h) - L(lo)) / (x + h - lo)

    rows, jac = [], []
    for LB, LF in funcs:
        b, db = np.zeros(T), np.zeros((T, T))
        for t in range(T):
            if t == 0:
                b[t], db[t] = e[t], I[t]
            else:
                b[t] = LB(b[t - 1]) + e[t]
                db[t] = d(LB, b[t - 1]) * db[t - 1] + I[t]
        f, df = np.zeros(T), np.zeros((T, T))
        for t in reversed(range(T)):
            if t == T - 1:
                f[t], df[t] = e[t], I[t]
            else:
                f[t] = LF(f[t + 1]) + e[t]
                df[t] = d(LF, f[t + 1]) * df[t + 1] + I[t]
        rows.append(b + f - eps)
        jac.append(db + df - I)
    return np.concatenate(rows), np.concatenate(jac)


def local_optimum(problem: BudgetAllocationProblem, start) -> np.ndarray | None:
    """A local minimum of the allocation problem from `start` (SLSQP), scaled to verify exactly.

    Parameters
    ----------
    problem : BudgetAllocationProblem
    start : array_like, shape (T,)
        Feasible budgets to start from (nats), e.g. Algorithm 8's.

    Returns
    -------
    numpy.ndarray, shape (T,), or None
        Budgets with max_t TPL_t ≤ α exactly (by :func:`_scale_to_feasible`), or None if
        SLSQP failed to improve on `start`.  A heuristic: it proves nothing; it gives the
        cutoff for :func:`tighten_bounds` and SCIP's warm start.
    """
    from scipy.optimize import minimize

    alpha, T = problem.tpl_level, problem.horizon
    x0 = np.asarray(start, dtype=float)
    lo = 1e-6 * alpha
    cache = {}
    funcs = [(_scalar_loss(lb), _scalar_loss(lf)) for lb, lf in zip(problem.loss_B, problem.loss_F)]
    v0 = float(np.sum(1.0 / x0 ** 2))  # objective scaled to 1 at the start: SLSQP stalls on raw scales

    def tj(e):
        """TPL and Jacobian at e (cached: SLSQP asks for both at the same point)."""
        key = e.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = _tpl_and_jacobian(problem, np.maximum(e, lo), funcs)
        return cache[key]

    try:
        res = minimize(
            lambda e: float(np.sum(1.0 / e ** 2)) / v0, x0, jac=lambda e: -2.0 / e ** 3 / v0, method="SLSQP",
            bounds=[(lo, alpha)] * T,
            constraints={"type": "ineq", "fun": lambda e: alpha - tj(e)[0], "jac": lambda e: -tj(e)[1]},
            options={"ftol": 1e-15, "maxiter": 500},
        )
    except (ValueError, ArithmeticError):  # pragma: no cover - SLSQP numerical failure
        return None
    x = np.clip(np.asarray(res.x, dtype=float), lo, alpha)
    if not np.all(np.isfinite(x)):
        return None
    x, _ = _scale_to_feasible(problem, x)
    if problem.total_variance(x) >= problem.total_variance(x0):
        return None
    return x


def _warm_start_solver(start_values, objective: float):
    """Pyomo's ``scip_direct`` solver that hands SCIP a complete primal solution before solving.

    Pyomo's ``warmstart_discrete_vars`` passes only integer variables (``ScipDirect._mipstart``);
    this subclass overrides that hook to pass every variable of `start_values` (a Pyomo
    ``ComponentMap`` var → value) plus Pyomo's objective variable, through PySCIPOpt's
    ``createSol`` / ``setSolVal`` / ``addSol``.  SCIP checks the solution and, if it accepts
    it, uses its objective as a cutoff from the start.  ``accepted`` records SCIP's answer.
    """
    from pyomo.contrib.solver.solvers.scip.scip_direct import ScipDirect

    class _WarmStartScip(ScipDirect):
        """``scip_direct`` with a full (continuous) warm start; see :func:`_warm_start_solver`."""

        accepted = None

        def _mipstart(self):
            """Pass the warm start to SCIP (called by ``ScipDirect.solve`` before ``optimize``)."""
            m = self._solver_model
            sol = m.createSol()
            for pv, sv in self._pyomo_var_to_solver_var_map.items():
                if pv in start_values:
                    m.setSolVal(sol, sv, float(start_values[pv]))
            if getattr(self, "_obj_var", None) is not None:
                m.setSolVal(sol, self._obj_var, float(objective))
            self.accepted = bool(m.addSol(sol, free=True))

    return _WarmStartScip()


def _reference_allocations(problem: BudgetAllocationProblem) -> tuple[dict, dict, str, float]:
    """Reference allocations: Algorithms 7, 8 and ε_t = α/T (always feasible: L(x) ≤ x gives TPL_t ≤ Σ_s ε_s = α),
    then a local optimum from the best of them.  Returns (allocations by name, their total variances, the name of
    the best, seconds of the local search)."""
    alpha, T = problem.tpl_level, problem.horizon
    refs = {}
    e7, _, _ = upper_bound_budget(problem.loss_B, problem.loss_F, alpha)
    refs["upper-bound"] = None if e7 is None else [e7] * T
    b8, _, _ = quantification_budgets(problem.loss_B, problem.loss_F, alpha, T)
    refs["quantification"] = b8
    refs["uniform"] = [alpha / T] * T
    var = {k: (problem.total_variance(b) if b is not None else None) for k, b in refs.items()}
    best_ref = min((k for k in refs if refs[k] is not None), key=lambda k: var[k])
    t0 = time.perf_counter()
    loc = local_optimum(problem, refs[best_ref]) if T > 1 else None
    time_local = time.perf_counter() - t0
    var["local"] = None if loc is None else problem.total_variance(loc)
    if loc is not None:
        refs["local"] = loc.tolist()
        if var["local"] < var[best_ref]:
            best_ref = "local"
    return refs, var, best_ref, time_local


class OptimalAllocator:
    """Minimum total Laplace variance subject to α-DP_T at every step, solved globally by SCIP.

    Beyond Cao et al. (2019): Algorithms 7 and 8 are heuristics for this problem.  The model is
    :func:`to_pyomo`; SCIP's spatial branch-and-bound proves a dual bound.  Before SCIP runs,
    a local optimum (:func:`local_optimum`, from Algorithm 8) gives a cutoff V, and
    optimality-based bound tightening (:func:`tighten_bounds`) shrinks every variable's
    box to the set of points with variance ≤ V; SCIP then starts from that point
    (:func:`_warm_start_solver`) inside that box.
    """

    name = "tpl-optimal"
    MIP_CAPABLE = False
    NONCONVEX_CAPABLE = True
    REQUIRED_MODULES = ("pyomo", "pyscipopt", "highspy")
    SUPPORTED_PROBLEMS = (BudgetAllocationProblem,)
    BACKEND = "pyomo+scip"
    #: SCIP parameters set on every solve.  ``display/verblevel`` 0: Pyomo's ``scip_direct``
    #: drains SCIP's output through a pipe while SCIP holds the GIL; a long log deadlocks
    #: (see :mod:`policyopt.solvers.global_scip`).  ``numerics/feastol`` 1e-8 (1e-9 stalls).
    SCIP_OPTIONS = {"numerics/feastol": 1e-8, "display/verblevel": 0}
    #: Share of `time_limit` that bound tightening may use before SCIP starts.
    OBBT_SHARE = 0.7
    #: Which columns the bound tightening optimises: ``"budgets"`` (the T budgets by LP, BPL/FPL by
    #: monotone propagation, :func:`tighten_budget_bounds`) or ``"all"`` (every column by LP,
    #: :func:`tighten_bounds`, the named baseline of the benchmark).
    TIGHTEN = "budgets"
    #: Share of the time limit given to the budget-only tightening (its relaxation usually proves the gap).
    BUDGET_OBBT_SHARE = 0.9

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether Pyomo, PySCIPOpt, ``scip_direct`` and highspy can be used: (bool, reason); never raises."""
        from .global_scip import PyomoSCIPSolver

        ok, reason = PyomoSCIPSolver.available()
        if not ok:
            return ok, reason
        try:
            import highspy  # noqa: F401 - installed with cvxpy
        except Exception as exc:  # noqa: BLE001
            return False, f"highspy is not importable ({exc}); `pip install highspy`"
        return True, ""

    @staticmethod
    def version() -> str:
        """Versions of Pyomo, SCIP, PySCIPOpt and HiGHS (highspy)."""
        from .global_scip import PyomoSCIPSolver

        try:
            import importlib.metadata as md

            hv = md.version("highspy")
        except Exception:  # noqa: BLE001 - informational only
            hv = "?"
        return f"{PyomoSCIPSolver.version()}; highspy {hv}"

    def _tighten(self, problem: BudgetAllocationProblem, v_ref: float, start: float, time_limit: float):
        """Bounds valid on S(v_ref) (:func:`variable_bounds`), tightened by OBBT on a linear relaxation: (box, the
        relaxation's safe lower bound or None, rounds)."""
        box = variable_bounds(problem, v_ref)
        if self.TIGHTEN == "budgets":
            # the relaxation itself is the proof here, SCIP only a fallback: most of the time goes to tightening
            box, lp_bound, rounds = tighten_budget_bounds(problem, box, v_ref,
                                                          deadline=start + self.BUDGET_OBBT_SHARE * time_limit,
                                                          target_gap=0.5 * PROOF_GAP)
            proven = lp_bound is not None and lp_bound > 0 and (v_ref - lp_bound) / v_ref <= 0.5 * PROOF_GAP
            if not proven and time.perf_counter() < start + self.OBBT_SHARE * time_limit:
                # The budget-only relaxation stalled short of a proof (e.g. Cao et al.'s Fig. 8 setting at T = 24,
                # gap 6.8 %): tighten every column from its box, so that SCIP gets the box it closes at the root.
                box, lp_all, more = tighten_bounds(problem, box, v_ref, deadline=start + self.OBBT_SHARE * time_limit)
                rounds += more
                if lp_all is not None and (lp_bound is None or lp_all > lp_bound):
                    lp_bound = lp_all
        else:
            box, lp_bound, rounds = tighten_bounds(problem, box, v_ref, deadline=start + self.OBBT_SHARE * time_limit)
        return box, lp_bound, rounds

    def _run_scip(self, problem: BudgetAllocationProblem, bounds, incumbent: np.ndarray, v_ref: float, start: float,
                  time_limit: float, rel_gap: float):
        """SCIP on the Pyomo model over the tightened box, warm-started at the incumbent with its true BPL/FPL, with
        what is left of `time_limit` since `start` (at least 1 s): (model, solver, results, when SCIP started)."""
        import pyomo.environ  # noqa: F401 - registers the solver plugins
        from pyomo.common.collections import ComponentMap

        T, U = problem.horizon, len(problem.loss_B)
        eps_lo, eps_hi = bounds[0], bounds[1]
        model = to_pyomo(problem, bounds)
        lk = problem.evaluate(incumbent).leakage
        ws = ComponentMap()
        for t in range(1, T + 1):
            ws[model.eps[t]] = incumbent[t - 1]
            model.eps[t].set_value(min(max(incumbent[t - 1], eps_lo[t - 1]), eps_hi[t - 1]))
            for u in range(U):
                ws[model.bpl[u, t]] = lk.bpl_users[u, t - 1]
                ws[model.fpl[u, t]] = lk.fpl_users[u, t - 1]
        opt = _warm_start_solver(ws, v_ref)
        t0 = time.perf_counter()
        results = opt.solve(
            model, time_limit=max(1.0, time_limit - (t0 - start)), rel_gap=rel_gap, abs_gap=0.0, load_solutions=False,
            raise_exception_on_nonoptimal_result=False, warmstart_discrete_vars=True,
            solver_options=dict(self.SCIP_OPTIONS),
        )
        return model, opt, results, t0

    def solve(self, problem: BudgetAllocationProblem, *, time_limit: float = 60.0, rel_gap: float = 5e-7) -> Solution:
        """Globally minimise Σ_t 2(Δf/ε_t)² subject to TPL_t ≤ α for t = 1..T.

        Parameters
        ----------
        problem : BudgetAllocationProblem
        time_limit : float
            Wall-clock limit of the whole solve, seconds (> 0), approximately: the local search
            is not interrupted (~7 s at T = 50), bound tightening starts no new round after
            ``OBBT_SHARE`` of it, SCIP gets the rest (at least 1 s).
        rel_gap : float
            SCIP's relative gap limit (≥ 0).

        Returns
        -------
        Solution
            ``optimal`` when a valid lower bound is within 1e-6 (relative) of the returned,
            verified variance: SCIP's dual bound after it converged, or the bound-tightening
            relaxation's bound; otherwise ``feasible``.  ``bound`` is the best valid lower
            bound on the total variance.  ``values``: ``max_tpl`` (numpy
            :func:`~policyopt.privacy.temporal.leakage`), ``alpha``, ``tolerance`` (SCIP's feasibility
            tolerance), ``total_variance``, ``dual_bound`` (SCIP's), ``lp_bound`` (the
            relaxation's), ``gap``, ``proof`` (which bound proves optimality, or None),
            ``scale_factor`` (1.0 unless SCIP's point had to be scaled down to verify),
            ``variance_upper_bound`` / ``variance_quantification`` / ``variance_local`` (of
            Algorithms 7, 8 and the local optimum, None if absent),
            ``savings_vs_upper_bound`` and ``savings_vs_quantification`` (1 − V_opt/V_alg,
            fractions), ``eps_lo``, ``eps_hi`` (the tightened box), ``obbt_rounds``,
            ``time_local_s``, ``time_obbt_s``, ``time_scip_s``, ``warm_start_accepted``,
            ``scip_status``, ``termination_condition``, ``nodes``, ``tpl``.

        Raises
        ------
        BackendUnavailableError
            If Pyomo, PySCIPOpt, ``scip_direct`` or highspy cannot be used.
        InvalidInputError
            If `problem` is not a BudgetAllocationProblem or `time_limit` / `rel_gap` is bad.
        RuntimeError
            If the returned allocation fails its own check (a bug).

        Notes
        -----
        Why the tightened box loses nothing: V is the variance of a verified allocation, so
        every optimum lies in S(V) (true recursion, variance ≤ V); :func:`tighten_bounds`
        returns a box containing S(V), so SCIP's optimum and dual bound over the box are
        those of the whole problem.  The warm start is the local optimum with its true
        BPL/FPL, which lies in S(V) and hence in the box.
        """
        check_budget_problem(problem, "optimal")
        from .global_scip import read_scip_status, solve_iv

        time_limit, rel_gap = solve_iv(time_limit, rel_gap)
        ok, reason = self.available()
        if not ok:
            raise BackendUnavailableError(f"method 'tpl-optimal' is unavailable: {reason}")
        start = time.perf_counter()
        alpha, T = problem.tpl_level, problem.horizon

        refs, var, best_ref, time_local = _reference_allocations(problem)
        v_ref = var[best_ref]
        incumbent = np.asarray(refs[best_ref], dtype=float)

        # Bounds valid on S(v_ref), then tightened by OBBT on a linear relaxation.
        t0 = time.perf_counter()
        box, lp_bound, rounds = self._tighten(problem, v_ref, start, time_limit)
        time_obbt = time.perf_counter() - t0
        e_lo, e_hi, b_lo, b_hi, f_lo, f_hi = box
        pad = 1e-9 * alpha  # a hair of slack so that SCIP's own rounding never cuts the warm start
        bounds = (np.maximum(e_lo - pad, 0.0), np.minimum(e_hi + pad, alpha), np.maximum(b_lo - pad, 0.0),
                  np.minimum(b_hi + pad, alpha), np.maximum(f_lo - pad, 0.0), np.minimum(f_hi + pad, alpha))
        eps_lo, eps_hi = bounds[0], bounds[1]

        # the relaxation's safe bound already proves the incumbent (a verified allocation) optimal:
        # SCIP has nothing left to prove and is not run (``TIGHTEN = "all"`` keeps the previous behaviour)
        skip_scip = self.TIGHTEN == "budgets" and lp_bound is not None and lp_bound > 0 and (v_ref - lp_bound) / v_ref <= 0.5 * PROOF_GAP
        t0 = time.perf_counter()
        if skip_scip:
            model = opt = results = None
            tc_name, scip_status, sbound = "notRun", "not run (proven by the relaxation)", None
        else:
            model, opt, results, t0 = self._run_scip(problem, bounds, incumbent, v_ref, start, time_limit, rel_gap)
            tc_name = results.termination_condition.name
            scip_status = read_scip_status(opt, results)
            sbound = results.objective_bound
            sbound = float(sbound) if sbound is not None and math.isfinite(sbound) else None
        time_scip = time.perf_counter() - t0
        values = {
            "alpha": alpha, "tolerance": self.SCIP_OPTIONS["numerics/feastol"],
            "eps_lo": eps_lo.tolist(), "eps_hi": eps_hi.tolist(),
            "scip_status": scip_status, "termination_condition": tc_name, "dual_bound": sbound,
            "lp_bound": lp_bound, "obbt_rounds": rounds, "warm_start_accepted": bool(getattr(opt, "accepted", False)),
            "time_local_s": time_local, "time_obbt_s": time_obbt, "time_scip_s": time_scip,
            "time_limit": time_limit, "rel_gap_requested": rel_gap,
            "variance_upper_bound": var["upper-bound"], "variance_quantification": var["quantification"],
            "variance_local": var["local"],
        }
        try:
            values["nodes"] = 0 if results is None else results.extra_info["NNodes"]
        except Exception:  # noqa: BLE001 - informational only
            values["nodes"] = None
        has_inc = (results is not None and results.incumbent_objective is not None
                   and results.solution_loader.get_number_of_solutions() > 0)
        notes = []
        cand, factor = incumbent, 1.0
        if has_inc:
            results.solution_loader.load_vars()
            eps = np.clip(np.array([model.eps[t].value for t in range(1, T + 1)], dtype=float), eps_lo, eps_hi)
            eps, f = _scale_to_feasible(problem, eps)
            if problem.total_variance(eps) < v_ref:
                cand, factor = eps, f
                if f < 1.0:
                    notes.append(f"SCIP's point violated TPL ≤ α within its tolerance; all budgets scaled by {f:.15g}")
            else:
                notes.append(f"SCIP's point (after scaling to verify) was not better than the {best_ref} allocation, "
                             "which is returned")
        elif results is not None:
            notes.append(f"SCIP found no incumbent ({scip_status!r}); the {best_ref} allocation is returned")
        cand, f = _scale_to_feasible(problem, np.asarray(cand, dtype=float))  # Algorithm 8 meets α to 1e-9 only
        factor *= f
        cert = problem.certify(cand)  # exact max TPL ≤ α (rounding of the recursion bounded, κ shrink)
        cand = cert.budgets
        factor *= 1.0 - cert.shrink
        ev = verify_budgets(problem, cand, "method 'tpl-optimal'")
        obj = ev.total_variance
        valid = [b for b in (sbound, lp_bound) if b is not None and b > 0]
        bound = max(valid) if valid else None
        gap = None if bound is None else max(0.0, obj - bound) / obj
        by_scip = tc_name == "convergenceCriteriaSatisfied" and sbound is not None and (obj - sbound) / obj <= PROOF_GAP
        by_lp = lp_bound is not None and (obj - lp_bound) / obj <= PROOF_GAP
        proof = "scip" if by_scip else ("relaxation" if by_lp else None)
        proven = proof is not None
        values.update(
            max_tpl=cert.leakage.tpl_level, total_variance=obj, gap=gap, proof=proof, scale_factor=factor,
            tpl=cert.leakage.tpl.tolist(), budget_shrink=cert.shrink, tpl_rounding_margin=cert.leakage.margin,
            savings_vs_upper_bound=None if var["upper-bound"] is None else 1.0 - obj / var["upper-bound"],
            savings_vs_quantification=None if var["quantification"] is None else 1.0 - obj / var["quantification"],
        )
        termination = {
            "convergenceCriteriaSatisfied": Termination.COMPLETED, "maxTimeLimit": Termination.TIME_LIMIT,
            "iterationLimit": Termination.ITERATION_LIMIT,
        }.get(tc_name, Termination.ERROR)
        if proven and termination is not Termination.COMPLETED:
            termination = Termination.COMPLETED  # the relaxation's bound proves it
        gap_text = "no lower bound" if gap is None else f"relative gap {gap:.3g}"
        if by_scip:
            head = f"SCIP ({scip_status!r}): global optimum proven, {gap_text} ≤ {PROOF_GAP:g}"
        elif by_lp:
            head = (f"global optimum proven by the bound-tightening relaxation ({gap_text} ≤ {PROOF_GAP:g}); "
                    f"SCIP: {scip_status!r}")
        else:
            head = f"SCIP ({scip_status!r}): not proven optimal ({gap_text})"
        head += (f"; {rounds} bound-tightening rounds ({time_obbt:.2f} s), "
                 + ("SCIP not run" if results is None else
                    f"SCIP {time_scip:.2f} s, warm start {'accepted' if opt.accepted else 'rejected'}"))
        return Solution(
            status=Status.OPTIMAL if proven else Status.FEASIBLE, termination=termination,
            decision={"budgets": [float(e) for e in cand]}, objective=obj, bound=bound,
            method=self.name, backend=self.BACKEND, backend_version=self.version(),
            wall_time_s=time.perf_counter() - start, message="; ".join([head, *notes]), values=values,
        )
