"""Global solution of (39), (41), (42) with SCIP through Pyomo's ``scip_direct`` interface.

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Section V-C, eqs. (38)–(42).  Privacy
in nats, time in slots.

The formulations are nonconvex (see :mod:`policyopt.problems.geometric`), so a local solver
proves nothing; SCIP's spatial branch-and-bound does, provided every variable and every
intermediate expression has finite bounds.  :func:`to_pyomo` writes (39) in that form:

* variables ``A`` ∈ [0, A_max], ``S_bar`` ∈ [1, S_max], ``epsilon_c`` ∈ [ε_min, ε_max]
  with ε_min raised to the smallest budget (39c) allows at the smallest peak age
  (integer ``A``, ``S_bar`` when ``problem.integer``), and an auxiliary
  ``u`` ∈ [0, 1 − margin] with ``u ≥ c·exp(ε_C − L·S̄)``;
* (39b) as the linear constraint ε_C − L·S̄ ≤ ln(1 − margin) − ln c;
* (39c) as ``penalty.pyomo_expression(A + S̄ − o, ε_C) / f̄ ≤ 1`` (scaled, so that SCIP's
  feasibility tolerance is relative to f̄);
* the objective z = ln c − L·A + ε_C + ln(1 − e^{−ε_C}) − ln(1 − u), the logarithm of the
  ratio inside (39a).  (39a) = ln(1 + e^z) is increasing in z, so both have the same
  minimisers, and SCIP's bound on z maps to a bound on (39a) through the same function.
  The log form keeps the objective well scaled (ρ^A ≈ 1e−8 is z ≈ −18, not 1e−8 next to
  SCIP's absolute tolerances), never forms e^{ε_C} (ε_max can be ~100), and 1 − u ≥ margin
  keeps ln(1 − u) finite on every node of the branch-and-bound tree.

``u ≥ c·exp(ε_C − L·S̄)`` (rather than ``=``) is exact: z increases in u, so at any optimum u
sits on its lower bound, and every point of the original problem is feasible here with the
same objective; so the optimal value and SCIP's dual bound are those of (39).  The
inequality is a convex constraint, which SCIP can relax by gradient cuts rather than by
spatial branching.

What is proven: SCIP's dual bound holds for the model with constraints met to SCIP's
feasibility tolerance (1e-8 here, see :attr:`PyomoSCIPSolver.SCIP_OPTIONS`), the usual
meaning of a global solver's bound; the reported decision is re-checked exactly with numpy.
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.errors import BackendUnavailableError, InvalidInputError, fmt
from policyopt.problems.geometric import (
    GeometricScheduleProblem,
    KKTBranchProblem,
    NoAgingProblem,
    PeakRiskProblem,
)
from policyopt.result import Termination
from policyopt.solvers._common import geometric_infeasible, geometric_solution

__all__ = ["PyomoSCIPSolver", "to_pyomo", "log_ratio_to_risk"]

#: Relative gap on (39a) under which an ``optimal`` SCIP termination counts as a proof.
PROOF_GAP = 1e-6


def log_ratio_to_risk(z):
    """(39a) in nats from the log-ratio z that SCIP minimises: ln(1 + e^z) (vectorised).

    Increasing in z, so it maps SCIP's incumbent and dual bound on z to those on (39a);
    z = −inf maps to 0 (the trivial bound).
    """
    return np.logaddexp(0.0, np.asarray(z, dtype=float))


def to_pyomo(problem: GeometricScheduleProblem):
    """Pyomo model of (39), (41) or (42) with finite bounds on everything SCIP sees.

    Parameters
    ----------
    problem : GeometricScheduleProblem
        A :class:`PeakRiskProblem` (39), :class:`KKTBranchProblem` (41) or
        :class:`NoAgingProblem` (42).

    Returns
    -------
    pyomo.environ.ConcreteModel
        Variables ``A``, ``S_bar`` (slots), ``epsilon_c`` (nats), ``u`` (dimensionless), all
        with finite bounds: ``problem.bounds``, except that ε_C's lower bound is raised to
        the smallest budget (39c) allows at the smallest peak age 1 − o (see
        ``_epsilon_bounds``), and u ∈ [0, 1 − margin];
        constraints ``cond_39b`` (linear form of (39b)), ``u_def`` (u ≥ c·e^{ε_C − L S̄}),
        ``penalty_39c`` ((39c), as f/f̄ ≤ 1) and, for (41), ``kkt_41b`` (L·S̄ = ln(2c) + ε_C, eq. (40));
        objective ``log_ratio`` z = ln c − L·A + ε_C + ln(1 − e^{−ε_C}) − ln(1 − u), to be
        minimised; (39a) = ln(1 + e^z), see :func:`log_ratio_to_risk`.  For (42), ``A`` is
        fixed at 0.  For (41), z = ln(2c ρ^A(e^{ε_C} − 1)) at the optimum (u = 1/2), which is
        (41a) reported in the units of (39a), as :class:`KKTBranchProblem` does.

    Raises
    ------
    InvalidInputError
        If `problem` is not one of the three geometric formulations, or its penalty has no
        algebraic Pyomo form (e.g. ``TableMSE``).
    BackendUnavailableError
        If Pyomo is not installed.

    Notes
    -----
    The model is rebuilt on every call; the problem is not modified.  See the module
    docstring for why the objective is the log-ratio and why ``u_def`` is an inequality.

    References
    ----------
    M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Section V-C, eqs. (38)–(42).
    """
    if not isinstance(problem, PyomoSCIPSolver.SUPPORTED_PROBLEMS):
        raise InvalidInputError(
            f"the pyomo back end solves (39), (41), (42) problems (PeakRiskProblem, KKTBranchProblem, "
            f"NoAgingProblem), got {fmt(problem)}"
        )
    try:
        import pyomo.environ as pyo
    except ImportError as exc:  # pragma: no cover - pyomo is installed in the test environment
        raise BackendUnavailableError(f"the pyomo back end needs Pyomo: {exc}; `pip install pyomo pyscipopt`") from exc

    c, L, o, margin = problem.c, problem.L, problem.aoi_offset, problem.margin
    b = problem.bounds
    domain = pyo.Integers if problem.integer else pyo.Reals
    m = pyo.ConcreteModel(name=f"policyopt ({problem.formulation})")
    m.A = pyo.Var(domain=domain, bounds=b["A"], doc="aging A (slots)")
    m.S_bar = pyo.Var(domain=domain, bounds=b["S_bar"], doc="inter-publish time S̄ (slots)")
    m.epsilon_c = pyo.Var(domain=pyo.Reals, bounds=_epsilon_bounds(problem), doc="budget per release ε_C (nats)")
    m.u = pyo.Var(domain=pyo.Reals, bounds=(0.0, 1.0 - margin), doc="u = c·ρ^S̄·e^ε_C of (39b)")
    if isinstance(problem, NoAgingProblem):
        m.A.fix(0.0)  # (42): A = 0

    # (39b) c·ρ^S̄·e^{ε_C} ≤ 1 − margin, in logs: linear, so SCIP propagates it directly.
    m.cond_39b = pyo.Constraint(expr=m.epsilon_c - L * m.S_bar <= math.log1p(-margin) - math.log(c))
    # u ≥ c·e^{ε_C − L S̄} (38)–(39b); tight at every optimum since the objective increases in u.
    m.u_def = pyo.Constraint(expr=c * pyo.exp(m.epsilon_c - L * m.S_bar) <= m.u)
    # (39c) f(A + S̄ − o, ε_C) ≤ f̄
    try:
        f = problem.penalty.pyomo_expression(m.A + m.S_bar - o, m.epsilon_c)
    except NotImplementedError as exc:
        raise InvalidInputError(
            f"the pyomo back end needs a penalty with an algebraic form (the two-state MSE closed form of a single "
            f"±1 two-state chain, or a linear penalty), and the penalty {problem.penalty.name!r} of this model has "
            "none; use method 'exact' or 'heuristic' (or 'cvxpy' with relax)"
        ) from exc
    # Scaled by f̄ so that SCIP's (absolute, for right-hand sides below 1) feasibility
    # tolerance acts on f/f̄, i.e. relative to f̄ (f̄ can be 1e-3 or smaller).
    m.penalty_39c = pyo.Constraint(expr=f * (1.0 / problem.max_penalty) <= 1.0)
    if isinstance(problem, KKTBranchProblem):
        # (41b) = (40): L·S̄ = ln(2c) + ε_C
        m.kkt_41b = pyo.Constraint(expr=L * m.S_bar == math.log(2.0 * c) + m.epsilon_c)
    # ln of the ratio in (39a): ln c − L·A + ln(e^{ε_C} − 1) − ln(1 − u), with
    # ln(e^{ε_C} − 1) = ε_C + ln(1 − e^{−ε_C}) so that e^{ε_C} is never formed.
    m.log_ratio = pyo.Objective(
        expr=math.log(c) - L * m.A + m.epsilon_c + pyo.log(1.0 - pyo.exp(-m.epsilon_c)) - pyo.log(1.0 - m.u),
        sense=pyo.minimize,
    )
    return m


def _epsilon_bounds(problem: GeometricScheduleProblem) -> tuple[float, float]:
    """Bounds on ε_C for SCIP: ``problem.bounds`` with the lower one tightened by (39c).

    f is non-decreasing in the peak age and A ≥ 0, S̄ ≥ 1 give T ≥ 1 − o, so (39c) needs
    ε_C ≥ ``penalty.min_epsilon(1 − o, f̄)`` at every feasible point.  Without this, ε_C's
    lower bound 1e−12 sits below SCIP's zero tolerance (1e−9): 1/ε_C and ln(1 − e^{−ε_C})
    get infinite bounds, SCIP branches on unbounded auxiliaries and can stall (seen with
    SCIP 10.0.2, ignoring its time limit).  The floor is lowered by a relative 1e−9 to undo
    ``min_epsilon``'s rounding up; if it exceeds ε_max the problem is infeasible and ε_C is
    pinned to ε_max, which keeps the model infeasible for SCIP to prove.
    """
    lo, hi = problem.bounds["epsilon_c"]
    floor = float(problem.penalty.min_epsilon(1.0 - problem.aoi_offset, problem.max_penalty))
    if math.isfinite(floor):
        lo = min(max(lo, floor * (1.0 - 1e-9)), hi)
    return lo, hi


class PyomoSCIPSolver:
    """(39), (41), (42) solved to global optimality by SCIP via Pyomo's ``scip_direct``.

    Both the continuous relaxation and the integer version (integer A, S̄) are handled.  A
    result is ``optimal`` only when SCIP terminates with a relative gap on (39a) of at most
    :data:`PROOF_GAP` = 1e-6; the proven lower bound is reported as ``bound`` (nats).

    Class constants declare what the back end can do, as cvxpy's solver interfaces do.

    References
    ----------
    M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Section V-C, eqs. (38)–(42).
    """

    name = "pyomo"
    MIP_CAPABLE = True
    NONCONVEX_CAPABLE = True
    REQUIRED_MODULES = ("pyomo", "pyscipopt")
    SUPPORTED_PROBLEMS = (PeakRiskProblem, KKTBranchProblem, NoAgingProblem)
    BACKEND = "pyomo+scip"
    #: Pyomo termination condition (member name) -> what it means here.
    STATUS_MAP = {
        "convergenceCriteriaSatisfied": "optimal",  # SCIP "optimal" or "gaplimit"
        "provenInfeasible": "infeasible",
        # Every variable has finite bounds and the objective is finite on the box, so the
        # model cannot be unbounded: "infeasible or unbounded" is infeasible.
        "infeasibleOrUnbounded": "infeasible",
        "maxTimeLimit": "time_limit",
        "iterationLimit": "iteration_limit",
    }
    #: What any other termination condition (unknown, interrupted, ...) means.
    OTHER_STATUS = "other"
    _TERMINATION = {
        "optimal": Termination.COMPLETED,
        "infeasible": Termination.INFEASIBLE,
        "time_limit": Termination.TIME_LIMIT,
        "iteration_limit": Termination.ITERATION_LIMIT,
        "other": Termination.ERROR,
    }
    #: SCIP parameters set on every solve.
    #:
    #: * ``numerics/feastol``: SCIP's default 1e-6 lets its optimum exploit a (39c) violation
    #:   worth up to ~1e-5 of (39a) when the noise term is a small part of f̄, which the
    #:   polish (see ``_polish``) then has to give back, so the 1e-6 proof could fail; 1e-8
    #:   keeps that below ~1e-7.  1e-9 is too tight: SCIP then asks SoPlex for an LP
    #:   tolerance of 1e-12, which it cannot give without GMP, warns at every node and
    #:   stalls (seen with SCIP 10.0.2).
    #: * ``display/verblevel`` 0: Pyomo's ``scip_direct`` captures SCIP's output through a
    #:   pipe drained by a Python thread, while ``optimize()`` holds the GIL; once SCIP has
    #:   written a pipe buffer's worth (64 KiB, i.e. a long log) it blocks for ever, time
    #:   limit or not.  Silencing the log removes the usual cause; warnings still go
    #:   through the pipe (counted in ``values["scip_output_lines"]``).
    SCIP_OPTIONS = {"numerics/feastol": 1e-8, "display/verblevel": 0}

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether Pyomo, PySCIPOpt and the ``scip_direct`` interface can be used.

        Returns
        -------
        (bool, str)
            ``(True, "")``, or ``(False, reason)``; never raises.
        """
        try:
            import pyomo.version  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - any failure means "unavailable"
            return False, f"Pyomo is not importable ({exc}); `pip install pyomo`"
        try:
            import pyscipopt  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return False, f"PySCIPOpt is not importable ({exc}); `pip install pyscipopt`"
        try:
            import pyomo.environ  # noqa: F401 - registers the solver plugins, scip_direct among them
            from pyomo.contrib.solver.common.factory import SolverFactory

            if not SolverFactory("scip_direct").available():
                return False, "Pyomo's scip_direct interface reports SCIP unavailable (version too old or not found)"
        except Exception as exc:  # noqa: BLE001
            return False, f"Pyomo's scip_direct interface failed to load ({type(exc).__name__}: {exc})"
        return True, ""

    @staticmethod
    def version() -> str:
        """Versions of Pyomo, SCIP and PySCIPOpt, e.g. ``"pyomo 6.10.1; SCIP 10.0.2 (PySCIPOpt 6.3.0)"``."""
        import pyomo.version
        import pyscipopt

        try:
            model = pyscipopt.Model()
            scip = f"{model.getMajorVersion()}.{model.getMinorVersion()}.{model.getTechVersion()}"
        except Exception:  # noqa: BLE001 - older PySCIPOpt: fall back to the wrapper's version
            scip = "unknown"
        return f"pyomo {pyomo.version.version}; SCIP {scip} (PySCIPOpt {pyscipopt.__version__})"

    def to_pyomo(self, problem: GeometricScheduleProblem):
        """The Pyomo model of `problem`; see :func:`to_pyomo`."""
        return to_pyomo(problem)

    def solve(self, problem: GeometricScheduleProblem, *, time_limit: float = 60.0, rel_gap: float = 1e-9):
        """Solve (39), (41) or (42) globally with SCIP.

        Parameters
        ----------
        problem : PeakRiskProblem, KKTBranchProblem or NoAgingProblem
            Continuous relaxation or integer version (``problem.integer``).
        time_limit : float
            SCIP's time limit (seconds, > 0).
        rel_gap : float
            Gap at which SCIP stops (≥ 0), passed as SCIP's relative gap on the log-ratio z
            and as its absolute gap on z; the relative gap on (39a) is at most the absolute
            gap on z (ln(1 + e^z) has logarithmic derivative ≤ 1 in z).

        Returns
        -------
        Solution
            ``method`` ``"pyomo"``, ``backend`` ``"pyomo+scip"``.  ``status`` is

            * ``optimal`` — SCIP terminated optimal and the relative gap on (39a) is ≤ 1e-6
              (``unbounded`` instead when A sits at A_max and a larger A_max would lower the
              risk, as classified by :func:`~policyopt.solvers._common.geometric_solution`);
            * ``feasible`` — an incumbent without that proof (time limit, larger gap);
            * ``infeasible`` — SCIP proved that no point meets (39b)–(39c) in the box
              (``values["min_penalty"]`` is the smallest achievable penalty);
            * ``unknown`` — SCIP stopped (e.g. on the time limit) without an incumbent.

            ``objective`` is (39a) at the (polished) decision, nats; ``bound`` is SCIP's
            dual bound mapped to (39a), nats.  ``values`` holds ``time_limit`` (s), ``gap``
            (relative, on (39a); ``None`` without incumbent), ``scip_status`` (SCIP's own
            status string), ``termination_condition`` (Pyomo's), ``dual_bound`` (nats, =
            ``bound``), ``scip_objective`` and ``scip_dual_bound`` (on z), ``nodes``,
            ``scip_time_s``, ``scip_output_lines`` (lines SCIP printed despite its silenced
            log, i.e. warnings), ``rel_gap_requested``, and with an incumbent ``polish`` (what
            was changed, see ``_polish``) and ``scip_point`` (SCIP's own A, S̄, ε_C).

        Raises
        ------
        BackendUnavailableError
            If Pyomo, PySCIPOpt or ``scip_direct`` cannot be used (the reason is given).
        InvalidInputError
            If `problem` is not supported, its penalty has no algebraic form (``TableMSE``),
            or `time_limit` / `rel_gap` is out of range.
        """
        ok, reason = self.available()
        if not ok:
            raise BackendUnavailableError(f"method 'pyomo' is unavailable: {reason}")
        time_limit, rel_gap = solve_iv(time_limit, rel_gap)
        start = time.perf_counter()
        model = to_pyomo(problem)  # raises InvalidInputError for unsupported problems/penalties

        import pyomo.environ  # noqa: F401 - registers the solver plugins
        from pyomo.contrib.solver.common.factory import SolverFactory

        version = self.version()
        opt = SolverFactory("scip_direct")
        results = opt.solve(
            model,
            time_limit=time_limit,
            rel_gap=rel_gap,
            abs_gap=rel_gap,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            solver_options=dict(self.SCIP_OPTIONS),
        )
        tc = results.termination_condition
        kind = self.STATUS_MAP.get(tc.name, self.OTHER_STATUS)
        termination = self._TERMINATION[kind]
        scip_status = read_scip_status(opt, results)
        z_inc = results.incumbent_objective
        z_bound = results.objective_bound
        bound = None
        if z_bound is not None and not (isinstance(z_bound, float) and math.isnan(z_bound)):
            # (39a) ≥ 0 always, so z_bound = −inf still proves the bound 0.
            bound = float(log_ratio_to_risk(z_bound)) if z_bound < math.inf else None
        values = {
            "time_limit": time_limit,
            "rel_gap_requested": rel_gap,
            "scip_status": scip_status,
            "termination_condition": tc.name,
            "dual_bound": bound,
            "scip_dual_bound": z_bound,
            "scip_objective": z_inc,
            "nodes": _extra(results, "NNodes"),
            "scip_time_s": getattr(results.timing_info, "scip_time", None),
            "gap": None,
            "scip_output_lines": len([ln for ln in (results.solver_log or "").splitlines() if ln.strip()]),
        }
        common = dict(method=self.name, backend=self.BACKEND, backend_version=version)

        if kind == "infeasible":
            return geometric_infeasible(
                problem, proven=True, termination=Termination.INFEASIBLE, values=values,
                message=f"SCIP proved infeasibility (status {scip_status!r}): no point of the box meets (39b) and (39c)",
                wall_time_s=time.perf_counter() - start, **common,
            )
        has_incumbent = z_inc is not None and results.solution_loader.get_number_of_solutions() > 0
        if not has_incumbent:
            what = {"time_limit": f"hit the time limit of {time_limit:g} s", "iteration_limit": "hit a node limit"}
            return geometric_infeasible(
                problem, proven=False, termination=termination, values=values,
                message=f"SCIP {what.get(kind, f'stopped ({scip_status!r})')} without finding a feasible point; "
                "infeasibility not proven",
                wall_time_s=time.perf_counter() - start, **common,
            )

        results.solution_loader.load_vars()
        A, S_bar, eps, polish = _polish(problem, model.A.value, model.S_bar.value, model.epsilon_c.value)
        values["polish"] = polish
        values["scip_point"] = {"A": model.A.value, "S_bar": model.S_bar.value, "epsilon_c": model.epsilon_c.value}
        objective = float(problem.risk(A, S_bar, eps))
        gap = None
        if bound is not None and math.isfinite(objective) and objective > 0:
            gap = max(0.0, objective - bound) / objective
        values["gap"] = gap
        proven = kind == "optimal" and gap is not None and gap <= PROOF_GAP
        kind_text = {
            "optimal": f"SCIP converged (status {scip_status!r})",
            "time_limit": f"SCIP hit the time limit of {time_limit:g} s",
            "iteration_limit": "SCIP hit a node limit",
        }.get(kind, f"SCIP stopped with status {scip_status!r}")
        gap_text = "no dual bound" if gap is None else f"relative gap on (39a) {gap:.3g}"
        if proven:
            message = f"{kind_text}; global optimum proven, {gap_text} ≤ {PROOF_GAP:g}"
        else:
            message = f"{kind_text}; incumbent not proven optimal ({gap_text})"
        if polish != "none":
            message += f"; SCIP's point polished ({polish})"
        return geometric_solution(
            problem, A, S_bar, eps, proven_optimal=proven, bound=bound, termination=termination,
            message=message, values=values, wall_time_s=time.perf_counter() - start, **common,
        )


def solve_iv(time_limit, rel_gap) -> tuple[float, float]:
    """Input validation of :meth:`PyomoSCIPSolver.solve`."""
    for nm, v, strict in (("time_limit", time_limit, True), ("rel_gap", rel_gap, False)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise InvalidInputError(f"`{nm}` must be a finite number, got {fmt(v)}")
        if (strict and not v > 0) or (not strict and not v >= 0):
            raise InvalidInputError(f"`{nm}` must be {'>' if strict else '≥'} 0, got {fmt(v)}")
    return float(time_limit), float(rel_gap)


def _extra(results, key):
    """``results.extra_info[key]`` (a ConfigDict entry), or ``None``."""
    try:
        return results.extra_info[key] if key in results.extra_info else None
    except Exception:  # noqa: BLE001 - informational only
        return None


def read_scip_status(opt, results) -> str:
    """SCIP's own status string ("optimal", "gaplimit", "timelimit", ...), else Pyomo's condition.

    Pyomo maps both "optimal" and "gaplimit" to ``convergenceCriteriaSatisfied``, so SCIP's
    string is read from the solver model (a private attribute of ``scip_direct``; guarded).
    """
    try:
        return str(opt._solver_model.getStatus())
    except Exception:  # noqa: BLE001 - informational only
        return results.termination_condition.name


def _polish(problem: GeometricScheduleProblem, A, S_bar, eps) -> tuple[float, float, float, str]:
    """Turn SCIP's point into one that passes the problem's own check (tolerance 1e-7).

    SCIP accepts points within its feasibility tolerance (set to 1e-8; on (39c) relative to
    f̄) and may leave a variable a hair outside its bounds or an integer a hair off.  The
    point is first clipped to the box (A, S̄ rounded when ``problem.integer``; A = 0 for (42);
    S̄ = (ln 2c + ε_C)/L exactly for (41), eq. (40)), then these candidates are tried and the
    one with the lowest (39a) that passes ``problem.evaluate`` exactly (tolerance 0; failing
    that, 1e-9) is kept:

    * as is (SCIP's clipped point may already be feasible);
    * (39), (42): ε_C = ``penalty.min_epsilon(A + S̄ − o, f̄)``, the smallest budget meeting
      (39c) at that peak age.  For fixed (A, S̄), (39a) increases in ε_C (the numerator
      e^{ε_C} − 1 grows, the denominator 1 − cρ^{S̄}e^{ε_C} shrinks), so this is the best
      ε_C for SCIP's (A, S̄); it moves ε_C by about the feasibility tolerance;
    * continuous problems: SCIP's ε_C with A lowered to the largest value (39c) allows,
      A = T_max(ε_C) + o − S̄;
    * the smallest ε_C ≥ SCIP's, up by a relative 1e-12 … 1e-5, that meets (39c) exactly
      (for (41) with S̄ following ε_C by (40)) — needed for (41), and near the ε_C where
      T_max(ε_C) jumps to ∞ (f̄ above the staleness limit), where lowering A is
      ill-conditioned and costs far more.

    The verification in :func:`geometric_solution` is never loosened: if no candidate
    passes, the clipped point is handed over as is and that function raises.

    Returns
    -------
    (A, S_bar, epsilon_c, how) : (float, float, float, str)
        ``how`` says what was changed (``"none"`` if nothing).
    """
    A0, S0, e0 = float(A), float(S_bar), float(eps)
    o, f_bar = problem.aoi_offset, problem.max_penalty
    kkt = isinstance(problem, KKTBranchProblem)
    A = min(max(A0, 0.0), problem.A_max)
    S = min(max(S0, 1.0), problem.S_max)
    e = min(max(e0, problem.epsilon_min), problem.epsilon_max)
    if problem.integer:
        A, S = float(round(A)), float(round(S))
    if isinstance(problem, NoAgingProblem):
        A = 0.0

    def point(a, e):
        """Candidate (A, S̄, ε_C); for (41) S̄ follows ε_C by (40)."""
        s = float(problem.s_bar_of(e)) if kkt else S  # (40)/(41b) exactly
        return a, s, e

    candidates = [point(A, e)]
    if not kkt:
        e_min = float(problem.penalty.min_epsilon(problem.peak_age(A, S), f_bar))
        if math.isfinite(e_min):
            candidates.append(point(A, max(e_min, problem.epsilon_min)))
    if not problem.integer and not isinstance(problem, NoAgingProblem):
        a, s, _ = point(A, e)
        t_max = float(problem.penalty.max_age(e, f_bar))  # (39c) ⇔ A + S̄ − o ≤ T_max(ε_C)
        if t_max < math.inf:
            candidates.append(point(max(0.0, min(A, t_max + o - s)), e))
    candidates.append(_raise_epsilon(problem, point, A, e))
    best = None
    for tol in (0.0, 1e-9):  # exactly feasible if any candidate is, else within 1e-9
        for cand in candidates:
            best = _better(problem, cand, best, tol)
        if best is not None:
            break
    A1, S1, e1 = best[:3] if best is not None else candidates[0]
    changes = [
        f"{nm} {old:.12g} -> {new:.12g}" for nm, old, new in (("A", A0, A1), ("S_bar", S0, S1), ("epsilon_c", e0, e1)) if new != old
    ]
    return A1, S1, e1, ", ".join(changes) if changes else "none"


def _raise_epsilon(problem, point, A, e):
    """``point(A, ε')`` with the smallest ε' = ε(1 + r), r ∈ [1e-12, 1e-5], that is exactly feasible.

    A ladder r = 1e-12, 1e-11, … finds the first feasible decade, and bisection inside it
    the smallest feasible r (the penalty decreases in ε_C near SCIP's point).  Returns
    SCIP's point unchanged if no r ≤ 1e-5 is feasible.
    """

    def ok(r):
        """Is ε_C raised by the relative amount `r` feasible, exactly (tolerance 0)?"""
        return problem.evaluate(*point(A, min(e * (1.0 + r), problem.epsilon_max)), tol=0.0).feasible

    lo = 0.0
    for k in range(12, 4, -1):
        hi = 10.0**-k
        if ok(hi):
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if ok(mid) else (mid, hi)
            return point(A, min(e * (1.0 + hi), problem.epsilon_max))
        lo = hi
    return point(A, e)


def _better(problem, cand, best, tol):
    """`cand` + its (39a) if it passes ``evaluate`` at tolerance `tol` and beats `best`, else `best`.

    For (39) and (42), a candidate whose ε_C is below ``penalty.min_epsilon`` at its peak age (the
    inverse of (39c), rounded up so that the bound holds in exact arithmetic) is refused even when
    the float evaluation of (39c) passes: ε_C is deployed, and (39c) must hold exactly, not to
    rounding.  (The KKT branch problem (41), used to check KKT points, keeps the float check.)
    """
    if not isinstance(problem, KKTBranchProblem):  # (41): S̄ follows ε_C by (40), a branch of the KKT check only
        e_min = float(problem.penalty.min_epsilon(problem.peak_age(cand[0], cand[1]), problem.max_penalty))
        if cand[2] < e_min:
            return best
    ev = problem.evaluate(*cand, tol=tol)
    if ev.feasible and ev.objective is not None and (best is None or ev.objective < best[3]):
        return (*cand, ev.objective)
    return best
