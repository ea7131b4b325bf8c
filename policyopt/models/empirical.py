r"""Δ(t) estimated directly from readings, with a confidence band, and its distribution under fitted chains.

Δ(t) of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory
70(2), 2024, eq. (12), is the largest total variation between two rows of a user's *reversed t-step kernel*
R_t(x, ·) = Pr(state at s − t = · | state at s = x), maximised over users.  :mod:`policyopt.models.markov`
computes it from a fitted first-order chain (matrix powers); here it is estimated from the readings
themselves, with no Markov assumption:

1. **Lagged-pair counts.**  For user u and lag t = 1..L, N_{u,t}[x, y] = #{s : state_s = x, state_{s−t} = y}
   (pairs with a missing end are not counted).  All lags at once by FFT cross-correlation of the K state
   indicator series (exact: the float result is rounded to the integer counts, and the rounding error is
   checked to be < 0.25), or, where a cost model says it is cheaper (short series, many states), by one
   ``np.bincount`` over (user, lag, state, state) codes.  A user whose rows cannot reach `min_pairs` pairs in two
   states at any lag (known from state totals and the pairs per row, which need no full counts) has Δ̂_u(t) = 0
   and is not counted at all.
2. **Plug-in estimate.**  Row x of N_{u,t} normalised is R̂_{u,t}(x, ·); rows with at least `min_pairs` pairs are
   *claimed*; Δ̂_u(t) is the largest ½‖R̂(x, ·) − R̂(x', ·)‖₁ over two claimed rows, and Δ̂(t) = max_u Δ̂_u(t).
   A row seen fewer than `min_pairs` times makes no claim: its TV to any other row may be 1, so the upper
   bound at that lag is 1 (:attr:`EmpiricalMaxTV.users_without_claim` counts the users concerned).
3. **Upper confidence band (serially dependent pairs).**  A non-overlapping block bootstrap (NBB; E. Carlstein,
   "The use of subseries values for estimating the variance of a general statistic from a stationary sequence",
   Ann. Statist. 14(3), 1986; S. N. Lahiri, "Resampling Methods for Dependent Data", Springer, 2003, Sec. 2.5):
   each user's current times s are cut into m blocks of about `block_length` consecutive slots, the lagged-pair
   counts of each block are tabulated (all lags), and a replicate resamples m blocks with replacement,
   independently per user (users are independent), and recomputes the whole statistic Δ̂*(t) = max_u Δ̂*_u(t).
   Blocks keep the serial dependence of the pairs inside them, which is what makes the resampling valid for a
   stationary, strongly mixing state series when the block length grows with T but slower than T (Lahiri 2003,
   Ch. 3); the default block length is the Politis–White automatic choice for the circular block bootstrap
   (D. N. Politis, H. White, "Automatic block-length selection for the dependent bootstrap", Econometric Rev.
   23(1), 2004, with A. Patton, D. N. Politis, H. White's correction, 2009; ``arch.bootstrap.optimal_block_length``)
   of each user's state series, kept within [⌈T^{1/3}⌉, T/20].
   **Simultaneity**: the level holds for all lags 1..L and all users at once, because the statistic bootstrapped
   is the maximum over users, and the band over lags is a max-statistic band: the pointwise `level` quantile
   q(t) of Δ̂*(t) is raised by the smallest constant c ≥ 0 such that a share ≥ `level` of the replicates lie
   below q(t) + c at every lag.  The lower band is built the same way from below.  The band is a percentile
   band: the plug-in TV is biased upwards (markedly near Δ = 0, and where several row pairs nearly tie), and
   so is its bootstrap distribution, so the *upper* band errs on the safe side there while the *lower* band
   may lie above a true Δ near 0.  Its coverage on held-out data is measured, not assumed (the benchmark).
4. **Beyond L** nothing is claimed: :meth:`EmpiricalMaxTV.max_tv` returns 1 for t > L.

The computation is a map step over users (:func:`max_tv_part`: Δ̂(t), and the B replicates' Δ̂*(t), as maxima over
a group's users, and the users without claim) and a band step (:func:`max_tv_band`: quantiles and the max-statistic
shift).  With one resampling stream per user (:func:`~policyopt.models.chain_simulation.user_streams`, keyed by the
user's name) a user's replicates do not depend on the other users, so the parts of disjoint groups (the files of a
Parquet data set on Dask) combine by :meth:`MaxTVPart.merge` into exactly the part of all users.

The test of a chain model (:func:`~policyopt.models.chain_simulation.chain_statistic_draws`) compares Δ̂(t) with
the distribution of *the same statistic* on series simulated from the fitted chains (a parametric bootstrap; a Monte
Carlo test, A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their Application", Cambridge, 1997, Sec. 4.2.5), which
carries the same upward bias, instead of comparing the band with the chain's Δ(t).

This module owns the estimator and its band (steps 3 and 4); the counts of step 1 are
:mod:`policyopt.models.lag_counts`, the statistic of step 2 :mod:`policyopt.models.row_tv`, the simulated chains and
the per-user streams :mod:`policyopt.models.chain_simulation`.  Every name of ``__all__`` is importable from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from policyopt import progress
from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.models.chain_simulation import chain_statistic_draws, simulate_chain_states, user_streams
from policyopt.models.lag_counts import (
    MAX_LAG_CAP,
    block_counts,
    check_lag,
    default_max_lag,
    lagged_pair_counts,
    last_observed,
    states_matrix,
)
from policyopt.models.markov import as_slots
from policyopt.models.row_tv import DEFAULT_MIN_PAIRS, claimable_series, max_row_tv, max_tv_statistic, user_max_tv

__all__ = [
    "EmpiricalMaxTV",
    "MaxTVPart",
    "estimate_max_tv",
    "max_tv_part",
    "max_tv_band",
    "lagged_pair_counts",
    "max_row_tv",
    "default_max_lag",
    "states_matrix",
    "simulate_chain_states",
    "max_tv_statistic",
    "chain_statistic_draws",
    "user_streams",
    "DEFAULT_MIN_PAIRS",
    "DEFAULT_N_BOOT",
    "MAX_LAG_CAP",
]

#: Block-bootstrap replicates of the band.
DEFAULT_N_BOOT = 200


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not (0.0 < float(level) < 1.0):
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    return float(level)


def _block_bounds(x: np.ndarray, block_length: int | None) -> np.ndarray:
    """Edges of the NBB blocks over one user's current times 0..T (lengths differ by at most one slot)."""
    T = x.size
    if block_length is None:
        block_length = _auto_block_length(x)
    m = max(1, int(round(T / max(1, int(block_length)))))
    return np.linspace(0, T, m + 1).round().astype(np.int64)


def _auto_block_length(x: np.ndarray) -> int:
    """Politis–White (2004, corrected 2009) circular-bootstrap block length of the state series, clipped."""
    T = x.size
    lo, hi = math.ceil(T ** (1.0 / 3.0)), max(math.ceil(T ** (1.0 / 3.0)), T // 20)
    obs = x[x >= 0].astype(float)
    if obs.size < 10 or np.all(obs == obs[0]):
        return lo
    from policyopt.models.arch_bootstrap import arch_bootstrap

    with np.errstate(divide="ignore", invalid="ignore"):  # a periodic series: a zero spectral term, b = inf
        b = float(arch_bootstrap().optimal_block_length(obs)["circular"].iloc[0])
    return int(min(hi, max(lo, math.ceil(b) if math.isfinite(b) else lo)))


def _quantile_band(draws: np.ndarray, level: float, upper: bool) -> np.ndarray:
    """Max-statistic band over lags: pointwise order statistic, shifted by one constant for simultaneity."""
    B = draws.shape[0]
    k = math.ceil(level * B)
    srt = np.sort(draws, axis=0)
    if upper:
        q = srt[k - 1]
        c = max(0.0, float(np.sort(np.max(draws - q[None, :], axis=1))[k - 1]))
        return q + c
    q = srt[B - k]
    c = max(0.0, float(np.sort(np.max(q[None, :] - draws, axis=1))[k - 1]))
    return q - c


@dataclass(frozen=True)
class EmpiricalMaxTV:
    """Δ(t) estimated from readings (eq. (12) of Zhang et al. 2024), with a simultaneous confidence band.

    A Δ(t) source: :meth:`max_tv` / :meth:`log_max_tv` give the upper band for 1 ≤ t ≤ L, and 1 at t = 0
    (Δ(0) = 1) and beyond L (nothing is claimed there).

    Attributes
    ----------
    lags : numpy.ndarray of int64, shape (L,)
        1..L (slots).
    estimate : numpy.ndarray, shape (L,)
        Δ̂(t) = max over users of the plug-in largest row TV (claimed rows only), in [0, 1].
    lower, upper : numpy.ndarray, shape (L,)
        Simultaneous band at `level` (all lags and users at once); ``upper`` is 1 at a lag where some user has
        a row with fewer than `min_pairs` pairs.  0 ≤ lower ≤ estimate ≤ upper ≤ 1.
    per_user : numpy.ndarray, shape (U, L)
        Δ̂_u(t) of each user.
    level : float
        Confidence level of the band.
    method : str
        How the band was made (resampling scheme, replicates, block lengths).
    min_pairs : int
        Pairs a row needs to be claimed.
    users_without_claim : numpy.ndarray of int64, shape (L,)
        Users with at least one unclaimed row at each lag (the reason ``upper`` is 1 there).
    row_pairs : numpy.ndarray of int64, shape (U, L, K)
        Pairs behind each row.
    n_users : int
        U.
    block_lengths : numpy.ndarray of int64, shape (U,)
        Mean NBB block length per user (slots).
    """

    lags: np.ndarray
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    per_user: np.ndarray
    level: float
    method: str
    min_pairs: int
    users_without_claim: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    row_pairs: np.ndarray | None = None
    n_users: int = 0
    block_lengths: np.ndarray | None = None

    @property
    def max_lag(self) -> int:
        """L, the last lag estimated (slots)."""
        return int(self.lags[-1])

    def max_tv(self, t):
        """Upper bound on Δ(t): the band's upper edge for 1 ≤ t ≤ L, 1 for t = 0 and t > L.

        Parameters
        ----------
        t : int or array_like of int
            Ages (slots) ≥ 0.

        Returns
        -------
        float or numpy.ndarray of the shape of `t`

        Raises
        ------
        InvalidInputError
            If `t` is not non-negative integers.
        """
        ts = as_slots(t, "t")
        L = self.max_lag
        inside = (ts >= 1) & (ts <= L)
        out = np.where(inside, self.upper[np.clip(ts, 1, L) - 1], 1.0)
        return float(out) if out.ndim == 0 else out

    def log_max_tv(self, t):
        """ln of :meth:`max_tv` (−inf where the bound is 0)."""
        with np.errstate(divide="ignore"):
            out = np.log(self.max_tv(t))
        return float(out) if np.ndim(out) == 0 else out


def _per_user_arrays(x: np.ndarray, K: int, L: int, block_length):
    """Block counts (m, L, K, K), and the block bounds, of one user (trailing missing slots dropped)."""
    obs = np.flatnonzero(x >= 0)
    last = int(obs[-1]) + 1 if obs.size else 0
    xs = x[:last]
    if xs.size <= L:
        return None, None
    bounds = _block_bounds(xs, block_length)
    return block_counts(xs, K, L, bounds), bounds


@dataclass(frozen=True)
class MaxTVPart:
    """The map step of :func:`estimate_max_tv` on one group of users: everything the band needs, reduced over them.

    Every statistic is a maximum over users (Δ̂(t) and each bootstrap replicate's Δ̂*(t), users resampled
    independently) or a count, so the parts of disjoint user groups combine with :meth:`merge` into the part of
    their union, exactly, when each user's replicates come from its own random stream
    (:func:`~policyopt.models.chain_simulation.user_streams`); :func:`max_tv_band` then forms the band.

    Attributes
    ----------
    estimate : numpy.ndarray, shape (L,)
        max over the group's users of Δ̂_u(t) (0 for a group without a usable user).
    boot : numpy.ndarray, shape (B, L), or None
        Replicate b's max over the group's users of Δ̂*_u(t); ``None`` for the point estimate alone (B = 0).
    users_without_claim : numpy.ndarray of int64, shape (L,)
        Users with an unclaimed row at each lag (users too short for L count at every lag).
    n_users, used : int
        Users of the group, and those with a series longer than L.
    block_range : (int, int) or None
        Smallest and largest mean block length (slots) of the resampled users; ``None`` when none or B = 0 (with a
        stream per user, users without two claimed rows at any lag are not resampled: they add 0 to every replicate).
    min_pairs : int
        Pairs a row needs to be claimed.
    block_given : bool
        True when the block length was given, not chosen per user.
    per_user, row_pairs, block_lengths : numpy.ndarray or None
        Δ̂_u(t) (U, L), pairs per row (U, L, K), mean block lengths (U,) when kept (``keep_users``); dropped by
        :meth:`merge` (a reduce over many users keeps none).
    """

    estimate: np.ndarray
    boot: np.ndarray | None
    users_without_claim: np.ndarray
    n_users: int
    used: int
    block_range: tuple | None
    min_pairs: int
    block_given: bool = False
    per_user: np.ndarray | None = None
    row_pairs: np.ndarray | None = None
    block_lengths: np.ndarray | None = None

    @property
    def n_boot(self) -> int:
        """B, the replicates (0 for the point estimate alone)."""
        return 0 if self.boot is None else int(self.boot.shape[0])

    def merge(self, other: "MaxTVPart") -> "MaxTVPart":
        """The part of the union of two disjoint user groups: maxima by maximum, counts by sum (per-user arrays
        dropped).

        Raises
        ------
        InvalidInputError
            Parts with different lags, replicates, `min_pairs` or block rule.
        """
        if (self.estimate.shape != other.estimate.shape or self.n_boot != other.n_boot
                or self.min_pairs != other.min_pairs or self.block_given != other.block_given):
            raise InvalidInputError(
                f"cannot merge parts of {self.estimate.size} lags, {self.n_boot} replicates, "
                f"min_pairs {self.min_pairs} with parts of {other.estimate.size} lags, {other.n_boot} replicates, "
                f"min_pairs {other.min_pairs}"
            )
        ranges = [r for r in (self.block_range, other.block_range) if r is not None]
        return MaxTVPart(
            estimate=np.maximum(self.estimate, other.estimate),
            boot=None if self.boot is None else np.maximum(self.boot, other.boot),
            users_without_claim=self.users_without_claim + other.users_without_claim,
            n_users=self.n_users + other.n_users, used=self.used + other.used,
            block_range=(min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None,
            min_pairs=self.min_pairs, block_given=self.block_given,
        )


def _boot_streams(rng, U: int, seed: int):
    """One generator for all users in row order (``rng`` None: ``default_rng(seed)``), or U per-user generators."""
    if rng is None:
        return np.random.default_rng(seed)  # resampling (simulation), never released noise
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (list, tuple)):
        if len(rng) != U or not all(isinstance(g, np.random.Generator) for g in rng):
            raise InvalidInputError(f"`rng` must hold one numpy Generator per user ({U}), got {len(rng)} entries")
        return list(rng)
    raise InvalidInputError(f"`rng` must be a numpy Generator or a list of one per user, got {fmt(rng)}")


def max_tv_part(
    states,
    n_states: int,
    max_lag: int,
    *,
    min_pairs: int = DEFAULT_MIN_PAIRS,
    block_length: int | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    rng=None,
    keep_users: bool = True,
) -> MaxTVPart:
    """The map step of :func:`estimate_max_tv` on the users of `states`: Δ̂(t) and the B replicates' Δ̂*(t), maxima
    over them.

    Parameters
    ----------
    states, n_states, max_lag, min_pairs, block_length, n_boot, seed
        As :func:`estimate_max_tv` (`max_lag` required: parts to be merged must share L).
    rng : numpy.random.Generator or sequence of U numpy.random.Generator, optional
        Resampling randomness (simulation only, never released noise).  One generator per user
        (:func:`~policyopt.models.chain_simulation.user_streams` with ``stream=2``): user u's B block draws come only
        from its own stream, so its replicates, and hence the part of any group of users, do not depend on the other
        users of the group.
        Default: one ``default_rng(seed)`` consumed user after user in row order.
    keep_users : bool
        Keep the per-user arrays (Δ̂_u(t), pairs per row, block lengths); a map over many users passes False.

    Returns
    -------
    MaxTVPart

    Raises
    ------
    InvalidInputError
        As :func:`estimate_max_tv`; an `rng` list whose length is not U.
    """
    x = states_matrix(states, n_states)
    U, T = x.shape
    K = int(n_states)
    L = check_lag(max_lag, T)
    mp = check_int(min_pairs, "min_pairs", 1)
    if block_length is not None:
        check_int(block_length, "block_length", 1)
    B = 0 if (n_boot == 0 and not isinstance(n_boot, bool)) else check_int(n_boot, "n_boot", 20)
    sd = check_int(seed, "seed", 0)
    if B == 0:
        per_user, rows = user_max_tv(x, K, L, mp)
        claimed = rows >= mp
        no_claim = np.sum(~np.all(claimed, axis=-1), axis=0).astype(np.int64)
        return MaxTVPart(
            estimate=per_user.max(axis=0) if U else np.zeros(L), boot=None, users_without_claim=no_claim, n_users=U,
            used=U, block_range=None, min_pairs=mp, block_given=block_length is not None,
            per_user=per_user if keep_users else None, row_pairs=rows if keep_users else None,
            block_lengths=np.zeros(U, dtype=np.int64) if keep_users else None,
        )
    streams = _boot_streams(rng, U, sd)
    per_user = np.zeros((U, L))
    row_pairs = np.zeros((U, L, K), dtype=np.int64) if keep_users else None
    boot = np.zeros((B, L))
    no_claim = np.zeros(L, dtype=np.int64)
    blens = np.zeros(U, dtype=np.int64)
    used = 0
    resample = np.ones(U, dtype=bool)
    if isinstance(streams, list) and U:
        # With a stream per user, a user without two claimed rows at any lag adds Δ̂*_u(t) = 0 to every replicate (the
        # claimed rows are those of the data, the same in every replicate) and draws from no other user's stream:
        # it is left out of the resampling (no block length, no draws), which changes no number.  It counts as
        # used (a series longer than L) and without claim at every lag (fewer than K ≥ 2 claimed rows).
        resample[:] = False
        resample[claimable_series(x, K, L, mp)] = True
        skip = np.flatnonzero(~resample)
        obs = np.any(x[skip] >= 0, axis=1)
        longer = obs & (last_observed(x[skip]) > L)
        used += int(np.count_nonzero(longer))
        no_claim += skip.size  # every skipped user: too short for L, or fewer than two claimed rows at every lag
        if keep_users and skip.size:
            _, r = user_max_tv(x[skip], K, L, mp)
            row_pairs[skip] = np.where(longer[:, None, None], r, 0)
    todo = np.flatnonzero(resample)
    steps = progress.bar(todo.size, "Δ(t) band", unit="user")
    for u in todo:
        steps.update(1)
        q, bounds = _per_user_arrays(x[u], K, L, block_length)
        if q is None:
            no_claim += 1  # a user too short for lag L makes no claim at any lag
            continue
        used += 1
        m = q.shape[0]
        blens[u] = int(round(bounds[-1] / m))
        total = q.sum(axis=0)  # (L, K, K)
        rows = total.sum(axis=-1)
        if keep_users:
            row_pairs[u] = rows
        claimed = rows >= mp
        per_user[u] = max_row_tv(total, claimed=claimed)
        no_claim += ~np.all(claimed, axis=-1)
        g = streams[u] if isinstance(streams, list) else streams
        W = g.multinomial(m, np.full(m, 1.0 / m), size=B).astype(np.float64)  # NBB: m blocks drawn with replacement
        flat = q.reshape(m, -1).astype(np.float64)
        step = max(1, (2**24) // max(1, B * K * K))
        for j in range(0, L, step):
            rep = _resampled_counts(W, flat[:, j * K * K : (j + step) * K * K]).reshape(B, -1, K, K)
            tv = max_row_tv(rep, claimed=claimed[None, j : j + step])
            boot[:, j : j + step] = np.maximum(boot[:, j : j + step], tv)
    steps.close()
    bl = blens[blens > 0]
    return MaxTVPart(
        estimate=per_user.max(axis=0) if U else np.zeros(L), boot=boot, users_without_claim=no_claim, n_users=U,
        used=used, block_range=(int(bl.min()), int(bl.max())) if bl.size else None, min_pairs=mp,
        block_given=block_length is not None, per_user=per_user if keep_users else None, row_pairs=row_pairs,
        block_lengths=blens if keep_users else None,
    )


def max_tv_band(part: MaxTVPart, level: float = 0.95) -> "EmpiricalMaxTV":
    """The band step of :func:`estimate_max_tv`: the simultaneous percentile band from a (merged) :class:`MaxTVPart`.

    The pointwise `level` quantiles of the replicates' Δ̂*(t), shifted by the max-statistic constant
    (see the module docstring), clipped to [0, 1] around the estimate; the upper edge is 1 at a lag where some
    user makes no claim.  With B = 0 the band is [0, 1] (no claim).

    Parameters
    ----------
    part : MaxTVPart
        The map step over all users (merged over groups).
    level : float
        Confidence level in (0, 1), simultaneous over lags and users.

    Returns
    -------
    EmpiricalMaxTV
        With the per-user arrays when `part` kept them (otherwise ``per_user`` of shape (0, L), the others None).

    Raises
    ------
    InvalidInputError
        Bad `level`; no user with a series longer than L.
    """
    lv = _check_level(level)
    L = part.estimate.size
    mp = part.min_pairs
    est = np.asarray(part.estimate, dtype=float)
    no_claim = np.asarray(part.users_without_claim, dtype=np.int64)
    per_user = part.per_user if part.per_user is not None else np.zeros((0, L))
    if part.boot is None:
        lo, hi = np.zeros(L), np.ones(L)
        method = (f"point estimate only (no bootstrap band: the band is [0, 1], no claim); rows with < {mp} pairs "
                  "make no claim")
    else:
        if part.used == 0:
            raise InvalidInputError(f"no user has a series longer than `max_lag`={L} slots")
        B = part.n_boot
        hi = np.maximum(_quantile_band(part.boot, lv, upper=True), est)
        lo = np.minimum(_quantile_band(part.boot, lv, upper=False), est)
        hi = np.where(no_claim > 0, 1.0, np.minimum(hi, 1.0))
        lo = np.clip(lo, 0.0, 1.0)
        how = "given" if part.block_given else "Politis–White, per user"
        if part.block_range is None:  # every user was left out of the resampling (fewer than two claimed rows)
            blocks = "no user has two rows with enough pairs at any lag, so none was resampled"
        else:
            b0, b1 = part.block_range
            blocks = f"blocks of {b0} slots ({how})" if b0 == b1 else f"blocks of {b0}–{b1} slots ({how})"
        method = (
            f"non-overlapping block bootstrap (Carlstein 1986), {B} replicates, {blocks}; "
            f"percentile band of max over users, simultaneous over lags 1..{L} (max-statistic); rows with < {mp} "
            "pairs make no claim (bound 1)"
        )
    arrs = [np.arange(1, L + 1, dtype=np.int64), est, lo, hi, per_user, no_claim]
    arrs += [a for a in (part.row_pairs, part.block_lengths) if a is not None]
    for a in arrs:
        a.setflags(write=False)
    return EmpiricalMaxTV(
        lags=arrs[0], estimate=est, lower=lo, upper=hi, per_user=per_user, level=lv, method=method, min_pairs=mp,
        users_without_claim=no_claim, row_pairs=part.row_pairs, n_users=part.n_users, block_lengths=part.block_lengths,
    )


def _resampled_counts(W: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """``W @ flat`` for replicate weights W (B, m) and block counts (m, n), both non-negative integers.

    In single precision when every partial sum is an integer below 2²⁴ (bounded by max row sum of W times the
    largest count), so the product is exact and equal to the double-precision one; else in double precision.
    """
    if flat.size and float(W.sum(axis=1).max()) * float(flat.max()) < 2.0**24:
        return W.astype(np.float32) @ flat.astype(np.float32)
    return W @ flat


def estimate_max_tv(
    states,
    n_states: int,
    max_lag: int | None = None,
    *,
    level: float = 0.95,
    min_pairs: int = DEFAULT_MIN_PAIRS,
    block_length: int | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    rng=None,
) -> EmpiricalMaxTV:
    """Direct estimate of Δ(t), t = 1..L, with a simultaneous block-bootstrap confidence band.

    The map step :func:`max_tv_part` over all users followed by the band step :func:`max_tv_band`; a data set
    split into groups of users gives the same result with :meth:`MaxTVPart.merge` between the two when every user
    resamples from its own stream (`rng`).

    Parameters
    ----------
    states : array_like of int, shape (U, T), or list of U one-dimensional arrays
        Quantile-state indices 0..K−1 of each user's consecutive slots; −1 (or NaN) marks a missing slot.
    n_states : int
        K ≥ 2.
    max_lag : int, optional
        L (slots), below the longest series.  Default :func:`~policyopt.models.lag_counts.default_max_lag` of the
        longest series.
    level : float
        Confidence level in (0, 1) of the band, simultaneous over lags and users.
    min_pairs : int
        Pairs (≥ 1) a row needs to be claimed; a user with an unclaimed row at lag t makes Δ(t) ≤ 1 the only
        claim at that lag.
    block_length : int, optional
        NBB block length (slots, ≥ 1).  Default: Politis–White per user (see the module docstring).
    n_boot : int
        Bootstrap replicates (≥ 20), or 0 for the point estimate alone: then no band is computed and the band is
        [0, 1] at every lag (no claim), which is all a test against simulated chains needs.
    seed : int
        Seed of the resampling (simulation only) when `rng` is not given.
    rng : numpy.random.Generator or sequence of U numpy.random.Generator, optional
        Resampling randomness; one generator per user (:func:`~policyopt.models.chain_simulation.user_streams` with
        ``stream=2``, as ``policyopt check-model`` uses) makes the result independent of how users are grouped.
        Default ``default_rng(seed)`` used user after user.

    Returns
    -------
    EmpiricalMaxTV

    Raises
    ------
    InvalidInputError
        Bad `states`, `n_states`, `max_lag`, `level`, `min_pairs`, `block_length`, `n_boot`, `seed` or `rng`; no
        user with a series longer than L.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12);
    Carlstein (1986), Lahiri (2003) Sec. 2.5 (NBB); Politis & White (2004) (block length).

    Examples
    --------
    >>> import numpy as np
    >>> from policyopt.models.empirical import estimate_max_tv
    >>> cycle = np.tile([0, 1], (2, 500))          # a deterministic cycle: Δ(t) = 1 at every lag
    >>> est = estimate_max_tv(cycle, 2, 5, n_boot=20)
    >>> est.estimate.tolist(), est.max_tv(6)
    ([1.0, 1.0, 1.0, 1.0, 1.0], 1.0)
    """
    x = states_matrix(states, n_states)
    L = default_max_lag(x.shape[1]) if max_lag is None else check_lag(max_lag, x.shape[1])
    lv = _check_level(level)
    part = max_tv_part(x, n_states, L, min_pairs=min_pairs, block_length=block_length, n_boot=n_boot, seed=seed,
                       rng=rng)
    return max_tv_band(part, lv)
