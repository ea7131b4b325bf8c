r"""The largest row total variation of lagged-pair counts: the plug-in statistic Δ̂_u(t) and the rows it claims.

Δ(t) of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory
70(2), 2024, eq. (12), is the largest total variation ½‖R_t(x, ·) − R_t(x', ·)‖₁ between two rows of a user's
reversed t-step kernel.  Row x of the lagged-pair counts N_{u,t} (:mod:`policyopt.models.lag_counts`) normalised
is R̂_{u,t}(x, ·); rows with at least `min_pairs` pairs (:data:`DEFAULT_MIN_PAIRS`) are *claimed*, and
Δ̂_u(t) is the largest TV over two claimed rows, 0 where fewer than two rows are claimed (a row seen fewer times
makes no claim: its TV to another row may be 1).  This module owns that statistic:

* :func:`max_row_tv` on given counts, with the TVs summed in the order of a plain loop, so the values are those of
  ``0.5 * np.abs(R[x] − R[x']).sum()`` bit for bit;
* :func:`claimable_series`: which series can claim two rows at some lag, decided from state totals and the pairs
  per row where possible, so the full counts of the others are never made;
* :func:`user_max_tv` / :func:`max_tv_statistic`: Δ̂_u(t) of every user, t = 1..L, counting users in chunks.

The estimator (the max over users and its block-bootstrap band) is :mod:`policyopt.models.empirical`.
"""

from __future__ import annotations

import numpy as np

from policyopt.errors import check_int
from policyopt.models.lag_counts import (
    check_lag,
    last_observed,
    pair_counts,
    pairs_per_row,
    rows_upper,
    state_totals,
    states_matrix,
)

__all__ = [
    "max_row_tv",
    "max_tv_statistic",
    "claimable_series",
    "user_max_tv",
    "DEFAULT_MIN_PAIRS",
]

#: Pairs a row (current state) needs before its reversed-kernel row is claimed
#: (every row of every bundled home has ≥ 143 at K = 3).
DEFAULT_MIN_PAIRS = 100


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
        max over claimed x, x' of ½ Σ_y ``|R(x, y) − R(x', y)|``; 0 where fewer than two rows are claimed.
    """
    c = np.asarray(counts, dtype=np.float64)
    lead, K = c.shape[:-2], c.shape[-1]
    c2 = c.reshape(-1, K, K)
    if K < _SEQ_SUM:
        rows = _seq_sum([c2[:, :, y] for y in range(K)])  # (N, K): as c.sum(axis=-1), bit for bit
    else:
        rows = c2.sum(axis=-1)
    if claimed is None:
        ok = rows >= max(1, int(min_pairs))
    else:
        ok = np.broadcast_to(claimed, lead + (K,)).reshape(-1, K) & (rows > 0)
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
    """max over claimed row pairs of ½‖R(x, ·) − R(x', ·)‖₁ for items (n, K, K) float64, each TV summed over y as
    a pairwise loop sums a row (``np.abs(R[x] − R[x']).sum()``), so the values are those of the plain loop bit for
    bit.

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


def _two_claimed(rows: np.ndarray, min_pairs: int) -> np.ndarray:
    """Series (axis 0) with two rows of at least `min_pairs` pairs at some lag."""
    return np.any(np.count_nonzero(rows >= min_pairs, axis=-1) >= 2, axis=-1)


def claimable_series(x: np.ndarray, K: int, L: int, min_pairs: int, total: np.ndarray | None = None) -> np.ndarray:
    """The series that have two rows of at least `min_pairs` pairs at some lag 1..L, exactly.

    Cheap bounds decide most series: state totals first, then the pairs per row if no slot were missing, lowered by
    the series' missing slots (:func:`~policyopt.models.lag_counts.rows_upper`); the exact pairs per row
    (:func:`~policyopt.models.lag_counts.pairs_per_row`) only where the two bounds disagree.

    Parameters
    ----------
    x : numpy.ndarray of int, shape (S, T)
        States 0..K−1, −1 missing (checked, as :func:`~policyopt.models.lag_counts.states_matrix` returns them).
    K : int
        Number of states.
    L : int
        Lags 1..L, L < T.
    min_pairs : int
        Pairs a row needs to be claimed.
    total : numpy.ndarray of int, shape (S, K), optional
        Observed slots per state (:func:`~policyopt.models.lag_counts.state_totals`), made here when not given.

    Returns
    -------
    numpy.ndarray of int, shape (n,)
        Sorted row indices of those series (the others have Δ̂_u(t) = 0 at every lag).
    """
    if total is None:
        total = state_totals(x, K)
    cand = np.flatnonzero(np.count_nonzero(total >= min_pairs, axis=-1) >= 2)
    todo = cand[:0]
    if cand.size:
        upper = rows_upper(x[cand, :L], K, L, total[cand])
        n_gaps = (last_observed(x) - total.sum(axis=1))[cand]  # missing slots before the last observed one
        sure = _two_claimed(upper - n_gaps[:, None, None], min_pairs)  # even if every gap removed a pair
        maybe = np.flatnonzero(~sure & _two_claimed(upper, min_pairs))
        todo = cand[sure]
        if maybe.size:
            r = pairs_per_row(x[cand[maybe]], K, L, total[cand[maybe]], upper[maybe])
            todo = np.union1d(todo, cand[maybe] if r is None else cand[maybe[_two_claimed(r, min_pairs)]])
    return todo


def user_max_tv(x: np.ndarray, K: int, L: int, min_pairs: int, with_rows: bool = True):
    """Δ̂_u(t) of every series and the pairs per row, counting users in chunks.

    Cheap bounds come first: a user whose rows cannot reach `min_pairs` pairs in two states at any lag
    (:func:`claimable_series`) has Δ̂_u(t) = 0 (the TV of fewer than two claimed rows) and its lagged-pair counts
    are never made; the full counts are made for the others only, in chunks (they are never all held).

    Parameters
    ----------
    x : numpy.ndarray of int, shape (U, T)
        States 0..K−1, −1 missing (checked, as :func:`~policyopt.models.lag_counts.states_matrix` returns them).
    K : int
        Number of states.
    L : int
        Lags 1..L, L < T.
    min_pairs : int
        Pairs a row needs to be claimed (≥ 1).
    with_rows : bool
        Also return the pairs per row.

    Returns
    -------
    per_user : numpy.ndarray, shape (U, L)
        Δ̂_u(t), the largest TV between two claimed rows; 0 where fewer than two rows are claimed.
    rows : numpy.ndarray of int64, shape (U, L, K), or None
        Pairs behind each row (``counts.sum(axis=-1)``); None unless `with_rows`.
    """
    U = x.shape[0]
    per_user = np.zeros((U, L))
    total = state_totals(x, K)
    todo = claimable_series(x, K, L, min_pairs, total)
    rows = None
    if with_rows:
        rows = np.zeros((U, L, K), dtype=np.int64)
        rest = np.setdiff1d(np.arange(U), todo)
        if rest.size:
            r = pairs_per_row(x[rest], K, L, total[rest])
            rows[rest] = pair_counts(x[rest], K, L).sum(axis=-1) if r is None else r
    step = max(1, int((128 * 2**20) // max(1, L * K * K * 8)))
    every = todo.size == U  # then chunks are slices (no copy of the states)
    for i in range(0, todo.size, step):
        sel = slice(i, i + step) if every else todo[i : i + step]
        counts = pair_counts(x[sel], K, L)
        # exact integers
        c_rows = _seq_sum([counts[..., y] for y in range(K)]) if K < _SEQ_SUM else counts.sum(axis=-1)
        if with_rows:
            rows[sel] = c_rows
        per_user[sel] = max_row_tv(counts, claimed=c_rows >= min_pairs)
    return per_user, rows


def max_tv_statistic(states, n_states: int, max_lag: int, *, min_pairs: int = DEFAULT_MIN_PAIRS) -> np.ndarray:
    """Δ̂_u(t) of every user, t = 1..L: the plug-in statistic of the direct estimate before the max over users.

    The statistic of :func:`~policyopt.models.empirical.estimate_max_tv` (there maximised over users).

    Parameters
    ----------
    states : array_like, shape (U, T)
        As :func:`~policyopt.models.lag_counts.states_matrix` (−1 missing).
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

    Raises
    ------
    InvalidInputError
        Bad `states`, `n_states`, `max_lag` or `min_pairs`.
    """
    x = states_matrix(states, n_states)
    L = check_lag(max_lag, x.shape[1])
    per_user, _ = user_max_tv(x, int(n_states), L, check_int(min_pairs, "min_pairs", 1), with_rows=False)
    return per_user
