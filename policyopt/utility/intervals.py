r"""Error bars of a release: an exact interval for the input mean, and one for the current mean (noise and staleness).

A release of the equal-spacing schedule (Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans.
Inf. Theory 70(2), 2024, Proposition 3) is v = m_in + L: the mean m_in of the I users' readings (clipped into the
public range) at the input slot S_n − A, plus Laplace noise L of scale b = Δf/ε_C (Proposition 1; Δf = (HI − LO)/I).
Both intervals below are functions of v, b and the design's readings only, so they are post-processing of the
release (C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Proposition 2.1): they
cost no privacy and never read the stream's readings.

**Input mean (exact).**  P(−w ≤ L ≤ w) = 1 − e^{−w/b}, so

    [v − w, v + w],   w = b · ln(1 / (1 − level)),                                                   (CI1)

holds m_in with probability exactly `level` over the noise, whatever the readings (the released noise is OpenDP's
discrete Laplace on the 2^−1074 grid; its tail differs from the continuous one by less than the float spacing).

**Current mean (noise and staleness).**  The user reads v at the publication slot S_n as if it described the mean
m_now there; m_now = m_in + D with D the I-user mean's A-step change.  D is not known: its distribution at the
release's phase of the day h = S_n mod P is estimated from the design's readings, slot by slot: at each slot t of
phase h with readings at t and t − A, the pilot's users give the mean change μ_t and the sample variance s²_t of
their own changes.  For a deployment of I users drawn like the pilot's n_t at that slot (the premise of
:mod:`policyopt.utility.readings_penalty`, (R1)), D at slot t is the mean of I draws without replacement, with
mean μ_t and variance s²_t (1/I − 1/n_t) when I < n_t (normal by the central limit theorem); for I ≥ n_t it is
taken as μ_t itself, which over-states its spread (the pilot's own sampling noise s²_t/n_t ≥ s²_t/I), so the
interval is conservative there.  D's distribution at phase h is the mixture of these over the design's slots of
that phase; q_lo, q_hi are its α/4 and 1 − α/4 quantiles (α = 1 − level).  The combination is a union bound:

    [v − w' + q_lo, v + w' + q_hi],   w' = b · ln(2 / α),                                            (CI2)

misses m_now with probability at most P(L ∉ [−w', w']) + P(D ∉ [q_lo, q_hi]) = α/2 + α/2, whatever the dependence of
the two parts (here they are independent: the noise is drawn apart from the data).  For A = 0 the input slot is the
publication slot, D ≡ 0 and (CI2) is (CI1).  Its assumptions: the
deployment's slots of phase h are like the design's (no trend or season beyond the phase of the day; `backtest`
measures the coverage on held-out time), and the deployment's users are drawn like the pilot's.  A phase needs
⌈4/α⌉ design slots (80 at level 0.95) for its quantiles to lie inside the data; with fewer the phases are pooled
(``pooled``), and with fewer slots in all no current interval is formed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, fmt

__all__ = [
    "DEFAULT_CI_LEVEL",
    "StalenessSample",
    "StalenessQuantiles",
    "check_ci_level",
    "noise_half_width",
    "noise_interval",
    "current_interval",
    "staleness_sample",
    "phase_period",
    "replay_coverage",
]

#: Default level of both intervals.
DEFAULT_CI_LEVEL = 0.95


def check_ci_level(level, name: str = "ci_level") -> float:
    """`level` as a float strictly between 0 and 1.

    Raises
    ------
    InvalidInputError
        If `level` is not a number strictly between 0 and 1 (the message names `name` and shows the value).
    """
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
        raise InvalidInputError(f"`{name}` must be a level strictly between 0 and 1, got {fmt(level)}")
    return float(level)


def noise_half_width(noise_scale, level: float, *, tails: float = 1.0):
    """Half-width b · ln(tails / (1 − level)) of a Laplace(b) interval ((CI1): `tails` 1; (CI2): `tails` 2).

    Parameters
    ----------
    noise_scale : float or numpy.ndarray
        Laplace scale b = Δf/ε_C of each release (same unit as the readings).
    level : float
        Coverage level in (0, 1).
    tails : float
        1 for the exact input interval at `level`; 2 for the noise half of the union bound (CI2).

    Returns
    -------
    float or numpy.ndarray
        The half-width, the shape of `noise_scale`.
    """
    return np.asarray(noise_scale, dtype=float) * (math.log(tails) - math.log1p(-check_ci_level(level)))


def noise_interval(value, noise_scale, level: float):
    """(CI1): the interval that holds the input slot's mean with probability exactly `level` over the noise.

    Parameters
    ----------
    value, noise_scale : float or numpy.ndarray
        Released value v and Laplace scale b (broadcast together).
    level : float
        Level in (0, 1).

    Returns
    -------
    (low, high) : numpy.ndarray, numpy.ndarray
        v ∓ b · ln(1 / (1 − level)).
    """
    v = np.asarray(value, dtype=float)
    w = noise_half_width(noise_scale, level)
    return v - w, v + w


def phase_period(slot_seconds: int | None) -> int:
    """Slots per day when a day is a whole number (≥ 2) of slots, else 1 (no phase of the day)."""
    if slot_seconds is None or slot_seconds <= 0 or 86400 % int(slot_seconds):
        return 1
    return max(1, 86400 // int(slot_seconds))


@dataclass(frozen=True)
class StalenessQuantiles:
    """The quantiles (q_lo, q_hi) of D per phase for one number of users, at one level (see the module docstring).

    Attributes
    ----------
    low, high : numpy.ndarray, shape (P,)
        α/4 and 1 − α/4 quantiles of the I-user mean's A-step change at each phase h = slot mod P.
    pooled : bool
        Whether the phases were pooled (some phase had fewer than ⌈4/α⌉ design slots).
    slots : int
        Design slots behind the fewest-sampled phase used.
    stale : bool
        False for A = 0 (the input slot is the publication slot: D ≡ 0, and (CI2) is (CI1)).
    """

    low: np.ndarray
    high: np.ndarray
    pooled: bool
    slots: int
    stale: bool = True


@dataclass(frozen=True)
class StalenessSample:
    """The design's readings reduced to what the current-mean interval needs: per publication slot t of the design
    data with readings at t and t − `age`, the pilot's mean change μ_t, the sample variance s²_t of its users' own
    changes and their number n_t.

    Attributes
    ----------
    age : int
        The release's age A (slots).
    period : int
        Phase period P (slots per day; 1: none).
    phase : numpy.ndarray of int, shape (N,)
        t mod P of each slot.
    mean_change, var_change : numpy.ndarray, shape (N,)
        μ_t and s²_t (ddof 1; 0 where n_t = 1), in the readings' unit and its square.
    users : numpy.ndarray of int, shape (N,)
        n_t.
    """

    age: int
    period: int
    phase: np.ndarray
    mean_change: np.ndarray
    var_change: np.ndarray
    users: np.ndarray

    def to_dict(self) -> dict:
        """JSON-ready dict (floats as float64 values; read back by :meth:`from_dict` bit for bit)."""
        return {"age": int(self.age), "period": int(self.period), "phase": self.phase.tolist(),
                "mean_change": self.mean_change.tolist(), "var_change": self.var_change.tolist(),
                "users": self.users.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "StalenessSample":
        """The sample :meth:`to_dict` wrote.

        Raises
        ------
        InvalidInputError
            A missing key or columns of unequal length.
        """
        try:
            cols = [np.asarray(d[k], dtype=float) for k in ("phase", "mean_change", "var_change", "users")]
            age, period = int(d["age"]), int(d["period"])
        except (KeyError, TypeError, ValueError):
            raise InvalidInputError(f"not a staleness sample: {fmt(d)}") from None
        if len({c.shape for c in cols}) != 1 or cols[0].ndim != 1:
            raise InvalidInputError("a staleness sample needs four columns of equal length")
        return cls(age, period, cols[0].astype(np.int64), cols[1], cols[2], cols[3].astype(np.int64))

    def quantiles(self, users: int, level: float) -> StalenessQuantiles | None:
        """(q_lo, q_hi) of D per phase for a mean over `users` users (``None``: too few design slots in all).

        The quantiles of the mixture Σ_t N(μ_t, s²_t (1/I − 1/n_t)⁺) / N_h (a point mass at μ_t where the variance
        is 0) by bisection on its distribution function, to 1e−12 of its range; q_lo is rounded down and q_hi up.

        Raises
        ------
        InvalidInputError
            If `users` is not a positive integer or `level` not in (0, 1).
        """
        from scipy.special import ndtr

        lv = check_ci_level(level)
        if isinstance(users, bool) or not isinstance(users, (int, np.integer)) or users < 1:
            raise InvalidInputError(f"`users` must be a positive integer, got {fmt(users)}")
        if self.age == 0:  # the current mean is the input mean: no staleness, (CI2) = (CI1)
            return StalenessQuantiles(np.zeros(self.period), np.zeros(self.period), False, int(self.phase.size), False)
        p = (1.0 - lv) / 4.0
        need = math.ceil(1.0 / p - 1e-9)
        counts = np.bincount(self.phase, minlength=self.period)
        pooled = bool(counts.min() < need)
        if pooled and self.phase.size < need:
            return None
        sd = np.sqrt(np.maximum(self.var_change * (1.0 / users - 1.0 / np.maximum(self.users, 1)), 0.0))
        groups = [np.arange(self.phase.size)] if pooled else [np.flatnonzero(self.phase == h) for h in range(self.period)]
        low, high = np.empty(len(groups)), np.empty(len(groups))
        for g, idx in enumerate(groups):
            mu, s = self.mean_change[idx], sd[idx]
            pos = s > 0

            def cdf(x):
                """The mixture's distribution function at x (point masses at μ_t, normals where s_t > 0)."""
                out = np.count_nonzero(mu[~pos] <= x)
                if pos.any():
                    out = out + ndtr((x - mu[pos]) / s[pos]).sum()
                return out / mu.size

            a, b = float(np.min(mu - 40 * s)), float(np.max(mu + 40 * s))
            # targets lowered by 1e-12 against the rounding of α/4 (0.05/4 is 0.012500000000000011 in floats)
            for k, target in enumerate((p - 1e-12, 1.0 - p - 1e-12)):
                lo_x, hi_x = a, b  # cdf(lo_x) < target ≤ cdf(hi_x) after the loop (cdf(b) = 1 to rounding)
                lo_x = np.nextafter(lo_x, -np.inf)
                tol = 1e-12 * max(b - a, abs(a), abs(b), 1e-300)
                while hi_x - lo_x > tol:
                    mid = 0.5 * (lo_x + hi_x)
                    if cdf(mid) >= target:
                        hi_x = mid
                    else:
                        lo_x = mid
                if k == 0:
                    low[g] = lo_x  # P(D < q_lo) ≤ α/4
                else:
                    high[g] = hi_x  # P(D > q_hi) ≤ α/4
        if pooled:
            low, high = np.full(self.period, low[0]), np.full(self.period, high[0])
        return StalenessQuantiles(low, high, pooled, int(self.phase.size if pooled else counts.min()))


def staleness_sample(data, age: int, *, value_range=None, slot_seconds: int | None = None) -> StalenessSample:
    """Reduce design readings to the :class:`StalenessSample` of releases of age `age`.

    Parameters
    ----------
    data : pandas.DataFrame
        Long readings ``user``, ``time`` (integer slots), ``value`` (the design's readings).
    age : int
        A, slots (≥ 0).
    value_range : (float, float), optional
        Public range the readings are clipped into first (as the releases clip them).
    slot_seconds : int, optional
        Slot length; a day of slots is the phase period (1 when unknown or not a whole number of slots).

    Returns
    -------
    StalenessSample

    Raises
    ------
    InvalidInputError
        Bad readings (:func:`~policyopt.utility.readings_penalty.readings_panel`), a negative `age`, or no slot with
        readings at t and t − `age`.
    """
    from policyopt.utility.readings_penalty import readings_panel

    if isinstance(age, bool) or not isinstance(age, (int, np.integer)) or age < 0:
        raise InvalidInputError(f"`age` must be a whole number of slots ≥ 0, got {fmt(age)}")
    _, times, X, _ = readings_panel(data, value_range)
    a = int(age)
    if a >= X.shape[1]:
        raise InvalidInputError(f"the design's readings span {X.shape[1]} slots: none has readings {a} slots earlier")
    d = X[:, a:] - X[:, : X.shape[1] - a]  # d[i, j]: user i's change from slot times[j] to times[j] + a
    ok = np.isfinite(d)
    n = ok.sum(axis=0)
    keep = n > 0
    if not keep.any():
        raise InvalidInputError(f"no user has readings {a} slots apart in the design's readings")
    d0 = np.where(ok, d, 0.0)
    mean = d0.sum(axis=0)[keep] / n[keep]
    dev = np.where(ok[:, keep], d[:, keep] - mean, 0.0)
    nk = n[keep]
    var = np.where(nk > 1, (dev ** 2).sum(axis=0) / np.maximum(nk - 1, 1), 0.0)
    P = phase_period(slot_seconds)
    slots = times[a:][keep]
    return StalenessSample(a, P, (slots % P).astype(np.int64), mean, var, nk.astype(np.int64))


def current_interval(value, noise_scale, slot, quantiles: StalenessQuantiles, level: float):
    """(CI2): the interval for the current mean at the publication slot (noise and staleness, union bound).

    Parameters
    ----------
    value, noise_scale : float or numpy.ndarray
        Released value v and Laplace scale b.
    slot : int or numpy.ndarray of int
        Publication slot S_n of each release (its phase is ``slot mod P``).
    quantiles : StalenessQuantiles
        From :meth:`StalenessSample.quantiles` at the same `level`.
    level : float
        Level in (0, 1).

    Returns
    -------
    (low, high) : numpy.ndarray, numpy.ndarray
    """
    v = np.asarray(value, dtype=float)
    w = noise_half_width(noise_scale, level, tails=2.0 if quantiles.stale else 1.0)
    h = np.asarray(slot, dtype=np.int64) % quantiles.low.size
    return v - w + quantiles.low[h], v + w + quantiles.high[h]


def replay_coverage(data, *, A: int, S_bar: int, split: int, epsilon_c: float, value_range, level: float = DEFAULT_CI_LEVEL,
                    slot_seconds: int | None = None, band_level: float = 0.95, reps: int = 399, seed: int = 0,
                    parts: int = 4) -> dict:
    """Coverage of the current-mean interval (CI2) on held-out time: releases replayed on the readings after `split`.

    The design sample is the readings before `split` (:func:`staleness_sample`); the releases are at
    S_n = split + n·S̄ with the input slot S_n − A, each the mean of the users with a reading there (I_n of them,
    Δf = (HI − LO)/I_n) plus Laplace noise; the current mean is that of the users with a reading at S_n.  The
    coverage of a release is computed exactly in the noise: given the readings, m_now ∈ (CI2) ⟺
    D_n − w' − q_hi ≤ L ≤ D_n + w' − q_lo (D_n = m_now − m_in), whose probability is a difference of the Laplace
    distribution function, so no noise is simulated.  The share is their mean over the releases; its band is a
    circular block bootstrap of that series (``arch.bootstrap.CircularBlockBootstrap``; block length by Politis &
    White (2004) with the Patton, Politis & White (2009) correction, and at least a day of releases), two-sided
    percentile at `band_level`; it assumes the held-out releases are a stationary series at that block scale.
    (CI1) needs no such check: its coverage is `level` exactly.

    Parameters
    ----------
    data : pandas.DataFrame
        Long readings user, time (integer slots), value (the whole range; before `split` designs, from it replays).
    A, S_bar : int
        The schedule (slots).
    split : int
        First held-out slot.
    epsilon_c : float
        ε_C (nats).
    value_range : (float, float)
        Public range the readings are clipped into.
    level : float
        Level of the intervals.
    slot_seconds : int, optional
        Slot length (phase of the day).
    band_level : float
        Level of the bootstrap band of the share.
    reps : int
        Bootstrap replicates.
    seed : int
        Seed of the bootstrap resampling (simulation only).
    parts : int
        The held-out releases are also cut into this many consecutive parts (seasons of the held-out span), each
        with its own share.

    Returns
    -------
    dict
        ``ci_level``, ``ci_coverage``, ``ci_coverage_lower``, ``ci_coverage_upper``, ``ci_releases`` (releases
        replayed), ``ci_coverage_parts`` (list of {``first_slot``, ``last_slot``, ``releases``, ``coverage``}),
        ``ci_pooled`` (phases pooled), ``ci_block`` (block length, releases); ``None`` values with ``ci_why`` when the
        interval cannot be formed or no release can be replayed.

    Raises
    ------
    InvalidInputError
        Bad readings or arguments.
    """
    from policyopt.models.arch_bootstrap import mean_interval
    from policyopt.utility.failure_rate import laplace_cdf
    from policyopt.utility.readings_penalty import block_length, readings_panel

    lv = check_ci_level(level)
    out = {"ci_level": lv, "ci_coverage": None, "ci_coverage_lower": None, "ci_coverage_upper": None, "ci_releases": 0,
           "ci_coverage_parts": [], "ci_pooled": None, "ci_block": None, "ci_why": None}
    df = data
    train = df[df["time"] < split]
    try:
        sample = staleness_sample(train, int(A), value_range=value_range, slot_seconds=slot_seconds)
    except InvalidInputError as exc:
        out["ci_why"] = f"the design part gives no {A}-slot change ({exc})"
        return out
    _, times, X, _ = readings_panel(df, value_range)
    t0 = int(times[0])
    pub = np.arange(int(split), int(times[-1]) + 1, int(S_bar))
    pub = pub[pub - int(A) >= t0]
    if pub.size == 0:
        out["ci_why"] = "no release falls in the held-out slots"
        return out
    obs = np.isfinite(X)
    n_in, n_now = obs[:, pub - A - t0].sum(axis=0), obs[:, pub - t0].sum(axis=0)
    ok = (n_in > 0) & (n_now > 0)
    pub, n_in, n_now = pub[ok], n_in[ok], n_now[ok]
    if pub.size < 8:
        out["ci_why"] = f"only {pub.size} held-out releases have readings at their input and publication slots"
        return out
    Xz = np.where(obs, X, 0.0)
    m_in = Xz[:, pub - A - t0].sum(axis=0) / n_in
    m_now = Xz[:, pub - t0].sum(axis=0) / n_now
    lo, hi = (float(v) for v in value_range)
    b = (hi - lo) / n_in / float(epsilon_c)
    q_lo, q_hi, w = np.empty(pub.size), np.empty(pub.size), np.empty(pub.size)
    pooled = False
    for u in np.unique(n_in):
        q = sample.quantiles(int(u), lv)
        if q is None:
            out["ci_why"] = (f"the design part has {sample.phase.size} slots with a {A}-slot change, fewer than a "
                             f"{100 * lv:g} % interval needs")
            return out
        sel = n_in == u
        h = pub[sel] % q.low.size
        q_lo[sel], q_hi[sel] = q.low[h], q.high[h]
        w[sel] = noise_half_width(b[sel], lv, tails=2.0 if q.stale else 1.0)
        pooled |= q.pooled
    D = m_now - m_in
    cover = laplace_cdf((D + w - q_lo) / b) - laplace_cdf((D - w - q_hi) / b)
    per_day = max(1, -(-sample.period // int(S_bar)))
    block = max(block_length(cover[:, None], cover.size), min(per_day, max(1, cover.size // 2)))
    ci_lo, ci_hi = mean_interval(cover, block, reps=int(reps), level=float(band_level), seed=seed)
    edges = np.linspace(0, pub.size, int(parts) + 1).astype(int)
    out.update(ci_coverage=float(np.mean(cover)), ci_coverage_lower=ci_lo, ci_coverage_upper=ci_hi,
               ci_releases=int(pub.size), ci_pooled=bool(pooled), ci_block=int(block),
               ci_coverage_parts=[{"first_slot": int(pub[a]), "last_slot": int(pub[z - 1]), "releases": int(z - a),
                                   "coverage": float(np.mean(cover[a:z]))}
                                  for a, z in zip(edges[:-1], edges[1:]) if z > a])
    return out
