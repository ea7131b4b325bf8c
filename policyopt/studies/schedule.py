"""The main job: an optimal aging/publishing schedule with its benchmarks.

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024 (problem (28), Theorem 4,
Proposition 3, Section VI).  :func:`design_schedule` is what ``policyopt schedule`` runs.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING
from dataclasses import dataclass, field

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.formatting import fmt_count, fmt_upper, fmt_value, json_clean, round_down, round_up
from policyopt.privacy.age_dependent import peak_risk_margin

if TYPE_CHECKING:  # annotations only: the problem is imported where it is built
    from policyopt.problems.age_dependent import ScheduleProblem
from policyopt.models.markov import Population
from policyopt.utility.penalty import MSEPenalty, Penalty, check_max_penalty
from policyopt.result import Solution, result_repr, summarize
from policyopt.studies.schedule_text import format_report

__all__ = ["ScheduleReport", "design_schedule", "staleness_profile", "certify_peak_risk", "noise_only_benchmark", "geometric_problem", "compare_methods", "METHODS"]


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
    check_int(releases, "releases", 1)
    f_bar = check_max_penalty(max_penalty)
    eps = float(np.asarray(penalty.min_epsilon_c_table(0, 1, f_bar))[0, 0])
    if not np.isfinite(eps):
        return {"status": "infeasible", "epsilon_c": None, "releases": int(releases), "risk_after_releases": None, "penalty": None}
    return {
        "status": "divergent",
        "epsilon_c": eps,
        "releases": int(releases),
        # Proposition 2: ε_C summed over releases; the exact product N·ε_C, rounded up one float step
        "risk_after_releases": round_up(releases * eps),
        "penalty": float(np.max(penalty.value(np.arange(1), eps))),
    }


def staleness_profile(penalty: MSEPenalty, population, horizon: int, fraction: float = 0.9) -> dict | None:
    """When the staleness of the mean reaches `fraction` of its limit, and Δ(t) there.

    Returns ``{"t", "fraction", "max_tv"}`` for the smallest age t ≤ `horizon` (slots) whose staleness
    is ≥ `fraction` × the staleness limit, with the actual fraction reached and Δ(t) (eq. 12), or
    ``None`` if no age up to `horizon` gets there.  Used to say in one sentence why aging pays or not.
    """
    limit = penalty.staleness_limit
    if not limit > 0:
        return None
    st = np.asarray(penalty.staleness(np.arange(int(horizon) + 1)), dtype=float)
    hit = np.flatnonzero(st >= fraction * limit)
    if hit.size == 0:
        return None
    t = int(hit[0])
    return {"t": t, "fraction": float(st[t] / limit), "max_tv": float(population.max_tv(t))}



def certify_peak_risk(sol: Solution, log_max_tv) -> dict:
    """The reported (rounded-up) peak risk of a schedule and the relative margin used.

    Parameters
    ----------
    sol : Solution
        A schedule (decision ``A``, ``S_bar``, ``epsilon_c``) whose ``objective`` is eq. (30) (exact
        solver) or (39a) (envelope back ends) as computed in floating point.
    log_max_tv : callable
        t ↦ ln Δ(t) used by the objective: the exact Δ for the exact solver, the envelope
        ln c + t ln ρ for problem (39) (t may be non-integer for a relaxation).

    Returns
    -------
    dict
        ``peak_risk`` (≥ the exact value, nats; ``None`` without a schedule) and ``peak_risk_margin``
        (relative margin of :func:`policyopt.privacy.age_dependent.peak_risk_margin`, ``None``
        without a schedule).

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
    eqs. (30)–(31), (39a).
    """
    d = sol.decision or {}
    if sol.objective is None or d.get("A") is None:
        return {"peak_risk": sol.objective, "peak_risk_margin": None}
    A, S, eps = float(d["A"]), float(d["S_bar"]), float(d["epsilon_c"])
    m = peak_risk_margin(float(log_max_tv(A)), float(log_max_tv(S)), eps, A, S)
    return {"peak_risk": round_up(sol.objective, m), "peak_risk_margin": m}


def _schedule_fields(sol: Solution, certified: dict | None = None) -> dict:
    d = sol.decision or {}
    cert = certified or {"peak_risk": round_up(sol.objective), "peak_risk_margin": None}
    return {
        "status": sol.status.value,
        "A": d.get("A"),
        "S_bar": d.get("S_bar"),
        "epsilon_c": d.get("epsilon_c"),
        "peak_risk": cert["peak_risk"],
        "peak_risk_margin": cert["peak_risk_margin"],
        "penalty": sol.values.get("penalty"),
        "peak_aoi": _whole(sol.values.get("peak_aoi", sol.values.get("peak_age"))),
    }


def _whole(v):
    """An integral float (a peak AoI of an integer schedule) as int; anything else unchanged."""
    if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
        return int(v)
    return v


def nearest_integer_schedules(problem: ScheduleProblem, A: float, S_bar: float) -> dict:
    """The deployable integer schedules around a relaxed (A, S̄): each with its smallest ε_C and exact risk.

    The candidates are (⌊A⌋ or ⌈A⌉, ⌊S̄⌋ or ⌈S̄⌉) inside the box; for each, the smallest ε_C meeting f̄ with the
    exact epoch penalty and the exact peak risk ε* of eq. (30) with the exact Δ(t) (Zhang, Wei, Berry, Huang,
    'Age-Dependent Differential Privacy', IEEE Trans. Inf. Theory, 2024, eq. (30)).

    Parameters
    ----------
    problem : ScheduleProblem
        The exact problem (28) of the same population, penalty, f̄ and box.
    A, S_bar : float
        The relaxed aging and inter-publish time, slots.

    Returns
    -------
    dict
        ``best`` (the feasible neighbour of least exact ε*, or None) and ``neighbours`` (list of dicts with ``A``,
        ``S_bar``, ``epsilon_c``, ``peak_risk``, ``penalty``, ``peak_aoi``, ``feasible``, ``why``).
    """
    a_set = sorted({a for a in (math.floor(A), math.ceil(A)) if 0 <= a <= problem.A_max})
    s_set = sorted({s for s in (math.floor(S_bar), math.ceil(S_bar)) if 1 <= s <= problem.S_max})
    rows = []
    if a_set and s_set:
        table = np.asarray(problem.penalty.min_epsilon_c_table(a_set[-1], s_set[-1], problem.max_penalty), dtype=float)
        for a in a_set:
            for s in s_set:
                e = float(table[a, s - 1])
                if not math.isfinite(e):
                    rows.append({"A": a, "S_bar": s, "epsilon_c": None, "peak_risk": None, "penalty": None,
                                 "peak_aoi": a + s - 1, "feasible": False,
                                 "why": "no ε_C meets the penalty bound at this (A, S̄)"})
                    continue
                ev = problem.evaluate(a, s, e)
                rows.append({"A": a, "S_bar": s, "epsilon_c": e, "peak_risk": ev.peak_risk, "penalty": ev.penalty,
                             "peak_aoi": a + s - 1, "feasible": bool(ev.feasible and ev.peak_risk is not None),
                             "why": "; ".join(ev.violations)})
    feasible = [r for r in rows if r["feasible"]]
    best = min(feasible, key=lambda r: (r["peak_risk"], r["A"], r["S_bar"])) if feasible else None
    return {"best": best, "neighbours": rows}


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
        ``users`` (deployment size I), ``pilot_users`` (chains the Δ(t) maximum runs over), states,
        envelope (c, ρ), λ*, ``tradeoff_range`` ([low, high]: a finite optimum exists for low < f̄ < high, see
        :func:`~policyopt.studies.deployment.tradeoff_range`), and for the MSE penalty ``sensitivity``
        (Δf = (HI − LO)/I), ``staleness_limit``, ``value_range`` ([LO, HI]), ``value_range_declared``,
        ``value_range_source`` (``"declared"``, or from the caller's notes ``"model"`` for given chains' state values,
        ``"data"`` for estimated ones; ``None`` when unknown), ``deployment`` (the assumption in words) and ``staleness_profile``; then the caller's data notes.
    wall_time_s : float
        Seconds from model to report (excluding interpreter start and data loading).
    comparison : list of dict or None
        With ``method="all"``: one row per back end (see :func:`compare_methods`).
    certified : dict
        ``solution`` and ``no_aging``: the outputs of :func:`certify_peak_risk` (the reported,
        rounded-up peak risks); a missing entry is rounded up by one float step only.
    guarantee_args : dict or None
        What :func:`policyopt.studies.guarantee.apply_guarantee` is called with (None: no guarantee fields).
    empirical_fields : dict or None
        With a design against the data's Δ̃(t) band: ``max_tv_source`` (into ``model``), ``empirical_max_tv`` and
        ``horizon_design``, computed once by :func:`design_schedule`.
    """

    solution: Solution
    no_aging: Solution
    noise_only: dict
    model: dict
    wall_time_s: float
    comparison: list | None = None
    extra: dict = field(default_factory=dict)
    certified: dict = field(default_factory=dict)
    guarantee_args: dict | None = None
    empirical_fields: dict | None = None

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self, first=("solution", "no_aging"), head=_schedule_head(self))

    def to_dict(self) -> dict:
        """The JSON object documented in the README (field names are a public interface)."""
        sol = self.solution.to_dict()
        out = _schedule_fields(self.solution, self.certified.get("solution"))
        out.update(
            {
                "max_penalty": self.solution.values.get("max_penalty"),
                "min_penalty": sol["values"].get("min_penalty"),
                "method": self.solution.method,
                "termination": sol["termination"],
                "bound": round_down(sol["bound"]),  # a lower bound on the minimised peak risk: rounded down
                "backend": self.solution.backend,
                "backend_version": self.solution.backend_version,
                "message": self.solution.message,
                "wall_time_s": self.wall_time_s,
                "model": self.model,
                "benchmarks": {
                    "no_aging": _schedule_fields(self.no_aging, self.certified.get("no_aging")),
                    "noise_only": self.noise_only,
                },
                "kkt": sol["kkt"],
            }
        )
        if self.comparison is not None:
            out["comparison"] = self.comparison
        out.update(self.extra)
        if self.guarantee_args is not None:  # the guarantee stated first (policyopt.studies.guarantee.apply_guarantee)
            from policyopt.studies.guarantee import apply_guarantee

            apply_guarantee(out, **self.guarantee_args)
        out = json_clean(out)
        if self.empirical_fields is not None:  # the design against the data's Δ̃(t) band (design_schedule(empirical=))
            e = dict(self.empirical_fields)
            out["model"]["max_tv_source"] = e.pop("max_tv_source")
            out.update(e)
        return out

    @property
    def peak_risk(self) -> float | None:
        """Peak age-dependent risk ε* (nats) of the chosen schedule (eq. (30)); ``None`` without a schedule."""
        return self.solution.objective

    @property
    def status(self) -> str:
        """``optimal``, ``unbounded``, ``feasible``, ``infeasible`` or ``unknown`` (see the JSON contract)."""
        return self.solution.status.value

    def __str__(self) -> str:
        """The text ``policyopt schedule`` prints (:func:`~policyopt.studies.schedule_text.format_report`), without the
        command's plain-words explanation and posterior checks (:mod:`policyopt.studies.deployment`), which it adds to the report."""
        return format_report(self.to_dict())

    def _repr_html_(self) -> str:
        """A small HTML table for notebooks: the schedule, its risk and penalty, and both benchmarks."""
        from html import escape

        r = self.to_dict()
        m = r["model"]
        unit = f" {m['penalty_unit']}" if m.get("penalty_unit") else ""
        na, no = r["benchmarks"]["no_aging"], r["benchmarks"]["noise_only"]
        rows = [
            ("model", f"{m.get('source') or 'population given in Python'}; {fmt_count(m['users'], 'user')}"
                      + ("" if m.get("states") is None else f", {fmt_count(m['states'], 'state')}")),
            ("status", r["status"]),
            ("A (slots)", fmt_value(r["A"], 10)),
            ("S̄ (slots)", fmt_value(r["S_bar"], 10)),
            ("ε_C (nats per release)", fmt_value(r["epsilon_c"], 10)),
            ("peak risk ε* (nats)", fmt_upper(r["peak_risk"])),
            (f"penalty (≤ f̄ = {fmt_value(r['max_penalty'])}{unit})", f"{fmt_value(r['penalty'])}{unit}"),
            ("peak AoI (slots)", fmt_value(r["peak_aoi"])),
            ("no aging (A = 0): ε*", f"{fmt_upper(na['peak_risk'])} ({na['status']})"),
            (f"noise only: risk after {fmt_count(no['releases'], 'release')}", fmt_upper(no["risk_after_releases"])),
            ("method", f"{r['method']} ({r['backend']})"),
            ("message", r["message"]),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>{escape(str(v))}</td></tr>"
            for k, v in rows
        )
        return f"<table class='policyopt-report'>{body}</table>"


METHODS = ("exact", "heuristic", "cvxpy", "pyomo")


def geometric_problem(population: Population, penalty: MSEPenalty, max_penalty: float, A_max: int, S_max: int, *, relax: bool):
    """Problem (39) for a population: (c, ρ) from its envelope over max(A_max, S_max) slots.

    The continuous penalty is the two-state closed form (49) for a single two-state chain with
    values ±1 and 0 < 1 − p − q < 1, else the interpolated running-max MSE table
    (:class:`~policyopt.utility.continuous_penalty.TableMSE`), which is ≥ the exact epoch penalty at integer ages.
    A penalty that is not an :class:`~policyopt.utility.penalty.MSEPenalty` (e.g. the failure rate) is
    wrapped in :class:`~policyopt.utility.continuous_penalty.StepPenalty` (running max over ages, non-smooth: the
    cvxpy back end refuses it; :exc:`InvalidInputError` if it is not proven monotone in ε_C).

    Returns
    -------
    policyopt.problems.PeakRiskProblem
    """
    from policyopt.utility.continuous_penalty import StepPenalty, TableMSE, TwoStateMSE
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
        plain = penalty.users == population.n_users and penalty.value_range == (-1.0, 1.0)  # (49)'s deployment
        if plain and list(chain.state_values) == [-1.0, 1.0] and 0.0 < 1.0 - p - q < 1.0:
            cont = TwoStateMSE(p, q, population.n_users)
    if cont is None:
        cont = TableMSE(penalty, A_max + S_max + 1)
    rho = env.rho if env.rho > 0 else 1e-300
    return PeakRiskProblem(env.c, rho, cont, max_penalty, A_max=A_max, S_max=S_max, integer=not relax)


def _row(name: str, sol: Solution | None, note: str = "", log_max_tv=None) -> dict:
    if sol is None:
        return {"method": name, "status": "unavailable", "objective": None, "bound": None, "gap": None,
                "wall_time_s": None, "kkt_residual": None, "A": None, "S_bar": None, "epsilon_c": None, "message": note}
    d = sol.decision or {}
    kkt = sol.kkt or {}
    residuals = [v for k, v in kkt.items() if k not in ("tolerance", "passed", "branch") and isinstance(v, (int, float)) and v is not None]
    objective = round_up(sol.objective) if log_max_tv is None else certify_peak_risk(sol, log_max_tv)["peak_risk"]
    return {
        "method": name,
        "status": sol.status.value,
        "objective": objective,
        "bound": round_down(sol.bound),  # a lower bound: rounded down (formatting module notes)
        "gap": sol.gap,
        "wall_time_s": sol.wall_time_s,
        "kkt_residual": max(residuals) if residuals else None,
        "kkt_branch": kkt.get("branch"),
        "A": d.get("A"),
        "S_bar": d.get("S_bar"),
        "epsilon_c": d.get("epsilon_c"),
        "message": note or sol.message,
    }


def _envelope_log(geometric):
    """t ↦ ln(c ρ^t), the envelope of problem (39) (ln c for t = 0)."""
    import math

    log_c = math.log(geometric.c)
    log_rho = math.log(geometric.rho) if geometric.rho > 0 else -math.inf
    return lambda t: log_c + (t * log_rho if t > 0 else 0.0)


def compare_methods(exact_solution: Solution, geometric, *, relax: bool, exact_log_max_tv=None) -> tuple[list, dict]:
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

    rows = [_row("exact (exact Δ, integer)", exact_solution, log_max_tv=exact_log_max_tv)]
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
        rows.append(_row(label, sol, log_max_tv=_envelope_log(geometric)))
    return rows, sols


def _check_design_options(method: str, relax: bool, privacy: str, horizon) -> None:
    """Refuse a method, relaxation or privacy target :func:`design_schedule` cannot combine (see its Raises)."""
    if method not in METHODS + ("all",):
        raise InvalidInputError(f"unknown `method` {fmt(method)}; choose one of {list(METHODS + ('all',))}")
    if method == "cvxpy" and not relax:
        raise InvalidInputError(
            "method 'cvxpy' solves the continuous relaxation of (39) only: add `relax` (--relax), "
            "or use 'exact' or 'heuristic' for integer A and S̄"
        )
    if relax and method == "exact":
        raise InvalidInputError("`relax` applies to the (39) back ends (heuristic, cvxpy, pyomo, all), not to the exact solver")
    if privacy not in ("model-based", "model-free"):
        raise InvalidInputError(f"`privacy` must be 'model-based' or 'model-free', got {fmt(privacy)}")
    if privacy == "model-free" and (method != "exact" or horizon is None):
        raise InvalidInputError("`privacy`='model-free' designs by exact enumeration over a horizon: use method 'exact' "
                                f"and give `horizon` (slots); got method {method!r}, horizon {horizon!r}")


def _mse_fields(model: dict, extra: dict, penalty: MSEPenalty, population, chains, solution: Solution,
                horizon: int) -> None:
    """The report's fields of an MSE penalty: sensitivity, value range, the deployment in words, the staleness
    profile and, for the readings' penalty, its record and its comparison with the chains' MSE (into `model` and
    `extra`)."""
    pilot_users = population.n_users
    model["sensitivity"] = penalty.sensitivity
    model["staleness_limit"] = penalty.staleness_limit
    model["value_range"] = list(penalty.value_range)
    model["value_range_declared"] = penalty.value_range_declared
    model["value_range_source"] = "declared" if penalty.value_range_declared else None  # model_info may say more
    moments = getattr(penalty, "moments", None)
    other_source = chains is not None and chains is not population  # e.g. the data's band, the chains given apart
    delta = ("Δ(t) from the source given, not the pilot chains (model.max_tv_source says which)" if other_source
             else "Δ(t) is the maximum over the pilot chains (eq. 12)")
    model["deployment"] = (
        f"{fmt_count(penalty.users, 'user')} drawn like the {fmt_count(moments.n_users, 'user')} of the readings; "
        f"MSE from the readings (cross + (self − cross)/I, worst phase); {delta}"
        if moments is not None else
        f"{fmt_count(penalty.users, 'independent user')}, each following one of the "
        f"{fmt_count(pilot_users, 'pilot chain')} in equal shares; {delta}"
    )
    model["staleness_profile"] = staleness_profile(penalty, population, horizon)
    if getattr(penalty, "moments", None) is not None:
        from policyopt.studies.deployment import penalty_comparison

        model["readings_penalty"] = {
            "design": penalty.design, "design_requested": penalty.design_requested,
            "design_reason": penalty.design_reason, "level": penalty.level, "phase_period": penalty.moments.phase_period,
            "readings_users": penalty.moments.n_users, "slots": penalty.moments.slots,
            "clipped_readings": penalty.moments.clipped, "bootstrap": penalty.bootstrap_info(),
            "terms": {str(a): {k: v for k, v in penalty.summary(a).items() if k in ("self", "cross")}
                      for a in (1, 3, 8) if a <= penalty.max_age},
        }
        d = solution.decision or {}
        if d.get("A") is not None and float(d["A"]).is_integer() and float(d["S_bar"]).is_integer():
            extra["penalty_comparison"] = penalty_comparison(
                penalty, population if chains is None else chains, int(d["A"]), int(d["S_bar"]))


def design_schedule(
    population: Population,
    *,
    max_penalty: float | None = None,
    A_max: int = 168,
    S_max: int = 168,
    penalty: Penalty | None = None,
    releases: int = 24,
    model_info: dict | None = None,
    method: str = "exact",
    relax: bool = False,
    data=None,
    users: int | None = None,
    value_range=None,
    phase_period: int | None = None,
    chains: Population | None = None,
    privacy: str = "model-based",
    horizon: int | None = None,
    delta: float | None = None,
    verdict: tuple | str | None = "assumed",
    empirical=None,
    horizon_design: bool = True,
) -> ScheduleReport:
    """Optimal stationary schedule (A, S̄, ε_C) for a population, with both benchmarks.

    Parameters
    ----------
    population : Population or MaxTVSource
        Users' chains (with numeric state values for the MSE penalty), or another Δ(t) source
        such as :class:`~policyopt.models.ar1.AR1Model` (then `penalty` is required).
    max_penalty : float, optional
        f̄ (penalty units, e.g. kWh² for the MSE of a kWh mean).  Default: the geometric midpoint
        √(low·high) of the trade-off range (:func:`~policyopt.studies.deployment.default_max_penalty`).
    A_max, S_max : int
        Search box (slots).
    penalty : Penalty, optional
        Default with `data`: the readings penalty
        :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` (I = `users`, worst phase of
        `phase_period`); without: :class:`MSEPenalty` of the mean over the population's own users.  For a deployment of
        I users modelled by pilot chains pass ``MSEPenalty(population, users=I, value_range=(LO, HI))``:
        Δ(t) stays the maximum over the pilot chains, the penalty is that of the I-user mean.
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
    data : pandas.DataFrame, optional
        Readings (columns user, time, value) for the default readings penalty (``design="auto"`` of
        :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty`: its bootstrap band's upper end when the band
        reaches 0 at some age, else the point estimate, as ``policyopt schedule``); ignored with `penalty`.
    users : int, optional
        Deployment size I of the readings penalty (default: the readings' users).
    value_range : (float, float), optional
        Public range the readings are clipped into (default: their own range, not private).
    phase_period : int, optional
        Slots per cycle of the readings penalty (24 for hourly readings); default one phase.
    chains : Population, optional
        The pilot chains when `population` is another Δ(t) source (the data's band of ``--max-tv empirical``, a
        posterior band): a readings penalty is still compared with their chain MSE, eqs. (48)–(49)
        (``penalty_comparison``), and ``model.deployment`` says Δ(t) is not theirs.  Default: `population` (when it
        is a Population).
    privacy : {"model-based", "model-free"}
        What the design minimises: the peak age-dependent risk ε* of eq. (30) under `population`'s Δ(t) (default), or
        the (ε, δ) of each user's whole series over `horizon` slots, whatever the correlation
        (:class:`~policyopt.problems.model_free.ModelFreeProblem`, exact method only); the model-free design's ε* under
        `population` is still evaluated (``peak_risk``; ``None`` where condition (31) fails) and its model-free
        objective is ``model_free_design``.
    horizon : int, optional
        H (slots) of the model-free design (required with ``privacy="model-free"``).
    delta : float, optional
        δ of the model-free design and guarantee (default :func:`policyopt.privacy.model_free.default_delta` of the
        deployment's I).
    verdict : (str, str, str) or "assumed" or None
        The Markov model the design's Δ(t) rests on, its verdict (``passed``, ``refuted``, ``assumed``,
        ``unchecked``) and why, for the guarantee the report states first
        (:func:`policyopt.studies.guarantee.apply_guarantee`; the model-free guarantee over `horizon` slots, default
        8760).  Default ``"assumed"``: the Δ(t) source is the caller's assumption ("the given chain", "the given
        chains" or "the given Δ(t) source"): :func:`design_schedule` checks no model against data (``policyopt
        schedule`` does, and passes its verdict).  ``None``: no guarantee fields.
    empirical : policyopt.studies.empirical_design.EmpiricalDesign, optional
        The data's Δ̃(t) band the design is against (``--max-tv empirical``; `population` is then its ``source``): the
        report gets ``empirical_max_tv``, ``model.max_tv_source`` and ``horizon_design``, the Theorem 3 design over
        the band's horizon when no schedule has a finite ε* (:func:`~policyopt.studies.empirical_design.add_empirical_design`,
        problem (H1)–(H2) of :mod:`policyopt.problems.horizon`) — unless `horizon_design` is false (the caller found
        the first-order premise refuted and designs the horizon model-free).
    horizon_design : bool
        With `empirical`: run the Theorem 3 horizon design when no finite ε* exists (default).

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
    Zhang et al. (2024): (28), Theorem 4, (30)–(31), (38), (39), (42).
    """
    from policyopt.problems import ScheduleProblem

    _check_design_options(method, relax, privacy, horizon)
    mf_horizon, mf_delta = horizon, delta  # `horizon` below is the envelope's
    start = time.perf_counter()
    if penalty is None and data is not None:
        from policyopt.utility.readings_penalty import ReadingsMSEPenalty

        penalty = ReadingsMSEPenalty.from_readings(data, A_max + S_max + 1, users=users, value_range=value_range,
                                                   phase_period=phase_period, design="auto")
    if penalty is None:
        if not isinstance(population, Population):
            raise InvalidInputError(
                f"`penalty` is required when `population` is not a Population (got {fmt(population)}); "
                "e.g. policyopt.utility.ar1_penalty.AR1MSEPenalty(model)"
            )
        penalty = MSEPenalty(population)
    from policyopt.studies.deployment import default_max_penalty, tradeoff_range

    max_penalty_source = "given"
    if max_penalty is None:  # the trade-off range first (it does not depend on f̄), then f̄ inside it
        probe = ScheduleProblem(population, penalty, 1.0, A_max=A_max, S_max=S_max)
        low0, high0 = tradeoff_range(probe)
        max_penalty = default_max_penalty(low0, high0)
        max_penalty_source = ("default: the staleness limit (no budget meets condition (31) in the box)"
                              if not math.isfinite(low0) else
                              "default: geometric midpoint √(low·high) of the trade-off range" if low0 < high0 else
                              "default: twice the smallest reachable MSE (no trade-off range: low ≥ high)")
    problem = ScheduleProblem(population, penalty, max_penalty, A_max=A_max, S_max=S_max)
    exact = problem.solve(method="exact")
    no_aging = problem.restrict(A_max=0).solve(method="exact")
    noise_only = noise_only_benchmark(penalty, problem.max_penalty, releases)
    horizon = max(problem.A_max, problem.S_max)
    env = population.envelope(horizon)
    comparison = None
    solution = exact
    table = problem.log_max_tv_table

    def exact_log(t):
        """ln Δ(t) from the exact problem's table (t whole slots)."""
        return table[int(t)]

    solution_log = exact_log
    extra: dict = {"privacy": privacy}
    if privacy == "model-free":
        solution, extra["model_free_design"] = _model_free_solution(problem, penalty, mf_horizon, mf_delta)
    if method != "exact":
        geo = geometric_problem(population, penalty, problem.max_penalty, problem.A_max, problem.S_max, relax=relax)
        if method == "all":
            comparison, _ = compare_methods(exact, geo, relax=relax, exact_log_max_tv=exact_log)
        else:
            solution = geo.solve(method=method)
            solution_log = _envelope_log(geo)
            if relax and solution.decision is not None:
                near = nearest_integer_schedules(problem, float(solution.decision["A"]), float(solution.decision["S_bar"]))
                extra["relaxed"] = True
                extra["message"] = ("continuous relaxation of (39): A, S_bar, epsilon_c and peak_risk are a bound, not a "
                                    "deployable schedule; `deployable` is the best integer neighbour with its exact "
                                    f"risk (eq. (30)); {solution.message}")
                extra["deployable"] = near["best"]
                extra["deployable_neighbours"] = near["neighbours"]
    certified = {"solution": certify_peak_risk(solution, solution_log), "no_aging": certify_peak_risk(no_aging, exact_log)}
    extra["max_penalty_source"] = max_penalty_source
    low, high = tradeoff_range(problem)
    pilot_users = population.n_users
    model = {
        "users": penalty.users if isinstance(penalty, MSEPenalty) else pilot_users,
        "pilot_users": pilot_users,
        "states": max(c.n_states for c in population.chains) if isinstance(population, Population) else None,
        "c": env.c,
        "rho": env.rho,
        "envelope_horizon": env.horizon,
        "lambda_star": population.spectral_rate,
        "penalty": penalty.name,
        "penalty_unit": getattr(penalty, "unit", ""),
    }
    model["tradeoff_range"] = [low, high]
    if isinstance(penalty, MSEPenalty):
        _mse_fields(model, extra, penalty, population, chains, solution, horizon)
    elif hasattr(penalty, "sensitivity"):
        model["sensitivity"] = penalty.sensitivity
    model.update(model_info or {})
    gargs = None
    if verdict is not None:
        from policyopt.privacy.model_free import default_delta
        from policyopt.studies.guarantee import UNKNOWN_SLOT_HORIZON, default_windows

        if verdict == "assumed":
            chains = population.chains if isinstance(population, Population) else None
            name = ("the given Δ(t) source" if chains is None else
                    "the given chain" if len(chains) == 1 else "the given chains")
            verdict = (name, "assumed", "given by the caller, not checked against data here")
        name, kind, why = verdict
        gargs = {"model": name, "verdict": kind, "why": why,
                 "horizon": UNKNOWN_SLOT_HORIZON if mf_horizon is None else int(mf_horizon),
                 "delta": default_delta(int(model["users"])) if mf_delta is None else float(mf_delta),
                 "windows": default_windows(None)}
    report = ScheduleReport(
        solution=solution,
        no_aging=no_aging,
        noise_only=noise_only,
        model=model,
        wall_time_s=time.perf_counter() - start,
        comparison=comparison,
        certified=certified,
        extra=extra,
        guarantee_args=gargs,
    )
    if empirical is None:
        return report
    from dataclasses import replace

    from policyopt.studies.empirical_design import add_empirical_design

    fields = add_empirical_design(report.to_dict(), empirical, penalty, max_penalty, A_max, S_max,
                                  horizon_design=horizon_design)
    return replace(report, wall_time_s=time.perf_counter() - start,
                   empirical_fields={"max_tv_source": fields["model"]["max_tv_source"],
                                     **{k: fields[k] for k in ("empirical_max_tv", "horizon_design")}})


def _model_free_solution(problem, penalty, horizon: int, delta: float | None) -> tuple[Solution, dict]:
    """The model-free design (:class:`~policyopt.problems.model_free.ModelFreeProblem`) of `problem`'s penalty, f̄ and
    box, as a schedule solution whose objective is its ε* of eq. (30) under `problem`'s Δ(t) (``None`` where (31)
    fails), and the model-free objective (``model_free_design``: ε at δ over the horizon, pure ε, releases)."""
    from policyopt.privacy.model_free import default_delta
    from policyopt.problems.model_free import ModelFreeProblem

    users = penalty.users if isinstance(penalty, MSEPenalty) else problem.population.n_users
    d = default_delta(users) if delta is None else delta
    mf = ModelFreeProblem(penalty, problem.max_penalty, horizon=int(horizon), delta=d, A_max=problem.A_max,
                          S_max=problem.S_max).solve()
    info = {"objective": "(ε, δ) of each user's whole series over the horizon (model-free)", "status": mf.status.value,
            "epsilon": mf.objective, "epsilon_pure": mf.values.get("epsilon_pure"), "delta": d, "horizon": int(horizon),
            "releases": mf.values.get("releases"), "message": mf.message}
    if mf.decision is None:
        return mf, info
    A, S, eps = int(mf.decision["A"]), int(mf.decision["S_bar"]), float(mf.decision["epsilon_c"])
    ev = problem.evaluate(A, S, eps)
    values = {"penalty": ev.penalty, "peak_aoi": ev.peak_aoi, "max_penalty": problem.max_penalty,
              "condition_31": ev.condition_31}
    sol = Solution(status=mf.status, termination=mf.termination, decision=mf.decision, objective=ev.peak_risk,
                   bound=None, method="model-free", backend=mf.backend, backend_version=mf.backend_version,
                   wall_time_s=mf.wall_time_s, message=mf.message, values=values, objective_name="peak_risk")
    return sol, info


def _schedule_head(report) -> str:
    """One line for ``repr(ScheduleReport)``: status, schedule and ε* (rounded up)."""
    s = report.solution
    if not s.decision:
        return f"{s.status.value}: no schedule; print(report) for the full text"
    d = s.decision
    return (f"{s.status.value}: A = {summarize(d.get('A'))}, S̄ = {summarize(d.get('S_bar'))}, ε_C = "
            f"{summarize(d.get('epsilon_c'))}, ε* = {fmt_upper(s.objective)} nats; print(report) for the full text")
