"""Check the fitted chains' Δ(t) against the readings: ``policyopt check-model`` and :func:`check_model`.

Every age-dependent risk policyopt prints rests on Δ(t), eq. (12) of M. Zhang, E. Wei, R. Berry, J. Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024.  For data it comes from one
stationary first-order chain per user over quantile states (:func:`~policyopt.models.estimation.fit_population`).
This study puts three curves side by side, lag by lag:

* the chains' Δ(t) (matrix powers, :meth:`~policyopt.models.markov.Population.max_tv`);
* Δ̂(t) estimated directly from the readings with its simultaneous confidence band
  (:func:`~policyopt.models.empirical.estimate_max_tv`: lagged-pair counts, non-overlapping block bootstrap);
* the distribution of the *same statistic* Δ̂(t) on data sets simulated from the fitted chains (same users, same
  lengths, same missing slots, same `min_pairs` rule; :func:`~policyopt.models.empirical.chain_statistic_draws`).

The verdict at lag t is a Monte Carlo test (A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their
Application", Cambridge, 1997, Sec. 4.2.5): p(t) = (1 + #{draws with Δ̂_sim(t) ≥ Δ̂(t)}) / (R + 1), and the
chains are **refuted** at lag t when p(t) ≤ 1 − level.  Each lag is tested at that level on its own (a pointwise
test), so on data that do follow the chains about a share 1 − level of the lags is refuted by chance; the plug-in
bias of Δ̂ near 0 is in the simulated statistic too, so it cannot produce a refutation by itself.  With
``holdout=F`` the chains (and the quantile edges) are fitted on the first 1 − F of each user's span and the
statistic is computed on the rest.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import check_text, fmt_count, fmt_lower, fmt_upper, fmt_value, json_clean
from policyopt.models.empirical import (
    DEFAULT_MIN_PAIRS,
    DEFAULT_N_BOOT,
    EmpiricalMaxTV,
    chain_statistic_draws,
    default_max_lag,
    estimate_max_tv,
    user_streams,
)

__all__ = ["ModelCheckReport", "check_model", "check_fitted", "quick_check", "check_from_maxima", "check_from_part", "quick_max_lag", "data_states", "format_check", "format_summary", "plot_check", "readings_states", "lag_ranges",
           "DEFAULT_DRAWS", "BUNDLED_STATES", "BUNDLED_VALUE_RANGE"]

#: Data sets simulated from the fitted chains for the test (p-values in steps of 1/(R + 1) = 0.01).
DEFAULT_DRAWS = 99
#: States and public value range of the bundled pilot (as ``policyopt schedule`` uses them).
BUNDLED_STATES = 3
BUNDLED_VALUE_RANGE = (0.0, 48.0)
#: Lags shown in the text report (those ≤ L), plus L itself.
SHOWN_LAGS = (1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 504, 720)


def readings_states(df, quantizer, users) -> np.ndarray:
    """States of each user's consecutive slots, −1 where a slot has no reading.

    Parameters
    ----------
    df : pandas.DataFrame
        Validated readings (user, time, value), already clipped to the public range if there is one.
    quantizer : policyopt.models.estimation.Quantizer
        Maps readings to states.
    users : sequence of str
        Users, in the order of the rows returned; slot 0 of a row is that user's first time in `df`.

    Returns
    -------
    numpy.ndarray of int64, shape (len(users), longest span)

    Raises
    ------
    InvalidInputError
        If a user's span has more than ten times as many slots as readings plus 1000 (the series would be
        mostly gaps; resample the data onto a regular slot grid first).
    """
    groups = {u: g for u, g in df.groupby("user", sort=False)}
    rows = []
    for u in users:
        g = groups[u]
        t = g["time"].to_numpy(dtype=np.int64)
        span = int(t.max() - t.min()) + 1
        if span > 10 * t.size + 1000:
            raise InvalidInputError(
                f"user {u!r} has {t.size} readings spread over {span} slots: the series is mostly gaps; "
                "put the readings on a regular slot grid"
            )
        x = np.full(span, -1, dtype=np.int64)
        x[t - t.min()] = quantizer.transform(g["value"].to_numpy())
        rows.append(x)
    T = max(r.size for r in rows)
    out = np.full((len(rows), T), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : r.size] = r
    return out


def lag_ranges(lags) -> str:
    """``[1, 2, 3, 7, 9, 10]`` → ``"1–3, 7, 9–10"`` (empty → ``"none"``)."""
    lags = sorted(int(t) for t in lags)
    if not lags:
        return "none"
    parts, start, prev = [], lags[0], lags[0]
    for t in lags[1:] + [None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        parts.append(str(start) if start == prev else f"{start}–{prev}")
        if t is not None:
            start = prev = t
    return ", ".join(parts)


@dataclass(frozen=True)
class ModelCheckReport:
    """What ``policyopt check-model`` prints: chains' Δ(t) vs the direct estimate, and the verdict per lag.

    Attributes
    ----------
    empirical : EmpiricalMaxTV
        Direct estimate and band (on the held-out part with `holdout`).
    model_max_tv : numpy.ndarray, shape (L,)
        Δ(t) of the fitted chains (max over users), t = 1..L.
    draws : numpy.ndarray, shape (R, L)
        The statistic on R data sets simulated from the fitted chains.
    p_values : numpy.ndarray, shape (L,)
        Monte Carlo p-values (1 + #{draws ≥ Δ̂}) / (R + 1).
    info : dict
        ``source``, ``states``, ``users``, ``slots``, ``holdout``, ``fit_slots``, ``excluded_users``,
        ``value_range``, ``smoothing``, ``seed``.
    wall_time_s : float
        Seconds from readings to report.
    """

    empirical: EmpiricalMaxTV
    model_max_tv: np.ndarray
    draws: np.ndarray
    p_values: np.ndarray
    info: dict = field(default_factory=dict)
    wall_time_s: float = 0.0

    @property
    def level(self) -> float:
        """Level of the band and of each lag's test."""
        return self.empirical.level

    @property
    def refuted(self) -> np.ndarray:
        """Boolean (L,): the chains are refuted at lag t (p(t) ≤ 1 − level)."""
        return self.p_values <= 1.0 - self.level + 1e-12

    @property
    def refuted_lags(self) -> list:
        """Lags (slots) where the chains are refuted."""
        return [int(t) for t in self.empirical.lags[self.refuted]]

    @property
    def model_critical(self) -> np.ndarray:
        """Per lag, the ⌈level·R⌉-th smallest simulated statistic: Δ̂ above it is unlikely under the chains."""
        R = self.draws.shape[0]
        return np.sort(self.draws, axis=0)[max(0, math.ceil(self.level * R) - 1)]

    def summary(self) -> dict:
        """The compact check other reports embed (``model_check`` of ``schedule``): verdict, lags, worst excess."""
        ref = self.refuted
        excess = np.where(ref, self.empirical.estimate - self.model_critical, -np.inf)
        worst = int(np.argmax(excess)) if ref.any() else None
        return {
            "refuted": bool(ref.any()),
            "level": self.level,
            "states": self.info.get("states"),
            "max_lag": self.empirical.max_lag,
            "refuted_lags": self.refuted_lags,
            "refuted_lag_ranges": lag_ranges(self.refuted_lags),
            "refuted_count": int(ref.sum()),
            "draws": int(self.draws.shape[0]),
            "worst_lag": None if worst is None else worst + 1,
            "worst_empirical_max_tv": None if worst is None else float(self.empirical.estimate[worst]),
            "worst_model_max_tv": None if worst is None else float(self.model_max_tv[worst]),
            "worst_model_critical": None if worst is None else float(self.model_critical[worst]),
        }

    def to_dict(self) -> dict:
        """The JSON object of ``policyopt check-model --json`` (field names are a public interface)."""
        e = self.empirical
        crit = self.model_critical
        ref = self.refuted
        lags = [
            {
                "lag": int(t),
                "model_max_tv": float(self.model_max_tv[i]),
                "empirical_max_tv": float(e.estimate[i]),
                "empirical_lower": float(e.lower[i]),
                "empirical_upper": float(e.upper[i]),
                "model_critical": float(crit[i]),
                "p_value": float(self.p_values[i]),
                "users_without_claim": int(e.users_without_claim[i]),
                "refuted": bool(ref[i]),
            }
            for i, t in enumerate(e.lags)
        ]
        out = {
            "level": self.level,
            "states": self.info.get("states"),
            "users": self.info.get("users"),
            "max_lag": e.max_lag,
            "min_pairs": e.min_pairs,
            "draws": int(self.draws.shape[0]),
            "holdout": self.info.get("holdout"),
            "source": self.info.get("source"),
            "slots": self.info.get("slots"),
            "fit_slots": self.info.get("fit_slots"),
            "value_range": self.info.get("value_range"),
            "smoothing": self.info.get("smoothing"),
            "seed": self.info.get("seed"),
            "excluded_users": self.info.get("excluded_users", {}),
            "estimate_method": e.method,
            "test_method": (
                f"parametric bootstrap: {self.draws.shape[0]} data sets simulated from the fitted first-order chains "
                "(same users, lengths, missing slots), the same statistic; refuted where the Monte Carlo p-value "
                f"(1 + #draws ≥ estimate)/(draws + 1) ≤ {1 - self.level:.4g}, each lag on its own"
            ),
            "refuted": bool(ref.any()),
            "refuted_lags": self.refuted_lags,
            "summary": self.summary(),
            "lags": lags,
            "wall_time_s": self.wall_time_s,
        }
        return json_clean(out)

    def __str__(self) -> str:
        """The text ``policyopt check-model`` prints (:func:`format_check`)."""
        return format_check(self.to_dict())


def format_check(r: dict) -> str:
    """The text of ``policyopt check-model`` from :meth:`ModelCheckReport.to_dict`.

    Upper band edges are rounded up and lower edges down to the printed digits.
    """
    L = r["max_lag"]
    hold = r.get("holdout")
    where = (f"chains fitted on the first {fmt_value(100 * (1 - hold), 4)}% of each series ({r['fit_slots']} slots), "
             f"Δ(t) estimated on the rest ({r['slots']} slots)" if hold else
             f"chains fitted and Δ(t) estimated on the same {r['slots']} slots")
    lines = [
        "policyopt check-model: fitted first-order chains vs Δ(t) estimated from the readings (Zhang et al. 2024, eq. (12))",
        f"data        : {r['source']}; {fmt_count(r['users'], 'user')}, {fmt_count(r['states'], 'quantile state')}; {where}",
        f"estimate    : {r['estimate_method']}",
        f"test        : {r['test_method']}",
        f"{'lag':>6} {'chain Δ(t)':>11} {'direct Δ̂(t)':>12} {'band ' + format(r['level'], 'g'):>17} "
        f"{'Δ̂ under chain':>15} {'p':>6}  verdict",
    ]
    rows = {row["lag"]: row for row in r["lags"]}
    shown = [t for t in SHOWN_LAGS if t <= L] + ([L] if L not in SHOWN_LAGS else [])
    for t in shown:
        row = rows[t]
        band = f"[{fmt_lower(row['empirical_lower'], 3)}, {fmt_upper(row['empirical_upper'], 3)}]"
        lines.append(
            f"{t:>6} {fmt_value(row['model_max_tv'], 3):>11} {fmt_value(row['empirical_max_tv'], 3):>12} {band:>17} "
            f"{'≤ ' + fmt_value(row['model_critical'], 3):>15} {fmt_value(row['p_value'], 2):>6}  "
            f"{'REFUTED' if row['refuted'] else 'consistent'}"
        )
    s = r["summary"]
    expect = (1 - r["level"]) * L
    if s["refuted"]:
        lines.append(
            f"refuted     : at {s['refuted_count']} of {L} lags ({s['refuted_lag_ranges']}; about {expect:.2g} would be "
            f"refuted by chance alone if the chains were true); the largest excess is at lag "
            f"{s['worst_lag']}: Δ̂ = {fmt_value(s['worst_empirical_max_tv'], 3)} on the data vs ≤ "
            f"{fmt_value(s['worst_model_critical'], 3)} in {100 * r['level']:g}% of the chain's simulated data sets "
            f"(chain Δ = {fmt_value(s['worst_model_max_tv'], 3)})"
        )
        if s["refuted_count"] > 2 * expect + 2:
            lines.append(
                "meaning     : the readings keep a dependence the fitted chains forget; privacy numbers computed from the "
                "chains' Δ(t) at the refuted lags are not supported by the data (design with --max-tv empirical "
                "where available, or a richer model)"
            )
        else:
            lines.append(
                "meaning     : about as many lags are refuted as chance gives at this level (each lag is tested on its "
                "own, and neighbouring lags are dependent): no clear evidence against the chains"
            )
    else:
        lines.append(
            f"refuted     : at no lag of 1..{L} (about {expect:.2g} lags would be refuted by chance alone at this level "
            "if the chains were true)"
        )
    none = [row["lag"] for row in r["lags"] if row["users_without_claim"] > 0]
    if none:
        lines.append(
            f"no claim    : at {len(none)} lags some user has a row with < {r['min_pairs']} pairs, so the upper band is 1 "
            f"there ({lag_ranges(none)})"
        )
    if r.get("excluded_users"):
        lines.append(f"excluded    : {fmt_count(len(r['excluded_users']), 'user')}: "
                     + "; ".join(f"{u} ({why})" for u, why in r["excluded_users"].items()))
    if r.get("plot"):
        lines.append(f"plot        : {r['plot']} (chain Δ(t) vs the band on a log lag axis, refuted lags marked)")
    dist = r.get("distributed")
    if dist:
        where = (f"a local cluster of {fmt_count(dist['workers'], 'worker')}" if dist.get("workers")
                 else f"the scheduler {dist['scheduler']}")
        peak = max(dist["peak_rss_mib"].values()) if dist.get("peak_rss_mib") else 0.0
        lines.append(f"dask        : map-reduce over {fmt_count(dist['partitions'], 'Parquet file')} on {where} (per-user random "
                     f"streams: the serial run's numbers); largest worker peak {peak:.0f} MiB")
    lines.append(f"wall time   : {r['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))


def format_summary(s: dict) -> str:
    """One sentence on a :meth:`ModelCheckReport.summary` (the ``model check`` line of ``policyopt schedule``)."""
    head = (f"first-order chains ({s['states']} states) vs Δ(t) estimated from the data, lags 1..{s['max_lag']}, "
            f"parametric bootstrap of {s['draws']} simulated data sets, level {s['level']:g}: ")
    if not s["refuted"]:
        return head + "not refuted at any lag"
    expect = (1 - s["level"]) * s["max_lag"]
    verdict = (
        "the chain's ε at those ages is not supported by the data (see policyopt check-model; --max-tv empirical "
        "designs against the data)" if s["refuted_count"] > 2 * expect + 2 else
        "about what chance gives when each lag is tested on its own: no clear evidence against the chains"
    )
    return head + (
        f"REFUTED at {s['refuted_count']} lags ({s['refuted_lag_ranges']}; ~{expect:.2g} by chance); worst at lag "
        f"{s['worst_lag']}: Δ̂ = {fmt_value(s['worst_empirical_max_tv'], 3)} on the data vs ≤ "
        f"{fmt_value(s['worst_model_critical'], 3)} under the chains, whose Δ there is "
        f"{fmt_value(s['worst_model_max_tv'], 3)} — {verdict}"
    )


def _check_fraction(holdout):
    if holdout is None:
        return None
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float, np.floating)) or not (0.0 < float(holdout) < 1.0):
        raise InvalidInputError(f"`holdout` must be a fraction strictly between 0 and 1, got {fmt(holdout)}")
    return float(holdout)


def check_model(
    data=None,
    *,
    n_states: int | None = None,
    value_range=None,
    max_lag: int | None = None,
    level: float = 0.95,
    holdout: float | None = None,
    min_pairs: int = DEFAULT_MIN_PAIRS,
    draws: int = DEFAULT_DRAWS,
    n_boot: int = DEFAULT_N_BOOT,
    smoothing: float = 0.01,
    seed: int = 0,
    source: str | None = None,
) -> ModelCheckReport:
    """Test the fitted first-order chains' Δ(t) against the readings, lag by lag.

    Parameters
    ----------
    data : pandas.DataFrame, optional
        Long table with columns user, time (integer slots), value.  Default: the bundled CityLearn pilot
        (17 homes, hourly kWh), with 3 states and the public range 0:48 kWh unless given.
    n_states : int, optional
        Quantile states K (default 3 for the bundled pilot, 12 otherwise).
    value_range : (float, float), optional
        Public range (LO, HI): readings are clipped into it before anything is estimated.
    max_lag : int, optional
        L (slots).  Default :func:`~policyopt.models.empirical.default_max_lag` of the estimation series.
    level : float
        Level in (0, 1) of the band and of each lag's test.
    holdout : float, optional
        Fraction F in (0, 1): fit on the first 1 − F of each user's span, estimate and test on the rest.
    min_pairs : int
        Pairs a row needs to be claimed (:func:`~policyopt.models.empirical.estimate_max_tv`).
    draws : int
        Data sets R ≥ 1 simulated from the chains for the test.
    n_boot : int
        Block-bootstrap replicates of the band (≥ 20).
    smoothing : float
        Pseudo-count of the chains' estimate (:func:`~policyopt.models.estimation.fit_population`).
    seed : int
        Seed of the resampling and the simulation (never released noise).
    source : str, optional
        How to name the data in the report.

    Returns
    -------
    ModelCheckReport

    Raises
    ------
    InvalidInputError
        Bad readings or any bad argument (named, with its value); a holdout part too short for L.

    See Also
    --------
    policyopt.studies.distributed_checks.check_model_partitions : the same check of a partitioned Parquet data set
        on Dask (``policyopt check-model --workers N``), with the same numbers.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12);
    Davison & Hinkley (1997), Sec. 4.2.5 (Monte Carlo tests).
    """
    from policyopt.errors import check_value_range
    from policyopt.models.estimation import fit_population, validate_readings

    start = time.perf_counter()
    bundled = data is None
    if bundled:
        from policyopt.data import load_citylearn

        data = load_citylearn()
        source = source or "bundled CityLearn 2022 pilot, 17 homes, hourly kWh"
        n_states = BUNDLED_STATES if n_states is None else n_states
        value_range = BUNDLED_VALUE_RANGE if value_range is None else value_range
    source = source or "readings given in Python"
    n_states = 12 if n_states is None else n_states
    frac = _check_fraction(holdout)
    df = validate_readings(data, source="`data`")
    if value_range is not None:
        lo, hi = check_value_range(value_range)
        df["value"] = np.clip(df["value"].to_numpy(), lo, hi)
        value_range = (lo, hi)
    if frac is not None:
        t0 = df.groupby("user")["time"].transform("min")
        span = df.groupby("user")["time"].transform("max") - t0 + 1
        cut = t0 + np.ceil((1.0 - frac) * span).astype(np.int64)
        train, test = df[df["time"] < cut], df[df["time"] >= cut]
        if test.empty:
            raise InvalidInputError(f"`holdout`={frac} leaves no readings to test on")
    else:
        train = test = df
    fitted = fit_population(train, n_states, smoothing=smoothing, source="`data`", value_range=value_range)
    present = set(test["user"].unique())  # once: the set of every reading's user per kept user cost O(users × readings)
    users = [u for u in fitted.users if u in present]
    if not users:
        raise InvalidInputError("no user kept by the fit has readings in the held-out part")
    states = readings_states(test, fitted.quantizer, users)
    info = {
        "source": source,
        "holdout": frac,
        "fit_slots": int(readings_states(train, fitted.quantizer, users).shape[1]) if frac is not None else int(states.shape[1]),
        "value_range": None if value_range is None else list(value_range),
        "smoothing": float(smoothing),
    }
    return check_fitted(fitted, states, users, max_lag=max_lag, level=level, min_pairs=min_pairs, draws=draws,
                        n_boot=n_boot, seed=seed, info=info, start=start)


def data_states(readings, fitted) -> tuple[np.ndarray, list]:
    """States of the fitted users' readings (clipped to the fit's value range), for :func:`check_fitted`.

    Returns
    -------
    (states, users) : numpy.ndarray of int64 (U, T) and list of str
        The fit's kept users that have readings in `readings`, in the fit's order (a user whose readings all lie
        elsewhere, e.g. a meter that stops before a held-out part, is left out; callers say so).

    Raises
    ------
    InvalidInputError
        No kept user of the fit has a reading in `readings`.
    """
    from policyopt.models.estimation import validate_readings

    df = validate_readings(readings, source="`readings`")
    if fitted.value_range is not None:
        df["value"] = np.clip(df["value"].to_numpy(), *fitted.value_range)
    present = set(df["user"].unique())
    users = [u for u in fitted.users if u in present]
    if not users:
        raise InvalidInputError("no user kept by the fit has readings here: the readings and the fit share no user")
    return readings_states(df, fitted.quantizer, users), users


#: Simulated data sets of the model check every data run of ``schedule`` / ``sweep`` prints: with 19 the smallest Monte
#: Carlo p-value is 0.05, enough for a verdict at level 0.95; the verdict needs no band, so none is computed
#: (``policyopt check-model`` runs the full check).
QUICK_DRAWS = 19


def quick_check(fitted, readings, A_max: int, S_max: int, *, seed: int = 0) -> dict:
    """The cheap model check of a design run on data: :meth:`ModelCheckReport.summary` at lags 1..A_max + S_max − 1.

    Parameters
    ----------
    fitted : policyopt.models.estimation.FittedModel
        The chains the design uses.
    readings : pandas.DataFrame
        The readings they were fitted to.
    A_max, S_max : int
        The search box (slots): Theorem 3 uses Δ at ages up to A_max + S_max − 1.
    seed : int
        Seed of the simulation.

    Returns
    -------
    dict
        The summary (``refuted``, ``refuted_lags``, ``worst_lag``, …), :data:`QUICK_DRAWS` simulated data sets, no band.
    """
    states, users = data_states(readings, fitted)
    check = check_fitted(fitted, states, users, max_lag=quick_max_lag(A_max, S_max, states.shape[1]), draws=QUICK_DRAWS,
                         n_boot=0, seed=seed)
    return check.summary()


def _p_values(sims: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    """Monte Carlo p-values (1 + #{draws ≥ Δ̂}) / (R + 1) per lag (Davison & Hinkley 1997, Sec. 4.2.5)."""
    return (1.0 + np.sum(sims >= estimate[None, :] - 1e-12, axis=0)) / (sims.shape[0] + 1.0)


def quick_max_lag(A_max: int, S_max: int, slots: int) -> int:
    """Lags of :func:`quick_check`: A_max + S_max − 1 (at least 1), below the longest series of `slots` slots."""
    return min(max(int(A_max) + int(S_max) - 1, 1), int(slots) - 1)


def check_from_maxima(estimate, model_max_tv, draws, *, users_without_claim=None, level: float = 0.95,
                      min_pairs: int = DEFAULT_MIN_PAIRS, info: dict | None = None, start: float | None = None) -> ModelCheckReport:
    """The point-estimate check (no band) from statistics already reduced over users, e.g. per partition on Dask.

    Every input is a maximum over users (Δ̂(t), the chains' Δ(t) of eq. (12), and each simulated data set's
    Δ̂(t) when each user is simulated from its own stream, :func:`~policyopt.models.empirical.user_streams`),
    so maxima over groups of users combine by a maximum; the test is then that of :func:`check_fitted`.

    Parameters
    ----------
    estimate, model_max_tv : array_like, shape (L,)
        Δ̂(t) and the chains' Δ(t), t = 1..L.
    draws : array_like, shape (R, L)
        The statistic on R simulated data sets.
    users_without_claim : array_like of int, shape (L,), optional
        Users with an unclaimed row per lag (summed over groups).
    level, min_pairs
        As :func:`check_model`.
    info : dict, optional
        Report facts (``states``, ``users``, ``slots``, ``seed``, ...).
    start : float, optional
        ``time.perf_counter()`` at the start of the caller's work.

    Returns
    -------
    ModelCheckReport
        Its ``empirical`` has the point estimate and the no-claim band [0, 1] (no per-user arrays).
    """
    start = time.perf_counter() if start is None else start
    est = np.asarray(estimate, dtype=float)
    L = est.size
    sims = np.asarray(draws, dtype=float).reshape(-1, L)
    no_claim = np.zeros(L, dtype=np.int64) if users_without_claim is None else np.asarray(users_without_claim, dtype=np.int64)
    emp = EmpiricalMaxTV(
        lags=np.arange(1, L + 1, dtype=np.int64), estimate=est, lower=np.zeros(L), upper=np.ones(L),
        per_user=np.zeros((0, L)), level=float(level),
        method=f"point estimate only (no bootstrap band: the band is [0, 1], no claim); rows with < {min_pairs} pairs "
        "make no claim", min_pairs=int(min_pairs), users_without_claim=no_claim,
    )
    p = _p_values(sims, est)
    return ModelCheckReport(empirical=emp, model_max_tv=np.asarray(model_max_tv, dtype=float), draws=sims, p_values=p,
                            info=dict(info or {}), wall_time_s=time.perf_counter() - start)


def check_from_part(part, model_max_tv, draws, *, level: float = 0.95, info: dict | None = None,
                    start: float | None = None) -> ModelCheckReport:
    """The full check (with the band when `part` has replicates) from statistics reduced over groups of users.

    Parameters
    ----------
    part : policyopt.models.empirical.MaxTVPart
        The map step of the direct estimate merged over all groups (:meth:`~policyopt.models.empirical.MaxTVPart.merge`).
    model_max_tv : array_like, shape (L,)
        The chains' Δ(t) (eq. (12)), max over users.
    draws : array_like, shape (R, L)
        The statistic on R data sets simulated from the chains, each user from its own stream (max over users).
    level : float
        Level of the band and of each lag's test.
    info : dict, optional
        Report facts (``source``, ``states``, ``users``, ``slots``, ``seed``, ...).
    start : float, optional
        ``time.perf_counter()`` at the start of the caller's work.

    Returns
    -------
    ModelCheckReport
        Its ``empirical`` is :func:`~policyopt.models.empirical.max_tv_band` of `part` (no per-user arrays when the
        part was merged).

    Raises
    ------
    InvalidInputError
        Bad `level`; no user with a series longer than L (with a band).
    """
    from policyopt.models.empirical import max_tv_band

    start = time.perf_counter() if start is None else start
    emp = max_tv_band(part, level)
    sims = np.asarray(draws, dtype=float).reshape(-1, emp.lags.size)
    p = _p_values(sims, emp.estimate)
    return ModelCheckReport(empirical=emp, model_max_tv=np.asarray(model_max_tv, dtype=float), draws=sims, p_values=p,
                            info=dict(info or {}), wall_time_s=time.perf_counter() - start)


def check_fitted(fitted, states, users, *, max_lag: int | None = None, level: float = 0.95,
                 min_pairs: int = DEFAULT_MIN_PAIRS, draws: int = DEFAULT_DRAWS, n_boot: int = DEFAULT_N_BOOT,
                 seed: int = 0, info: dict | None = None, start: float | None = None) -> ModelCheckReport:
    """The check of :func:`check_model` for chains already fitted, on given state series.

    Parameters
    ----------
    fitted : policyopt.models.estimation.FittedModel
    states : numpy.ndarray of int, shape (U, T)
        State series of `users` (−1 missing), e.g. from :func:`data_states`.
    users : sequence of str
        Users of the rows of `states`, each kept by `fitted`.
    max_lag, level, min_pairs, draws, n_boot, seed
        As :func:`check_model`.
    info : dict, optional
        Extra report facts (source, holdout, …).
    start : float, optional
        ``time.perf_counter()`` at the start of the caller's work (for ``wall_time_s``).

    Returns
    -------
    ModelCheckReport
    """
    from policyopt.models.markov import Population

    start = time.perf_counter() if start is None else start
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidInputError(f"`seed` must be an integer ≥ 0, got {fmt(seed)}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise InvalidInputError(f"`draws` must be an integer ≥ 1, got {fmt(draws)}")
    keep = [fitted.users.index(u) for u in users]
    K = fitted.quantizer.n_states
    T = states.shape[1]
    L = default_max_lag(T) if max_lag is None else max_lag
    # one resampling stream per user (keyed by name), like the simulation: the Dask path resamples each partition's
    # users alone and gets the same replicates, so the same band
    emp = estimate_max_tv(states, K, L, level=level, min_pairs=min_pairs, n_boot=n_boot, seed=int(seed),
                          rng=user_streams(users, int(seed), stream=2))
    chains = [fitted.population.chains[i] for i in keep]
    model = np.asarray(Population(chains).max_tv(emp.lags), dtype=float)
    # one stream per user (keyed by name): the Dask path simulates each partition's users alone and gets the same draws
    sims = chain_statistic_draws([c.P for c in chains], states, K, emp.max_lag, min_pairs=emp.min_pairs, draws=int(draws),
                                 rng=user_streams(users, int(seed)))
    p = _p_values(sims, emp.estimate)
    full = {"source": "readings given in Python", "holdout": None, "fit_slots": int(T),
            "value_range": None if fitted.value_range is None else list(fitted.value_range),
            "smoothing": float(fitted.smoothing)}
    full.update(info or {})
    full.update({"states": K, "users": len(users), "slots": int(T), "seed": int(seed),
                 "excluded_users": dict(fitted.excluded)})
    return ModelCheckReport(empirical=emp, model_max_tv=model, draws=sims, p_values=p, info=full,
                            wall_time_s=time.perf_counter() - start)


def plot_check(report: ModelCheckReport, path, *, title: str | None = None) -> None:
    """Draw the chains' Δ(t), the direct estimate, its band and the refuted lags on a log lag axis into `path`.

    Raises
    ------
    BackendUnavailableError
        If matplotlib is missing.
    """
    from policyopt.studies.plots import require_matplotlib

    require_matplotlib("--plot")
    from matplotlib.figure import Figure

    e = report.empirical
    fig = Figure(figsize=(7.5, 5.0), layout="constrained")
    ax = fig.subplots()
    lags = e.lags
    ax.fill_between(lags, e.lower, e.upper, color="0.85", label=f"direct estimate, {100 * e.level:g}% simultaneous band")
    ax.plot(lags, e.estimate, color="0.0", lw=1.2, label="direct estimate Δ̂(t) (max over users)")
    ax.plot(lags, report.model_critical, color="0.45", lw=1.0, ls="--",
            label=f"Δ̂(t) under the chains ({100 * e.level:g}% of simulated data sets below)")
    ax.plot(lags, report.model_max_tv, color="0.25", lw=1.6, ls=":", label="fitted chains' Δ(t) (eq. (12))")
    ref = report.refuted
    if ref.any():
        ax.scatter(lags[ref], e.estimate[ref], s=9, color="tab:red", zorder=3, label="refuted lags")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("lag t (slots, log scale)")
    ax.set_ylabel("Δ(t): largest row TV of the reversed t-step kernel")
    ax.set_title(title or f"Chain model check, {report.info.get('states')} states")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=7, frameon=False)
    fig.savefig(path, dpi=110)
