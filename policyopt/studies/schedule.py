"""The main job: an optimal aging/publishing schedule with its benchmarks.

Source: ``../shared/papers/000_2a085da7b331351a.txt`` (problem (28), Theorem 4,
Proposition 3, Section VI).  :func:`design_schedule` is what ``policyopt schedule`` runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import json_clean
from policyopt.models.markov import Population
from policyopt.utility.penalty import MSEPenalty, Penalty, check_max_penalty
from policyopt.result import Solution

__all__ = ["ScheduleReport", "design_schedule", "noise_only_benchmark", "geometric_problem", "compare_methods", "METHODS"]


def noise_only_benchmark(penalty: Penalty, max_penalty: float, releases: int) -> dict:
    """Classical DP benchmark: publish fresh data (A = 0) every slot with noise alone.

    With Δ ≡ 1 (no credit for temporal decorrelation) the risk composes additively
    (Theorem 3 with Δ = 1, i.e. basic composition, Proposition 2) and grows without bound.

    Parameters
    ----------
    penalty : Penalty
    max_penalty : float
        f̄.
    releases : int
        Number of releases after which the accumulated risk is reported (≥ 1).

    Returns
    -------
    dict
        ``epsilon_c`` (per release, nats; ``None`` if no budget meets f̄), ``releases``,
        ``risk_after_releases`` (nats), ``penalty``.

    Raises
    ------
    InvalidInputError
        If `releases` < 1 or `max_penalty` is not positive.
    """
    if isinstance(releases, bool) or not isinstance(releases, (int, np.integer)) or releases < 1:
        raise InvalidInputError(f"`releases` must be an integer ≥ 1, got {fmt(releases)}")
    f_bar = check_max_penalty(max_penalty)
    eps = float(np.asarray(penalty.min_epsilon_c_table(0, 1, f_bar))[0, 0])
    if not np.isfinite(eps):
        return {"status": "infeasible", "epsilon_c": None, "releases": int(releases), "risk_after_releases": None, "penalty": None}
    return {
        "status": "divergent",
        "epsilon_c": eps,
        "releases": int(releases),
        "risk_after_releases": releases * eps,  # Proposition 2: ε_C summed over releases
        "penalty": float(np.max(penalty.value(np.arange(1), eps))),
    }


def _schedule_fields(sol: Solution) -> dict:
    d = sol.decision or {}
    return {
        "status": sol.status.value,
        "A": d.get("A"),
        "S_bar": d.get("S_bar"),
        "epsilon_c": d.get("epsilon_c"),
        "peak_risk": sol.objective,
        "penalty": sol.values.get("penalty"),
        "peak_aoi": sol.values.get("peak_aoi", sol.values.get("peak_age")),
    }


@dataclass(frozen=True)
class ScheduleReport:
    """Everything ``policyopt schedule`` prints.

    Attributes
    ----------
    solution : Solution
        The optimal schedule (or why there is none).
    no_aging : Solution
        Best schedule with A = 0 (problem (42)'s setting).
    noise_only : dict
        See :func:`noise_only_benchmark`.
    model : dict
        Users, states, envelope (c, ρ), λ*, data notes.
    wall_time_s : float
        Seconds from model to report (excluding interpreter start and data loading).
    comparison : list of dict or None
        With ``method="all"``: one row per back end (see :func:`compare_methods`).
    """

    solution: Solution
    no_aging: Solution
    noise_only: dict
    model: dict
    wall_time_s: float
    comparison: list | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON object documented in the README (field names are a public interface)."""
        sol = self.solution.to_dict()
        out = _schedule_fields(self.solution)
        out.update(
            {
                "max_penalty": self.solution.values.get("max_penalty"),
                "min_penalty": sol["values"].get("min_penalty"),
                "method": self.solution.method,
                "termination": sol["termination"],
                "bound": sol["bound"],
                "backend": self.solution.backend,
                "backend_version": self.solution.backend_version,
                "message": self.solution.message,
                "wall_time_s": self.wall_time_s,
                "model": self.model,
                "benchmarks": {"no_aging": _schedule_fields(self.no_aging), "noise_only": self.noise_only},
                "kkt": sol["kkt"],
            }
        )
        if self.comparison is not None:
            out["comparison"] = self.comparison
        out.update(self.extra)
        return json_clean(out)


METHODS = ("exact", "heuristic", "cvxpy", "pyomo")


def geometric_problem(population: Population, penalty: MSEPenalty, max_penalty: float, A_max: int, S_max: int, *, relax: bool):
    """Problem (39) for a population: (c, ρ) from its envelope over max(A_max, S_max) slots.

    The continuous penalty is the two-state closed form (49) for a single two-state chain with
    values ±1 and 0 < 1 − p − q < 1, else the interpolated running-max MSE table
    (:class:`~policyopt.utility.penalty.TableMSE`), which is ≥ the exact epoch penalty at integer ages.
    A penalty that is not an :class:`~policyopt.utility.penalty.MSEPenalty` (e.g. the failure rate) is
    wrapped in :class:`~policyopt.utility.penalty.StepPenalty` (running max over ages, non-smooth: the
    cvxpy back end refuses it; :exc:`InvalidInputError` if it is not proven monotone in ε_C).

    Returns
    -------
    policyopt.problems.PeakRiskProblem
    """
    from policyopt.utility.penalty import StepPenalty, TableMSE, TwoStateMSE
    from policyopt.problems import PeakRiskProblem

    env = population.envelope(max(A_max, S_max))
    cont = None
    if not isinstance(penalty, MSEPenalty):
        # Any other discrete penalty (failure rate, AR(1) MSE): its running max over ages, a step
        # function that is ≥ the exact epoch penalty; refused if not proven monotone in ε_C.
        cont = StepPenalty(penalty, A_max + S_max + 1)
    elif isinstance(population, Population) and len(population.chains) == 1 and population.chains[0].n_states == 2:
        chain = population.chains[0]
        p, q = float(chain.P[0, 1]), float(chain.P[1, 0])
        if list(chain.state_values) == [-1.0, 1.0] and 0.0 < 1.0 - p - q < 1.0:
            cont = TwoStateMSE(p, q, population.n_users)
    if cont is None:
        cont = TableMSE(penalty, A_max + S_max + 1)
    rho = env.rho if env.rho > 0 else 1e-300
    return PeakRiskProblem(env.c, rho, cont, max_penalty, A_max=A_max, S_max=S_max, integer=not relax)


def _row(name: str, sol: Solution | None, note: str = "") -> dict:
    if sol is None:
        return {"method": name, "status": "unavailable", "objective": None, "bound": None, "gap": None,
                "wall_time_s": None, "kkt_residual": None, "A": None, "S_bar": None, "epsilon_c": None, "message": note}
    d = sol.decision or {}
    kkt = sol.kkt or {}
    residuals = [v for k, v in kkt.items() if k not in ("tolerance", "passed", "branch") and isinstance(v, (int, float)) and v is not None]
    return {
        "method": name,
        "status": sol.status.value,
        "objective": sol.objective,
        "bound": sol.bound,
        "gap": sol.gap,
        "wall_time_s": sol.wall_time_s,
        "kkt_residual": max(residuals) if residuals else None,
        "kkt_branch": kkt.get("branch"),
        "A": d.get("A"),
        "S_bar": d.get("S_bar"),
        "epsilon_c": d.get("epsilon_c"),
        "message": note or sol.message,
    }


def compare_methods(exact_solution: Solution, geometric, *, relax: bool) -> tuple[list, dict]:
    """Run every available back end on the geometric problem; one row per method.

    The first row is the exact solver on the exact Δ(t) table (the main job's reference);
    the others solve (39) with the envelope, integer unless `relax`.  Back ends that cannot
    run here, or do not handle the problem, get a row with status ``unavailable`` and the reason.

    Returns
    -------
    (rows, solutions) : list of dict, dict of method → Solution
    """
    from policyopt.errors import PolicyOptError
    from policyopt.solvers import get_solver

    rows = [_row("exact (exact Δ, integer)", exact_solution)]
    sols = {}
    for name in ("exact", "heuristic", "cvxpy", "pyomo"):
        label = f"{name} ((39), {'relaxed' if relax else 'integer'})"
        if name == "exact" and relax:
            continue
        try:
            solver = get_solver(name)
            ok, why = solver.available()
            if not ok:
                rows.append(_row(label, None, why))
                continue
            sol = solver.solve(geometric)
        except (PolicyOptError, ImportError) as exc:
            rows.append(_row(label, None, " ".join(str(exc).split())))
            continue
        sols[name] = sol
        rows.append(_row(label, sol))
    return rows, sols


def design_schedule(
    population: Population,
    *,
    max_penalty: float,
    A_max: int = 168,
    S_max: int = 168,
    penalty: Penalty | None = None,
    releases: int = 24,
    model_info: dict | None = None,
    method: str = "exact",
    relax: bool = False,
) -> ScheduleReport:
    """Optimal stationary schedule (A, S̄, ε_C) for a population, with both benchmarks.

    Parameters
    ----------
    population : Population or MaxTVSource
        Users' chains (with numeric state values for the MSE penalty), or another Δ(t) source
        such as :class:`~policyopt.models.ar1.AR1Model` (then `penalty` is required).
    max_penalty : float
        f̄ (penalty units, e.g. kWh² for the MSE of a kWh mean).
    A_max, S_max : int
        Search box (slots).
    penalty : Penalty, optional
        Default: :class:`MSEPenalty` of the mean over the population's I users.
    releases : int
        Releases after which the noise-only benchmark's risk is reported.
    model_info : dict, optional
        Extra model facts to carry into ``report.model`` (e.g. data source).
    method : {"exact", "heuristic", "cvxpy", "pyomo", "all"}
        ``exact`` solves problem (28) with the exact Δ(t) table over integers; the others
        solve (39) with the envelope Δ(t) ≤ cρ^t (whose objective bounds the exact peak risk
        from above); ``all`` reports the exact answer and a comparison of every back end.
    relax : bool
        Continuous relaxation of A and S̄ for the (39) back ends (required by ``cvxpy``).

    Returns
    -------
    ScheduleReport

    Raises
    ------
    InvalidInputError
        Bad `max_penalty`, box, `releases`, `method`, or `relax` with ``method="exact"``; no
        `penalty` for a population that is not a Population; a penalty the chosen (39) back end
        cannot handle (not proven monotone in ε_C, or non-smooth with ``cvxpy``).

    References
    ----------
    ``000_2a085da7b331351a.txt``: (28), Theorem 4, (30)–(31), (38), (39), (42).
    """
    from policyopt.problems import ScheduleProblem

    if method not in METHODS + ("all",):
        raise InvalidInputError(f"unknown `method` {fmt(method)}; choose one of {list(METHODS + ('all',))}")
    if method == "cvxpy" and not relax:
        raise InvalidInputError(
            "method 'cvxpy' solves the continuous relaxation of (39) only: add `relax` (--relax), "
            "or use 'exact', 'pyomo' or 'heuristic' for integer A and S̄"
        )
    if relax and method == "exact":
        raise InvalidInputError("`relax` applies to the (39) back ends (heuristic, cvxpy, pyomo, all), not to the exact solver")
    start = time.perf_counter()
    if penalty is None:
        if not isinstance(population, Population):
            raise InvalidInputError(
                f"`penalty` is required when `population` is not a Population (got {fmt(population)}); "
                "e.g. policyopt.utility.ar1_penalty.AR1MSEPenalty(model)"
            )
        penalty = MSEPenalty(population)
    problem = ScheduleProblem(population, penalty, max_penalty, A_max=A_max, S_max=S_max)
    exact = problem.solve(method="exact")
    no_aging = problem.restrict(A_max=0).solve(method="exact")
    noise_only = noise_only_benchmark(penalty, problem.max_penalty, releases)
    horizon = max(problem.A_max, problem.S_max)
    env = population.envelope(horizon)
    comparison = None
    solution = exact
    if method != "exact":
        geo = geometric_problem(population, penalty, problem.max_penalty, problem.A_max, problem.S_max, relax=relax)
        if method == "all":
            comparison, _ = compare_methods(exact, geo, relax=relax)
        else:
            solution = geo.solve(method=method)
    model = {
        "users": population.n_users,
        "states": max(c.n_states for c in population.chains) if isinstance(population, Population) else None,
        "c": env.c,
        "rho": env.rho,
        "envelope_horizon": env.horizon,
        "lambda_star": population.spectral_rate,
        "penalty": penalty.name,
        "penalty_unit": getattr(penalty, "unit", ""),
    }
    if isinstance(penalty, MSEPenalty):
        model["sensitivity"] = penalty.sensitivity
        model["staleness_limit"] = penalty.staleness_limit
    elif hasattr(penalty, "sensitivity"):
        model["sensitivity"] = penalty.sensitivity
    model.update(model_info or {})
    return ScheduleReport(
        solution=solution,
        no_aging=no_aging,
        noise_only=noise_only,
        model=model,
        wall_time_s=time.perf_counter() - start,
        comparison=comparison,
    )
