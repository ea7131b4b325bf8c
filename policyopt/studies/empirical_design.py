"""Design a schedule against Δ(t) estimated from the data (``schedule --max-tv empirical``).

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2),
2024: Theorem 3 (eq. (25), the risk of a sequence of releases), Proposition 3 (eq. (30), its limit for an
equal-spacing schedule under condition (31)), problem (28).

The Δ(t) source is the upper edge U(t) of the simultaneous confidence band of
:func:`~policyopt.models.empirical.estimate_max_tv` for 1 ≤ t ≤ L (and Δ(0) = 1), made non-increasing over the ages
the search box uses by a running maximum from the right over 0..M, M = max(A_max + S_max − 1, max(A_max, S_max) + 1)
≤ L: Δ̃(t) = max_{t ≤ s ≤ M} U(s) ≥ U(t), and Δ̃(t) = 1 beyond M.  Theorem 3 looks Δ up at the ages
A..A + S̄ − 1 inside each epoch and at the gap S̄ between inputs, all ≤ M for every cell of the box, and its risk
increases with every Δ it uses, so any pointwise upper bound of Δ gives an upper bound of the risk; Δ̃ being
non-increasing on 0..M makes the epoch's risk peak at its publication, as eq. (30) and the exact solver assume.
The maximum runs over 0..M only, not over every estimated lag: lags beyond M are never used, and a band that reaches
1 at a long lag (a home too rare in a state there to make a claim) would otherwise make Δ̃ ≡ 1 at every age.
Nothing is assumed beyond L.

Δ estimated from data need not decay: if Δ̃(S̄)·e^{ε_C} ≥ 1 for every schedule meeting the MSE bound, the
infinite-horizon peak risk ε* of eq. (30) does not exist.  :func:`design_over_horizon` then designs for the
largest risk over a finite deployment horizon H (slots): with publications at S_n = A + (n − 1)·S̄ ≤ H (inputs at
slots (n − 1)·S̄), Theorem 3's recursion ε(τ_n) = ln(1 + Δ̃(S̄)(e^{ε_C + ε(τ_{n−1})} − 1)) grows with n, so the
largest risk over the horizon is the one at the last publication, ln(1 + Δ̃(A)(e^{ε_C + ε(τ_N)} − 1)),
N = ⌊(H − A)/S̄⌋ + 1.  That risk increases with ε_C and the penalty does not, so for each (A, S̄) the smallest
ε_C meeting f̄ is optimal; every (A, S̄) of the integer box is enumerated, which proves the optimum over the box.

What the numbers assume: Theorem 3 is proven for inputs that form a Markov chain on the publication grid; here
Δ̃ bounds the data's pairwise Δ(t) at the stated confidence, and the composition is Theorem 3's.  The design is
an upper bound *under that Δ bound* (statistical: level of the band), not under the fitted chains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, check_int
from policyopt.models.empirical import EmpiricalMaxTV
from policyopt.models.tabulated import TabulatedMaxTV

__all__ = [
    "box_last_age",
    "empirical_max_tv_table",
    "empirical_source",
    "design_over_horizon",
    "parse_max_tv_source",
    "estimate_up_to",
    "EmpiricalDesign",
    "empirical_design",
    "add_empirical_design",
]


def parse_max_tv_source(text: str, default_level: float = 0.95) -> tuple[str, float | None]:
    """``model`` → (``"model"``, None); ``empirical`` / ``empirical:LEVEL`` → (``"empirical"``, level).

    Raises
    ------
    InvalidInputError
        Anything else, or a LEVEL outside (0, 1).
    """
    kind, sep, rest = str(text).partition(":")
    if kind == "model" and not sep:
        return "model", None
    if kind == "empirical":
        if not sep:
            return "empirical", float(default_level)
        try:
            level = float(rest)
        except ValueError:
            level = math.nan
        if not 0.0 < level < 1.0:
            raise InvalidInputError(f"--max-tv empirical:LEVEL needs a LEVEL strictly between 0 and 1, got {text!r}")
        return "empirical", level
    raise InvalidInputError(f"--max-tv must be model, empirical or empirical:LEVEL, got {text!r}")


def estimate_up_to(fitted, readings, last_age: int, level: float, *, seed: int = 0,
                   what: str = "the schedule") -> tuple[EmpiricalMaxTV, int]:
    """Δ(t) estimated from `readings` on `fitted`'s quantile states for t ≤ L, L ≥ `last_age` (``--max-tv empirical``).

    L is :func:`~policyopt.models.empirical.default_max_lag` of the series' length T, raised to `last_age` when that
    is larger; the band is :func:`~policyopt.models.empirical.estimate_max_tv`'s at `level`.

    Parameters
    ----------
    fitted : policyopt.models.estimation.FittedModel
        Chains whose quantile states (and value range) the readings are mapped to.
    readings : pandas.DataFrame
        user, time, value.
    last_age : int
        Largest age (slots) the design or accounting looks Δ up at.
    level : float
        Level of the simultaneous band, in (0, 1).
    seed : int
        Seed of the block bootstrap.
    what : str
        What needs the ages, for the message.

    Returns
    -------
    (EmpiricalMaxTV, int)
        The estimate and T (slots).

    Raises
    ------
    InvalidInputError
        If `last_age` ≥ T (the data cannot tell Δ at that age).
    """
    from policyopt.models.empirical import default_max_lag, estimate_max_tv
    from policyopt.studies.check_model import data_states

    states, _ = data_states(readings, fitted)
    T = states.shape[1]
    if last_age >= T:
        raise InvalidInputError(f"{what} needs Δ(t) up to t = {int(last_age)} slots, beyond the data's {T} slots")
    L = max(default_max_lag(T), int(last_age))
    return estimate_max_tv(states, fitted.quantizer.n_states, L, level=level, seed=seed), T


def box_last_age(A_max: int, S_max: int) -> int:
    """M = max(A_max + S_max − 1, max(A_max, S_max) + 1): the largest age whose Δ a schedule of the box A ≤ A_max,
    S̄ ≤ S_max looks up (Theorem 3: the ages A..A + S̄ − 1 of an epoch and the gap S̄; eq. (30) and the exact solver
    one beyond max(A_max, S_max)); Δ̃ is tabulated and made non-increasing over 0..M."""
    return max(int(A_max) + int(S_max) - 1, max(int(A_max), int(S_max)) + 1)


def empirical_max_tv_table(est: EmpiricalMaxTV, last_age: int) -> np.ndarray:
    """Δ̃(0..last_age): 1 at 0, then the running maximum from the right of the band's upper edge over 1..last_age.

    Δ̃(t) = max_{t ≤ s ≤ last_age} U(s) ≥ U(t): non-increasing over the ages a design uses, and no larger than it has
    to be (lags beyond `last_age` are not looked at); a caller accounts Δ = 1 beyond `last_age`.

    Raises
    ------
    InvalidInputError
        If `last_age` > L (no claim is made beyond the estimated lags).
    """
    L = est.max_lag
    check_int(last_age, "last_age", 0)
    if last_age > L:
        raise InvalidInputError(
            f"the schedule box uses Δ(t) up to t = {int(last_age)} slots (A_max + S_max − 1) but Δ(t) was estimated for "
            f"t ≤ L = {L} only: lower --max-age/--max-interval or raise the estimated lags"
        )
    full = np.concatenate([[1.0], np.asarray(est.upper, dtype=float)])[: int(last_age) + 1]
    return np.maximum.accumulate(full[::-1])[::-1]  # non-increasing, ≥ the band at every lag ≤ last_age


def empirical_source(est: EmpiricalMaxTV, A_max: int, S_max: int) -> TabulatedMaxTV:
    """The Δ(t) source of the schedule problem: ln Δ̃(0..max(A_max + S_max − 1, max(A_max, S_max) + 1)).

    Raises
    ------
    InvalidInputError
        If the box needs ages beyond the estimated lags L.
    """
    last = box_last_age(A_max, S_max)
    table = empirical_max_tv_table(est, last)
    with np.errstate(divide="ignore"):
        logs = np.log(table)
    return TabulatedMaxTV(logs, est.n_users, 1.0)


def design_over_horizon(source: TabulatedMaxTV, penalty, max_penalty: float, A_max: int, S_max: int,
                        horizon: int) -> dict:
    """The schedule minimising the largest risk over `horizon` slots (Theorem 3): problem (H1)–(H2) of
    :mod:`policyopt.problems.horizon`, solved by enumeration of the box (:class:`policyopt.solvers.horizon.HorizonEnumeration`),
    as the report's dict.

    Parameters
    ----------
    source : TabulatedMaxTV
        Δ̃(t), non-increasing, tabulated at least to max(A_max, S_max).
    penalty : Penalty
        Utility penalty with ``min_epsilon_c_table``.
    max_penalty : float
        f̄.
    A_max, S_max : int
        Box (slots).
    horizon : int
        Last slot H of the deployment (≥ 1); publications at A + (n − 1)·S̄ ≤ H.

    Returns
    -------
    dict
        ``status`` (``optimal`` or ``infeasible``), ``A``, ``S_bar``, ``epsilon_c``, ``penalty`` (the largest penalty
        over the epoch's ages A..A + S̄ − 1, ≤ f̄), ``horizon_risk`` (nats, rounded up), ``releases`` (N), ``horizon``, ``enumerated`` (cells of the box), ``feasible_cells``, ``composition_check``
        (the chosen schedule's largest risk recomputed by :func:`policyopt.privacy.age_dependent.compose`),
        ``proof`` (what was enumerated and why it is optimal), ``accounting`` (``"theorem-3"``).

    Raises
    ------
    InvalidInputError
        Bad `horizon` or box.
    """
    from policyopt.problems.horizon import HorizonDesignProblem

    sol = HorizonDesignProblem(source, penalty, max_penalty, A_max=A_max, S_max=S_max, horizon=horizon).solve("exact")
    v = sol.values
    d = sol.decision or {}
    return {"status": sol.status.value, "A": d.get("A"), "S_bar": d.get("S_bar"), "epsilon_c": d.get("epsilon_c"),
            "penalty": v["penalty"], "horizon_risk": sol.objective, "releases": v["releases"], "horizon": v["horizon"],
            "enumerated": v["enumerated"], "feasible_cells": v["feasible_cells"],
            "composition_check": v["composition_check"], "proof": v["proof"], "accounting": "theorem-3"}


@dataclass(frozen=True)
class EmpiricalDesign:
    """Δ̃(t) estimated once from the data and what every design against it needs (``--max-tv empirical``).

    Built by :func:`empirical_design`; shared by ``schedule`` and by every point of ``sweep`` (and shipped to its
    Dask workers once).

    Attributes
    ----------
    estimate : EmpiricalMaxTV
        The direct estimate of Δ(t) for t ≤ L and its simultaneous band.
    source : TabulatedMaxTV
        Δ̃(0..max(A_max + S_max − 1, max(A_max, S_max) + 1)) of :func:`empirical_source`, the design's Δ(t).
    level : float
        Level of the band, in (0, 1).
    slots : int
        T, the data's length (slots).
    horizon : int
        H (slots) of :func:`design_over_horizon` when no schedule has a finite ε*: the one given, else T.
    """

    estimate: EmpiricalMaxTV
    source: TabulatedMaxTV
    level: float
    slots: int
    horizon: int

    @property
    def spec(self) -> str:
        """``empirical:LEVEL``: the ``max_tv_source`` of the deployment record and of a sweep row."""
        return f"empirical:{self.level:g}"


def empirical_design(fitted, readings, A_max: int, S_max: int, level: float, *, horizon: int | None = None,
                     seed: int = 0, what: str | None = None) -> EmpiricalDesign:
    """Estimate Δ(t) from `readings` once for the box A ≤ `A_max`, S̄ ≤ `S_max` (:func:`estimate_up_to`).

    Parameters
    ----------
    fitted : policyopt.models.estimation.FittedModel
        Chains whose quantile states the readings are mapped to.
    readings : pandas.DataFrame
        user, time, value.
    A_max, S_max : int
        The search box (slots); Δ is needed up to max(A_max + S_max − 1, max(A_max, S_max) + 1).
    level : float
        Level of the band, in (0, 1).
    horizon : int, optional
        H of the horizon design (slots); default the data's length T.
    seed : int
        Seed of the block bootstrap.
    what : str, optional
        The box in the words of its options, for the message when the data are too short (default ``--max-age A_max
        with --max-interval S_max``; ``publish`` names its schedule's ``--A``, ``--S-bar``).

    Returns
    -------
    EmpiricalDesign
        The one place the data's Δ̃(t) is built: ``schedule``, every ``sweep`` point, ``backtest``'s design on the
        training readings and ``publish --max-tv empirical`` (its schedule's A and S̄ as the box) use it.

    Raises
    ------
    InvalidInputError
        If the box needs ages at or beyond the data's length.
    """
    need = box_last_age(A_max, S_max)
    est, T = estimate_up_to(fitted, readings, need, level, seed=seed,
                            what=what or f"--max-age {int(A_max)} with --max-interval {int(S_max)}")
    return EmpiricalDesign(estimate=est, source=empirical_source(est, A_max, S_max), level=float(level), slots=int(T),
                           horizon=int(T) if horizon is None else int(horizon))


def add_empirical_design(report: dict, design: EmpiricalDesign, penalty, max_penalty: float | None, A_max: int,
                         S_max: int, *, horizon_design: bool = True) -> dict:
    """Complete the schedule report `report` (designed against ``design.source``) for ``--max-tv empirical``.

    `max_penalty` ``None``: the f̄ the report states (the default the design chose); none there either: no
    horizon design.

    Sets ``model.max_tv_source``, ``empirical_max_tv`` (``level``, ``max_lag``, ``method``, ``min_pairs``,
    ``estimate``, ``upper``, ``max_tv_used`` = Δ̃(0..A_max + S_max − 1 or more), ``users_without_claim``) and
    ``horizon_design``: ``null`` when the exact solver found a schedule (its ε* of eq. (30) is finite), else
    :func:`design_over_horizon` over ``design.horizon`` slots — unless `horizon_design` is false (the caller found the
    first-order premise of Theorem 3 refuted and designs the horizon model-free instead: the Theorem 3 enumeration,
    O(H) per cell, is then not run at all).  ``schedule --max-tv empirical`` and every point of ``sweep --max-tv
    empirical`` use this one function, so their numbers are the same.

    Returns
    -------
    dict
        `report`, modified in place.
    """
    est = design.estimate
    used = empirical_max_tv_table(est, design.source.horizon)
    report["model"]["max_tv_source"] = (
        f"upper edge of the {est.level:g} simultaneous block-bootstrap band of Δ(t) estimated directly from the data "
        f"(t ≤ L = {est.max_lag} slots), made non-increasing from the right over the ages the box uses "
        f"(t ≤ {design.source.horizon}), 1 beyond; Theorem 3's composition under that bound"
    )
    report["empirical_max_tv"] = {
        "level": est.level,
        "max_lag": est.max_lag,
        "method": est.method,
        "min_pairs": est.min_pairs,
        "estimate": est.estimate.tolist(),
        "upper": est.upper.tolist(),
        "max_tv_used": used.tolist(),
        "users_without_claim": int(est.users_without_claim.max()),
    }
    report["horizon_design"] = None
    if report["A"] is None and horizon_design:
        f_bar = report.get("max_penalty") if max_penalty is None else max_penalty  # the default f̄ the design chose
        if f_bar is not None:
            report["horizon_design"] = design_over_horizon(design.source, penalty, f_bar, A_max, S_max, design.horizon)
    return report
