"""Data studies of discounted DP (Farokhi, "Temporally Discounted Differential Privacy for Evolving Datasets on
an Infinite Horizon", ICCPS 2020): the CityLearn daily means (Section IV, Fig. 2 analogue) and the
infinite-horizon question for exponential discounting.

The mathematics (losses, corollary schedules) is in :mod:`policyopt.privacy.discounted`; the optimal schedule
in :mod:`policyopt.problems.discounted` / :mod:`policyopt.solvers.discounted_opt`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, check_positive, fmt
from policyopt.privacy.discounted import (
    check_alpha,
    check_horizon,
    discounted_loss,
    expected_relative_error,
    exponential_loss,
    total_variance,
)
from policyopt.privacy.discounted_schedules import corollary_schedule
from policyopt.result import result_repr

__all__ = ["DailyMeans", "daily_means", "DEFAULT_DAILY_CLIP", "exponential_infinite_horizon", "citylearn_study", "citylearn_sweep"]

#: Default clip bound per home and day, kWh (Section IV study).
DEFAULT_DAILY_CLIP = 100.0


@dataclass(frozen=True)
class DailyMeans:
    """Daily mean consumption across homes, the released query of Farokhi (2020), Section IV.

    Attributes
    ----------
    values : numpy.ndarray, shape (days,)
        f_t = (1/n) Σ_i min(x_i(t), clip), kWh per home and day, t = day.
    sensitivity : float
        Δf = clip / n (kWh): one home's clipped daily value lies in [0, clip], so replacing
        its row changes the mean by at most clip/n (eq. 7, neighbouring rows of Definition 2).
    clip : float
        Clip bound per home and day, kWh.
    n_users : int
    clipped : int
        Number of (home, day) values that the clip changed.
    unclipped_max : float
        Largest daily value before clipping, kWh.
    """

    values: np.ndarray
    sensitivity: float
    clip: float
    n_users: int
    clipped: int
    unclipped_max: float

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


def _check_complete_days(df, daily, wide, spd: int) -> None:
    """Raise naming the first home and day without all `spd` readings (the resolution daily means expect)."""
    expected = (f"daily means need one reading per home in each of the {spd} slots of every day "
                f"({'hourly kWh, time in whole hours' if spd == 24 else f'{spd} slots a day'} from slot 0)")
    homes = sorted(df["user"].unique(), key=str)
    never = [u for u in homes if u not in wide.columns]
    if never:
        u = never[0]
        got = daily[daily["user"] == u]["count"]
        raise InvalidInputError(
            f"`df` (--data): home {u!r} has no complete day (at most {int(got.max()) if len(got) else 0} of {spd} "
            f"readings in a day): {expected}; finer or coarser readings (e.g. half-hourly) must be summed to hours first"
            + (f"; {len(never) - 1} more homes likewise" if len(never) > 1 else ""))
    gaps = wide.isna()
    if gaps.any().any():
        days, users = np.nonzero(gaps.to_numpy())
        day, u = int(wide.index[days[0]]), wide.columns[users[0]]
        row = daily[(daily["user"] == u) & (daily["day"] == day)]
        n = int(row["count"].iloc[0]) if len(row) else 0
        raise InvalidInputError(
            f"`df` (--data): home {u!r} has {n} of the {spd} readings of day {day} (slots {day * spd}..{day * spd + spd - 1})"
            f": {expected}; finer or coarser readings (e.g. half-hourly) must be summed to hours first"
            + (f"; {len(days) - 1} more (home, day) pairs are incomplete" if len(days) > 1 else ""))


def daily_means(df=None, clip: float = DEFAULT_DAILY_CLIP, slots_per_day: int = 24) -> DailyMeans:
    """Daily mean of the homes' daily consumption, each home clipped to [0, clip] kWh per day.

    Parameters
    ----------
    df : pandas.DataFrame, optional
        Columns ``user``, ``time`` (integer slot), ``value`` (kWh per slot, ≥ 0); the bundled
        CityLearn data (17 homes, hourly) by default.
    clip : float
        Bound per home and day (kWh); sets Δf = clip/n.  Default 100 kWh, above the bundled
        data's largest daily value (96.8 kWh), so nothing is clipped there.
    slots_per_day : int
        Slots per day (24 for hourly data); incomplete trailing days are dropped.

    Returns
    -------
    DailyMeans

    Raises
    ------
    InvalidInputError
        If `clip` ≤ 0, `df` lacks the columns, values are negative, or a home misses a day.
    """
    clip = check_positive(clip, "clip", "kWh per home and day")
    if df is None:
        from policyopt.data import load_citylearn

        df = load_citylearn()
    missing = {"user", "time", "value"} - set(getattr(df, "columns", []))
    if missing:
        raise InvalidInputError(f"`df` must have columns user, time, value; missing {sorted(missing)}")
    if (df["value"] < 0).any():
        raise InvalidInputError("`df` values must be ≥ 0 (kWh) for the clip to bound the sensitivity")
    day = df["time"].astype(int) // int(slots_per_day)
    daily = df.assign(day=day).groupby(["user", "day"])["value"].agg(["sum", "count"]).reset_index()
    full = daily[daily["count"] == slots_per_day]
    wide = full.pivot(index="day", columns="user", values="sum")
    _check_complete_days(df, daily, wide, int(slots_per_day))
    raw = wide.to_numpy(dtype=float)
    n = raw.shape[1]
    clipped = np.minimum(raw, clip)
    return DailyMeans(
        values=clipped.mean(axis=1),
        sensitivity=clip / n,
        clip=clip,
        n_users=n,
        clipped=int((raw > clip).sum()),
        unclipped_max=float(raw.max()),
    )


# ----------------------------------------------------------------------------------------
# studies: infinite-horizon optimality (exponential) and the CityLearn daily means
# ----------------------------------------------------------------------------------------


def exponential_infinite_horizon(epsilon, alpha, horizons=(10, 100, 1000), sensitivity=1.0) -> dict:
    """Is Corollary 12's constant schedule optimal over an infinite horizon?  (Beyond Farokhi (2020).)

    Answer, proved here and checked numerically:

    * **Yes, for the long-run average variance.**  Any schedule meeting (ε, α)-exponentially
      discounted DP (eq. 10) at every t has r_t = s_t − α s_{t−1} with s_t ≤ ε, so
      Σ_{t≤T} r_t = s_T + (1 − α) Σ_{t<T} s_t ≤ ε(1 + (1 − α)(T − 1)); by Jensen (x ↦ x⁻² is
      convex) (1/T) Σ_{t≤T} 2Δf²/r_t² ≥ 2Δf² / (ε(1 − α) + αε/T)², which tends to the constant
      schedule's 2Δf²/(ε(1 − α))².  So lim inf of the average variance of every valid schedule
      is ≥ that of Corollary 12 (``lower_bound_average``).
    * **No, in the strict sense.**  r_1 = ε, r_t = (1 − α)ε (t ≥ 2) keeps s_t = ε (valid) with
      b_1 = Δf/ε < Δf/(ε(1 − α)) and the same b_t afterwards: Corollary 12 is strictly dominated,
      hence not optimal for any total or discounted variance criterion, and the finite-T optimum
      (``DiscountedScheduleProblem``) saves a fraction that vanishes like 1/T.

    Parameters
    ----------
    epsilon : float
        ε > 0, nats.
    alpha : float
        α ∈ (0, 1).
    horizons : sequence of int
        Finite horizons T at which the optimal schedule is solved (cvxpy).
    sensitivity : float
        Δf > 0.

    Returns
    -------
    dict
        ``constant_variance`` (per slot, 2(Δf/(ε(1−α)))²), ``dominating_schedule_valid`` (bool,
        checked by :func:`exponential_loss` over the largest horizon), ``dominating_first_scale``,
        and ``rows``: per T, ``optimal_average`` (optimal total / T), ``constant_average``,
        ``lower_bound_average`` (the Jensen bound), ``savings`` (1 − optimal/constant),
        ``T_times_savings`` (≈ constant in T if the saving is Θ(1/T)), ``status``, ``relative_gap``.

    Raises
    ------
    InvalidInputError
        On a bad ε, α (α = 1 included: no constant schedule is ε-DP), Δf or horizon.
    """
    from policyopt.problems.discounted import DiscountedScheduleProblem

    eps = check_positive(epsilon, "epsilon", "nats")
    a = check_alpha(alpha, allow_one=False)
    d = check_positive(sensitivity, "sensitivity", "query units")
    Ts = [check_horizon(T) for T in horizons]
    if not Ts:
        raise InvalidInputError(f"`horizons` must hold at least one horizon, got {fmt(horizons)}")
    vc = 2.0 * (d / (eps * (1.0 - a))) ** 2  # Corollary 12 per-slot variance
    Tmax = max(Ts)
    dom = np.full(Tmax, (1.0 - a) * eps)
    dom[0] = eps
    dom_ok = exponential_loss(dom, a).holds(eps, rtol=1e-12)
    rows = []
    for T in Ts:
        sol = DiscountedScheduleProblem("exponential", eps, T, alpha=a, sensitivity=d).solve()
        opt_avg = sol.objective / T
        lb = 2.0 * d * d / (eps * (1.0 - a) + a * eps / T) ** 2  # Jensen bound
        sav = 1.0 - opt_avg / vc
        rows.append({"T": T, "optimal_average": opt_avg, "constant_average": vc, "lower_bound_average": lb,
                     "savings": sav, "T_times_savings": T * sav, "status": sol.status.value,
                     "relative_gap": sol.relative_gap})
    return {"epsilon": eps, "alpha": a, "sensitivity": d, "constant_variance": vc,
            "dominating_schedule_valid": bool(dom_ok), "dominating_first_scale": d / eps, "rows": rows}


def citylearn_study(epsilon=1.0, *, alpha=0.9, beta=0.1, clip: float = DEFAULT_DAILY_CLIP, kinds=("corollary", "optimal"),
                    df=None) -> dict:
    """Expected relative error of the daily mean over the year (Farokhi 2020, Section IV, Fig. 2 analogue).

    The released query is the daily mean of the homes' clipped daily consumption
    (:func:`daily_means`, Δf = clip/n); the horizon is the number of days.  For each notion
    (ε-DP, (ε, α)-exponential, (ε, β)-hyperbolic) and kind of schedule (``"corollary"``:
    Corollaries 8 / 12 / corrected 16; ``"paper"``: printed 16; ``"optimal"``: the
    minimum-total-variance schedule with uniform weights, which uses no private data) it reports
    b_t / f_t per day.

    Parameters
    ----------
    epsilon : float
        ε > 0, nats.
    alpha : float
        α ∈ (0, 1).
    beta : float
        β > 0.
    clip : float
        kWh per home and day (default 100).
    kinds : sequence of {"corollary", "paper", "optimal"}
    df : pandas.DataFrame, optional
        Readings (bundled CityLearn data by default).

    Returns
    -------
    dict
        ``data`` (:class:`DailyMeans`) and ``results``: {(notion, kind): {``schedule`` (days,),
        ``relative_error`` (days,), ``average_relative_error``, ``worst_loss`` (upper bound, nats),
        ``holds`` (bool), ``total_variance``}}.

    Raises
    ------
    InvalidInputError
        On a bad argument or an unknown kind.
    """
    from policyopt.problems.discounted import DiscountedScheduleProblem

    eps = check_positive(epsilon, "epsilon", "nats")
    bad = [k for k in kinds if k not in ("corollary", "paper", "optimal")]
    if bad:
        raise InvalidInputError(f"unknown `kinds` {fmt(bad)}; choose from 'corollary', 'paper', 'optimal'")
    data = daily_means(df, clip)
    T, d = data.values.size, data.sensitivity
    params = {"dp": {}, "exponential": {"alpha": alpha}, "hyperbolic": {"beta": beta}}
    out = {}
    for notion, kw in params.items():
        for kind in kinds:
            if kind == "optimal":
                sol = DiscountedScheduleProblem(notion, eps, T, sensitivity=d, **kw).solve()
                b = np.asarray(sol.decision["schedule"])
            else:
                b = corollary_schedule(notion, eps, T, sensitivity=d, variant=kind, **kw)
            loss = discounted_loss(b, d, notion, **kw)
            err = expected_relative_error(b, data.values)
            out[(notion, kind)] = {"schedule": b, "relative_error": err, "average_relative_error": float(err.mean()),
                                   "worst_loss": loss.worst, "holds": loss.holds(eps), "total_variance": total_variance(b)}
    return {"data": data, "epsilon": eps, "alpha": alpha, "beta": beta, "results": out}


def citylearn_sweep(epsilon=1.0, *, alphas=(0.5, 0.8, 0.9, 0.95, 0.99), betas=(0.01, 0.1, 1.0, 10.0),
                    clip: float = DEFAULT_DAILY_CLIP, kinds=("corollary", "optimal"), df=None):
    """Average expected relative error over the year versus α and β (Farokhi 2020, Fig. 3 analogue).

    Parameters
    ----------
    epsilon : float
        ε > 0, nats.
    alphas, betas : sequence of float
        α ∈ (0, 1) and β > 0 values.
    clip, kinds, df
        As :func:`citylearn_study`.

    Returns
    -------
    pandas.DataFrame
        Columns ``notion``, ``parameter``, ``kind``, ``average_relative_error``, ``worst_loss``
        (nats, upper bound), ``holds``.

    Raises
    ------
    InvalidInputError
        On a bad argument.
    """
    import pandas as pd

    from policyopt.problems.discounted import DiscountedScheduleProblem

    eps = check_positive(epsilon, "epsilon", "nats")
    data = daily_means(df, clip)
    T, d = data.values.size, data.sensitivity
    rows = []
    grid = [("exponential", "alpha", a) for a in alphas] + [("hyperbolic", "beta", b) for b in betas]
    for notion, name, p in grid:
        for kind in kinds:
            if kind not in ("corollary", "paper", "optimal"):
                raise InvalidInputError(f"unknown kind {fmt(kind)} in `kinds`; choose from 'corollary', 'paper', 'optimal'")
            if kind == "optimal":
                sol = DiscountedScheduleProblem(notion, eps, T, sensitivity=d, **{name: p}).solve()
                b = np.asarray(sol.decision["schedule"])
            else:
                b = corollary_schedule(notion, eps, T, sensitivity=d, variant=kind, **{name: p})
            loss = discounted_loss(b, d, notion, **{name: p})
            rows.append({"notion": notion, "parameter": p, "kind": kind,
                         "average_relative_error": float(expected_relative_error(b, data.values).mean()),
                         "worst_loss": loss.worst, "holds": loss.holds(eps)})
    return pd.DataFrame(rows)
