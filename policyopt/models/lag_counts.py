r"""Lagged-pair counts of quantile-state series: the series format, the lags, and the exact counting kernels.

Δ(t) of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory
70(2), 2024, eq. (12), compares rows of a user's reversed t-step kernel R_t(x, ·) = Pr(state at s − t = · |
state at s = x); estimated from readings, row x of R_t is the normalised row x of the lagged-pair counts

    N_{u,t}[x, y] = #{s : state_s = x, state_{s−t} = y},   t = 1..L

(pairs with a missing end are not counted).  This module owns those counts (the statistic built on them is
:mod:`policyopt.models.row_tv`, the estimator and its band :mod:`policyopt.models.empirical`):

* the state-series format (:func:`states_matrix`: (U, T) int64, −1 missing) and the lags (:func:`default_max_lag`,
  the rule of thumb of G. E. P. Box, G. M. Jenkins, "Time Series Analysis: Forecasting and Control", Holden-Day,
  1976, Sec. 6.2.1; :func:`check_lag`);
* all lags at once, by FFT cross-correlation of the K state indicator series (exact: the float result is rounded to
  the integer counts, and the rounding error is checked to be < 0.25), or, where a cost model says it is cheaper
  (short series, many states), by one ``np.bincount`` over (series, lag, state, state) codes (:func:`pair_counts`,
  :func:`lagged_pair_counts`); the counts per block of current times for the block bootstrap
  (:func:`block_counts`);
* the pairs behind each row without the full counts (:func:`state_totals`, :func:`rows_upper`,
  :func:`pairs_per_row`, :func:`last_observed`), which let a user whose rows cannot be claimed skip counting.
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt

__all__ = [
    "lagged_pair_counts",
    "default_max_lag",
    "states_matrix",
    "check_lag",
    "pair_counts",
    "block_counts",
    "state_totals",
    "last_observed",
    "rows_upper",
    "pairs_per_row",
    "MAX_LAG_CAP",
]

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
    check_int(n_states, "n_states", 2)
    if isinstance(states, np.ndarray) and states.ndim == 2 and states.dtype.kind in "iu" and states.shape[0] > 0:
        out = states.astype(np.int64, copy=False)  # no copy of a large int64 matrix
        bad = (out < -1) | (out >= n_states)
        if bad.any():
            i, j = (int(v[0]) for v in np.nonzero(bad))
            raise InvalidInputError(f"`states` user {i} slot {j} is {int(out[i, j])}, "
                                    f"outside 0..{n_states - 1} (−1 = missing)")
        return out
    if isinstance(states, np.ndarray) and states.ndim == 2:
        rows = list(states)
    elif isinstance(states, np.ndarray) and states.ndim == 1 and states.dtype != object:
        rows = [states]
    else:
        try:
            rows = [np.asarray(r) for r in states]
        except TypeError:
            raise InvalidInputError(
                f"`states` must be an array (users, T) or a list of 1-D arrays, got {fmt(states)}") from None
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
            raise InvalidInputError(f"`states` user {i} slot {j} is {int(a[j])}, "
                                    f"outside 0..{n_states - 1} (−1 = missing)")
        out[i, : a.size] = a
    return out


def check_lag(max_lag, T: int) -> int:
    """The number of lags L as an int, checked against the series length.

    Parameters
    ----------
    max_lag : int
        L (slots), a Python or NumPy integer (not a bool).
    T : int
        Series length (slots).

    Returns
    -------
    int
        L, with 1 ≤ L < T.

    Raises
    ------
    InvalidInputError
        `max_lag` not an integer ≥ 1, or not below T.
    """
    check_int(max_lag, "max_lag", 1, "slots")
    if max_lag >= T:
        raise InvalidInputError(f"`max_lag`={int(max_lag)} must be below the series length T = {T} slots")
    return int(max_lag)


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
    raise ArithmeticError(  # pragma: no cover
        f"FFT lagged-pair counts are not integral (error {err:.3g}); series too long")


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
    L = check_lag(max_lag, x.shape[1])
    return pair_counts(x, int(n_states), L).astype(np.int64, copy=False)


def pair_counts(x: np.ndarray, K: int, L: int) -> np.ndarray:
    """Lagged-pair counts of a checked state matrix, by direct counting or by FFT, whichever the cost model favours.

    Parameters
    ----------
    x : numpy.ndarray of int64, shape (S, T)
        States 0..K−1, −1 missing (as :func:`states_matrix` returns them; not checked again).
    K : int
        Number of states.
    L : int
        Lags 1..L, 1 ≤ L < T (as :func:`check_lag` returns it).

    Returns
    -------
    numpy.ndarray, shape (S, L, K, K)
        ``counts[s, t − 1, a, b]`` = #{i : x[s, i] = a, x[s, i − t] = b}; exact integers, int64 from the direct
        count or float from the FFT.

    Raises
    ------
    ArithmeticError
        The FFT counts are not integral even in double precision (series far too long; not met in practice).
    """
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


def state_totals(x: np.ndarray, K: int) -> np.ndarray:
    """Observed slots per state of each series (one boolean temporary at a time).

    Parameters
    ----------
    x : numpy.ndarray of int, shape (S, T)
        States 0..K−1, −1 missing.
    K : int
        Number of states.

    Returns
    -------
    numpy.ndarray of int64, shape (S, K)
    """
    return np.stack([np.count_nonzero(x == k, axis=1) for k in range(K)], axis=1).astype(np.int64)


def _internal_gaps(x: np.ndarray) -> np.ndarray:
    """Missing slots before each series' last observation, (S, T) bool."""
    T = x.shape[1]
    return (x < 0) & (np.arange(T)[None, :] < last_observed(x)[:, None])


def last_observed(x: np.ndarray) -> np.ndarray:
    """One past each series' last observed slot.

    Parameters
    ----------
    x : numpy.ndarray of int, shape (S, T)
        States, −1 missing.

    Returns
    -------
    numpy.ndarray of int, shape (S,)
        The index after the last slot ≥ 0 of each row; 0 for a row with no observed slot.
    """
    return x.shape[1] - np.argmax((x >= 0)[:, ::-1], axis=1)


def rows_upper(x: np.ndarray, K: int, L: int, total: np.ndarray) -> np.ndarray:
    """#{i ≥ t : x_i = k}: the pairs behind row k at lag t if no slot were missing.

    An upper bound on the pairs per row, larger by at most the series' missing slots.

    Parameters
    ----------
    x : numpy.ndarray of int, shape (S, T') with T' ≥ L
        States 0..K−1, −1 missing; only the first L slots are read.
    K : int
        Number of states.
    L : int
        Lags 1..L.
    total : numpy.ndarray of int, shape (S, K)
        Observed slots per state of the whole series (:func:`state_totals`).

    Returns
    -------
    numpy.ndarray of int64, shape (S, L, K)
    """
    head = np.add.accumulate((x[:, :L, None] == np.arange(K)).view(np.int8), axis=1, dtype=np.int32)
    # head[:, t − 1] = #{i < t : x_i = k}; only the first L slots of `x` are read
    return np.subtract(total[:, None, :], head, dtype=np.int64)


def pairs_per_row(x: np.ndarray, K: int, L: int, total: np.ndarray, upper: np.ndarray | None = None):
    """Pairs behind each row without the full counts: ``pair_counts(x, K, L).sum(axis=-1)``.

    rows[s, t, k] = #{i ≥ t : x_i = k} − #{m : x_m missing, x_{m+t} = k} (:func:`rows_upper` minus a count over
    the M missing slots before each series' last observation, M·L work).

    Parameters
    ----------
    x : numpy.ndarray of int, shape (S, T)
        States 0..K−1, −1 missing.
    K : int
        Number of states.
    L : int
        Lags 1..L, L < T.
    total : numpy.ndarray of int, shape (S, K)
        Observed slots per state (:func:`state_totals`).
    upper : numpy.ndarray of int64, shape (S, L, K), optional
        :func:`rows_upper` of the same series when already made (copied, not changed).

    Returns
    -------
    numpy.ndarray of int64, shape (S, L, K), or None
        None when the gaps are so many that counting every pair is as cheap.
    """
    S, T = x.shape
    gaps = _internal_gaps(x)
    M = int(np.count_nonzero(gaps))
    if M * L * 4 > S * T * L:
        return None
    rows = rows_upper(x, K, L, total) if upper is None else upper.copy()
    if M:
        s_i, m_i = np.nonzero(gaps)
        code = np.concatenate([np.where(x >= 0, x, K), np.full((S, L), K, dtype=x.dtype)], axis=1).astype(np.intp)
        v = code[s_i[:, None], m_i[:, None] + np.arange(1, L + 1)[None, :]]  # (M, L): state at m + t
        idx = (s_i[:, None] * L + np.arange(L)[None, :]) * (K + 1) + v
        rows -= np.bincount(idx.ravel(), minlength=S * L * (K + 1)).reshape(S, L, K + 1)[..., :K]
    return rows


def block_counts(x: np.ndarray, K: int, L: int, bounds: np.ndarray) -> np.ndarray:
    """Lagged-pair counts of one user's series per block of current times (the blocks of the block bootstrap).

    Parameters
    ----------
    x : numpy.ndarray of int, shape (T,)
        One user's states 0..K−1, −1 missing.
    K : int
        Number of states.
    L : int
        Lags 1..L.
    bounds : numpy.ndarray of int, shape (m + 1,)
        Block edges over current times 0..T, increasing; block j holds the pairs whose current time lies in
        [bounds[j], bounds[j + 1]).

    Returns
    -------
    numpy.ndarray, shape (m, L, K, K)
        Block j's counts, exact integers as float; summed over blocks they are the user's counts.

    Raises
    ------
    ArithmeticError
        As :func:`pair_counts` (FFT counts not integral).
    """
    ind = (x[None, :] == np.arange(K)[:, None]).astype(np.float32)  # (K, T)
    starts, ends = bounds[:-1], bounds[1:]
    bmax = int(np.max(ends - starts))
    # index = time + L
    pad = np.concatenate([np.zeros((K, L), np.float32), ind, np.zeros((K, bmax), np.float32)], axis=1)
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
