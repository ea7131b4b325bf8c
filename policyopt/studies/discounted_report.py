"""The discounted-DP job and its report: what ``policyopt discounted`` prints, as a Python object.

Source: F. Farokhi, "Temporally Discounted Differential Privacy for Evolving Datasets on an Infinite Horizon",
ACM/IEEE ICCPS, 2020: Corollaries 8, 12 and (corrected) 16, the discounted loss of Definitions 3–4.

:func:`design_discounted` builds the Laplace scales b_1..b_T for the daily mean of the homes' consumption
(corollary schedule, the corollaries as printed, or the schedule of least total variance), certifies the worst
discounted privacy loss with the direct sum (an upper bound, rounded up when printed) and the expected relative
error on the data; :class:`DiscountedReport` holds the result.  ``str(report)`` is exactly the text of
``policyopt discounted`` and ``report.to_dict()`` exactly its ``--json`` object.  Privacy in nats, one slot =
one day.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import check_text, fmt_count, fmt_upper, fmt_value, json_clean, round_down
from policyopt.studies.citylearn import DEFAULT_DAILY_CLIP
from policyopt.result import result_repr

__all__ = ["DiscountedReport", "design_discounted", "format_discounted_report", "NOTIONS", "SCHEDULES", "SOLVERS"]

NOTIONS = ("dp", "exponential", "hyperbolic")
SCHEDULES = ("corollary", "optimal", "paper")
SOLVERS = ("auto", "cvxpy", "dual")
#: ``solver="auto"`` uses the dual back end for hyperbolic horizons above this.
AUTO_DUAL_FROM_T = 1000


@dataclass(frozen=True)
class DiscountedReport:
    """Everything ``policyopt discounted`` prints.

    Attributes
    ----------
    fields : dict
        The JSON object of ``policyopt discounted --json`` (see :meth:`to_dict`): ``notion``, ``epsilon``,
        ``alpha``, ``beta``, ``horizon``, ``schedule_kind``, ``source``, ``clip``, ``clipped_values``,
        ``sensitivity`` (kWh), ``schedule`` (b_t, kWh, length T), ``worst_discounted_loss`` (nats, computed),
        ``worst_t``, ``holds``, ``holds_until``, ``accounting_method``, ``total_variance`` (kWh²),
        ``expected_relative_error``; with ``schedule_kind="optimal"`` also ``solver``, ``status``, ``message``,
        ``objective``, ``bound`` (a lower bound on the least total variance, rounded down), ``relative_gap``,
        ``kkt``, ``corollary_total_variance``, ``savings_vs_corollary``; then ``warnings`` and ``wall_time_s``.
    solution : Solution or None
        The optimal schedule's solver result (``schedule_kind="optimal"`` only).
    """

    fields: dict
    solution: object = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        r = self.fields
        return result_repr(self, head=f"{r.get('notion')}: worst discounted loss "
                           f"{fmt_upper(r.get('worst_discounted_loss'))} nats (rounded up) over {r.get('horizon')} "
                           "releases; print(report) for the full text")

    def to_dict(self) -> dict:
        """The ``--json`` object (a deep copy; strict JSON: non-finite floats become null)."""
        return json_clean(copy.deepcopy(self.fields))

    @property
    def worst_discounted_loss(self) -> float:
        """max_t of the certified discounted loss (nats): an upper bound on the worst loss up to T."""
        return self.fields["worst_discounted_loss"]

    @property
    def warnings(self) -> list:
        """Warnings the command prints on stderr (a guarantee that fails, days without data)."""
        return list(self.fields["warnings"])

    def __str__(self) -> str:
        """The text ``policyopt discounted`` prints (:func:`format_discounted_report`)."""
        return format_discounted_report(self.fields)

    def _repr_html_(self) -> str:
        """A small HTML table for notebooks: the notion, the schedule's ends, the worst loss (rounded up)."""
        from html import escape

        r = self.fields
        b = r["schedule"]
        ere = r["expected_relative_error"]
        rows = [
            ("notion", f"{r['notion']} (ε = {fmt_value(r['epsilon'])} nats)"),
            ("schedule", f"{r['schedule_kind']}: b_1 = {fmt_value(b[0])}, b_T = {fmt_value(b[-1])} kWh over "
                         f"{fmt_count(r['horizon'], 'day')}"),
            ("worst discounted loss (nats, upper bound)",
             f"{fmt_upper(r['worst_discounted_loss'], 12)} at slot {r['worst_t']}"),
            ("guarantee", "holds at every slot" if r["holds"] else f"holds up to slot {r['holds_until']} only"),
            ("total variance (kWh²)", fmt_value(r["total_variance"])),
            ("average relative error", fmt_value(ere["average"])),
            ("data", r["source"]),
        ]
        if "status" in r:
            rows.append(("status", f"{r['status']} ({r['solver']})"))
        body = "".join(
            f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>{escape(str(v))}</td></tr>"
            for k, v in rows
        )
        return f"<table class='policyopt-discounted'>{body}</table>"


def _parameter(notion, alpha, beta, schedule) -> dict:
    """The notion's keyword (alpha/beta) after checking that the right one was given (Python argument names)."""
    if notion == "dp":
        if alpha is not None or beta is not None:
            raise InvalidInputError(f"`notion`='dp' takes neither `alpha` nor `beta`, got alpha={fmt(alpha)}, "
                                    f"beta={fmt(beta)}")
        return {}
    if notion == "exponential":
        if beta is not None or alpha is None:
            raise InvalidInputError(f"`notion`='exponential' takes `alpha` in (0, 1) and no `beta`, got alpha={fmt(alpha)}, "
                                    f"beta={fmt(beta)}")
        if not (0 < alpha < 1 or (alpha == 1 and schedule == "optimal")):
            raise InvalidInputError(f"`alpha` must be in (0, 1) ((0, 1] with schedule='optimal'), got {fmt(alpha)}")
        return {"alpha": float(alpha)}
    if alpha is not None or beta is None:
        raise InvalidInputError(f"`notion`='hyperbolic' takes `beta` > 0 and no `alpha`, got alpha={fmt(alpha)}, "
                                f"beta={fmt(beta)}")
    return {"beta": float(beta)}


def design_discounted(notion: str, epsilon: float, horizon: int, *, alpha: float | None = None,
                      beta: float | None = None, schedule: str = "corollary", solver: str = "auto", data=None,
                      clip: float = DEFAULT_DAILY_CLIP, source: str | None = None) -> DiscountedReport:
    """Laplace scales b_1..b_T for the homes' daily mean under ε-DP or discounted DP, reported as the CLI does.

    Parameters
    ----------
    notion : {"dp", "exponential", "hyperbolic"}
        ε-DP (Σ ρ(k) ≤ ε), (ε, α)-exponentially (Σ α^(t−k) ρ(k) ≤ ε) or (ε, β)-hyperbolically
        (Σ ρ(k)/(1 + β(t−k)) ≤ ε) discounted DP.
    epsilon : float
        Budget ε > 0, nats.
    horizon : int
        T ≥ 1, number of releases (days).
    alpha, beta : float, optional, keyword-only
        Discount factor α ∈ (0, 1) (exponential; α = 1 allowed with ``schedule="optimal"``) or discounting
        coefficient β > 0 (hyperbolic).
    schedule : {"corollary", "optimal", "paper"}, keyword-only
        Corollaries 8 / 12 / corrected 16 (default), least total variance, or the corollaries exactly as
        printed (a failing guarantee is reported in :attr:`DiscountedReport.warnings`).
    solver : {"auto", "cvxpy", "dual"}, keyword-only
        Back end of ``schedule="optimal"``; ``auto`` is the dual one for hyperbolic T > 1000, else cvxpy.
    data : pandas.DataFrame, optional, keyword-only
        Long readings ``user, time, value`` (hourly kWh); the bundled CityLearn 2022 data by default.
    clip : float, keyword-only
        Clip bound per home and day, kWh; Δf = clip / homes.
    source : str, optional, keyword-only
        How the report names the data, followed by the number of homes (the CLI passes ``"data FILE"``;
        default ``"bundled CityLearn 2022"`` or ``"data given in Python"``).

    Returns
    -------
    DiscountedReport

    Raises
    ------
    InvalidInputError
        If `notion`, `schedule` or `solver` is unknown, `alpha`/`beta` does not match `notion`, `solver` is
        given without ``schedule="optimal"``, the optimal schedule cannot be computed, or as
        :func:`~policyopt.studies.citylearn.daily_means` and the schedule functions (bad `epsilon`, `horizon`,
        `clip`, data).

    References
    ----------
    F. Farokhi, "Temporally Discounted Differential Privacy for Evolving Datasets on an Infinite Horizon",
    ACM/IEEE ICCPS, 2020, Corollaries 8, 12, 16.

    Examples
    --------
    >>> report = design_discounted("exponential", 1.0, 30, alpha=0.9)
    >>> report.to_dict()["holds"]
    True
    """
    from policyopt.privacy.discounted import discounted_loss, expected_relative_error, total_variance
    from policyopt.privacy.discounted_schedules import corollary_schedule
    from policyopt.studies.citylearn import daily_means

    start = time.perf_counter()
    for name, value, allowed in (("notion", notion, NOTIONS), ("schedule", schedule, SCHEDULES),
                                 ("solver", solver, SOLVERS)):
        if value not in allowed:
            raise InvalidInputError(f"`{name}` must be one of {allowed}, got {fmt(value)}")
    par = _parameter(notion, alpha, beta, schedule)
    if schedule != "optimal" and solver != "auto":
        raise InvalidInputError(f"`solver`={solver!r} applies to schedule='optimal' only, got schedule={schedule!r}")
    T = horizon
    if schedule == "optimal" and solver == "auto":
        solver = "dual" if notion == "hyperbolic" and T > AUTO_DUAL_FROM_T else "cvxpy"
    days = daily_means(data, clip)
    if source is None:
        source = "bundled CityLearn 2022" if data is None else "data given in Python"
    source = f"{source}, {fmt_count(days.n_users, 'home')}, {fmt_count(days.values.size, 'day')} of 24 hourly readings, daily kWh"
    d = days.sensitivity
    warnings = []
    out = {
        "notion": notion,
        "epsilon": epsilon,
        "alpha": par.get("alpha"),
        "beta": par.get("beta"),
        "horizon": T,
        "schedule_kind": schedule,
        "source": source,
        "clip": days.clip,
        "clipped_values": days.clipped,
        "sensitivity": d,
    }
    solution = None
    if schedule == "optimal":
        from policyopt.problems.discounted import DiscountedScheduleProblem

        solution = DiscountedScheduleProblem(notion, epsilon, T, sensitivity=d, **par).solve(method=solver)
        if solution.decision is None:
            raise InvalidInputError(f"the optimal schedule could not be computed: {solution.message}")
        b = np.asarray(solution.decision["schedule"], dtype=float)
    else:
        b = corollary_schedule(notion, epsilon, T, sensitivity=d, variant=schedule, **par)
    loss = discounted_loss(b, d, notion, method="direct", **par)  # certified error bound (never the FFT)
    holds_until = loss.holds_until(epsilon)
    if holds_until < T:
        warnings.append(
            f"the {schedule} schedule violates the guarantee: the discounted loss exceeds ε = {epsilon:g} "
            f"from slot {holds_until + 1} (worst {fmt_upper(loss.worst, 17)} nats at slot {loss.worst_t})"
            + (" — Corollary 16 as printed (eq. 14) is invalid; use --schedule corollary"
               if notion == "hyperbolic" and schedule == "paper" else
               " — eq. (8)/(11) as printed reach ε in the limit and rounding puts them a few ulps above it"
               if schedule == "paper" else "")
        )
    n = min(T, days.values.size)
    with np.errstate(over="ignore"):  # a tiny β (e.g. 1e-320) gives scales ~1e160, whose squares overflow
        err = expected_relative_error(b[:n], days.values[:n])
        variance = total_variance(b)
    if not math.isfinite(variance):
        warnings.append("the total noise variance 2·Σ b_k² overflows a float (> 1.8e308), so `total_variance` is null: "
                        "the noise scales are astronomically large (a discount rate near 0 is hardly discounting)")
    out.update(
        schedule=b.tolist(),
        worst_discounted_loss=loss.worst,
        worst_t=loss.worst_t,
        holds=holds_until == T,
        holds_until=holds_until,
        accounting_method=loss.method,
        total_variance=variance,
        expected_relative_error={
            "days": n,
            "data_days": int(days.values.size),
            "average": float(err.mean()),
            "first_day": float(err[0]),
            "last_day": float(err[-1]),
            "per_day": err.tolist(),
        },
    )
    if T > days.values.size:
        warnings.append(f"the expected relative error covers the {days.values.size} days of data; slots "
                        f"{days.values.size + 1}..{T} have no data")
    if solution is not None:
        out.update(
            solver=solver,
            status=solution.status.value,
            message=solution.message,
            objective=solution.objective,
            bound=round_down(solution.bound),  # a lower bound on the least total variance: rounded down
            relative_gap=solution.relative_gap,
            kkt=dict(solution.kkt) if solution.kkt is not None else None,
            corollary_total_variance=solution.values.get("corollary_objective"),
            savings_vs_corollary=solution.values.get("savings_vs_corollary"),
        )
    out["warnings"] = warnings
    out["wall_time_s"] = time.perf_counter() - start
    return DiscountedReport(out, solution)


def format_discounted_report(r: dict) -> str:
    """The text of ``policyopt discounted`` for a report's fields (:attr:`DiscountedReport.fields`).

    The worst loss is printed rounded up to 12 significant digits (an upper bound); everything else with
    :func:`~policyopt.formatting.fmt_value`.

    Parameters
    ----------
    r : dict
        As :meth:`DiscountedReport.to_dict` returns.

    Returns
    -------
    str
        Lines separated by ``\\n``, no final newline.
    """
    par = {k: r[k] for k in ("alpha", "beta") if r.get(k) is not None}
    par_text = "" if not par else ", " + ", ".join(f"{k} = {fmt_value(v)}" for k, v in par.items())
    ere = r["expected_relative_error"]
    b, T = r["schedule"], r["horizon"]
    lines = [
        f"policyopt discounted: {r['notion']} (ε = {fmt_value(r['epsilon'])} nats{par_text}), {fmt_count(T, 'release')}, "
        f"{r['schedule_kind']} schedule (Farokhi 2020)",
        f"data       : {r['source']}; clip {fmt_value(r['clip'])} kWh per home and day ({r['clipped_values']} values "
        f"clipped), Δf = {fmt_value(r['sensitivity'])} kWh",
        "schedule   : " + ", ".join(f"b_{t + 1} = {fmt_value(b[t])}" for t in sorted({0, T // 2, T - 1})) + " kWh",
        f"worst loss : {fmt_upper(r['worst_discounted_loss'], 12)} nats at slot {r['worst_t']} (upper bound; "
        + ("holds at every slot" if r["holds"] else f"holds up to slot {r['holds_until']} only") + ")",
        f"variance   : Σ 2 b_t² = {fmt_value(r['total_variance'])} kWh²",
        f"rel. error : average {fmt_value(ere['average'])} over {fmt_count(ere['days'], 'day')} (first {fmt_value(ere['first_day'])}, "
        f"last {fmt_value(ere['last_day'])})",
    ]
    if "status" in r:
        sav = r["savings_vs_corollary"]
        lines += [
            f"status     : {r['status']} (dual bound gap {fmt_value(r['relative_gap'], 3)}, KKT "
            f"{'passed' if r['kkt'] and r['kkt']['passed'] else 'not passed'})",
            "savings    : " + ("no corollary for this notion" if sav is None else
                               f"{100 * sav:.6g}% of the corollary schedule's total variance"),
        ]
    lines.append(f"wall time  : {r['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))
