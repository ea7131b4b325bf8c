"""Back ends of problem P1 (Luo et al. 2025, eqs. 23–24) and the baselines of Luo et al.'s (2025) Fig. 5.

* :class:`EnumerationSolver` — every AoI vector in {0..A_max}^s with its smallest feasible ε_C
  in closed form (every bound increases in ε_C); exhaustive, so ``optimal``.  Supports the
  sound, paper and exact bounds.
* :class:`CvxpyInnerSolver` — for each candidate AoI vector (see
  :meth:`policyopt.problems.fran.FRANProblem.candidates`) the convex inner problem in ε_C with
  cvxpy (Clarabel): minimise log_sum_exp(ln(1 − Δ), ln Δ + d(k)ε_C) (sound) or d(k)Δε_C
  (paper) s.t. 2dΔf²·ε_C^{−2} ≤ l̄ − D; KKT residuals of the winner are reported.
* :class:`ScipSolver` — the mixed-integer model with Pyomo + SCIP: one binary per candidate AoI
  vector (Δ_k and D are table look-ups: they have no algebraic form in A_t), continuous ε_C,
  constraint (24) as 2dΔf² ≤ (l̄ − D)ε_C² and the nonconvex objective
  ln(1 + Δ(e^{d(k)ε_C} − 1)); solved to global optimality.

Beyond the exact limit (``problem.distance_kind == "spectral"``) every back end works unchanged on
the spectral upper bound Δ̄(min A_t) of Δ_k; the result's status is then ``feasible`` (optimal
only for that bound, not for the exact Δ_k) and its message and ``values["distance_kind"]`` say so.

Import these classes directly (they are not registered in ``policyopt.solvers.SOLVERS``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.errors import (
    BackendUnavailableError,
    InfeasibleProblemError,
    InvalidInputError,
    InvalidModelError,
    SolverFailedError,
    fmt,
)
from policyopt.problems.fran import FRANProblem
from policyopt.result import Solution, Status, Termination
from policyopt.solvers._common import cvxpy_available

__all__ = ["EnumerationSolver", "CvxpyInnerSolver", "ScipSolver", "fig5_baselines", "KKT_TOL"]

#: Tolerance of the KKT checks of the inner convex problem.
KKT_TOL = 1e-6


def _check_problem(problem, bounds) -> None:
    if not isinstance(problem, FRANProblem):
        raise InvalidInputError(f"`problem` must be a FRANProblem, got {fmt(problem)}")
    if problem.bound not in bounds:
        raise InvalidInputError(f"this back end supports bound in {bounds}, the problem has bound={problem.bound!r}; "
                                "use method='enumeration'")


def _solution(problem: FRANProblem, idx: int, eps: float, *, status, method, backend, version, start, message,
              values=None, kkt=None, bound=None) -> Solution:
    aoi = tuple(int(a) for a in problem.table["aoi"][idx])
    ev = problem.evaluate(np.array(aoi), float(eps))
    if not ev.feasible:  # a back end returning an infeasible point is a bug
        raise AssertionError(f"{method}: candidate {aoi}, ε_C={eps!r} violates (24): MSE {ev.mse!r} > {problem.max_mse!r}")
    vals = {"mse": ev.mse, "max_mse": problem.max_mse, "distance": ev.distance, "distortion": ev.distortion,
            "d_k": problem.d_k, "sensitivity": problem.sensitivity, "bound_kind": problem.bound,
            "correlation_degree": problem.cmc.correlation_degree}
    vals["distance_kind"] = problem.distance_kind
    if problem.distance_kind == "spectral":
        cert = problem.cmc.spectral_certificate()
        vals.update({"spectral_rate": cert.rate, "spectral_log_constant": cert.log_constant,
                     "spectral_failure_probability": cert.failure_probability})
        if status == Status.OPTIMAL:
            status = Status.FEASIBLE
        message = (f"Δ_k is the matrix-free spectral upper bound (Zhang et al. 2024 eq. 55 on the joint chain at min A), not exact: "
                   f"ε_S is a proven upper bound (certificate failure probability ≤ {cert.failure_probability:g}), "
                   f"the design is optimal for that bound only; {message}")
        bound = None
    vals.update(values or {})
    return Solution(
        status=status, termination=Termination.COMPLETED, decision={"aoi": list(aoi), "epsilon_c": float(eps)},
        objective=float(ev.leakage), bound=bound, method=method, backend=backend, backend_version=version,
        wall_time_s=time.perf_counter() - start, message=message, values=vals, kkt=kkt,
    )


class EnumerationSolver:
    """Exhaustive search over AoI vectors with the closed-form smallest feasible ε_C (optimal)."""

    name = "enumeration"
    BACKEND = "numpy"
    BOUNDS = ("sound", "paper", "exact")

    def solve(self, problem: FRANProblem) -> Solution:
        """Solve P1 by enumeration.

        Parameters
        ----------
        problem : FRANProblem

        Returns
        -------
        Solution
            ``optimal`` (the domain is searched exhaustively); ``bound`` equals the objective.
            P1 is always feasible: A_t = 0 has no aging distortion, so ε_C = Δf·sqrt(2d/l̄) meets (24).

        Raises
        ------
        InvalidInputError
            If `problem` is not a FRANProblem.
        """
        _check_problem(problem, self.BOUNDS)
        start = time.perf_counter()
        t = problem.table
        if problem.bound != "exact":
            res = problem.search()
            n_eval = len(res["evaluated"])
            return _solution(problem, res["index"], res["epsilon_c"], status=Status.OPTIMAL, method=self.name,
                             backend=self.BACKEND, version=np.__version__, start=start, bound=res["objective"],
                             message=f"exhaustive branch and bound over {len(t['aoi'])} AoI vectors "
                             f"({res['n_feasible']} feasible, "
                             f"{'exact Δ_k' if problem.distance_kind == 'exact' else 'Δ_k bound'} computed for {n_eval})",
                             values={"n_vectors": int(len(t["aoi"])), "n_feasible": res["n_feasible"],
                                     "n_evaluated": n_eval})
        from policyopt.privacy.fran import exact_leakage

        eps = problem.min_epsilon(t["distortion"])
        feas = np.flatnonzero(np.isfinite(eps))
        obj = np.array([exact_leakage(problem.cmc, problem.query, t["aoi"][i], float(eps[i])) for i in feas])
        # ties: smallest leakage, then smallest MSE distortion, then lexicographically smallest AoI vector
        j = int(np.lexsort((np.arange(feas.size), t["distortion"][feas], obj))[0])
        i = int(feas[j])
        return _solution(problem, i, float(eps[i]), status=Status.OPTIMAL, method=self.name, backend=self.BACKEND,
                         version=np.__version__, start=start, bound=float(obj[j]),
                         message=f"exhaustive search over {len(t['aoi'])} AoI vectors ({feas.size} feasible), "
                         "exact leakage of each",
                         values={"n_vectors": int(len(t["aoi"])), "n_feasible": int(feas.size)})


class CvxpyInnerSolver:
    """Candidate AoI vectors × the convex inner problem in ε_C solved by cvxpy (Clarabel)."""

    name = "cvxpy"
    BACKEND = "cvxpy"
    BOUNDS = ("sound", "paper")
    #: Clarabel tolerances tightened from 1e-8 so ε_C agrees with the closed form to ~1e-8.
    CLARABEL_OPTIONS = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") if cvxpy with an exponential-cone solver is importable, else (False, reason)."""
        return cvxpy_available(("CLARABEL",))  # the exponential cone needs Clarabel

    def solve(self, problem: FRANProblem) -> Solution:
        """Solve P1: cvxpy inner problem for every candidate AoI vector, best one returned.

        Parameters
        ----------
        problem : FRANProblem
            With bound ``"sound"`` or ``"paper"``.

        Returns
        -------
        Solution
            ``optimal`` (inner problems are convex and solved to tolerance; the outer search is
            exhaustive over the candidates, which provably contain an optimum), ``feasible`` if some
            inner solve was inaccurate; with the KKT residuals of the winning inner problem.

        Raises
        ------
        InvalidInputError
            For an ``exact`` bound.
        BackendUnavailableError
            If cvxpy / Clarabel is missing.
        """
        _check_problem(problem, self.BOUNDS)
        ok, why = self.available()
        if not ok:
            raise BackendUnavailableError(f"method 'cvxpy' is unavailable: {why}")
        import cvxpy as cp

        start = time.perf_counter()
        t = problem.table
        idx, dists = problem.candidates()
        dk, c2 = problem.d_k, 2.0 * problem.output_dim * problem.sensitivity ** 2
        eps = cp.Variable(nonneg=True)
        c0, c1, k2 = cp.Parameter(), cp.Parameter(), cp.Parameter(pos=True)
        cons = [k2 * cp.power(eps, -2) <= 1]  # (24) divided by l̄ − D: better scaled for small slacks
        sound = cp.Problem(cp.Minimize(cp.log_sum_exp(cp.hstack([c0, c1 + dk * eps]))), cons)
        # paper objective d(k)Δ·ε_C with d(k)Δ > 0 (and the sound one at Δ = 1) has the minimiser of ε_C itself;
        # minimising ε_C directly keeps the problem well scaled when d(k)Δ is tiny
        linear = cp.Problem(cp.Minimize(eps), cons)
        best, inaccurate = None, 0
        for i, dist in zip(idx, dists):
            dist, D = float(dist), float(t["distortion"][i])
            k2.value = c2 / (problem.max_mse - D)
            if dist == 0.0:  # objective ≡ 0: every feasible ε_C is optimal; take the smallest
                e, obj, kkt, note = float(problem.min_epsilon(D)), 0.0, None, "Δ_k = 0: objective ≡ 0"
            else:
                if problem.bound == "sound" and dist < 1.0:
                    c0.value, c1.value = math.log1p(-dist), math.log(dist)
                    prob = sound
                else:  # paper bound, or Δ = 1 where the sound objective is d(k)ε_C
                    prob = linear
                note = _clarabel_solve(prob, self.CLARABEL_OPTIONS)
                inaccurate += prob.status != "optimal"
                if prob.status not in ("optimal", "optimal_inaccurate") or eps.value is None:
                    raise SolverFailedError(
                        f"method 'cvxpy': Clarabel could not solve the inner problem of AoI {t['aoi'][i].tolist()} "
                        f"(status {prob.status!r}, l̄ = {problem.max_mse:g}); use method 'enumeration'")
                e = float(eps.value)
                mu = float(cons[0].dual_value) / (problem.max_mse - D)  # multiplier of the unscaled (24)
                if prob is linear:  # undo the objective scaling: multiplier of d(k)Δ·ε_C (paper) or d(k)ε_C
                    mu *= dk * dist if problem.bound == "paper" else dk
                kkt = _inner_kkt(problem, dist, D, e, mu)
                e_min = float(problem.min_epsilon(D))
                if e < e_min:  # solver tolerance: move onto the constraint (objective increases in ε_C)
                    e = e_min
            obj = float(problem.leakage_from(dist, e))
            if best is None or obj < best[0] * (1 - 1e-12) or (obj <= best[0] and D < best[4]):
                best = (obj, int(i), e, kkt, D, note)
        obj, i, e, kkt, D, note = best
        status = Status.OPTIMAL if inaccurate == 0 else Status.FEASIBLE
        extra = "" if inaccurate == 0 else f"; {inaccurate} inner solve(s) inaccurate, optimality not certified"
        return _solution(problem, i, e, status=status, method=self.name, backend=self.BACKEND,
                         version=f"cvxpy {cp.__version__} (CLARABEL)", start=start, kkt=kkt,
                         message=f"convex inner problem solved for {idx.size} candidate AoI vectors (winner: {note}){extra}",
                         values={"n_candidates": int(idx.size), "n_inaccurate": inaccurate})


def _clarabel_solve(prob, options) -> str:
    """Solve with tight Clarabel tolerances; on an inaccurate result retry with Clarabel's defaults.

    cvxpy's "may be inaccurate" warning is not dropped: the returned note (kept in the result
    message) says which attempt was used and the final status.
    """
    import warnings

    import cvxpy as cp

    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            prob.solve(solver=cp.CLARABEL, **options)
        if prob.status == "optimal":
            return "optimal (tight tolerances)"
    except cp.error.SolverError:
        pass  # retried with the defaults below
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            prob.solve(solver=cp.CLARABEL)
    except cp.error.SolverError:
        raise SolverFailedError("method 'cvxpy': Clarabel failed on an inner problem with tight and with default "
                                "tolerances (numerically too hard for this MSE bound); use method 'enumeration'") from None
    return f"{prob.status} (Clarabel default tolerances after an inaccurate tight solve)"


def _inner_kkt(problem: FRANProblem, dist, D, eps, mu) -> dict:
    """KKT residuals of min f(ε) s.t. g(ε) = c2 ε^{-2} − (l̄ − D) ≤ 0 at (ε, μ)."""
    dk = problem.d_k
    c2 = 2.0 * problem.output_dim * problem.sensitivity ** 2
    if problem.bound == "sound" and dist < 1.0:
        # f'(ε) = d Δ e^{dε} / (1 − Δ + Δ e^{dε}) = d / (1 + (1 − Δ)/Δ · e^{−dε})
        fprime = dk / (1.0 + (1.0 - dist) / dist * math.exp(-dk * eps))
    else:
        fprime = dk * dist if problem.bound == "paper" else dk
    g = c2 / eps ** 2 - (problem.max_mse - D)
    gprime = -2.0 * c2 / eps ** 3
    scale = max(1.0, abs(fprime))
    return {
        "stationarity": abs(fprime + mu * gprime) / scale,
        "primal_feasibility": max(0.0, g) / max(1.0, problem.max_mse),
        "dual_feasibility": max(0.0, -mu),
        "complementarity": abs(mu * g) / scale,
        "multiplier": mu,
    }


class ScipSolver:
    """Mixed-integer P1 solved globally by SCIP through Pyomo's ``scip_direct`` interface."""

    name = "scip"
    BACKEND = "pyomo+scip"
    BOUNDS = ("sound", "paper")
    #: ``display/verblevel`` 0 and ``numerics/feastol`` 1e-8: see solvers/global_scip.py (deadlock, accuracy).
    SCIP_OPTIONS = {"numerics/feastol": 1e-8, "display/verblevel": 0}
    #: Largest d(k)·ε_C the model accepts (exp(d(k)ε_C) must stay well inside the double range).
    MAX_EXPONENT = 600.0

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether Pyomo + SCIP can be used: ``(True, "")`` or ``(False, reason)``; never raises."""
        from policyopt.solvers.global_scip import PyomoSCIPSolver

        return PyomoSCIPSolver.available()

    def to_pyomo(self, problem: FRANProblem, idx=None):
        """The Pyomo model of P1 on the AoI vectors `idx` (default: :meth:`FRANProblem.candidates`).

        Variables ``y[i]`` (binary, one per AoI vector), ``epsilon_c`` (continuous, nats).

        Raises
        ------
        InvalidInputError
            If d(k)·ε_C could exceed :attr:`MAX_EXPONENT` (exp would overflow).
        """
        import pyomo.environ as pyo

        t = problem.table
        if idx is None:
            idx, dists = problem.candidates()
        else:
            idx = np.asarray(idx)
            dists = np.array([problem.distance(int(i)) for i in idx])
        e_need = problem.min_epsilon(t["distortion"][idx])
        lo, hi = float(np.min(e_need)), float(np.max(e_need))
        if problem.bound == "sound" and problem.d_k * hi > self.MAX_EXPONENT:
            raise InvalidInputError(
                f"the SCIP model needs exp(d(k)·ε_C) up to d(k)·ε_C = {problem.d_k * hi:.4g} > {self.MAX_EXPONENT:g}: "
                f"--max-mse {problem.max_mse:g} is too close to the aging distortion; use method='enumeration'"
            )
        m = pyo.ConcreteModel()
        m.I = pyo.RangeSet(0, len(idx) - 1)
        m.y = pyo.Var(m.I, within=pyo.Binary)
        m.epsilon_c = pyo.Var(bounds=(lo, hi * (1 + 1e-9)), initialize=hi)
        dist = {n: float(dists[n]) for n in range(len(idx))}
        dstn = {n: float(t["distortion"][i]) for n, i in enumerate(idx)}
        m.one = pyo.Constraint(expr=sum(m.y[n] for n in m.I) == 1)
        m.D = pyo.Expression(expr=sum(dstn[n] * m.y[n] for n in m.I))
        m.Delta = pyo.Expression(expr=sum(dist[n] * m.y[n] for n in m.I))
        c2 = 2.0 * problem.output_dim * problem.sensitivity ** 2
        m.mse = pyo.Constraint(expr=c2 <= (problem.max_mse - m.D) * m.epsilon_c ** 2)  # (24)
        if problem.bound == "sound":
            m.obj = pyo.Objective(expr=pyo.log(1 + m.Delta * (pyo.exp(problem.d_k * m.epsilon_c) - 1)))  # eq. (45)
        else:
            m.obj = pyo.Objective(expr=problem.d_k * m.Delta * m.epsilon_c)  # eq. (15)
        m._idx = idx
        return m

    def solve(self, problem: FRANProblem, *, time_limit: float = 60.0) -> Solution:
        """Solve P1 globally with SCIP.

        Parameters
        ----------
        problem : FRANProblem
            With bound ``"sound"`` or ``"paper"``.
        time_limit : float, keyword-only
            Seconds (> 0).

        Returns
        -------
        Solution
            ``optimal`` when SCIP proves it, ``feasible`` otherwise.  SCIP's ε_C is moved onto
            the constraint (24) (the objective increases in ε_C) and re-evaluated with numpy.

        Raises
        ------
        InvalidInputError
            For an ``exact`` bound, a bad `time_limit`, or exponent overflow (see :meth:`to_pyomo`).
        BackendUnavailableError
            If Pyomo / SCIP cannot be used.
        """
        _check_problem(problem, self.BOUNDS)
        if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not (
            math.isfinite(time_limit) and time_limit > 0
        ):
            raise InvalidInputError(f"`time_limit` must be a positive number of seconds, got {fmt(time_limit)}")
        ok, why = self.available()
        if not ok:
            raise BackendUnavailableError(f"method 'scip' is unavailable: {why}")
        from policyopt.solvers.global_scip import PyomoSCIPSolver

        start = time.perf_counter()
        version = PyomoSCIPSolver.version()
        model = self.to_pyomo(problem)
        import pyomo.environ  # noqa: F401
        from pyomo.contrib.solver.common.factory import SolverFactory

        opt = SolverFactory("scip_direct")
        res = opt.solve(model, time_limit=float(time_limit), rel_gap=1e-9, abs_gap=1e-12, load_solutions=False,
                        raise_exception_on_nonoptimal_result=False, solver_options=dict(self.SCIP_OPTIONS))
        tc = res.termination_condition.name
        if res.incumbent_objective is None or res.solution_loader.get_number_of_solutions() == 0:
            raise InfeasibleProblemError(f"SCIP stopped ({tc}) without a feasible point although the candidate set is "
                                         "non-empty; increase `time_limit`")
        res.solution_loader.load_vars()
        chosen = [n for n in model.I if model.y[n].value is not None and model.y[n].value > 0.5]
        n = chosen[0]
        i = int(model._idx[n])
        e_scip = float(model.epsilon_c.value)
        e = float(problem.min_epsilon(problem.table["distortion"][i]))
        proven = tc == "convergenceCriteriaSatisfied"
        bound = res.objective_bound
        bound = float(bound) if bound is not None and math.isfinite(bound) else None
        return _solution(problem, i, e, status=Status.OPTIMAL if proven else Status.FEASIBLE, method=self.name,
                         backend=self.BACKEND, version=version, start=start, bound=bound,
                         message=f"SCIP {'proved global optimality' if proven else 'stopped: ' + tc} over "
                         f"{len(model._idx)} candidate AoI vectors",
                         values={"termination_condition": tc, "scip_epsilon_c": e_scip,
                                 "scip_objective": float(res.incumbent_objective), "n_candidates": len(model._idx)})


def fig5_baselines(problem: FRANProblem) -> dict:
    """Minimum leakage of each method of Luo et al.'s (2025) Fig. 5 under the same MSE bound l̄, nats.

    Every method releases f(aged snapshot) + Lap(Δf/ε_C) with the smallest ε_C meeting (24) on
    the true CMC; what differs is the aging allowed and the accounting:

    * ``dp`` — no aging, independence assumed: ε_S = ε_C (standard DP).
    * ``ddp`` — no aging, group sensitivity for spatial correlation (Zhao et al.): the Laplace
      level is charged d(k) times, ε_S = d(k)·ε_C.  Both bounds agree when Δ = 1.
    * ``adp`` — uniform aging A ∈ 0..A_max, sequences treated as independent Markov chains
      P^(ii) (temporal correlation only; Zhang et al. Theorem 1): sound ln(1 + Δ(A)(e^{ε_C} − 1))
      with Δ(A) = max_i Δ_i(A) of Zhang et al. (2024) eq. (12); paper Δ(A)·ε_C.  Not a valid CSDP guarantee
      when the sequences are coupled (it ignores the coupling).
    * ``csdp`` — FRAN with P1's optimum (enumeration), sound and paper bound.  With the spectral
      distance (beyond the exact limit) the sound value uses the spectral upper bound on Δ_k and the
      paper value is None with a ``note``.

    Parameters
    ----------
    problem : FRANProblem

    Returns
    -------
    dict
        ``{method: {"sound": {...}, "paper": {...}}}``, each inner dict with ``epsilon_s``,
        ``aoi``, ``epsilon_c`` and ``mse``; for ``adp`` all None plus ``note`` when some P^(ii) is
        reducible (its Δ(t) is then undefined).
    """
    from policyopt.privacy.age_dependent import risk_after_aging
    from policyopt.models.markov import MarkovChain

    t = problem.table
    s = problem.cmc.n_sequences
    out = {}
    zero = tuple([0] * s)
    i0 = int(np.flatnonzero((t["aoi"] == 0).all(axis=1))[0])
    e0 = float(problem.min_epsilon(t["distortion"][i0]))
    empty = {"epsilon_s": None, "aoi": None, "epsilon_c": None, "mse": None}
    for name, factor in (("dp", 1.0), ("ddp", problem.d_k)):
        if math.isfinite(e0):
            row = {"epsilon_s": factor * e0, "aoi": list(zero), "epsilon_c": e0,
                   "mse": float(problem.mse(t["distortion"][i0], e0))}
        else:  # without aging the staleness alone breaks l̄: this baseline has no feasible release
            row = dict(empty, note="cannot meet the MSE bound without aging (no ε_C is large enough)")
        out[name] = {"sound": dict(row), "paper": dict(row)}
    chains = [MarkovChain(problem.cmc.transitions[i, i]) for i in range(s)]
    # row of the uniform AoI vector (a, ..., a) for each a: one pass over the table (a scan per a was O(A³), issue 26)
    aoi = np.asarray(t["aoi"])
    rows = np.flatnonzero((aoi == aoi[:, :1]).all(axis=1))
    first = {}
    for i in rows.tolist():
        first.setdefault(int(aoi[i, 0]), i)
    uni = [first[a] for a in range(problem.max_age + 1)]
    adp = {"sound": None, "paper": None}
    try:
        deltas = [max(float(c.max_tv(a)) for c in chains) for a in range(problem.max_age + 1)]
    except InvalidModelError as exc:  # a reducible P^(ii): ADP's Δ(t) (Zhang et al. 2024, eq. 12) is undefined
        deltas, reason = None, f"ADP needs irreducible P^(ii): {exc}"
    if deltas is not None:
        for a, i in enumerate(uni):
            e = float(problem.min_epsilon(t["distortion"][i]))
            if not math.isfinite(e):  # this uniform age cannot meet l̄ with any ε_C
                continue
            for kind, val in (("sound", float(risk_after_aging(deltas[a], e))), ("paper", deltas[a] * e)):
                if adp[kind] is None or val < adp[kind]["epsilon_s"]:
                    adp[kind] = {"epsilon_s": val, "aoi": [a] * s, "epsilon_c": e,
                                 "mse": float(problem.mse(t["distortion"][i], e))}
        out["adp"] = {k: v if v is not None else dict(empty, note="no uniform age ≤ max_age meets the MSE bound")
                      for k, v in adp.items()}
    else:
        out["adp"] = {k: dict(empty, note=reason) for k in ("sound", "paper")}
    out["csdp"] = {}
    for kind in ("sound", "paper"):
        if kind == "paper" and problem.distance_kind == "spectral":
            out["csdp"][kind] = dict(empty, note="the paper bound needs the exact Δ_k (m^s ≤ 4096 snapshots)")
            continue
        res = problem.search(kind)
        i = res["index"]
        out["csdp"][kind] = {"epsilon_s": res["objective"], "aoi": t["aoi"][i].tolist(), "epsilon_c": res["epsilon_c"],
                             "mse": float(problem.mse(t["distortion"][i], res["epsilon_c"]))}
    return out
