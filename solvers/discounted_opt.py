"""cvxpy back end for :class:`~policyopt.problems.discounted.DiscountedScheduleProblem`.

Source of the constraints: F. Farokhi, "Temporally Discounted Differential Privacy for Evolving Datasets on an Infinite Horizon", ACM/IEEE ICCPS 2020, Theorems 6,
11, 15; the optimisation itself is beyond the paper.

The problem is compiled in scaled variables u = r/ρ_ref (``to_cvxpy``), solved with Clarabel
(power cones for u^{−2}), mapped back to b_t = Δf_t/r_t, scaled down by the smallest factor that
makes the rigorous accounting of :mod:`policyopt.privacy.discounted` certify every loss ≤ ε, and
certified by

* a KKT report computed with numpy (:func:`kkt_report`): primal feasibility, dual feasibility,
  complementary slackness and stationarity −2c_t/r_t³ + (Aᵀλ)_t = 0 of the Lagrangian
  Σ c_t/r_t² + λᵀ(A r − ε), with Aᵀλ computed independently of cvxpy;
* the Lagrange dual value g(λ) (:meth:`DiscountedScheduleProblem.dual_bound`), a proven lower
  bound on the optimum; ``optimal`` is reported only when the relative gap objective − g(λ)
  is ≤ ``PROOF_GAP`` and the KKT check passes.
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.privacy.discounted import discounted_sum, discounted_sum_transpose
from policyopt.errors import BackendUnavailableError, InvalidInputError, fmt
from policyopt.problems.discounted import DiscountedScheduleProblem
from policyopt.result import Solution, Status, Termination
from policyopt.solvers._common import cvxpy_available
from policyopt.solvers.scipy_backend import scipy_available, scipy_versions

__all__ = ["DiscountedCvxpySolver", "DiscountedDualSolver", "DiscountedReducedSolver", "kkt_report", "recovered_multipliers",
           "check_discounted_problem", "STATUS_MAP", "KKT_TOL", "PROOF_GAP"]

#: Tolerance of the relative, pointwise KKT residuals.  The optimality proof is the duality gap
#: (≤ ``PROOF_GAP``); near the optimum the objective is quadratic in the error of r, so a gap g
#: pins r down only to O(√g) (≈ 1e-5 at Clarabel's default tolerances), and residuals of
#: 2c/r³ are of that order: 1e-3 checks consistency without demanding more than the gap gives.
KKT_TOL = 1e-3
#: Relative duality gap at or below which the solution is reported ``optimal``.
PROOF_GAP = 1e-6

#: cvxpy status -> (Status, Termination) before verification.
STATUS_MAP = {
    "optimal": (Status.OPTIMAL, Termination.COMPLETED),
    "optimal_inaccurate": (Status.FEASIBLE, Termination.COMPLETED),
    "infeasible": (Status.INFEASIBLE, Termination.INFEASIBLE),
    "infeasible_inaccurate": (Status.UNKNOWN, Termination.ERROR),
    "unbounded": (Status.UNKNOWN, Termination.ERROR),
    "unbounded_inaccurate": (Status.UNKNOWN, Termination.ERROR),
    "user_limit": (Status.UNKNOWN, Termination.TIME_LIMIT),
    "solver_error": (Status.UNKNOWN, Termination.ERROR),
}


def _residuals(problem, r, lam, s, F, grad, active) -> dict:
    """Dual feasibility, complementarity and stationarity of (r, λ) (relative, see kkt_report)."""
    eps = problem.epsilon
    lmax = float(np.max(np.abs(lam))) or 1.0
    dual = max(0.0, -float(np.min(lam))) / lmax
    comp = float(np.sum(np.abs(lam * (eps - s)))) * 1.0 / F
    at = discounted_sum_transpose(lam, problem.notion, **problem.parameter)  # Aᵀλ
    stat = float(np.max(np.abs(at[active] - grad[active])) / np.max(grad[active]))
    return {"dual_feasibility": dual, "complementarity": comp, "stationarity": stat}


def recovered_multipliers(problem: DiscountedScheduleProblem, r) -> np.ndarray:
    """λ* = A^{−T} ∇F(r), the unique multipliers that make the Lagrangian stationary at r.

    A has a unit diagonal, so Aᵀλ = ∇F(r) = (2c_t/r_t³) has exactly one solution
    (:func:`policyopt.privacy.discounted.solve_discounted_transpose`); r is a KKT point iff λ* ≥ 0 and
    λ*_t (ε − (A r)_t) = 0.  Steps with Δf_t = 0 (r_t = 0) are fixed and get gradient 0.

    Returns
    -------
    numpy.ndarray, shape (T,)
        Squared query units per nat.
    """
    from policyopt.privacy.discounted import solve_discounted_transpose

    r = np.asarray(r, dtype=float)
    active = problem.sensitivity > 0
    grad = np.zeros_like(r)
    grad[active] = 2.0 * problem.cost[active] / r[active] ** 3
    return solve_discounted_transpose(grad, problem.notion, **problem.parameter)


def kkt_report(problem: DiscountedScheduleProblem, r, lam) -> dict:
    """KKT residuals of min F(r) = Σ c_t r_t^{−2} s.t. A r ≤ ε at (r, λ), computed with numpy.

    Two multiplier vectors are checked: the solver's duals `lam`, and λ* of
    :func:`recovered_multipliers` (stationarity exact by construction, so the certificate is
    λ* ≥ 0 plus complementarity).  A convex problem's KKT conditions are sufficient, so either
    passing proves r optimal up to the tolerance.

    Parameters
    ----------
    problem : DiscountedScheduleProblem
    r : array_like, shape (T,)
        Losses r_t = Δf_t / b_t (nats); entries with Δf_t = 0 are 0 and excluded from
        stationarity.
    lam : array_like, shape (T,)
        Solver multipliers of the loss constraints (squared query units per nat).

    Returns
    -------
    dict
        ``primal_feasibility`` max_t ((A r)_t − ε)/ε (≤ 0 is feasible); for the solver duals
        ``dual_feasibility`` max(0, −min λ)/max ``|λ|``, ``complementarity`` Σ_t ``|λ_t (ε − (A r)_t)|`` / F,
        ``stationarity`` ‖−∇F + Aᵀλ‖_∞ / ‖∇F‖_∞ over active steps; the same three with the prefix
        ``recovered_`` for λ*; ``tolerance``; ``passed`` (primal and one of the two triples all
        ≤ ``KKT_TOL``).
    """
    r = np.asarray(r, dtype=float)
    lam = np.asarray(lam, dtype=float)
    active = problem.sensitivity > 0
    c = problem.cost
    s = discounted_sum(r, problem.notion, **problem.parameter)  # A r
    primal = float(np.max(s - problem.epsilon)) / problem.epsilon
    F = float(np.sum(c[active] / r[active] ** 2))
    grad = np.zeros_like(r)
    grad[active] = 2.0 * c[active] / r[active] ** 3
    rep = {"primal_feasibility": primal}
    rep.update(_residuals(problem, r, lam, s, F, grad, active))
    lam_star = recovered_multipliers(problem, r)
    rep.update({f"recovered_{k}": v for k, v in _residuals(problem, r, lam_star, s, F, grad, active).items()})
    rep["tolerance"] = KKT_TOL
    ok_solver = all(rep[k] <= KKT_TOL for k in ("dual_feasibility", "complementarity", "stationarity"))
    ok_rec = all(rep["recovered_" + k] <= KKT_TOL for k in ("dual_feasibility", "complementarity", "stationarity"))
    rep["passed"] = bool(primal <= KKT_TOL and (ok_solver or ok_rec))
    return rep


def _versions() -> str:
    import cvxpy as cp

    try:
        import clarabel

        return f"cvxpy {cp.__version__}; clarabel {clarabel.__version__}"
    except Exception:  # noqa: BLE001
        return f"cvxpy {cp.__version__}"


def _certify(backend, problem, r, lam, start, *, status, term, form, notes, label, extra=None) -> Solution:
    """Verify a candidate r (losses) with multipliers λ and build the Solution (shared by the back ends).

    r is scaled down until the rigorous accounting of :mod:`policyopt.privacy.discounted` certifies every
    discounted loss ≤ ε; the objective is evaluated with numpy, the bound is the best Lagrange
    dual value over the solver's λ and the recovered λ* (weak duality), and ``optimal`` needs a
    relative gap ≤ ``PROOF_GAP`` and a passing KKT report.
    """
    T = problem.horizon
    active = problem.sensitivity > 0
    d = problem.sensitivity
    if np.any(active & ~(r > 0)):
        return backend._failed(problem, start, f"{label} returned a zero loss at an active step", status)
    scale = 1.0
    for _ in range(8):
        b = np.zeros(T)
        b[active] = d[active] / (r[active] * scale)
        ev = problem.evaluate(b)
        if ev.feasible:
            break
        scale *= problem.epsilon / ev.worst_loss * (1.0 - 1e-12)
    else:  # pragma: no cover - the scaling converges in one or two steps
        raise RuntimeError(f"optimal schedule fails its own check: worst loss {ev.worst_loss!r} > ε")
    r = r * scale
    kkt = kkt_report(problem, r, lam)
    bound = max(problem.dual_bound(lam), problem.dual_bound(recovered_multipliers(problem, r)))
    obj = ev.objective
    gap = (obj - bound) / obj if math.isfinite(bound) else math.inf
    # optimal iff proven: verified feasible point, weak-duality bound within PROOF_GAP, KKT consistent
    st = Status.OPTIMAL if (kkt["passed"] and gap <= PROOF_GAP) else Status.FEASIBLE
    if term == Termination.INFEASIBLE:
        term = Termination.COMPLETED  # the verified point is feasible whatever the solver said
    values = {
        "worst_loss": ev.worst_loss,
        "worst_t": ev.loss.worst_t,
        "epsilon": problem.epsilon,
        "total_variance": float(np.sum(2.0 * b * b)),
        "multipliers": np.asarray(lam, dtype=float).tolist(),
        "solver_status": status,
        "form": form,
        "feasibility_scale": scale,
        "relative_gap_bound": gap,
    }
    values.update(_comparison(problem, obj))
    values.update(extra or {})
    msg = (f"{label} ({form} constraints, T = {T}): status {status}; verified worst discounted loss "
           f"{ev.worst_loss:.12g} ≤ ε = {problem.epsilon:g} nats; dual bound gap {gap:.2e}; KKT "
           f"{'passed' if kkt['passed'] else 'NOT passed'}"
           + (f" ({'; '.join(notes)}; the schedule above is verified independently)" if notes else ""))
    return Solution(
        status=st, termination=term, decision={"schedule": b.tolist(), "losses": r.tolist()}, objective=obj,
        bound=bound if math.isfinite(bound) else None, method=backend.name, backend=backend.BACKEND,
        backend_version=backend._versions(), wall_time_s=time.perf_counter() - start, message=msg, values=values, kkt=kkt,
    )


#: Default of :func:`check_discounted_problem`'s `max_iterations`: no iteration limit to check.
_NO_LIMIT = object()


def check_discounted_problem(problem, who: str, *, max_iterations=_NO_LIMIT) -> DiscountedScheduleProblem:
    """Check the arguments of a discounted back end's ``solve``.

    Parameters
    ----------
    problem : object
        Must be a :class:`~policyopt.problems.discounted.DiscountedScheduleProblem`.
    who : str
        The back end named in the message (``"cvxpy"``, ``"dual"``, ``"reduced"``).
    max_iterations : int, optional
        An iteration limit to check (a Python int ≥ 1, ``bool`` refused); omitted: none is checked.

    Returns
    -------
    DiscountedScheduleProblem
        `problem` itself.

    Raises
    ------
    InvalidInputError
        If `problem` is not a DiscountedScheduleProblem (checked first), or `max_iterations` is
        given and is not an integer ≥ 1 (None included).
    """
    if not isinstance(problem, DiscountedScheduleProblem):
        raise InvalidInputError(f"the discounted {who} solver handles DiscountedScheduleProblem, got {fmt(problem)}")
    if max_iterations is not _NO_LIMIT and (isinstance(max_iterations, bool) or not isinstance(max_iterations, int)
                                            or max_iterations < 1):
        raise InvalidInputError(f"`max_iterations` must be an integer ≥ 1, got {fmt(max_iterations)}")
    return problem


def _comparison(problem: DiscountedScheduleProblem, obj: float) -> dict:
    """Objective of the corollary schedule (same ε, T, max Δf, weights) and the saving."""
    try:
        cor = problem.corollary_schedule()
    except InvalidInputError:
        return {"corollary_objective": None, "savings_vs_corollary": None}
    cobj = problem.objective_value(cor)
    return {"corollary_objective": cobj, "savings_vs_corollary": 1.0 - obj / cobj if cobj > 0 else None}


class _Base:
    """Capabilities and result helpers shared by the discounted back ends (convex, never a MIP)."""

    name = ""
    BACKEND = ""
    MIP_CAPABLE = False
    NONCONVEX_CAPABLE = False
    SUPPORTED_PROBLEMS = (DiscountedScheduleProblem,)

    @staticmethod
    def _versions() -> str:
        return _versions()

    def _trivial(self, problem, start) -> Solution:
        """Δf_t = 0 at every step: b = 0 is optimal with variance 0."""
        T = problem.horizon
        return Solution(
            status=Status.OPTIMAL, termination=Termination.COMPLETED, decision={"schedule": [0.0] * T, "losses": [0.0] * T},
            objective=0.0, bound=0.0, method=self.name, backend=self.BACKEND, backend_version=self._versions(),
            wall_time_s=time.perf_counter() - start,
            message="every sensitivity is 0: no noise is needed (b_t = 0, no privacy loss)",
            values={"worst_loss": 0.0, "worst_t": 1, "epsilon": problem.epsilon, "total_variance": 0.0,
                    "corollary_objective": None, "savings_vs_corollary": None},
            kkt=None,
        )

    def _failed(self, problem, start, message, status) -> Solution:
        """No usable point from the solver (the problem itself is always feasible: b = corollary)."""
        return Solution(
            status=Status.UNKNOWN, termination=STATUS_MAP.get(status, (None, Termination.ERROR))[1], decision=None,
            objective=None, bound=None, method=self.name, backend=self.BACKEND, backend_version=self._versions(),
            wall_time_s=time.perf_counter() - start,
            message=message + " (the problem is always feasible, e.g. with a large constant scale)",
            values={"solver_status": status, "epsilon": problem.epsilon},
        )


class DiscountedCvxpySolver(_Base):
    """Convex back end (cvxpy + Clarabel) for the variance-optimal discounted-DP schedule.

    Class constants declare what the back end can do, as cvxpy's solver interfaces do.
    """

    name = "discounted-cvxpy"
    BACKEND = "cvxpy"
    REQUIRED_MODULES = ("cvxpy", "clarabel")

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") if cvxpy with Clarabel is usable, else (False, reason); never raises."""
        return cvxpy_available(("CLARABEL",))

    def solve(self, problem: DiscountedScheduleProblem, *, solver: str = "CLARABEL", time_limit: float | None = None,
              verbose: bool = False) -> Solution:
        """Solve the problem and certify the answer.

        Parameters
        ----------
        problem : DiscountedScheduleProblem
        solver : str
            cvxpy solver name (default ``"CLARABEL"``).
        time_limit : float, optional
            Seconds, passed to Clarabel as ``time_limit``.
        verbose : bool
            Solver log.

        Returns
        -------
        Solution
            ``decision``: ``schedule`` (b_1..b_T, list) and ``losses`` (r_t = Δf_t/b_t, nats).
            ``objective``: Σ w_t 2 b_t² of the returned (verified) schedule; ``bound``: the Lagrange
            dual value g(λ) (proven lower bound).  ``values``: ``worst_loss`` (upper bound, nats),
            ``epsilon``, ``total_variance`` (unweighted Σ 2b_t²), ``multipliers`` (λ, list),
            ``solver_status``, ``form`` (``recursion``/``dense``), ``feasibility_scale`` (factor ≤ 1
            applied to r so that the rigorous accounting certifies ε), and for the corollary
            comparison ``corollary_objective`` / ``savings_vs_corollary`` (1 − optimal/corollary;
            None where the notion has no corollary).  ``kkt``: :func:`kkt_report`.

        Raises
        ------
        InvalidInputError
            If `problem` is not a DiscountedScheduleProblem.
        BackendUnavailableError
            If cvxpy / the requested solver is missing.
        RuntimeError
            If the returned schedule fails its own verification (a bug).
        """
        check_discounted_problem(problem, "cvxpy")
        ok, why = self.available()
        if not ok:
            raise BackendUnavailableError(why)
        import cvxpy as cp

        start = time.perf_counter()
        T = problem.horizon
        active = problem.sensitivity > 0
        if not active.any():  # Δf ≡ 0: no noise needed, zero variance, no loss
            return self._trivial(problem, start)
        comp = problem.to_cvxpy()
        prob = comp["problem"]
        opts = {}
        if time_limit is not None:
            opts["time_limit"] = float(time_limit)
        import warnings

        with warnings.catch_warnings(record=True) as caught:  # reported in the message, not lost
            warnings.simplefilter("always")
            try:
                prob.solve(solver=solver, verbose=verbose, **opts)
            except cp.error.SolverError as exc:
                return self._failed(problem, start, f"{solver} failed: {exc}", "solver_error")
        notes = sorted({"cvxpy: " + str(w.message).split(".")[0] for w in caught})
        status = prob.status
        if comp["u"].value is None:
            return self._failed(problem, start, f"{solver} returned status {status!r} without a point", status)
        rho, N = comp["scale"], comp["normaliser"]
        r = np.zeros(T)
        r[active] = rho * np.maximum(np.asarray(comp["u"].value, dtype=float), 0.0)
        mu = np.asarray(comp["budget"].dual_value, dtype=float).reshape(-1)
        if comp["form"] == "sum":  # only the constraint at t = T is kept (the others are implied)
            mu = np.concatenate([np.zeros(T - 1), mu])
        lam = N * mu / rho  # multipliers of A r ≤ ε in original units
        return _certify(self, problem, r, lam, start, status=status, term=STATUS_MAP.get(status, (None, Termination.ERROR))[1],
                        form=comp["form"], notes=notes, label=solver)


class DiscountedDualSolver(_Base):
    """Dual back end (scipy L-BFGS-B): maximise the Lagrange dual g(λ) over λ ≥ 0.

    g(λ) = Σ_t 3 (c_t a_t² / 4)^{1/3} − ε Σ_t λ_t with a = Aᵀλ is concave and smooth where a > 0,
    with gradient ∇g(λ) = A r(λ) − ε, r(λ)_t = (2c_t/a_t)^{1/3} (the minimiser of the Lagrangian).
    Only products with A and Aᵀ are needed; they are FFT convolutions (O(T log T)), so the dense
    hyperbolic case scales to T = 10⁴ and beyond where the cvxpy model (T²/2 nonzeros) does not.
    The primal point r(λ) is then scaled to feasibility and certified exactly like the cvxpy
    answer (duality gap and KKT report).  Beyond Farokhi (2020).
    """

    name = "discounted-dual"
    BACKEND = "scipy"
    REQUIRED_MODULES = ("scipy",)
    _versions = staticmethod(scipy_versions)
    #: (True, "") if scipy.optimize imports, else (False, reason); never raises.
    available = staticmethod(scipy_available)

    def solve(self, problem: DiscountedScheduleProblem, *, max_iterations: int = 50_000) -> Solution:
        """Solve the dual with L-BFGS-B and certify the recovered primal schedule.

        Parameters
        ----------
        problem : DiscountedScheduleProblem
        max_iterations : int
            L-BFGS-B iteration limit.

        Returns
        -------
        Solution
            As :meth:`DiscountedCvxpySolver.solve` (``form`` is ``"fft"``; ``solver_status`` is
            L-BFGS-B's message; termination ``iteration_limit`` when the limit stopped it).

        Raises
        ------
        InvalidInputError
            If `problem` is not a DiscountedScheduleProblem or `max_iterations` < 1.
        RuntimeError
            If the returned schedule fails its own verification (a bug).
        """
        check_discounted_problem(problem, "dual", max_iterations=max_iterations)
        from scipy import fft as sfft
        from scipy.optimize import minimize

        from policyopt.privacy.discounted import discount_kernel

        start = time.perf_counter()
        T = problem.horizon
        active = problem.sensitivity > 0
        if not active.any():
            return self._trivial(problem, start)
        c, eps = problem.cost, problem.epsilon
        rho = problem.reference_scale()
        d = discount_kernel(problem.notion, T, **problem.parameter)
        n = sfft.next_fast_len(2 * T - 1)
        D = sfft.rfft(d, n)

        def A(x):
            """(A x)_t = Σ_{k≤t} d_{t−k} x_k by FFT."""
            return sfft.irfft(sfft.rfft(x, n) * D, n)[:T]

        def At(y):
            """(Aᵀ y)_k = Σ_{t≥k} d_{t−k} y_t by FFT."""
            return A(y[::-1])[::-1]

        lam_ref = 2.0 * float(np.mean(c[active])) / (rho**2 * eps)  # λ with Aᵀλ ≈ 2c/ρ³ at r = ρ
        F_ref = float(np.sum(c)) / rho**2

        def neg_g(m):
            """−g(λ)/F_ref and its gradient in the scaled variable m = λ/λ_ref."""
            lam = lam_ref * m
            a = np.maximum(At(lam), 1e-300)
            r = np.cbrt(2.0 * c / a)  # argmin of the Lagrangian (0 where c = 0)
            g = float(np.sum(3.0 * np.cbrt(c * a * a / 4.0))) - eps * float(np.sum(lam))
            return -g / F_ref, -(A(r) - eps) * (lam_ref / F_ref)

        res = minimize(neg_g, np.ones(T), jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * T,
                       options={"maxiter": max_iterations, "maxfun": 2 * max_iterations, "ftol": 1e-16,
                                "gtol": 1e-14, "maxcor": 30})
        lam = lam_ref * res.x
        a = At(lam)
        r = np.zeros(T)
        ok = active & (a > 0)
        r[ok] = np.cbrt(2.0 * c[ok] / a[ok])
        status = str(res.message)
        term = Termination.ITERATION_LIMIT if res.nit >= max_iterations else Termination.COMPLETED
        return _certify(self, problem, r, lam, start, status=status, term=term, form="fft", notes=[],
                        label=f"L-BFGS-B on the dual ({res.nit} iterations)")


class DiscountedReducedSolver(DiscountedDualSolver):
    """Reduced primal back end: a suffix of active budget constraints, L-BFGS-B on the prefix only.

    In the variables s = A r (the discounted losses) the problem is min F(A⁻¹s) subject to the
    box s ≤ ε, A⁻¹ being lower-triangular Toeplitz with the kernel of
    :func:`policyopt.privacy.discounted.inverse_discount_kernel` (O(T log T) products by FFT).  For the
    hyperbolic and exponential notions the optimal schedule spends the whole budget from some
    slot t₀ on (s_t = ε for t ≥ t₀, observed on every case tried; the certificate below does not
    assume it), so only the prefix s_1..s_{t₁} is optimised, with the box, by L-BFGS-B; the suffix
    is fixed at ε.  The multipliers λ = A⁻ᵀ∇F(r) of the suffix must then be ≥ 0 (KKT); if not,
    t₁ is doubled and the prefix problem re-solved from the previous point (t₁ = T is the full
    box-constrained problem).  The answer is certified exactly like the other back ends: the
    schedule is checked by the accounting of :mod:`policyopt.privacy.discounted`, the bound is the Lagrange
    dual value of λ ≥ 0 (weak duality), and ``optimal`` needs a relative gap ≤ ``PROOF_GAP`` and a
    passing KKT report.  Problems with some Δf_t = 0 are handed to :class:`DiscountedDualSolver`.
    The constraints are F. Farokhi, "Temporally Discounted Differential Privacy for Evolving Datasets
    on an Infinite Horizon", ICCPS 2020, Theorems 6, 11, 15 (eqs. 6, 10, 13); the method is beyond it.
    """

    name = "discounted-reduced"
    #: Scale of the optimisation variables z = KAPPA (s_P/ε − 1): L-BFGS-B's first step has unit
    #: length in z, so s_P moves by ε/KAPPA in norm (larger first steps overshoot r > 0).
    KAPPA = 100.0
    #: Restarts of L-BFGS-B per prefix length when a run stops within 50 iterations while still improving.
    RESTARTS = 20

    def solve(self, problem: DiscountedScheduleProblem, *, max_iterations: int = 50_000,
              fallback: bool = True) -> Solution:
        """Solve by the reduced prefix problem and certify the schedule.

        Parameters
        ----------
        problem : DiscountedScheduleProblem
        max_iterations : int
            L-BFGS-B iteration limit per prefix length.
        fallback : bool
            When the reduced answer is not proven optimal (the prefix L-BFGS-B can stall on badly
            scaled cases), also run :class:`DiscountedDualSolver` and return its answer if it is
            proven optimal or better (default True).

        Returns
        -------
        Solution
            As :meth:`DiscountedCvxpySolver.solve` (``form`` is ``"reduced"``; ``values`` also holds
            ``prefix_length`` t₁ and ``first_active`` t₀, the first slot whose budget is spent).

        Raises
        ------
        InvalidInputError
            If `problem` is not a DiscountedScheduleProblem or `max_iterations` < 1.
        RuntimeError
            If the returned schedule fails its own verification (a bug).
        """
        check_discounted_problem(problem, "reduced", max_iterations=max_iterations)
        if not np.all(problem.sensitivity > 0):
            return DiscountedDualSolver().solve(problem, max_iterations=max_iterations)
        from scipy import fft as sfft
        from scipy.optimize import minimize

        from policyopt.privacy.discounted import discount_kernel, inverse_discount_kernel

        start = time.perf_counter()
        T = problem.horizon
        c, eps = problem.cost, problem.epsilon
        d = discount_kernel(problem.notion, T, **problem.parameter)
        h = inverse_discount_kernel(problem.notion, T, **problem.parameter)
        n = sfft.next_fast_len(2 * T)
        Hf = sfft.rfft(h, n)

        def inv(x):
            """A⁻¹x by FFT."""
            return sfft.irfft(sfft.rfft(x, n) * Hf, n)[:T]

        def inv_t(y):
            """A⁻ᵀy by FFT."""
            return inv(y[::-1])[::-1]

        r_all = eps * inv(np.ones(T))  # every budget spent: s = ε
        floor = 1e-3 * eps / float(np.sum(d))  # below it F is continued quadratically (line-search excursions)

        def F_and_dF(r):
            """F = Σ c/r² (C² quadratic continuation below `floor`) and dF/dr."""
            low = r < floor
            rr = np.where(low, floor, r)
            F = c / rr**2
            dF = -2.0 * c / rr**3
            if low.any():
                dr = r - floor
                F = F + low * (dF * dr + 3.0 * c / floor**4 * dr * dr)
                dF = dF + low * (6.0 * c / floor**4 * dr)
            return float(np.sum(F)), dF

        lam = inv_t(2.0 * c / r_all**3)
        neg = np.flatnonzero(lam < 0)
        t1 = 0 if neg.size == 0 else min(T, max(64, 2 * (int(neg[-1]) + 1)))
        x = np.ones(t1)
        n_iter, rounds, status = 0, 0, "all budgets spent: KKT holds at s = ε"
        r = r_all
        while t1 > 0:
            rounds += 1
            base = np.zeros(T)
            base[t1:] = eps
            r_base = inv(base)
            Fs = F_and_dF(r_all)[0]

            # s is zero beyond t1 and only the first t1 entries of A⁻ᵀ∇F are needed, so circular
            # convolutions of length T + t1 (not 2T) are exact for every entry used
            m = sfft.next_fast_len(T + t1)
            Hm = sfft.rfft(h, m)

            def fun(z, t1=t1, r_base=r_base, Fs=Fs, m=m, Hm=Hm):
                """F/F(s = ε) and its gradient in z = KAPPA (s_P/ε − 1) ≤ 0 (small first steps)."""
                sP = eps * (1.0 + z / self.KAPPA)
                F, dF = F_and_dF(r_base + sfft.irfft(sfft.rfft(sP, m) * Hm, m)[:T])
                g = sfft.irfft(sfft.rfft(dF[::-1], m) * Hm, m)[T - t1:T][::-1]  # (A⁻ᵀ dF)_k, k < t1
                return F / Fs, g * (eps / (Fs * self.KAPPA))

            z = self.KAPPA * (x - 1.0)
            f_prev = math.inf
            for _ in range(self.RESTARTS):  # a restart resets the memory after a stalled line search
                res = minimize(fun, z, jac=True, method="L-BFGS-B", bounds=[(None, 0.0)] * t1,
                               options={"maxiter": max_iterations, "maxfun": 2 * max_iterations, "ftol": 1e-16,
                                        "gtol": 1e-14, "maxcor": 30})
                n_iter += int(res.nit)
                z = res.x
                if res.nit > 50 or not float(res.fun) < f_prev * (1 - 1e-12):
                    break
                f_prev = float(res.fun)
            status = str(res.message)
            s = np.full(T, eps)
            s[:t1] = eps * (1.0 + np.minimum(res.x, 0.0) / self.KAPPA)
            r = inv(s)
            lam = inv_t(2.0 * c / np.maximum(r, floor) ** 3)
            if t1 == T or float(np.min(lam[t1:])) >= -1e-12 * float(np.max(np.abs(lam))):
                break
            x = np.concatenate([s[:t1] / eps, np.ones(min(T, 2 * t1) - t1)])
            t1 = min(T, 2 * t1)
        if t1 == 0:
            s = np.full(T, eps)
        first_active = int(np.argmax(s >= eps * (1 - 1e-12)))
        sol = _certify(self, problem, np.maximum(r, 0.0), np.maximum(lam, 0.0), start, status=status,
                       term=Termination.COMPLETED, form="reduced", notes=[],
                       label=f"L-BFGS-B on the prefix s_1..s_{t1} ({n_iter} iterations, {rounds} round(s))",
                       extra={"prefix_length": int(t1), "first_active": first_active})
        if sol.status is Status.OPTIMAL or not fallback:
            return sol
        # not proven (the prefix L-BFGS-B stalled): the dual back end, keeping the better certified answer
        dual = DiscountedDualSolver().solve(problem, max_iterations=max_iterations)
        return dual if (dual.status is Status.OPTIMAL or dual.objective < sol.objective) else sol
