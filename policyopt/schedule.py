"""The main job: an optimal aging/publishing schedule with its benchmarks.

Source: ``../shared/papers/000_2a085da7b331351a.txt`` (problem (28), Theorem 4,
Proposition 3, Section VI).  :func:`design_schedule` is what ``policyopt schedule`` runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .errors import InvalidInputError, fmt
from .markov import Population
from .penalty import MSEPenalty, Penalty, _check_max_penalty
from .result import Solution

__all__ = ["ScheduleReport", "design_schedule", "noise_only_benchmark"]


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
    f_bar = _check_max_penalty(max_penalty)
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
        "peak_aoi": sol.values.get("peak_aoi"),
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
    """

    solution: Solution
    no_aging: Solution
    noise_only: dict
    model: dict
    wall_time_s: float
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
            }
        )
        out.update(self.extra)
        return _json_clean(out)


def _json_clean(v):
    if isinstance(v, dict):
        return {k: _json_clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_clean(x) for x in v]
    if isinstance(v, (np.floating, np.integer)):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def design_schedule(
    population: Population,
    *,
    max_penalty: float,
    A_max: int = 168,
    S_max: int = 168,
    penalty: Penalty | None = None,
    releases: int = 24,
    model_info: dict | None = None,
) -> ScheduleReport:
    """Optimal stationary schedule (A, S̄, ε_C) for a population, with both benchmarks.

    Parameters
    ----------
    population : Population
        Users' chains (with numeric state values for the MSE penalty).
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

    Returns
    -------
    ScheduleReport

    Raises
    ------
    InvalidInputError
        Bad `max_penalty`, box or `releases`.

    References
    ----------
    ``000_2a085da7b331351a.txt``: (28), Theorem 4, (30)–(31), (38), (42).
    """
    from policyopt.problems import ScheduleProblem

    start = time.perf_counter()
    penalty = MSEPenalty(population) if penalty is None else penalty
    problem = ScheduleProblem(population, penalty, max_penalty, A_max=A_max, S_max=S_max)
    solution = problem.solve(method="exact")
    no_aging = problem.restrict(A_max=0).solve(method="exact")
    noise_only = noise_only_benchmark(penalty, problem.max_penalty, releases)
    horizon = max(problem.A_max, problem.S_max)
    env = population.envelope(horizon)
    model = {
        "users": population.n_users,
        "states": max(c.n_states for c in population.chains),
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
    model.update(model_info or {})
    return ScheduleReport(
        solution=solution,
        no_aging=no_aging,
        noise_only=noise_only,
        model=model,
        wall_time_s=time.perf_counter() - start,
    )

