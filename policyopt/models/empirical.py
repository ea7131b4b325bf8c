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
shift).  With one resampling stream per user (:func:`user_streams`, keyed by the user's name) a user's replicates do
not depend on the other users, so the parts of disjoint groups (the files of a Parquet data set on Dask) combine by
:meth:`MaxTVPart.merge` into exactly the part of all users.

The test of a chain model (:func:`chain_statistic_draws`) compares Δ̂(t) with the distribution of *the same
statistic* on series simulated from the fitted chains (a parametric bootstrap; a Monte Carlo test,
A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their Application", Cambridge, 1997, Sec. 4.2.5), which
carries the same upward bias, instead of comparing the band with the chain's Δ(t).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from policyopt import progress
from policyopt.errors import InvalidInputError, fmt
from policyopt.models.markov import as_slots

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

#: Pairs a row (current state) needs before its reversed-kernel row is claimed (every row of every bundled home has ≥ 143 at K = 3).
DEFAULT_MIN_PAIRS = 100
#: Block-bootstrap replicates of the band.
DEFAULT_N_BOOT = 200
#: Largest default number of lags (slots); see :func:`default_max_lag`.
MAX_LAG_CAP = 1000
#: Bytes of complex FFT products held at once (per chunk of blocks or series).
_CHUNK_BYTES = 64 * 2**20


def default_max_lag(T: int) -> int:
    """Default number of lags L for series of T slots: ⌊T/10⌋, at most :data:`MAX_LAG_CAP`, at least 1.

    At lag t only T − t pairs exist; with t ≤ T/10 every lag keeps ≥ 90 % of the pairs of lag 1, so the
    estimates at all lags rest on about the same amount of data (the usual rule of thumb for sample
    autocorrelations, G. E. P. Box, G. M. Jenkins, "Time Series Analysis", 1976, Sec. 6.2.1: n/4 at most,
    here stricter).
    """
    return int(max(1, min(int(T) // 10, MAX_LAG_CAP)))


def states_matrix(states, n_states: int) -> np.ndarray:
    """Quantile-state series as an int64 array (users, T) with −1 for a missing slot.

    Parameters
    ----------
    states : array_like of shape (U, T), or a list of U one-dimensional arrays (unequal lengths allowed)
        State indices 0..K−1; −1 or NaN marks a missing slot.  Shorter series are padded with −1.
    n_states : int
        K ≥ 2.

    Returns
    -------
    numpy.ndarray of int64, shape (U, T_max)

    Raises
    ------
    InvalidInputError
        Non-integral entries, entries outside −1..K−1, no users, or a bad `n_states`.
    """
    if isinstance(n_states, bool) or not isinstance(n_states, (int, np.integer)) or n_states < 2:
        raise InvalidInputError(f"`n_states` must be an integer ≥ 2, got {fmt(n_states)}")
    if isinstance(states, np.ndarray) and states.ndim == 2 and states.dtype.kind in "iu" and states.shape[0] > 0:
        out = states.astype(np.int64, copy=False)  # no copy of a large int64 matrix
        bad = (out < -1) | (out >= n_states)
        if bad.any():
            i, j = (int(v[0]) for v in np.nonzero(bad))
            raise InvalidInputError(f"`states` user {i} slot {j} is {int(out[i, j])}, outside 0..{n_states - 1} (−1 = missing)")
        return out
    if isinstance(states, np.ndarray) and states.ndim == 2:
        rows = list(states)
    elif isinstance(states, np.ndarray) and states.ndim == 1 and states.dtype != object:
        rows = [states]
    else:
        try:
            rows = [np.asarray(r) for r in states]
        except TypeError:
            raise InvalidInputError(f"`states` must be an array (users, T) or a list of 1-D arrays, got {fmt(states)}") from None
    if not rows:
        raise InvalidInputError("`states` holds no user")
    T = max(int(np.size(r)) for r in rows)
    out = np.full((len(rows), T), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        a = np.asarray(r)
        if a.ndim != 1:
            raise InvalidInputError(f"`states` user {i} must be a one-dimensional series, got shape {a.shape}")
        if a.dtype == bool or not (np.issubdtype(a.dtype, np.number)):
            raise InvalidInputError(f"`states` user {i} must hold state indices, got dtype {a.dtype}")
        if np.issubdtype(a.dtype, np.floating):
            nan = np.isnan(a)
            a = np.where(nan, -1.0, a)
            if np.any(a != np.round(a)) or not np.all(np.isfinite(a)):
                raise InvalidInputError(f"`states` user {i} has a non-integral state index")
        a = a.astype(np.int64)
        bad = (a < -1) | (a >= n_states)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise InvalidInputError(f"`states` user {i} slot {j} is {int(a[j])}, outside 0..{n_states - 1} (−1 = missing)")
        out[i, : a.size] = a
    return out


def _indicators(x: np.ndarray, K: int) -> np.ndarray:
    """(S, T) states → (S, K, T) float32 indicators (0 at missing slots; exact, and what the FFT tries first)."""
    return (x[:, None, :] == np.arange(K)[None, :, None]).astype(np.float32)


def _xcorr_counts(cur: np.ndarray, past: np.ndarray, L: int) -> np.ndarray:
    """Counts (S, L, K, K): entry [i, t−1, x, y] = Σ_s cur[i, x, s]·past[i, y, s + L − t], t = 1..L.

    `cur` (S, K, b) holds the indicators at the current times of a stretch, `past` (S, K, b + L) those from L
    slots before it to its end (zeros outside the series).  Linear cross-correlation by real FFT of length
    n ≥ b + L (no circular wrap at the offsets used), rounded to integers.  Computed in single precision first
    (twice as fast); if any result is not within 0.25 of an integer it is recomputed in double precision, and
    if even that fails an ArithmeticError is raised, so the counts returned are always exact integers, as
    float32 (exact below 2²⁴) from the single-precision pass, float64 from the other.
    """
    from scipy import fft as sfft

    S, K, b = cur.shape
    n = sfft.next_fast_len(b + L, real=True)
    for dtype in (np.float32, np.float64):
        fc = np.conj(sfft.rfft(cur.astype(dtype, copy=False), n, axis=-1))
        fp = sfft.rfft(past.astype(dtype, copy=False), n, axis=-1)
        corr = sfft.irfft(fc[:, :, None, :] * fp[:, None, :, :], n, axis=-1)[..., :L]  # offset k = L − t
        counts = np.rint(corr)
        np.subtract(corr, counts, out=corr)
        err = max(float(np.max(corr)), -float(np.min(corr))) if corr.size else 0.0
        if err < 0.25:
            out = np.empty((S, L, K, K), dtype=dtype)
            np.copyto(out.transpose(0, 2, 3, 1)[..., ::-1], counts)
            return out
    raise ArithmeticError(f"FFT lagged-pair counts are not integral (error {err:.3g}); series too long")  # pragma: no cover


def _chunk(S: int, K: int, n: int) -> int:
    return max(1, int(_CHUNK_BYTES // max(1, K * K * (n // 2 + 1) * 16)))


def lagged_pair_counts(states, n_states: int, max_lag: int) -> np.ndarray:
    """Lagged-pair counts of every user at lags 1..L.

    Parameters
    ----------
    states : array_like
        As :func:`states_matrix`: (U, T) state indices, −1 missing.
    n_states : int
        K.
    max_lag : int
        L ≥ 1 (slots).

    Returns
    -------
    numpy.ndarray of int64, shape (U, L, K, K)
        ``counts[u, t − 1, x, y]`` = number of slots s with state x at s and state y at s − t (both observed).

    Raises
    ------
    InvalidInputError
        Bad `states`, `n_states` or `max_lag`.
    """
    x = states_matrix(states, n_states)
    L = _check_lag(max_lag, x.shape[1])
    return _pair_counts(x, int(n_states), L).astype(np.int64, copy=False)


def _pair_counts(x: np.ndarray, K: int, L: int) -> np.ndarray:
    """Counts (S, L, K, K) of a checked state matrix, by direct counting or by FFT, whichever the cost model favours
    (exact integers, int64 or, from the FFT, float)."""
    S, T = x.shape
    if _direct_is_cheaper(T, K, L):
        return _direct_counts(x, K, L)
    out = np.empty((S, L, K, K), dtype=np.float64)
    step = _chunk(S, K, T + L)
    for i in range(0, S, step):
        ind = _indicators(x[i : i + step], K)
        past = np.concatenate([np.zeros(ind.shape[:2] + (L,), ind.dtype), ind], axis=-1)
        out[i : i + step] = _xcorr_counts(ind, past, L)
    return out


def _direct_is_cheaper(T: int, K: int, L: int) -> bool:
    """Cost model per series (ns, fitted to timings of both paths on the project's 2-core machine): direct counting
    touches L·T pairs and L·(K + 1)² bins; the FFT path makes K² + 2K transforms of length n ≈ T + L, K²·n products
    and L·K² roundings.  Both paths give the same exact counts; this only picks the faster."""
    n = T + L
    direct = 4.5 * L * T + 20.0 * L * (K + 1) ** 2
    fft = 0.5 * (K * K + 2 * K) * n * max(1.0, math.log2(n)) + 10.0 * L * K * K + 3.0 * K * K * n
    return direct <= fft


#: Pairs (int64 bin indices) held at once by the direct count.
_DIRECT_CHUNK = 2**17


def _direct_counts(x: np.ndarray, K: int, L: int) -> np.ndarray:
    """Counts (S, L, K, K) by one ``np.bincount`` over (series, lag, current state, past state) codes.

    A missing slot (−1) is coded as state K, so a pair with a missing end lands in a bin that is dropped; the
    counts are exact integers by construction (no rounding).
    """
    S, T = x.shape
    K1 = K + 1
    out = np.empty((S, L, K, K), dtype=np.int64)
    if S == 0:
        return out
    step = max(1, _DIRECT_CHUNK // max(1, L * T))
    lag_base = (np.arange(L, dtype=np.intp) * (K1 * K1))[:, None]  # window j ↔ lag L − j
    for i in range(0, S, step):
        xc = x[i : i + step]
        n = xc.shape[0]
        code = np.where(xc >= 0, xc, K).astype(np.intp)
        past = np.concatenate([np.full((n, L), K, dtype=np.intp), code], axis=1)
        win = np.lib.stride_tricks.sliding_window_view(past, T, axis=1)[:, :L, :]  # (n, L, T): past at lag L − j
        cur = code * K1 + (np.arange(n, dtype=np.intp) * (L * K1 * K1))[:, None]
        idx = win + (cur[:, None, :] + lag_base[None, :, :])
        c = np.bincount(idx.ravel(), minlength=n * L * K1 * K1).reshape(n, L, K1, K1)
        out[i : i + n] = c[:, ::-1, :K, :K]
    return out


def _state_totals(x: np.ndarray, K: int) -> np.ndarray:
    """Observed slots per state of each series, (S, K) int64 (one boolean temporary at a time)."""
    return np.stack([np.count_nonzero(x == k, axis=1) for k in range(K)], axis=1).astype(np.int64)


def _internal_gaps(x: np.ndarray) -> np.ndarray:
    """Missing slots before each series' last observation, (S, T) bool."""
    T = x.shape[1]
    return (x < 0) & (np.arange(T)[None, :] < _last_observed(x)[:, None])


def _last_observed(x: np.ndarray) -> np.ndarray:
    """One past each series' last observed slot, (S,) (0 if none)."""
    return x.shape[1] - np.argmax((x >= 0)[:, ::-1], axis=1)


def _rows_upper(x: np.ndarray, K: int, L: int, total: np.ndarray) -> np.ndarray:
    """#{i ≥ t : x_i = k}, (S, L, K) int64: the pairs behind row k at lag t if no slot were missing (an upper bound
    on them, and larger by at most the series' missing slots)."""
    head = np.add.accumulate((x[:, :L, None] == np.arange(K)).view(np.int8), axis=1, dtype=np.int32)
    return np.subtract(total[:, None, :], head, dtype=np.int64)  # only the first L slots of `x` are read  # head[:, t − 1] = #{i < t : x_i = k}


def _row_pairs(x: np.ndarray, K: int, L: int, total: np.ndarray, upper: np.ndarray | None = None):
    """Pairs behind each row, (S, L, K) int64, without the full counts: ``counts.sum(axis=-1)``.

    rows[s, t, k] = #{i ≥ t : x_i = k} − #{m : x_m missing, x_{m+t} = k} (:func:`_rows_upper` minus a count over
    the M missing slots before each series' last observation, M·L work).  None when the gaps are so many that
    counting every pair is as cheap.
    """
    S, T = x.shape
    gaps = _internal_gaps(x)
    M = int(np.count_nonzero(gaps))
    if M * L * 4 > S * T * L:
        return None
    rows = _rows_upper(x, K, L, total) if upper is None else upper.copy()
    if M:
        s_i, m_i = np.nonzero(gaps)
        code = np.concatenate([np.where(x >= 0, x, K), np.full((S, L), K, dtype=x.dtype)], axis=1).astype(np.intp)
        v = code[s_i[:, None], m_i[:, None] + np.arange(1, L + 1)[None, :]]  # (M, L): state at m + t
        idx = (s_i[:, None] * L + np.arange(L)[None, :]) * (K + 1) + v
        rows -= np.bincount(idx.ravel(), minlength=S * L * (K + 1)).reshape(S, L, K + 1)[..., :K]
    return rows


def _block_counts(x: np.ndarray, K: int, L: int, bounds: np.ndarray) -> np.ndarray:
    """Lagged-pair counts of one user's series per block of current times: (m, L, K, K), exact integers as float.

    ``bounds`` (m + 1,) are the block edges over current times 0..T; block j holds the pairs whose current time
    lies in [bounds[j], bounds[j + 1]); summed over blocks they are the user's counts.
    """
    ind = (x[None, :] == np.arange(K)[:, None]).astype(np.float32)  # (K, T)
    starts, ends = bounds[:-1], bounds[1:]
    bmax = int(np.max(ends - starts))
    pad = np.concatenate([np.zeros((K, L), np.float32), ind, np.zeros((K, bmax), np.float32)], axis=1)  # index = time + L
    m = starts.size
    parts = []
    step = _chunk(m, K, bmax + L)
    offs_p = np.arange(bmax + L)
    offs_c = np.arange(bmax)
    for i in range(0, m, step):
        a = starts[i : i + step]
        lens = (ends - starts)[i : i + step]
        past = pad[:, a[:, None] + offs_p[None, :]].transpose(1, 0, 2)  # times a − L .. a + bmax − 1
        cur = pad[:, a[:, None] + L + offs_c[None, :]].transpose(1, 0, 2)
        cur = cur * (offs_c[None, None, :] < lens[:, None, None])
        parts.append(_xcorr_counts(cur, past, L))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def max_row_tv(counts, min_pairs: int = 1, claimed=None) -> np.ndarray:
    """Largest total variation between two claimed rows of normalised lagged-pair counts.

    Parameters
    ----------
    counts : array_like, shape (..., K, K)
        ``counts[..., x, y]``: pairs with current state x and past state y.
    min_pairs : int
        A row is claimed when it holds at least this many pairs (and at least one).
    claimed : array_like of bool, shape (..., K), optional
        Rows to use instead of the `min_pairs` rule (a row with no pairs is still skipped).

    Returns
    -------
    numpy.ndarray, shape (...)
        max over claimed x, x' of ½ Σ_y |R(x, y) − R(x', y)|; 0 where fewer than two rows are claimed.
    """
    c = np.asarray(counts, dtype=np.float64)
    lead, K = c.shape[:-2], c.shape[-1]
    c2 = c.reshape(-1, K, K)
    if K < _SEQ_SUM:
        rows = _seq_sum([c2[:, :, y] for y in range(K)])  # (N, K): as c.sum(axis=-1), bit for bit
    else:
        rows = c2.sum(axis=-1)
    ok = rows >= max(1, int(min_pairs)) if claimed is None else (np.broadcast_to(claimed, lead + (K,)).reshape(-1, K) & (rows > 0))
    best = np.zeros(c2.shape[0])
    two = np.count_nonzero(ok, axis=-1) >= 2  # an item with < 2 claimed rows has TV 0
    items = None if two.all() else np.flatnonzero(two)
    n = c2.shape[0] if items is None else items.size
    step = max(1, (2**17) // max(1, K * K))  # ~1 MiB of float64 per temporary
    for i in range(0, n, step):
        sel = slice(i, min(n, i + step)) if items is None else items[i : i + step]
        best[sel] = _pair_tv_max(c2[sel], rows[sel], ok[sel])
    return np.minimum(best, 1.0).reshape(lead)


#: Below this many terms numpy's float sum along an axis adds left to right (its pairwise summation starts at 8).
_SEQ_SUM = 8


def _seq_sum(terms: list) -> np.ndarray:
    """Left-to-right sum of equally shaped arrays: the bits of ``np.sum`` over an axis of < 8 terms."""
    out = terms[0].copy()
    for t in terms[1:]:
        out += t
    return out


def _pair_tv_max(c: np.ndarray, rows: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """max over claimed row pairs of ½‖R(x, ·) − R(x', ·)‖₁ for items (n, K, K) float64, each TV summed over y as a
    pairwise loop sums a row (``np.abs(R[x] − R[x']).sum()``), so the values are those of the plain loop bit for bit.

    K < 8: one contiguous (n,) array per entry (planar) and the K terms added left to right; otherwise the TVs of
    row xr against rows xr + 1.. at once, summed by numpy over the contiguous last axis.
    """
    K = c.shape[-1]
    den = np.where(rows > 0, rows, 1.0)
    best = np.zeros(c.shape[0])
    if K < _SEQ_SUM:
        cp = np.ascontiguousarray(np.moveaxis(c, 0, -1))  # (K, K, n)
        dp = np.ascontiguousarray(den.T)
        okp = np.ascontiguousarray(ok.T)
        R = cp / dp[:, None, :]
        buf = np.empty(c.shape[0])
        for xa in range(K - 1):
            for xb in range(xa + 1, K):
                terms = []
                for y in range(K):
                    d = np.subtract(R[xa, y], R[xb, y])
                    np.abs(d, out=d)
                    terms.append(d)
                tv = _seq_sum(terms)  # ‖R(xa, ·) − R(xb, ·)‖₁; halved below (exact, and max commutes with it)
                both = okp[xa] & okp[xb]
                if both.all():
                    np.maximum(best, tv, out=best)
                else:
                    np.copyto(buf, 0.0)
                    np.copyto(buf, tv, where=both)
                    np.maximum(best, buf, out=best)
        np.multiply(best, 0.5, out=best)  # eq. (12): ½‖·‖₁
        return best
    R = c / den[..., None]
    for xr in range(K - 1):
        tv = 0.5 * np.abs(R[:, xr : xr + 1, :] - R[:, xr + 1 :, :]).sum(axis=-1)  # eq. (12): ½‖·‖₁
        both = ok[:, xr : xr + 1] & ok[:, xr + 1 :]
        best = np.maximum(best, np.max(np.where(both, tv, 0.0), axis=-1))
    return best


def _check_lag(max_lag, T: int) -> int:
    if isinstance(max_lag, bool) or not isinstance(max_lag, (int, np.integer)) or max_lag < 1:
        raise InvalidInputError(f"`max_lag` must be an integer ≥ 1 (slots), got {fmt(max_lag)}")
    if max_lag >= T:
        raise InvalidInputError(f"`max_lag`={int(max_lag)} must be below the series length T = {T} slots")
    return int(max_lag)


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not (0.0 < float(level) < 1.0):
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    return float(level)


def _check_int(v, name: str, lower: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lower:
        raise InvalidInputError(f"`{name}` must be an integer ≥ {lower}, got {fmt(v)}")
    return int(v)


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
    return _block_counts(xs, K, L, bounds), bounds


@dataclass(frozen=True)
class MaxTVPart:
    """The map step of :func:`estimate_max_tv` on one group of users: everything the band needs, reduced over them.

    Every statistic is a maximum over users (Δ̂(t) and each bootstrap replicate's Δ̂*(t), users resampled
    independently) or a count, so the parts of disjoint user groups combine with :meth:`merge` into the part of
    their union, exactly, when each user's replicates come from its own random stream (:func:`user_streams`);
    :func:`max_tv_band` then forms the band.

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
        """The part of the union of two disjoint user groups: maxima by maximum, counts by sum (per-user arrays dropped).

        Raises
        ------
        InvalidInputError
            Parts with different lags, replicates, `min_pairs` or block rule.
        """
        if (self.estimate.shape != other.estimate.shape or self.n_boot != other.n_boot
                or self.min_pairs != other.min_pairs or self.block_given != other.block_given):
            raise InvalidInputError(
                f"cannot merge parts of {self.estimate.size} lags, {self.n_boot} replicates, min_pairs {self.min_pairs} "
                f"with parts of {other.estimate.size} lags, {other.n_boot} replicates, min_pairs {other.min_pairs}"
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
    """The map step of :func:`estimate_max_tv` on the users of `states`: Δ̂(t) and the B replicates' Δ̂*(t), maxima over them.

    Parameters
    ----------
    states, n_states, max_lag, min_pairs, block_length, n_boot, seed
        As :func:`estimate_max_tv` (`max_lag` required: parts to be merged must share L).
    rng : numpy.random.Generator or sequence of U numpy.random.Generator, optional
        Resampling randomness (simulation only, never released noise).  One generator per user
        (:func:`user_streams` with ``stream=2``): user u's B block draws come only from its own stream, so its
        replicates, and hence the part of any group of users, do not depend on the other users of the group.
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
    L = _check_lag(max_lag, T)
    mp = _check_int(min_pairs, "min_pairs", 1)
    if block_length is not None:
        _check_int(block_length, "block_length", 1)
    B = 0 if (n_boot == 0 and not isinstance(n_boot, bool)) else _check_int(n_boot, "n_boot", 20)
    sd = _check_int(seed, "seed", 0)
    if B == 0:
        per_user, rows = _user_max_tv(x, K, L, mp)
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
        resample[_claimable(x, K, L, mp)] = True
        skip = np.flatnonzero(~resample)
        obs = np.any(x[skip] >= 0, axis=1)
        longer = obs & (_last_observed(x[skip]) > L)
        used += int(np.count_nonzero(longer))
        no_claim += skip.size  # every skipped user: too short for L, or fewer than two claimed rows at every lag
        if keep_users and skip.size:
            _, r = _user_max_tv(x[skip], K, L, mp)
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
            boot[:, j : j + step] = np.maximum(boot[:, j : j + step], max_row_tv(rep, claimed=claimed[None, j : j + step]))
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
            blocks = f"blocks of {b0}–{b1} slots ({how})"
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
        L (slots), below the longest series.  Default :func:`default_max_lag` of the longest series.
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
        Resampling randomness; one generator per user (:func:`user_streams` with ``stream=2``, as ``policyopt
        check-model`` uses) makes the result independent of how users are grouped.  Default ``default_rng(seed)``
        used user after user.

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
    L = default_max_lag(x.shape[1]) if max_lag is None else _check_lag(max_lag, x.shape[1])
    lv = _check_level(level)
    part = max_tv_part(x, n_states, L, min_pairs=min_pairs, block_length=block_length, n_boot=n_boot, seed=seed,
                       rng=rng)
    return max_tv_band(part, lv)


def _two_claimed(rows: np.ndarray, min_pairs: int) -> np.ndarray:
    """Series (axis 0) with two rows of at least `min_pairs` pairs at some lag."""
    return np.any(np.count_nonzero(rows >= min_pairs, axis=-1) >= 2, axis=-1)


def _claimable(x: np.ndarray, K: int, L: int, min_pairs: int, total: np.ndarray | None = None) -> np.ndarray:
    """Indices (sorted) of the series that have two rows of at least `min_pairs` pairs at some lag 1..L, exactly.

    Cheap bounds decide most series: state totals first, then the pairs per row if no slot were missing, lowered by
    the series' missing slots (:func:`_rows_upper`); the exact pairs per row (:func:`_row_pairs`) only where the two
    bounds disagree.
    """
    if total is None:
        total = _state_totals(x, K)
    cand = np.flatnonzero(np.count_nonzero(total >= min_pairs, axis=-1) >= 2)
    todo = cand[:0]
    if cand.size:
        upper = _rows_upper(x[cand, :L], K, L, total[cand])
        n_gaps = (_last_observed(x) - total.sum(axis=1))[cand]  # missing slots before the last observed one
        sure = _two_claimed(upper - n_gaps[:, None, None], min_pairs)  # even if every gap removed a pair
        maybe = np.flatnonzero(~sure & _two_claimed(upper, min_pairs))
        todo = cand[sure]
        if maybe.size:
            r = _row_pairs(x[cand[maybe]], K, L, total[cand[maybe]], upper[maybe])
            todo = np.union1d(todo, cand[maybe] if r is None else cand[maybe[_two_claimed(r, min_pairs)]])
    return todo


def _user_max_tv(x: np.ndarray, K: int, L: int, min_pairs: int, with_rows: bool = True):
    """Δ̂_u(t) (U, L) and the pairs per row (U, L, K) (None unless `with_rows`), counting users in chunks.

    Cheap bounds come first: a user whose rows cannot reach `min_pairs` pairs in two states at any lag (state
    totals, then pairs per row, :func:`_rows_upper` / :func:`_row_pairs`) has Δ̂_u(t) = 0 (the TV of fewer than
    two claimed rows) and its lagged-pair counts are never made; the full counts are made for the others only,
    in chunks (they are never all held).
    """
    U = x.shape[0]
    per_user = np.zeros((U, L))
    total = _state_totals(x, K)
    todo = _claimable(x, K, L, min_pairs, total)
    rows = None
    if with_rows:
        rows = np.zeros((U, L, K), dtype=np.int64)
        rest = np.setdiff1d(np.arange(U), todo)
        if rest.size:
            r = _row_pairs(x[rest], K, L, total[rest])
            rows[rest] = _pair_counts(x[rest], K, L).sum(axis=-1) if r is None else r
    step = max(1, int((128 * 2**20) // max(1, L * K * K * 8)))
    every = todo.size == U  # then chunks are slices (no copy of the states)
    for i in range(0, todo.size, step):
        sel = slice(i, i + step) if every else todo[i : i + step]
        counts = _pair_counts(x[sel], K, L)
        c_rows = _seq_sum([counts[..., y] for y in range(K)]) if K < _SEQ_SUM else counts.sum(axis=-1)  # exact integers
        if with_rows:
            rows[sel] = c_rows
        per_user[sel] = max_row_tv(counts, claimed=c_rows >= min_pairs)
    return per_user, rows


def max_tv_statistic(states, n_states: int, max_lag: int, *, min_pairs: int = DEFAULT_MIN_PAIRS) -> np.ndarray:
    """Δ̂_u(t) of every user, t = 1..L: the plug-in statistic of :func:`estimate_max_tv` before the max over users.

    Parameters
    ----------
    states : array_like, shape (U, T)
        As :func:`states_matrix` (−1 missing).
    n_states : int
        K.
    max_lag : int
        L (slots), below T.
    min_pairs : int
        Pairs a row needs to be claimed.

    Returns
    -------
    numpy.ndarray, shape (U, L)
        0 for a user without two claimed rows at a lag.
    """
    x = states_matrix(states, n_states)
    L = _check_lag(max_lag, x.shape[1])
    per_user, _ = _user_max_tv(x, int(n_states), L, _check_int(min_pairs, "min_pairs", 1), with_rows=False)
    return per_user


def simulate_chain_states(matrices, lengths, initial, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Simulate each user's first-order chain: `draws` independent series per user.

    Parameters
    ----------
    matrices : sequence of U array_like, shape (K, K)
        Row-stochastic transition matrices P_u.
    lengths : array_like of int, shape (U,)
        Slots to simulate per user (the series is padded with −1 up to the longest).
    initial : array_like of int, shape (U,)
        State at slot 0 of every draw of each user.
    draws : int
        R ≥ 1.
    rng : numpy.random.Generator or sequence of U numpy.random.Generator
        Simulation randomness (seeded by the caller), never released noise.  One generator per user
        (:func:`user_streams`): user u's draws use only its own stream, (R, lengths[u] − 1) uniforms in draw-major
        order, so they do not depend on which other users are simulated with it or on how draws are batched.

    Returns
    -------
    numpy.ndarray of int64, shape (R, U, max(lengths))

    Raises
    ------
    InvalidInputError
        A sequence of generators whose length is not U.
    """
    P = np.stack([np.asarray(m, dtype=float) for m in matrices])
    U, K, _ = P.shape
    n = np.asarray(lengths, dtype=np.int64)
    T = int(n.max())
    R = int(draws)
    cum = np.cumsum(P, axis=2)
    cum[:, :, -1] = np.inf  # a uniform draw always lands in some state
    # state at s = #{k : u ≥ cum[u, previous, k]}; column K − 1 (inf) never counts.  Entry k of every row, flat
    # over (user, previous state), so one step is K − 1 gathers and comparisons on (R, U) (time-major buffers).
    cum_k = [np.ascontiguousarray(cum[:, :, k]).ravel() for k in range(K - 1)]
    out_t = np.empty((T, R, U), dtype=np.int8 if K <= 127 else np.int64)
    cur = np.broadcast_to(np.asarray(initial, dtype=np.int64), (R, U)).copy()
    out_t[0] = cur
    base = (np.arange(U, dtype=np.int64) * K)[None, :]
    per_user = isinstance(rng, (list, tuple))
    if per_user:
        if len(rng) != U:
            raise InvalidInputError(f"`rng` has {len(rng)} generators for {U} users")
        uniforms = np.zeros((T, R, U))
        for u, g in enumerate(rng):
            if n[u] > 1:
                uniforms[1 : n[u], :, u] = g.random((R, int(n[u]) - 1)).T
    row = np.empty((R, U), dtype=np.int64)
    cur = cur.astype(out_t.dtype)
    for s in range(1, T):
        u01 = uniforms[s] if per_user else rng.random((R, U))
        np.add(base, cur, out=row)
        nxt = out_t[s]
        nxt[...] = 0
        for ck in cum_k:
            nxt += u01 >= ck[row]
        cur = nxt
    out = out_t.transpose(1, 2, 0).astype(np.int64, order="C")
    out[:, np.arange(T)[None, :] >= n[:, None]] = -1
    return out


def chain_statistic_draws(matrices, observed_states, n_states: int, max_lag: int, *, min_pairs: int = DEFAULT_MIN_PAIRS,
                          draws: int = 99, rng: np.random.Generator) -> np.ndarray:
    """The statistic Δ̂(t) = max_u Δ̂_u(t) on series simulated from fitted chains (parametric bootstrap).

    Each user's chain is started in the user's first observed state and run for the user's span; the slots
    missing in the observed series are masked in the simulated one, so the statistic sees the same pattern of
    pairs.  Comparing the observed Δ̂(t) with these draws is a Monte Carlo test of the chain model that carries
    the same upward bias of the plug-in TV (Davison & Hinkley 1997, Sec. 4.2.5).

    Parameters
    ----------
    matrices : sequence of U array_like, shape (K, K)
        The fitted chains P_u, in the order of the rows of `observed_states`.
    observed_states : array_like, shape (U, T)
        As :func:`states_matrix`.
    n_states : int
        K.
    max_lag : int
        L.
    min_pairs : int
        As :func:`estimate_max_tv`.
    draws : int
        Simulated data sets R ≥ 1.
    rng : numpy.random.Generator or sequence of U numpy.random.Generator
        Simulation randomness (seeded), never released noise; one generator per user (:func:`user_streams`) makes
        each user's simulated series, and so the max over users, independent of how users are grouped: the
        statistic of a union of user groups is then the maximum of the groups' statistics, draw by draw.

    Returns
    -------
    numpy.ndarray, shape (R, L)
        Row r: the statistic on simulated data set r.
    """
    x = states_matrix(observed_states, n_states)
    U, T = x.shape
    L = _check_lag(max_lag, T)
    K = int(n_states)
    R = _check_int(draws, "draws", 1)
    mp = _check_int(min_pairs, "min_pairs", 1)
    if len(matrices) != U:
        raise InvalidInputError(f"`matrices` has {len(matrices)} chains for {U} users")
    present = x >= 0
    first = np.array([int(r[r >= 0][0]) if np.any(r >= 0) else 0 for r in x])
    lengths = np.array([int(np.flatnonzero(r >= 0)[-1]) + 1 if np.any(r >= 0) else 1 for r in x])
    out = np.zeros((R, L))
    # batch draws so that one batch's counts stay small (R_b·U·L·K² int64)
    per_draw = U * T * 8 * 3 + U * L * (K + 1) * 8
    rb = max(1, int((256 * 2**20) // max(1, per_draw)))
    for r0 in range(0, R, rb):
        nb = min(rb, R - r0)
        sim = simulate_chain_states(matrices, lengths, first, nb, rng)
        sim[:, ~present[:, : sim.shape[2]]] = -1
        per_user, _ = _user_max_tv(sim.reshape(nb * U, -1), K, L, mp, with_rows=False)
        out[r0 : r0 + nb] = per_user.reshape(nb, U, L).max(axis=1)
    return out


def user_streams(users, seed: int, stream: int = 1) -> list:
    """One generator per user, keyed by the user's name: ``default_rng([seed, stream, hash(user)])``.

    The hash is pandas' ``hash_array`` of the user text (64 bits, fixed key, the same in every process), so a
    user's draws are the same whichever process or partition makes them (simulation only, never released noise).

    Parameters
    ----------
    users : sequence of str
    seed : int
        ≥ 0.
    stream : int
        Which of the user's independent streams (≥ 1): 1 simulates the chains (:func:`chain_statistic_draws`),
        2 resamples the blocks of the band (:func:`max_tv_part`).

    Returns
    -------
    list of numpy.random.Generator
    """
    import pandas as pd

    sd = _check_int(seed, "seed", 0)
    st = _check_int(stream, "stream", 1)
    names = np.array([str(u) for u in users], dtype=object)
    keys = pd.util.hash_array(names) if names.size else np.zeros(0, dtype=np.uint64)
    return [np.random.default_rng([sd, st, int(k)]) for k in keys]
