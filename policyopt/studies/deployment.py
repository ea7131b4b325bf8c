"""Designing a deployment from pilot data: where the trade-off lives, estimation uncertainty, plain-words verdicts.

A pilot of n homes gives the chains (one per home); the deployment has I users, each following one
of those chains in equal shares (:class:`~policyopt.utility.penalty.MSEPenalty` with ``users=I``).
This module adds to the schedule report of :func:`~policyopt.studies.schedule.design_schedule`:

- :func:`tradeoff_range`: the interval of penalty bounds f̄ for which problem (28) has a finite optimum;
- :func:`max_tv_witness` and :func:`sparse_row_warnings`: which user and start states attain Δ(t) of
  eq. (12) at the chosen A and S̄, and whether a row estimated from few transitions is among them;
- :func:`credible_peak_risk`: the posterior median and upper credible quantile of ε* (30) for a chosen
  schedule, over Dirichlet posterior draws of the pilot's chains, or posterior (bootstrap for ``hmm:R``)
  draws of Δ_Z of a richer Markov model (a Bayesian credible statement under the model, not a proof);
- :func:`robust_source`: a simultaneous posterior upper band of Δ(t), or of Δ_Z(t) of a richer Markov
  model, to design against (``--robust``);
- :func:`explain`: what ``infeasible`` / ``unbounded`` / ``optimal`` mean for the user's numbers, and
  one sentence on why aging pays or not.

Source: Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
Δ(t) eq. (12), peak risk (30) under condition (31), problem (28), Theorem 4.
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import fmt_count, fmt_range, fmt_value
from policyopt.models.estimation import FittedModel
from policyopt.models.markov_model import FittedMarkovModel
from policyopt.models.posterior import (
    check_draws,
    check_level,
    posterior_log_max_tv,
    simultaneous_upper_band,
)
from policyopt.models.tabulated import TabulatedMaxTV
from policyopt.privacy.age_dependent import peak_risk_values_log
from policyopt.problems import ScheduleProblem
from policyopt.utility.penalty import check_epsilon_c

__all__ = [
    "tradeoff_range",
    "default_max_penalty",
    "penalty_comparison",
    "max_tv_witness",
    "sparse_row_warnings",
    "credible_peak_risk",
    "robust_source",
    "explain",
    "CREDIBLE_NOTE",
    "credible_note",
    "posterior_draw_text",
]

#: How a credible result must be read (printed in the text report and put in the JSON).
CREDIBLE_NOTE = (
    "Bayesian credible statement, not a proof: under a Dirichlet(counts + smoothing) posterior for every row of "
    "every pilot chain, ε* of this schedule is below `upper` with posterior probability `level` (estimated from "
    "`draws` simulated pilots); it assumes stationary first-order chains and says nothing beyond that model"
)


#: What one posterior draw of Δ_Z is, per kind of :class:`~policyopt.models.markov_model.FittedMarkovModel`.
_DRAWS = {
    "chain": "every transition row of every user's chain drawn from Dir(counts + smoothing)",
    "phase": "every transition row of every phase of every user's chain drawn from Dir(counts + smoothing)",
    "order": "every context row (the next state given the last k states) of every user drawn from Dir(counts + "
             "smoothing)",
    "hmm": "a parametric bootstrap, not a posterior: every user's fitted HMM simulated over the user's observed runs and "
           "refitted by EM warm-started at the fit, Δ_Z = Δ of the refitted regime chain",
}


def posterior_draw_text(fitted) -> str:
    """What one draw of Δ (or Δ_Z) behind ``--robust`` / ``--credible`` is, for the chains or a Markov model `fitted`."""
    return _DRAWS[fitted.kind if isinstance(fitted, FittedMarkovModel) else "chain"]


def credible_note(fitted) -> str:
    """How a credible result of `fitted` must be read: :data:`CREDIBLE_NOTE` for the chains, its analogue for a
    :class:`~policyopt.models.markov_model.FittedMarkovModel` (what its draws are and which model they assume)."""
    if not isinstance(fitted, FittedMarkovModel):
        return CREDIBLE_NOTE
    return (
        f"{'Bootstrap' if fitted.kind == 'hmm' else 'Bayesian'} credible statement, not a proof: ε* of this schedule is "
        f"below `upper` in a share `level` of the `draws` draws of Δ_Z of the Markov model {fitted.name}, each draw "
        f"with {posterior_draw_text(fitted)}; it assumes that model (stationary, as fitted) and says nothing beyond it"
    )


def _posterior_tables(fitted, ages, draws: int, rng) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Draws and point estimate of ln Δ at `ages`, with the users and a geometric rate, for the chains or a model.

    `fitted` is a :class:`~policyopt.models.estimation.FittedModel` (the first-order chains: Dirichlet draws of
    :func:`~policyopt.models.posterior.posterior_log_max_tv`, point Δ of eq. (12)) or a
    :class:`~policyopt.models.markov_model.FittedMarkovModel` (its ``log_max_tv_draws`` and ``log_max_tv``: Δ_Z).

    Returns
    -------
    (draws, point, n_users, rate) : numpy.ndarray (M, n), numpy.ndarray (n,), int, float
    """
    ts = np.asarray(ages)
    if isinstance(fitted, FittedMarkovModel):
        logs = np.asarray(fitted.log_max_tv_draws(ts, draws, rng), dtype=float)
        point = np.asarray(fitted.log_max_tv(ts), dtype=float).reshape(-1)
        return logs, point, fitted.n_users, float(fitted.spectral_rate)
    if not isinstance(fitted, FittedModel):
        raise InvalidInputError(
            f"`fitted` must be a FittedModel (fit_population) or a FittedMarkovModel (fit_markov_model), got {fmt(fitted)}"
        )
    logs = posterior_log_max_tv(fitted, ts, draws, rng)
    pop = fitted.population
    return logs, np.asarray(pop.log_max_tv(ts), dtype=float).reshape(-1), pop.n_users, float(pop.spectral_rate)


def tradeoff_range(problem: ScheduleProblem) -> tuple[float, float | None]:
    """The penalty bounds f̄ for which problem (28) has a finite optimum: (low, high).

    low is the smallest penalty any schedule in the box can achieve under condition (31): for each
    S̄, ε_C must stay below −ln Δ(S̄), so the smallest achievable penalty is
    min over A ≤ A_max, S̄ ≤ S_max of max_{a=A..A+S̄−1} f(a, −ln Δ(S̄)) (an infimum: (31) is strict).
    Below it the problem is infeasible.  high is the staleness limit lim_{t→∞} f(t, ∞) (the MSE
    penalty's ``staleness_limit``): above it data of any age meets f̄ once the noise is small
    enough, and Δ(A) → 0 as A → ∞, so ε* can be made arbitrarily small (no optimum: unbounded).
    For f̄ strictly between them the exact optimum exists, though with a finite box it may lie
    beyond A_max (the solver then reports ``unbounded`` for the box).

    Parameters
    ----------
    problem : ScheduleProblem

    Returns
    -------
    (low, high) : float, float or None
        Penalty units.  high is ``None`` for a penalty without a staleness limit; low is ``inf`` when
        Δ(S̄) = 1 for every S̄ in the box (no ε_C > 0 meets (31)).

    Raises
    ------
    InvalidInputError
        If `problem` is not a ScheduleProblem.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
    (28), (31).
    """
    if not isinstance(problem, ScheduleProblem):
        raise InvalidInputError(f"`problem` must be a ScheduleProblem, got {fmt(problem)}")
    A_max, S_max, pen = problem.A_max, problem.S_max, problem.penalty
    cap = -problem.log_max_tv_table[1 : S_max + 1]  # (31): ε_C < −ln Δ(S̄)
    low = math.inf
    noiseless = None
    for j, c in enumerate(cap):
        if not c > 0:
            continue
        if math.isinf(c):
            if noiseless is None:
                from policyopt.utility.penalty import window_max

                noiseless = window_max(np.asarray(pen.noiseless(np.arange(A_max + S_max)), dtype=float), A_max, S_max)
            col = noiseless[:, j]
        else:
            col = np.asarray(pen.epoch_table(A_max, S_max, float(c)), dtype=float)[:, j]
        low = min(low, float(np.min(col)))
    high = getattr(pen, "staleness_limit", None)
    return low, (float(high) if high is not None else None)


def default_max_penalty(low: float, high: float | None) -> float:
    """The default bound f̄ inside the trade-off range (low, high): the geometric midpoint √(low·high).

    The range spans orders of magnitude, so its geometric midpoint sits as far (in ratio) from the
    infeasible end as from the unbounded one.  With low = 0 (a Δ(t) that reaches 0) it is high/100.
    Without a trade-off (low ≥ high: no f̄ has a finite optimum) it is 2·low, a reachable bound, and the
    report's explanation says that there is no trade-off.

    When no budget meets condition (31) in the box (low = ∞), no f̄ has a schedule; the default is then the
    staleness limit `high`, so that the design runs and its report says why nothing is feasible.

    Raises
    ------
    InvalidInputError
        If high is missing or not finite (a penalty without a staleness limit) and low is not finite:
        then the bound must be given.
    """
    if not math.isfinite(low) and high is not None and math.isfinite(high) and high > 0:
        return float(high)
    if high is None or not math.isfinite(high) or not math.isfinite(low):
        raise InvalidInputError(
            f"no trade-off range to choose a default f̄ from (low {low!r}, high {high!r}): give the bound "
            "(--max-penalty / --max-rmse, or `max_penalty`)"
        )
    if not low < high:
        return 2.0 * low
    return math.sqrt(low * high) if low > 0 else high / 100.0


def penalty_comparison(penalty, population, A: int, S_bar: int, *, chain_penalty=None) -> dict | None:
    """The readings penalty against the chain model (Zhang et al. 2024, eqs. (48)–(49)) at a schedule.

    Both staleness terms are the maximum over the epoch's ages A..A + S̄ − 1 (the peak AoI is A + S̄ − 1);
    the chain model has the same deployment size I and value range.

    Parameters
    ----------
    penalty : ReadingsMSEPenalty
    population : Population
        The pilot chains.
    A, S_bar : int
        The schedule (slots).
    chain_penalty : MSEPenalty, optional
        The chain model's penalty already formed (e.g. the Dask path's
        :class:`~policyopt.utility.tabulated_penalty.TabulatedMSEPenalty`, same I and value range); then
        `population` is not used.

    Returns
    -------
    dict or None
        ``peak_aoi``, ``age`` (the ages compared end there: the peak AoI, or 1 for fresh data, whose staleness is 0
        in both models), ``readings_staleness`` (what the design bounds), ``readings_pooled`` (all phases),
        ``readings_lower``/``readings_upper`` (band at the peak AoI, ``None`` without one), ``level``,
        ``worst_phase``, ``self``, ``cross`` (pooled, at the peak AoI), ``chain_staleness`` and ``ratio``
        (readings / chain; ``None`` when the chain's is 0).  ``None`` when `penalty` is not a readings
        penalty or there is neither `chain_penalty` nor a `population` with chains.
    """
    from policyopt.models.markov import Population
    from policyopt.utility.penalty import MSEPenalty
    from policyopt.utility.readings_penalty import ReadingsMSEPenalty

    if not isinstance(penalty, ReadingsMSEPenalty) or (chain_penalty is None and not isinstance(population, Population)):
        return None
    A, S = int(A), int(S_bar)
    ages = np.arange(A, A + S) if A + S > 1 else np.array([1])  # fresh data (peak AoI 0): compare one slot of age
    chain = chain_penalty if chain_penalty is not None else MSEPenalty(
        population, penalty.unit, users=penalty.users,
        value_range=penalty.value_range if penalty.value_range_declared else None)
    chain_st = float(np.max(chain.staleness(ages)))
    read_st = float(np.max(penalty.staleness(ages)))
    peak = A + S - 1
    summ = penalty.summary(int(ages[-1]))
    band = penalty.band()
    return {
        "peak_aoi": peak,
        "age": int(ages[-1]),
        "readings_staleness": read_st,
        "readings_pooled": summ["staleness_pooled"],
        "readings_lower": None if band is None else float(np.max(band[0][ages])),
        "readings_upper": None if band is None else float(np.max(band[1][ages])),
        "level": penalty.level,
        "worst_phase": summ["worst_phase"],
        "phase_period": summ["phase_period"],
        "self": summ["self"],
        "cross": summ["cross"],
        "chain_staleness": chain_st,
        "ratio": read_st / chain_st if chain_st > 0 else None,
    }


def max_tv_witness(population, t: int) -> dict:
    """Which user and which pair of start states attain Δ(t) of eq. (12).

    Δ(t) = max over users u and start states x, x' of ½‖(e_x − e_x') P̂_u^t‖₁ (P̂_u the reversed
    chain).  Computed with matrix powers in float (a diagnostic: for Δ(t) below ~1e-12 the
    witness may be imprecise; the privacy numbers themselves never come from here).

    Parameters
    ----------
    population : Population
    t : int
        Age (slots) ≥ 0.

    Returns
    -------
    dict
        ``t``, ``chain`` (index into ``population.chains``), ``states`` ([x, x']) and ``max_tv``.
    """
    best = (-1.0, 0, (0, 0))
    for i, chain in enumerate(population.chains):
        R = np.linalg.matrix_power(chain.reversed_matrix, int(t))
        tv = 0.5 * np.abs(R[:, None, :] - R[None, :, :]).sum(axis=2)
        x, y = np.unravel_index(int(np.argmax(tv)), tv.shape)
        if tv[x, y] > best[0]:
            best = (float(tv[x, y]), i, (int(min(x, y)), int(max(x, y))))
    return {"t": int(t), "chain": best[1], "states": list(best[2]), "max_tv": best[0]}


def sparse_row_warnings(fitted: FittedModel, ages: dict, min_row_transitions: int) -> tuple[list, list]:
    """Witnesses of Δ(t) at the chosen ages, and a warning for each that starts from a sparse row.

    Parameters
    ----------
    fitted : FittedModel
    ages : dict
        Name → age (slots), e.g. ``{"A": 0, "S_bar": 12}``.
    min_row_transitions : int
        Rows with fewer observed transitions are sparse (:meth:`FittedModel.sparse_states`).

    Returns
    -------
    (witnesses, warnings) : list of dict, list of str
        One witness per age (``name``, ``t``, ``user``, ``states``, ``max_tv``, ``row_transitions``),
        and one sentence per age t > 0 whose witness user has a sparse row at one of the two start states
        (Δ(0) = 1 whatever the data, so t = 0 never warns).
    """
    rows = fitted.row_transitions()
    witnesses, warnings = [], []
    for name, t in ages.items():
        w = max_tv_witness(fitted.population, int(t))
        user = fitted.users[w["chain"]]
        obs = [int(rows[user][x]) for x in w["states"]]
        witnesses.append({"name": name, "t": int(t), "user": user, "states": w["states"], "max_tv": w["max_tv"],
                          "row_transitions": obs})
        sparse = [(x, n) for x, n in zip(w["states"], obs) if n < min_row_transitions]
        if sparse and int(t) > 0:  # Δ(0) = 1 for every chain with ≥ 2 states: no data sets it
            which = ", ".join(f"state {x} ({n} observed transitions)" for x, n in sparse)
            warnings.append(
                f"Δ({int(t)}) at {name.replace('S_bar', 'S̄')} = {int(t)} is set by user {user}, {which}, fewer than "
                f"{min_row_transitions}: that row is mostly smoothing pseudo-count, so the privacy claim rests on the "
                "smoothing, not on data (use fewer --states, longer data, or --robust)"
            )
    return witnesses, warnings


def credible_peak_risk(fitted: FittedModel | FittedMarkovModel, A: int, S_bar: int, epsilon_c: float, *,
                       level: float = 0.95, draws: int = 200, rng: np.random.Generator) -> dict:
    """Posterior median and upper `level` quantile of ε* (30) for the schedule (A, S̄, ε_C).

    Each of `draws` simulated pilots draws every row of every user's chain from Dir(counts + s);
    its Δ(A), Δ(S̄) (eq. 12, max over its users) give ε* by (30), or ``inf`` where (31) fails.  For a
    :class:`~policyopt.models.markov_model.FittedMarkovModel` the draws are its ``log_max_tv_draws`` of
    Δ_Z (:func:`posterior_draw_text`: Dirichlet rows of the Z chain, a parametric bootstrap for ``hmm:R``).
    The upper quantile is the ⌈level·M⌉-th smallest draw (rounded outward, never interpolated
    down).  A Bayesian credible statement under the model, not a proof (:data:`CREDIBLE_NOTE`).

    Parameters
    ----------
    fitted : FittedModel or FittedMarkovModel
        With smoothing > 0 (the Dirichlet prior).
    A, S_bar : int
        Schedule (slots).
    epsilon_c : float
        Per-release budget (nats).
    level : float
        Credible level in (0, 1).
    draws : int
        M ≥ 2 simulated pilots.
    rng : numpy.random.Generator
        Seeded simulation randomness (never released noise).

    Returns
    -------
    dict
        ``level``, ``draws``, ``point`` (ε* of the point estimate), ``median``, ``upper`` (nats; ``None``
        when infinite), ``condition_31_fails`` (fraction of draws where (31) fails), ``note``.

    Raises
    ------
    InvalidInputError
        Bad `level`, `draws`, `rng`, schedule, or a fit without smoothing.
    """
    lv = check_level(level, "level")
    m = check_draws(draws, "draws")
    check_epsilon_c(epsilon_c)
    ages = np.array([int(A), int(S_bar)])
    logs, lp, _, _ = _posterior_tables(fitted, ages, m, rng)
    risks = peak_risk_values_log(logs[:, 0], logs[:, 1], float(epsilon_c))  # eq. (30); NaN where (31) fails
    risks = np.where(np.isnan(risks), np.inf, risks)
    srt = np.sort(risks)
    upper = float(srt[math.ceil(lv * m) - 1])
    median = float(srt[math.ceil(0.5 * m) - 1])
    point = float(peak_risk_values_log(lp[0], lp[1], float(epsilon_c)))
    return {
        "level": lv,
        "draws": m,
        "point": None if math.isnan(point) else point,
        "median": median if math.isfinite(median) else None,
        "upper": upper if math.isfinite(upper) else None,
        "condition_31_fails": float(np.mean(np.isinf(risks))),
        "note": credible_note(fitted),
    }


def robust_source(fitted: FittedModel | FittedMarkovModel, horizon: int, *, level: float, draws: int,
                  rng) -> tuple[TabulatedMaxTV, dict]:
    """A Δ(t) source for t ≤ `horizon` that bounds the posterior pilots' Δ(t) simultaneously with probability `level`.

    See :func:`~policyopt.models.posterior.simultaneous_upper_band` for the construction (pointwise
    quantile, one log-inflation until ⌈level·M⌉ of the M draws lie entirely below, raised to the
    point estimate, made non-increasing).  Designing against it makes the schedule's ε* hold for
    those plausible chains, not only the point estimate.

    For a richer Markov model (:class:`~policyopt.models.markov_model.FittedMarkovModel`: ``phase:P``,
    ``order:k``, ``hmm:R``) the same construction bands ln Δ_Z(t) of the augmented chain Z over its
    ``log_max_tv_draws``.  What it assumes: for ``phase:P`` and ``order:k``, the Dirichlet posterior
    Dir(counts + smoothing) of every transition row of every user's Z chain (per phase; per context of
    the last k states) — a Bayesian statement under that prior and the model; for ``hmm:R``, a draw is a
    parametric bootstrap (each user's fitted HMM simulated over its observed runs and refitted by EM
    warm-started at the fit; Δ_Z = Δ of the refitted regime chain), which assumes that the fitted HMM
    generated the data and ignores the choice of R and the EM's other local optima
    (:mod:`policyopt.models.hidden_regime`; one EM fit per user and draw).  In every case the band is
    at least the pointwise ``level`` quantile of the draws and at least the fitted Δ_Z(t), at every
    t ≤ `horizon`, and non-increasing (as Δ_Z is: Theorem 4 and eq. (30) need it).

    Parameters
    ----------
    fitted : FittedModel or FittedMarkovModel
        The chains (:func:`~policyopt.models.estimation.fit_population`) or a Markov model
        (:func:`~policyopt.models.markov_model.fit_markov_model`), fitted with smoothing > 0.
    horizon : int
        Last age H (slots) tabulated.
    level : float
        Posterior probability in (0, 1).
    draws : int
        M ≥ 2 posterior (bootstrap) draws.
    rng : numpy.random.Generator
        Seeded simulation randomness, never released noise (a Markov model also takes one Generator per user).

    Returns
    -------
    (source, info) : TabulatedMaxTV, dict
        ``info``: ``level``, ``draws``, ``inflation``, ``coverage``, ``max_ratio`` (band / Δ̂), ``horizon``,
        ``construction`` and ``max_tv`` (the band's Δ(t), t = 0..H); for a Markov model also ``model`` (its
        name) and ``posterior`` (what one draw is).

    Raises
    ------
    InvalidInputError
        Bad `level`, `draws` or `rng`; `fitted` of another type, or fitted without smoothing.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12),
    Theorem 4, eq. (30).
    """
    lv = check_level(level, "robust level")
    m = check_draws(draws, "draws")
    ts = np.arange(int(horizon) + 1)
    logs, point, n_users, rate = _posterior_tables(fitted, ts, m, rng)
    band, info = simultaneous_upper_band(logs, lv, point)
    info["horizon"] = int(horizon)
    info["construction"] = (
        "pointwise level-quantile of ln Δ_draw(t), inflated by one constant until ⌈level·draws⌉ draws lie entirely "
        "below, raised to the point estimate, made non-increasing"
    )
    info["max_tv"] = np.exp(band).tolist()
    if isinstance(fitted, FittedMarkovModel):
        info["model"] = fitted.name
        info["posterior"] = posterior_draw_text(fitted)
    return TabulatedMaxTV(band, n_users, max(rate, 1e-300)), info


def explain(report: dict, *, A_max: int | None = None) -> list:
    """Plain-words sentences on a schedule report (the dict of ``ScheduleReport.to_dict()`` plus ``tradeoff_range``).

    `A_max` is the box's largest aging (``--max-age``): an ``unbounded`` report names it, not the aging of the best
    schedule inside the box (which may lie below A_max when the readings' staleness is not monotone in the age).

    Returns
    -------
    list of str
        What the status means for the user's numbers, and why aging pays or not.
    """
    m = report["model"]
    unit = f" {m.get('penalty_unit')}" if m.get("penalty_unit") else ""
    low, high = (m.get("tradeoff_range") or [None, None])[:2]
    f_bar = report["max_penalty"]
    out = []
    status = report["status"]
    between = fmt_range(low, high)  # None when no f̄ has a finite optimum (said below, in words)
    rng_txt = f"{between}{unit}" if between else ""
    if low is not None and high is not None and not rng_txt:
        out.append(
            (f"no trade-off for this deployment: the smallest MSE reachable under condition (31), {low:.4g}{unit}, is not "
             f"below the staleness limit {high:.4g}{unit}" if math.isfinite(low) else
             "no trade-off for this deployment: Δ(S̄) = 1 for every S̄ in the box, so no budget ε_C > 0 meets "
             "condition (31)")
            + ", so no f̄ has a finite optimum; deploy to more users (the noise falls like 1/I², the staleness like "
            "1/I) or declare a tighter public value range"
        )
    if status == "infeasible":
        msg = (
            f"infeasible: your bound f̄ = {f_bar:.4g}{unit} is tighter than any schedule can reach; the smallest "
            f"achievable MSE under condition (31) is {low:.4g}{unit}" if low is not None and math.isfinite(low) else
            f"infeasible: no schedule in the box meets f̄ = {f_bar:.4g}{unit}"
        )
        if low is not None and math.isfinite(low):
            msg += (f" — raise f̄ above it (a trade-off exists {rng_txt}), or deploy to more users" if rng_txt else
                    " — a larger f̄ gives schedules but no finite optimum (see above): deploy to more users")
        out.append(msg)
    elif status == "unbounded":
        if high is not None and f_bar > high:
            out.append(
                f"unbounded: your bound f̄ = {f_bar:.4g}{unit} is looser than publishing data of any age (the staleness "
                f"limit is {high:.4g}{unit}), so waiting longer always lowers the risk; "
                + (f"lower f̄ below {high:.4g}{unit} to get a trade-off ({rng_txt})" if rng_txt else
                   "no f̄ below it has a finite optimum either (see above)")
            )
        else:
            box = "A_max" if A_max is None else f"A_max = {fmt_count(A_max, 'slot')}"
            inside = ("" if A_max is None or report.get("A") is None or report["A"] == A_max else
                      f" (the best schedule inside it has A = {fmt_count(report['A'], 'slot')})")
            out.append(
                f"unbounded in this box: an aging beyond {box} gives a smaller risk{inside}; "
                "raise --max-age" + (f" (a finite optimum exists for f̄ {rng_txt})" if rng_txt else "")
            )
    elif status in ("optimal", "feasible") and high is not None and f_bar > high:
        out.append(
            f"{status} only within the box: f̄ = {f_bar:.4g}{unit} is above the staleness limit {high:.4g}{unit}, so a "
            "much larger A and S̄ would lower ε* further (no finite optimum exists without the box); lower f̄ below "
            f"{high:.4g}{unit} for a real trade-off"
        )
    elif status in ("optimal", "feasible") and rng_txt:
        out.append(f"{status}: f̄ = {f_bar:.4g}{unit} lies inside the trade-off range ({rng_txt})")
    na = report["benchmarks"]["no_aging"]
    if report.get("A") is not None and status in ("optimal", "feasible", "unbounded"):
        A = report["A"]
        if not float(A).is_integer():  # a continuous relaxation (--relax): its A is a bound, not whole slots
            out.append(f"the relaxation's A = {fmt_value(A, 6)} slots is not a whole number of slots: it bounds the integer "
                       "schedules (see `deployable` for the best integer neighbour)")
            return out
        A = int(A)
        if A > 0 and status == "unbounded":
            out.append(
                f"aging pays without limit here: data {fmt_count(A, 'slot')} old (the largest age in the box) still meets "
                "f̄, and the "
                "older the data the lower ε*; this reflects a loose f̄, not a useful trade-off"
            )
        elif A > 0 and na.get("peak_risk") is not None:
            out.append(
                f"aging pays: publishing data {fmt_count(A, 'slot')} old cuts ε* from {na['peak_risk']:.4g} (no aging) to "
                f"{report['peak_risk']:.4g} nats, because the data decorrelate (Δ falls) faster than the staleness of "
                "an A-slot-old mean uses up the MSE bound"
            )
        elif A == 0:
            stale = m.get("staleness_profile")
            if stale:
                out.append(
                    f"aging does not pay: the staleness of the mean grows faster than the correlation decays — after "
                    f"{fmt_count(stale['t'], 'slot')} it already reaches {100 * stale['fraction']:.0f}% of its limit while Δ({stale['t']}) "
                    f"is still {stale['max_tv']:.3g}, so MSE room is better spent on less noise"
                    + (" and a longer S̄" if report.get("S_bar") not in (None, 1) else "")
                )
            else:
                out.append("aging does not pay: any aging spends MSE room that lowers ε* more when spent on noise and S̄")
    return out
