r"""Tests of the Markov premise: G² likelihood-ratio statistics per lag, parametric bootstrap, family-wise level.

Theorem 3 of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory
70(2), 2024 ("If the process {X_t} is Markovian …") composes the per-release risks with Δ(t) of eq. (12) only when
each user's state series X_t is a first-order Markov chain, or, for a richer model, when an augmented state Z_t is.
This module tests that premise on quantile-state series (states 0..K−1 on the slot grid, −1 where a slot has no
reading).

**Statistic.**  The G² likelihood-ratio statistic of conditional independence of X_{t+1} and X_{t−ℓ} given a context
C_t, per lag ℓ and summed over users (eqs. (G2) and (DF) of :mod:`policyopt.models.g2_profile`, which computes it on a
compiled kernel as a map step whose per-group profiles add; :func:`markov_test_from_parts` is the reduce step).
Every name of ``__all__`` is importable from here.

**Reference distribution.**  A parametric bootstrap: R data sets simulated from the model under test (the caller
provides them), with the observed missing slots applied, and the same statistic on each.  Monte Carlo p-values
(1 + #{draws at least as extreme}) / (R + 1) (A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their
Application", Cambridge, 1997, Sec. 4.2.5) are valid for small counts, where the χ² approximation of G² is not.

**Family-wise level.**  Single-step max-T / min-p (P. H. Westfall, S. S. Young, "Resampling-Based Multiple Testing",
Wiley, 1993): each lag's G² is mapped by a fixed monotone transform that makes lags comparable, the χ² upper-tail
probability with df(ℓ) (in log space, :func:`chi2_logsf`), and m_j = min_ℓ of it on the observed set (j = 0) and on
each simulated set j = 1..R; p_family = (1 + #{j ≥ 1 : m_j ≤ m_0}) / (R + 1).  The transform is one function of a
data set applied to every set, and the R + 1 sets are exchangeable under the model, so the test is an exact Monte
Carlo test at every level, however poor the χ² approximation (it only decides how the lags are weighed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.formatting import lag_ranges
from policyopt.models.empirical import states_matrix
from policyopt.models.g2_profile import BITSET_COST_RATIO, G2Counter, G2Profile, describe_context, g2_profile

__all__ = [
    "G2Profile",
    "FamilyWiseP",
    "MarkovTestResult",
    "chi2_logsf",
    "family_wise_p",
    "markov_test",
    "markov_test_from_parts",
    "default_markov_lags",
    "WEEK_OF_HOURS",
    "g2_profile",
    "describe_context",
    "BITSET_COST_RATIO",
]

#: Slots of a week of hourly slots: the default number of lags when the slot length is unknown.
WEEK_OF_HOURS = 168
#: Relative tolerance under which two transformed statistics count as tied (ties count against refutation).
_TIE_RTOL = 1e-12


# --------------------------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class FamilyWiseP:
    """A single-step max-T / min-p family-wise Monte Carlo p-value over lags (Westfall & Young 1993).

    Attributes
    ----------
    p_value : float
        (1 + #{j ≥ 1 : set j at least as extreme as the observed set}) / (R + 1), in [1/(R + 1), 1].
    pointwise : numpy.ndarray, shape (L,)
        Per lag, (1 + #{draws at least as extreme at that lag}) / (R + 1) (descriptive; not family-wise).
    worst : int or None
        Index (0-based) of the lag where the observed set is most extreme after the transform; None if no lag is
        informative.
    observed_extreme : float
        m_0 (``"chi2"``: the smallest log χ² upper-tail probability, nats) or T_0 (``"z"``: the largest z).
    draws_extreme : numpy.ndarray, shape (R,)
        m_j or T_j of the simulated sets.
    transform : str
        ``"chi2"`` or ``"z"``.
    """

    p_value: float
    pointwise: np.ndarray
    worst: int | None
    observed_extreme: float
    draws_extreme: np.ndarray
    transform: str


@dataclass(frozen=True)
class MarkovTestResult:
    """Verdict of :func:`markov_test`: observed G² per lag, family-wise and pointwise Monte Carlo p-values.

    Attributes
    ----------
    lags : numpy.ndarray of int64, shape (L,)
        Lags tested (slots).
    statistic, df, pairs : numpy.ndarray, shape (L,)
        Observed G²(ℓ), df(ℓ) and triples counted (summed over users).
    p_value : float
        Family-wise p (max-T / min-p over the lags).
    pointwise_p_values : numpy.ndarray, shape (L,)
        Monte Carlo p-value of each lag alone (descriptive).
    worst_lag : int or None
        Lag (slots) of the smallest observed χ² upper-tail probability; None when no lag has df > 0.
    refuted : bool
        ``p_value ≤ 1 − level``.
    level : float
        1 − the family-wise size of the test.
    draws : int
        R, simulated data sets.
    context : str
        What is conditioned on (:func:`describe_context`).
    method : str
        One sentence on the statistic, the context, the reference distribution and the correction.
    draw_statistic, draw_df : numpy.ndarray, shape (R, L)
        G²(ℓ) and df(ℓ) of each simulated set.
    log_sf : numpy.ndarray, shape (L,)
        ln of the χ² upper-tail probability of the observed G²(ℓ) with df(ℓ) (the transform; nats).
    users : int
        Users in the test.
    """

    lags: np.ndarray
    statistic: np.ndarray
    df: np.ndarray
    pairs: np.ndarray
    p_value: float
    pointwise_p_values: np.ndarray
    worst_lag: int | None
    refuted: bool
    level: float
    draws: int
    context: str
    method: str
    draw_statistic: np.ndarray = field(repr=False)
    draw_df: np.ndarray = field(repr=False)
    log_sf: np.ndarray = field(repr=False)
    users: int = 0

    def to_dict(self) -> dict:
        """JSON-ready fields: method, level, lags, statistic, p_value, worst_lag, refuted, pointwise_p_values, df,
        draws, context."""
        return {
            "method": self.method,
            "level": float(self.level),
            "lags": [int(v) for v in self.lags],
            "statistic": [float(v) for v in self.statistic],
            "p_value": float(self.p_value),
            "worst_lag": None if self.worst_lag is None else int(self.worst_lag),
            "refuted": bool(self.refuted),
            "pointwise_p_values": [float(v) for v in self.pointwise_p_values],
            "df": [int(v) for v in self.df],
            "draws": int(self.draws),
            "context": self.context,
        }




# --------------------------------------------------------------------------------------------------------------------
# validation



def _check_sim(sim, K: int, U: int, T: int, j: int) -> np.ndarray:
    """A simulated data set (U, T' ≤ T) of integers in −1..K−1, without copying integer arrays."""
    a = sim if isinstance(sim, np.ndarray) and sim.ndim == 2 and sim.dtype.kind in "iu" else states_matrix(sim, K)
    if a.ndim != 2 or a.shape[0] != U or a.shape[1] > T:
        raise InvalidInputError(f"`simulated` data set {j} has shape {a.shape}; expected ({U}, T') with T' ≤ {T} "
                                "(the observed users and slots)")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < -1 or hi >= K:
            raise InvalidInputError(f"`simulated` data set {j} holds states {lo}..{hi}, outside 0..{K - 1} "
                                    "(−1 = missing)")
    if a.dtype not in (np.int8, np.int16, np.int32, np.int64):
        a = a.astype(np.int64)
    return a



def chi2_logsf(statistic, df) -> np.ndarray:
    """ln Pr(χ²_df ≥ statistic), accurate far into the tail (no underflow to −inf).

    ``scipy.stats.chi2.logsf``'s own rule (ln of the survival function above the median, log1p of minus the cdf
    below) on ``scipy.special.chdtrc``/``chdtr`` — the same numbers without importing ``scipy.stats`` (about 1 s per
    process) — where it is above −600 nats; below, the upper incomplete gamma function in log
    space, ln Q(a, x) = −x + a ln x − ln Γ(a) + ln F(a, x) with a = df/2, x = statistic/2 and F the continued
    fraction of Γ(a, x) e^x x^{−a} (modified Lentz; W. H. Press et al., "Numerical Recipes", 3rd ed., Cambridge,
    2007, Sec. 6.2), which converges fast there (x > a + 1: a tail probability below e^−600 needs x far above a).  df = 0 gives 0 (probability 1: no evidence).

    Parameters
    ----------
    statistic : array_like
        G² values ≥ 0 (dimensionless).
    df : array_like of int
        Degrees of freedom ≥ 0, broadcastable with `statistic`.

    Returns
    -------
    numpy.ndarray
        ln of the upper-tail probability (nats, ≤ 0).
    """
    from scipy import special

    x = np.asarray(statistic, dtype=np.float64)
    d = np.asarray(df, dtype=np.float64)
    x, d = np.broadcast_arrays(x, d)
    out = np.zeros(x.shape)
    pos = d > 0
    if np.any(pos):
        xp, dp = np.maximum(x[pos], 0.0), d[pos]
        with np.errstate(divide="ignore"):
            out[pos] = np.where(xp > special.chdtri(dp, 0.5), np.log(special.chdtrc(dp, xp)),
                                np.log1p(-special.chdtr(dp, xp)))
    deep = pos & ~(out > -600.0)
    if np.any(deep):
        a = d[deep] / 2.0
        z = x[deep] / 2.0
        tiny = 1e-300
        b = z + 1.0 - a
        c = np.full(a.shape, 1.0 / tiny)
        dd = 1.0 / b
        h = dd.copy()
        for i in range(1, 2000):  # continued fraction of Γ(a, z) (modified Lentz)
            an = -i * (i - a)
            b = b + 2.0
            dd = an * dd + b
            dd = np.where(np.abs(dd) < tiny, tiny, dd)
            c = b + an / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            dd = 1.0 / dd
            step = dd * c
            h = h * step
            if np.all(np.abs(step - 1.0) < 1e-15):
                break
        out[deep] = -z + a * np.log(z) - special.gammaln(a) + np.log(h)  # ln Q(a, z) = ln[Γ(a, z)/Γ(a)], NR Sec. 6.2
    return out


def family_wise_p(observed, draws, *, transform: str = "chi2", df=None, draws_df=None) -> FamilyWiseP:
    """Family-wise Monte Carlo p-value over lags by the single-step max-T / min-p method (Westfall & Young 1993).

    The observed per-lag statistic (set j = 0) and R simulated ones (j = 1..R) are made comparable across lags by a
    monotone transform, reduced to one number per set, and ranked:

    * ``"chi2"``: τ_j(ℓ) = ln Pr(χ²_{df_j(ℓ)} ≥ s_j(ℓ)) (:func:`chi2_logsf`; df 0 gives 0), m_j = min_ℓ τ_j(ℓ),
      p = (1 + #{j ≥ 1 : m_j ≤ m_0}) / (R + 1);
    * ``"z"``: z_j(ℓ) = (s_j(ℓ) − mean_ℓ) / sd_ℓ with the mean and standard deviation of the R + 1 values at lag ℓ
      pooled (lags where all R + 1 values are equal are left out), T_j = max_ℓ z_j(ℓ),
      p = (1 + #{j ≥ 1 : T_j ≥ T_0}) / (R + 1).

    **Exactness.**  Each set's reduced value is the same function of that set (for ``"z"`` a function of the set and
    of the unordered collection of all R + 1 sets), so when the R + 1 sets are exchangeable — the observed data
    follow the simulated model — the rank of set 0 is uniform and Pr(p ≤ α) ≤ α for every α, with equality when
    α (R + 1) is an integer and there are no ties, whatever the quality of the χ² approximation (which only decides
    how the lags are weighed).  Ties (within a relative 1e-12) count against refutation.

    Parameters
    ----------
    observed : array_like, shape (L,)
        The statistic at each lag on the observed data (larger = more evidence against the model).
    draws : array_like, shape (R, L)
        The same statistic on R ≥ 1 simulated data sets.
    transform : {"chi2", "z"}
        The lag-wise transform.
    df : array_like of int, shape (L,)
        Degrees of freedom of the observed statistic per lag (required with ``"chi2"``).
    draws_df : array_like of int, shape (R, L), optional
        Degrees of freedom of each simulated set (``"chi2"``); default `df` for every set.

    Returns
    -------
    FamilyWiseP

    Raises
    ------
    InvalidInputError
        Shapes that disagree, R = 0, non-finite values, a bad `transform`, ``"chi2"`` without `df`, negative df.

    References
    ----------
    P. H. Westfall, S. S. Young, "Resampling-Based Multiple Testing", Wiley, 1993 (single-step min-p / max-T
    adjustment); A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their Application", Cambridge, 1997,
    Sec. 4.2.5 (Monte Carlo p-values).
    """
    s0 = np.asarray(observed, dtype=np.float64)
    if s0.ndim != 1 or s0.size == 0:
        raise InvalidInputError(f"`observed` must be a non-empty 1-D array (one value per lag), got {fmt(observed)}")
    L = s0.size
    sj = np.asarray(draws, dtype=np.float64)
    if sj.ndim != 2 or sj.shape[1] != L or sj.shape[0] < 1:
        raise InvalidInputError(f"`draws` must have shape (R ≥ 1, {L}), got shape {sj.shape}")
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(sj))):
        raise InvalidInputError("`observed` and `draws` must be finite")
    R = sj.shape[0]
    if transform == "chi2":
        if df is None:
            raise InvalidInputError("`transform`='chi2' needs `df` (degrees of freedom per lag)")
        d0 = np.asarray(df)
        dj = d0[None, :] if draws_df is None else np.asarray(draws_df)
        if d0.shape != (L,) or dj.shape not in ((1, L), (R, L)):
            raise InvalidInputError(f"`df` must have shape ({L},) and `draws_df` ({R}, {L}), got {d0.shape} and "
                                    f"{np.shape(draws_df)}")
        if np.any(d0 < 0) or np.any(dj < 0):
            raise InvalidInputError(f"`df` and `draws_df` must be ≥ 0, got {fmt(d0.tolist())}")
        t0 = chi2_logsf(s0, d0)
        tj = chi2_logsf(sj, np.broadcast_to(dj, (R, L)))
        # smaller τ = more extreme: min-p
        m0 = float(np.min(t0))
        mj = np.min(tj, axis=1)
        tol = _TIE_RTOL * max(1.0, abs(m0))
        p = (1.0 + np.count_nonzero(mj <= m0 + tol)) / (R + 1.0)  # single-step min-p (Westfall & Young 1993)
        # per lag, (1 + #{τ_j ≤ τ_0}) / (R + 1) (Davison & Hinkley 1997, Sec. 4.2.5)
        point = (1.0 + np.sum(tj <= t0[None, :] + _TIE_RTOL * np.maximum(1.0, np.abs(t0))[None, :], axis=0)) / (R + 1.0)
        worst = int(np.argmin(t0)) if np.any(t0 < 0.0) else None
        return FamilyWiseP(float(p), point, worst, m0, mj, "chi2")
    if transform == "z":
        pooled = np.vstack([s0[None, :], sj])
        mean = pooled.mean(axis=0)
        sd = pooled.std(axis=0)
        live = ~np.all(pooled == pooled[:1], axis=0)  # lags where the R + 1 values differ
        # per lag, (1 + #{s_j ≥ s_0}) / (R + 1) (Davison & Hinkley 1997, Sec. 4.2.5)
        point = (1.0 + np.sum(sj >= s0[None, :] - _TIE_RTOL * np.maximum(1.0, np.abs(s0))[None, :], axis=0)) / (R + 1.0)
        if not np.any(live):
            return FamilyWiseP(1.0, point, None, -math.inf, np.full(R, -math.inf), "z")
        z = (pooled[:, live] - mean[live]) / sd[live]  # z_j(ℓ), pooled over the R + 1 sets
        tmax = z.max(axis=1)  # T_j = max_ℓ z_j(ℓ)
        t0 = float(tmax[0])
        tol = _TIE_RTOL * max(1.0, abs(t0))
        p = (1.0 + np.count_nonzero(tmax[1:] >= t0 - tol)) / (R + 1.0)  # single-step max-T (Westfall & Young 1993)
        worst = int(np.flatnonzero(live)[int(np.argmax(z[0]))])
        return FamilyWiseP(float(p), point, worst, t0, tmax[1:], "z")
    raise InvalidInputError(f"`transform` must be 'chi2' or 'z', got {fmt(transform)}")


def markov_test_from_parts(observed: G2Profile, draws, *, level: float = 0.95) -> MarkovTestResult:
    """The reduce step of :func:`markov_test`: the verdict from the observed profile and R simulated ones.

    Parameters
    ----------
    observed : G2Profile
        :func:`g2_profile` of the observed data (merged over all groups of users).
    draws : sequence of G2Profile
        The same for each of R ≥ 1 simulated data sets (same users, lags and context, observed missing slots).
    level : float
        In (0, 1); refuted iff the family-wise p ≤ 1 − level.

    Returns
    -------
    MarkovTestResult

    Raises
    ------
    InvalidInputError
        Bad `level`, no draws, or a draw of another test (lags, context, users).
    """
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    if not isinstance(observed, G2Profile):
        raise InvalidInputError(f"`observed` must be a G2Profile, got {fmt(observed)}")
    draws = list(draws)
    if not draws:
        raise InvalidInputError("`draws` is empty: the test needs R ≥ 1 simulated data sets (19 for a verdict at "
                                "level 0.95)")
    for j, d in enumerate(draws):
        if (not isinstance(d, G2Profile) or not np.array_equal(d.lags, observed.lags) or d.users != observed.users
                or d.context_order != observed.context_order or d.period != observed.period):
            raise InvalidInputError(f"`draws` item {j} is not a G2Profile of the same test (lags, context, "
                                    f"{observed.users} users): {fmt(d)}")
    R = len(draws)
    stat = np.vstack([d.statistic for d in draws])
    ddf = np.vstack([d.df for d in draws])
    fw = family_wise_p(observed.statistic, stat, transform="chi2", df=observed.df, draws_df=ddf)
    lv = float(level)
    context = describe_context(observed.context_order, observed.period)
    lags = observed.lags
    method = (
        f"G² likelihood-ratio test (Anderson & Goodman 1957) of X_(t+1) independent of X_(t−ℓ) given {context}, "
        f"summed over {observed.users} users, at lags {lag_ranges(lags)}; reference: parametric bootstrap of {R} "
        "data sets simulated from the model under test (same users, missing slots); family-wise over the lags by the "
        "single-step max-T/min-p method (Westfall & Young 1993) on the χ² upper-tail probability with df(ℓ): exact "
        f"Monte Carlo p-value (1 + #sets with min p ≤ observed)/({R} + 1), smallest possible {1 / (R + 1):.4g}"
    )
    return MarkovTestResult(
        lags=lags, statistic=observed.statistic, df=observed.df, pairs=observed.pairs, p_value=fw.p_value,
        pointwise_p_values=fw.pointwise, worst_lag=None if fw.worst is None else int(lags[fw.worst]),
        refuted=bool(fw.p_value <= 1.0 - lv + 1e-12), level=lv, draws=R, context=context, method=method,
        draw_statistic=stat, draw_df=ddf, log_sf=chi2_logsf(observed.statistic, observed.df), users=observed.users,
    )


def markov_test(observed_states, n_states: int, simulated, lags, *, level: float = 0.95, context_order: int = 1,
                period: int | None = None, starts=None) -> MarkovTestResult:
    """Test the Markov premise on state series against R data sets simulated from the model under test.

    G²(ℓ) (eq. (G2)) on the observed series and on each simulated data set (with the observed missing slots
    applied), then the family-wise max-T / min-p Monte Carlo p-value over the lags (:func:`family_wise_p` with the
    χ² transform).  The test is exact at every level when the observed data follow the model that simulated the
    sets, started as the observed series starts, and the missing slots do not depend on the states (the R + 1 sets
    are then exchangeable; see :func:`family_wise_p`); with a *fitted* model it is a parametric bootstrap test, whose
    size is measured in ``tests/benchmarks/bench_markov_test.py`` (4.5 % at level 0.95 for K = 3).  With many states
    per slot of data (K = 12 fitted on 4,380 slots), fitted chains make transitions unseen in the fit almost
    impossible, the simulated sets have fewer non-empty cells (df) than the data, and the test becomes conservative
    (no true chain refuted in 100 data sets; an order-2 chain still refuted in 8 of 10, through distant lags).

    Parameters
    ----------
    observed_states : array_like, shape (U, T)
        As :func:`~policyopt.models.empirical.states_matrix`: states 0..K−1, −1 missing.
    n_states : int
        K ≥ 2.
    simulated : array_like of shape (R, U, T') or iterable of R arrays (U, T')
        Data sets simulated from the model under test (e.g. :func:`~policyopt.models.empirical.simulate_chain_states`
        with one stream per user, :func:`~policyopt.models.empirical.user_streams`), T' ≤ T (columns beyond T' are
        missing); consumed one at a time, so a generator keeps one set in memory.  Simulation randomness only.
    lags : int or sequence of int
        As :func:`g2_profile` (an integer L: lags k..L).
    level : float
        1 − the family-wise size; refuted iff p ≤ 1 − level.
    context_order, period, starts
        The context, as :func:`g2_profile`.

    Returns
    -------
    MarkovTestResult

    Raises
    ------
    InvalidInputError
        As :func:`g2_profile`; `simulated` empty, a 2-D array, or a data set of another shape or with states
        outside −1..K−1; bad `level`.

    References
    ----------
    Anderson & Goodman (1957); Billingsley (1961); Westfall & Young (1993); Davison & Hinkley (1997), Sec. 4.2.5.
    """
    counter = G2Counter(observed_states, n_states, lags, context_order=context_order, period=period, starts=starts)
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    if isinstance(simulated, np.ndarray) and simulated.ndim != 3:
        raise InvalidInputError(f"`simulated` must be an array (R, U, T) or an iterable of (U, T) arrays, got an "
                                f"array of shape {simulated.shape}")
    K, U, T = counter.n_states, counter.users, counter.slots
    obs = counter.profile(counter.states)
    draws = [counter.profile(_check_sim(sim, K, U, T, j)) for j, sim in enumerate(simulated)]
    if not draws:
        raise InvalidInputError("`simulated` holds no data set: the test needs R ≥ 1 (19 for a verdict at level 0.95)")
    return markov_test_from_parts(obs, draws, level=level)


def default_markov_lags(slots_per_week: int | None, box_last_age: int, series_length: int) -> int:
    """Default number of lags L of the Markov test: a week of slots or the design box's last age, whichever is larger.

    L = max(slots_per_week (168 when None: hourly slots), box_last_age), at most T − 2 (a triple X_{t−ℓ}, X_t,
    X_{t+1} must fit), at least 1.  A week covers daily and weekly routines; the box's last age covers every Δ(t)
    the design uses (Zhang et al. 2024, Theorem 3).

    Parameters
    ----------
    slots_per_week : int or None
        Slots in a week (≥ 1), None when the slot length is unknown.
    box_last_age : int
        Largest age (slots, ≥ 0) at which the design uses Δ(t), e.g. A_max + S_max − 1.
    series_length : int
        T ≥ 1, slots of the longest series.

    Returns
    -------
    int

    Raises
    ------
    InvalidInputError
        If an argument is not an integer in its range.
    """
    week = WEEK_OF_HOURS if slots_per_week is None else check_int(slots_per_week, "slots_per_week", 1)
    age = check_int(box_last_age, "box_last_age", 0)
    T = check_int(series_length, "series_length", 1)
    return int(max(1, min(max(week, age), T - 2)))
